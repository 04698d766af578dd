"""Step times (di.engine.step_times): jobs whose step durations are known by construction, a training log alone,
and the statistics against a plain-Python reference."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from analyze_cli import analyze_json, analyze_text

import di
from di.engine.step_times import COLUMNS, SLOW_SLOWDOWN, step_durations, step_times
from engine_jobs import MS, Job

STEPS = 10
BASE_MS = 100.0
STRAGGLER, STRAGGLER_EXTRA = 2, 0.1
"""Rank 2's steps last 10 % longer than the others'."""
HICCUP_STEP, HICCUP_MS = 7, 200.0
"""One step of the straggler lasts 200 ms (an outlier of its own rank, not only of the job)."""


def straggler_job(ranks: int = 3) -> Job:
    """``ranks`` ranks of ``STEPS`` back-to-back ProfilerStep markers, each filled with one compute region; the
    straggler's steps take 110 ms, its step ``HICCUP_STEP`` 200 ms, everyone else's 100 ms."""
    job = Job()
    for rank in range(ranks):
        cpu = job.thread(rank)
        t = 0.0
        for step in range(STEPS):
            d = BASE_MS * (1 + STRAGGLER_EXTRA) if rank == STRAGGLER else BASE_MS
            d = HICCUP_MS if (rank, step) == (STRAGGLER, HICCUP_STEP) else d
            job.ev(cpu, t, t + d, f"ProfilerStep#{step}", "step")
            job.ev(cpu, t, t + d, "forward_backward", "compute")
            t += d
    return job


def test_the_straggler_and_its_slow_step_are_told_and_the_other_analyses_agree() -> None:
    result = di.analyze(straggler_job().build())
    st = result.step_times
    assert st is not None and st.schema == pl.Schema(COLUMNS)
    by_rank = {r["rank"]: r for r in st.iter_rows(named=True)}
    assert sorted(by_rank) == [0, 1, 2]
    for rank in (0, 1):
        r = by_rank[rank]
        assert (r["steps"], r["median_ns"], r["p90_ns"], r["max_ns"]) == (STEPS, 100 * MS, 100 * MS, 100 * MS)
        assert r["cv"] == 0 and r["slow_steps"] == 0 and r["vs_fastest"] == 0 and r["source"] == "marker"
    late = by_rank[STRAGGLER]
    assert late["median_ns"] == late["p90_ns"] == 110 * MS  # nine of ten steps take 110 ms
    assert (late["max_ns"], late["slowest_step"], late["slow_steps"]) == (200 * MS, HICCUP_STEP, 1)
    assert late["total_ns"] == (9 * 110 + 200) * MS and late["mean_ns"] == round((9 * 110 + 200) / 10 * MS)
    assert late["vs_fastest"] == pytest.approx(STRAGGLER_EXTRA)
    # the imbalance and the critical path name the same straggler
    work = result.imbalance.filter((pl.col("state") == "work") & pl.col("step").is_null())
    assert work.get_column("max_rank").to_list() == [STRAGGLER]
    path_ranks = result.critical_path["by_rank"].sort("contrib_ns", descending=True)
    assert path_ranks.get_column("rank")[0] == STRAGGLER
    # the slow step's slowdown is the one the GPU step clocks use
    slow = step_durations(result.steps).filter(pl.col("slowdown") > SLOW_SLOWDOWN)
    assert slow.select("rank", "step").rows() == [(STRAGGLER, HICCUP_STEP)]
    assert slow.get_column("slowdown")[0] == pytest.approx(200 / 110 - 1)


def test_a_time_window_keeps_the_steps_it_touches() -> None:
    trace = straggler_job().build()
    result = di.analyze(trace, window="time=250ms:450ms")  # steps 2-4 of ranks 0 and 1, 2-4 of rank 2 (110 ms each)
    st = {r["rank"]: r for r in result.step_times.iter_rows(named=True)}
    assert {rank: r["steps"] for rank, r in st.items()} == {0: 3, 1: 3, 2: 3}


def reference(durations: list[int]) -> dict[str, float | int | None]:
    """The per-rank statistics by their definitions (module docstring of di.engine.step_times), in plain Python."""
    n = len(durations)
    ordered = sorted(durations)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    mean = sum(durations) / n
    std = math.sqrt(sum((d - mean) ** 2 for d in durations) / n)
    return {
        "steps": n,
        "total_ns": sum(durations),
        "median_ns": round(median),
        "p90_ns": ordered[math.ceil(0.9 * n) - 1],
        "min_ns": ordered[0],
        "max_ns": ordered[-1],
        "slowest_step": durations.index(max(durations)),
        "cv": std / mean if mean else None,
        "slow_steps": sum(1 for d in durations if median > 0 and d / median - 1 > SLOW_SLOWDOWN),
    }


@pytest.mark.parametrize("seed", range(6))
def test_statistics_equal_a_plain_python_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    want = {}
    for rank in range(4):
        n = int(rng.integers(1, 40))
        durations = rng.integers(0 if seed == 0 else 1, 5, n) * int(rng.integers(1, 10**9))  # ties and zeros
        starts = np.concatenate([[0], np.cumsum(durations)[:-1]])
        rows += [(rank, k, int(s), int(s + d)) for k, (s, d) in enumerate(zip(starts, durations))]
        want[rank] = reference([int(d) for d in durations])
    steps = pl.DataFrame(rows, schema=["rank", "step", "start_ns", "end_ns"], orient="row").with_columns(
        pl.col("rank").cast(pl.Int32), pl.lit(None, pl.String).alias("label"), pl.lit("marker").alias("source")
    )
    got = {r["rank"]: r for r in step_times(steps.sample(fraction=1.0, shuffle=True, seed=seed)).iter_rows(named=True)}
    for rank, w in want.items():
        for key, value in w.items():
            assert got[rank][key] == (pytest.approx(value) if isinstance(value, float) else value), (rank, key)
    fastest = min(w["median_ns"] for w in want.values())
    for rank, w in want.items():  # null where the fastest median is 0
        want_vs = (w["median_ns"] - fastest) / fastest if fastest else None
        assert got[rank]["vs_fastest"] == (pytest.approx(want_vs) if fastest else None)
    if fastest:  # exactly 0 on the fastest rank, never below (a recorded job's gave -1.1e-16 once)
        assert min(r["vs_fastest"] for r in got.values()) == 0
    assert step_times(steps.clear()).schema == pl.Schema(COLUMNS)


MEGATRON_LINE = (
    " iteration {i:>8}/    1000 | consumed samples: {s:>10} | elapsed time per iteration (ms): {ms:.1f} |"
    " learning rate: 1.500E-04 | global batch size:     8 | lm loss: 6.5E+00 |"
)
LOG_MS = [2000.0, 1000.0, 1000.0, 1500.0, 1000.0, 1000.0]
"""Each logged interval's milliseconds per iteration, 10 iterations an interval: the fourth is 50 % slower."""


