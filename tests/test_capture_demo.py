"""`di demo`: the built-in mpi4py job recorded with everything available."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from capture_helpers import di_cmd, need_mpi4py, run

import di
from di.demo import train as demo_train

STEPS = 3


def test_demo_records_the_training_like_job(tmp_path: Path) -> None:
    need_mpi4py()
    proc = run(di_cmd("demo", "-o", str(tmp_path / "demo.di"), "--steps", str(STEPS)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "late_sender" in proc.stdout and "Critical path" in proc.stdout  # the analysis was printed
    trace = di.load(tmp_path / "demo.di")
    trace.validate()
    for extra in ("demo.json.gz", "demo.pftrace", "demo-otf2/traces.otf2"):  # every writer's output reads back
        assert di.load(tmp_path / extra).events.height == trace.events.height, extra
    assert trace.ranks == [0, 1, 2, 3]
    coll = trace.collectives
    assert coll.filter(pl.col("op") == "allreduce").get_column("instance").n_unique() == STEPS
    assert trace.messages.height == 4 * 2 * STEPS  # halo: every rank to both neighbours, every step
    assert trace.series.height > 0 and trace.samples.height > 0
    # the straggler computes longest outside MPI and I/O calls (the others wait inside MPI)
    ev = trace.events.join(trace.locations.select("loc", "rank"), on="loc")
    mpi = ev.filter(
        pl.col("cat").is_in(["mpi_p2p", "mpi_coll"]) & ~pl.col("name").cast(pl.String).str.starts_with("MPI_Bcast")
    )
    span = mpi.group_by("rank").agg(first=pl.col("start_ns").min(), last=pl.col("end_ns").max())
    inside = ev.join(span, on="rank").filter(
        (pl.col("start_ns") >= pl.col("first"))
        & (pl.col("end_ns") <= pl.col("last"))
        & pl.col("cat").is_in(["mpi_p2p", "mpi_coll", "io"])
    )
    compute = inside.group_by("rank").agg(
        ((pl.col("last").first() - pl.col("first").first()) - (pl.col("end_ns") - pl.col("start_ns")).sum()).alias("ns")
    )
    assert compute.sort("ns").get_column("rank")[-1] == demo_train.STRAGGLER, compute.sort("rank").rows()
    ckpt = ev.filter((pl.col("name") == "fsync"))
    assert ckpt.height == 4 * (STEPS // demo_train.CHECKPOINT_EVERY)
    # the job's di.region annotations: each phase on every rank, and the steps come from them
    regions = ev.filter(pl.col("src_cat") == "di_region").group_by("name").agg(pl.len()).sort("name")
    assert dict(regions.iter_rows()) == {
        "backward": 4 * STEPS,
        "checkpoint": 4 * (STEPS // demo_train.CHECKPOINT_EVERY),
        "forward": 4 * STEPS,
        "optimizer": 4 * STEPS,
        **{f"step {k}": 4 for k in range(STEPS)},
    }
    from di.engine.steps import find_steps

    steps = find_steps(trace)
    assert steps.get_column("source").unique().to_list() == ["annotation"] and steps.height == 4 * STEPS
    # and every analysis says so: its work outside the calls is compute, not idle, and the path runs through it
    result = di.analyze(trace)
    host = result.breakdown.filter(pl.col("step").is_null() & (pl.col("scope") == "host"))
    untraced = dict(host.filter(pl.col("state") == "untraced").select("rank", "share").iter_rows())
    assert max(untraced, key=untraced.get) == demo_train.STRAGGLER and untraced[demo_train.STRAGGLER] > 0.5, untraced
    work = result.imbalance.filter(pl.col("step").is_null() & (pl.col("state") == "work"))
    assert work.get_column("max_rank").to_list() == [demo_train.STRAGGLER]
    # of the training steps' time on the path, the straggler's is most: the window of the steps leaves out the
    # start-up before the first one, which runs on rank 0 and on a loaded machine (load 10 on 2 cores) outweighed
    # 3 steps (rank 0: 35 % of the whole path, the straggler less)
    cp = di.analyze(trace, window="steps=:").critical_path
    assert cp["by_rank"].sort("contrib_ns").get_column("rank")[-1] == demo_train.STRAGGLER, cp["by_rank"]
    # its largest item is its computation: untraced work, which the engine names after the di.region holding it
    straggler_items = (
        cp["segments"].filter(pl.col("rank") == demo_train.STRAGGLER).group_by("name").agg(pl.col("contrib_ns").sum())
    )
    assert straggler_items.sort("contrib_ns").get_column("name")[-1] in (
        "backward",
        "forward",
        "(outside traced calls)",
    ), straggler_items


def test_demo_kineto_still_writes_the_generated_job(tmp_path: Path) -> None:
    from di.cli import main

    assert main(["demo", "--kineto", "-o", str(tmp_path / "k"), "--steps", "2"]) == 0
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == [f"rank-{r}.json" for r in range(4)]