def test_a_training_log_alone_gives_its_step_times(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(
        "\n".join(MEGATRON_LINE.format(i=10 * (k + 1), s=80 * (k + 1), ms=ms) for k, ms in enumerate(LOG_MS)) + "\n"
    )
    doc = analyze_json(log, tmp_path / "result.json")
    (row,) = doc["step_times"]
    ms = [10 * x for x in LOG_MS]  # an interval of 10 iterations
    assert row["steps"] == len(LOG_MS) and row["max_ns"] == max(ms) * MS and row["slowest_step"] == 10
    assert row["median_ns"] == 10_000 * MS and row["slow_steps"] == 2  # the first interval and the 50 % slower one
    shown = analyze_text(log)
    assert "Step times per rank" in shown and "no program events in the window" in shown
    assert "Temporal breakdown" not in shown  # no empty table frames


def test_the_report_shows_the_step_times_and_names_the_straggler() -> None:
    from di.viewers.report import build_report

    trace = straggler_job().build()
    page, problems = build_report(trace, di.analyze(trace, per_step=True), plugins=False)
    assert not problems
    assert 'data-table="step_times"' in page
    assert f"Rank {STRAGGLER}&#x27;s typical step (110.0 ms) is 10 % longer than the fastest rank" in page
    assert f"step {HICCUP_STEP} on rank {STRAGGLER}, 82 % longer" in page


def test_candidate_rows_split_by_rank() -> None:
    """Each rank's rows, ascending; a row of a rank not listed (an event on a location the locations table lacks,
    read as rank 0) belongs to none."""
    from di.engine.steps import _by_rank

    rank_ev = np.array([0, 3, 5, 3, 0, 5, 3], np.int64)
    mask = np.array([True, True, True, True, True, False, True])
    got = _by_rank(mask, rank_ev, np.array([3, 5, 7], np.int64))
    assert [g.tolist() for g in got] == [[1, 3, 6], [2], []]


def test_each_rank_takes_its_steps_from_the_best_source_it_has() -> None:
    """Rank 0 marks its steps (ProfilerStep#5, #6, and a second #6 that starts with the first: one step each);
    rank 1 has no markers but annotations (``step 3``, ``iteration#4``; ``forward`` is not one); rank 2 has
    neither: a region that repeats and covers its timeline; rank 3 has markers whose numbers repeat, so its steps
    are numbered by position; rank 4 has annotations and markers, and the markers win."""
    from di.engine.steps import find_steps

    job = Job()
    th = [job.thread(r) for r in range(5)]
    job.ev(th[0], 0, 10, "ProfilerStep#5", "step")
    job.ev(th[0], 10, 20, "ProfilerStep#6", "step")
    job.ev(th[0], 10, 15, "ProfilerStep#6", "step")
    job.ev(th[1], 0, 10, "step 3", "user")
    job.ev(th[1], 2, 4, "forward", "user")
    job.ev(th[1], 10, 20, "iteration#4", "user")
    for k in range(3):
        job.ev(th[2], 10 * k, 10 * k + 9, "train_batch", "compute")
        job.ev(th[2], 10 * k + 1, 10 * k + 2, "MPI_Allreduce", "mpi_coll")
    job.ev(th[3], 0, 10, "ProfilerStep#1", "step")
    job.ev(th[3], 10, 20, "ProfilerStep#1", "step")
    job.ev(th[4], 0, 10, "step 7", "user")
    job.ev(th[4], 0, 10, "ProfilerStep#9", "step")
    got = find_steps(job.build()).sort("rank", "start_ns")
    rows = {r: got.filter(pl.col("rank") == r).select("step", "label", "start_ns", "source").rows() for r in range(5)}
    ms = MS
    assert rows[0] == [(5, "ProfilerStep#5", 0, "marker"), (6, "ProfilerStep#6", 10 * ms, "marker")]
    assert rows[1] == [(3, "step 3", 0, "annotation"), (4, "iteration#4", 10 * ms, "annotation")]
    assert rows[2] == [(k, f"train_batch #{k}", 10 * k * ms, "detected") for k in range(3)]
    assert rows[3] == [(0, "ProfilerStep#1", 0, "marker"), (1, "ProfilerStep#1", 10 * ms, "marker")]
    assert rows[4] == [(9, "ProfilerStep#9", 0, "marker")]
    assert got.get_column("end_ns").to_list()[:2] == [10 * ms, 20 * ms]
