"""``mpiexec -n P di report`` over a rank-partitioned store: the page one process writes.

Runs the real ``di report`` under the mpich wheel's ``mpiexec`` (1 to 3 processes, uneven rank counts
per process) on shared multi-rank traces converted to a partitioned store and on a generated 16-rank job
that exercises every panel that reads events, samples or waits (top kernels past the top-25 cut, I/O per
file shared across processes, counters, wait states, io_files). The HTML must equal the single-process
page but for the generation time and the input's name. A damaged partition ends every process with a
clear error within a timeout, and no page is written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import polars as pl
import pytest
from parallel_jobs import KERNEL_NAMES, RANKS, SHARDS, STEPS, report_job
from report_tables import read_page
from test_parallel import SHARED, di_run, error_lines, install_plugin, need_mpi, stores

import di

STAMP = re.compile(r"di report \d{4}-\d\d-\d\d \d\d:\d\d")


def page(store: Path, tmp: Path, processes: int | None, *extra: str) -> str:
    """The report of ``store`` by ``processes`` (None: one process, no mpiexec), its generation time and the
    input's name taken out."""
    out = tmp / f"report-{processes}.html"
    done = di_run(["report", str(store), "-o", str(out), "--force", *extra], processes, tmp)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return STAMP.sub("di report (time)", out.read_text()).replace(str(store), "(input)")


@need_mpi
def test_generated_job_same_page_and_known(tmp_path: Path) -> None:
    trace = report_job()
    single, parted = stores(trace, tmp_path, ranks_per_group=5)  # groups of 5, 5, 5, 1 ranks: 10, 5, 1 on 3
    one = page(single, tmp_path, None)
    for p in (1, 2, 3):
        assert page(parted, tmp_path, p) == one, f"{p} processes"
    tables, keys = read_page(one)
    assert {"top_kernels", "io_files", "io_stats", "counters", "wait_states", "cp_by_rank"} <= set(tables)
    kernels = [r["name"] for r in tables["top_kernels"]]
    assert len(kernels) == 25 < KERNEL_NAMES  # the top of the job's sums per name
    from di.viewers.report.top_events import top_names

    assert kernels == top_names(trace.events, ("kernel",)).get_column("name").to_list()
    files = {r["file"]: r for r in tables["io_files"]}
    for s in range(SHARDS):  # read by ranks of several processes, summed by file
        ranks = [r for r in range(RANKS) if r % SHARDS == s]
        assert files[f"/data/shard-{s}"]["read_bytes"] == STEPS * sum(4096 * (r + 1) for r in ranks)
        assert files[f"/data/shard-{s}"]["calls"] == 2 * STEPS * len(ranks)
    assert keys["io.files"] == SHARDS + RANKS
    counters = {r["series"]: r for r in tables["counters"]}
    assert len(counters) == 2 * RANKS and counters["ib port 3 rcv bytes"]["unit"] == "bytes/s"
    assert keys["events"] == trace.events.height
    # the longest collectives (40 ms: every rank but the late one, every step) tie: the first event's is named
    assert "The longest traced collective, MPI_Allreduce on rank 0 (40.00 ms), ran over P2P/NVLink" in one


@need_mpi
@pytest.mark.parametrize("window", ["steps=1:", "time=1ms:200ms"])
def test_windows_same_page(window: str, tmp_path: Path) -> None:
    single, parted = stores(report_job(), tmp_path, ranks_per_group=3)
    assert page(parted, tmp_path, 3, "--window", window) == page(single, tmp_path, None, "--window", window)


@need_mpi
@pytest.mark.parametrize(
    ("name", "processes"), [("otf2_10_ranks", 3), ("otf2_cloverleaf_2_ranks", 2), ("kineto_2_ranks", 2)]
)
def test_shared_traces_same_page(name: str, processes: int, tmp_path: Path) -> None:
    path = {
        **SHARED,
        "otf2_cloverleaf_2_ranks": SHARED["otf2_10_ranks"].parents[1]
        / "casita_2_cloverleaf_oaccregions_cudafull"
        / "traces.otf2",
    }[name]
    if not path.exists():
        pytest.skip(f"shared test data absent: {path}")
    single, parted = stores(di.load(path), tmp_path)
    one = page(single, tmp_path, None)
    assert page(parted, tmp_path, processes) == one, f"{processes} processes"
    tables, _ = read_page(one)
    assert "cp_by_rank" in tables and any(t.startswith("top_") for t in tables)
    if name == "otf2_cloverleaf_2_ranks":
        assert tables["counters"]  # its METRIC samples: per-series statistics made by each process


@need_mpi
def test_input_not_partitioned_is_reported_by_process_0(tmp_path: Path) -> None:
    single, _ = stores(report_job(), tmp_path)
    assert page(single, tmp_path, 2) == page(single, tmp_path, None)


@need_mpi
def test_a_process_that_cannot_read_its_part_fails_every_process(tmp_path: Path) -> None:
    _, parted = stores(report_job(), tmp_path, ranks_per_group=4)
    (parted / "samples" / "g00002.parquet").write_bytes(b"not parquet")
    lines = error_lines(di_run(["report", str(parted), "-o", "out.html"], 3, tmp_path), "report", 3)
    assert all("g00002.parquet" in x and "unreadable Parquet" in x for x in lines)
    assert sum("process 1 of 3 failed while reading" in x for x in lines) == 2
    assert not (tmp_path / "out.html").exists()


def test_report_job_is_what_its_docstring_says() -> None:
    trace = report_job()
    io = trace.events.filter(pl.col("cat") == "io")
    assert io.height == 3 * STEPS * RANKS and io.get_column("bytes").null_count() == STEPS * RANKS
    assert trace.samples.get_column("series").n_unique() == 2 * RANKS


EVENTS_PANEL_PLUGIN = """
from di.viewers.report import Section


def events_per_rank(ctx):
    rank = ctx.trace.locations.select("loc", "rank")
    n = ctx.trace.events.join(rank, on="loc").group_by("rank").len().sort("rank")
    return Section("events_per_rank", "Events per rank", " ".join(f"{r}:{c}" for r, c in n.iter_rows()))
"""


@need_mpi
def test_panel_plugins_see_the_whole_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``di.report_panels`` plugin under mpiexec reads the whole trace on process 0, as in one process."""
    install_plugin(
        tmp_path,
        monkeypatch,
        "di_panel_plugin",
        EVENTS_PANEL_PLUGIN,
        "[di.report_panels]\nevents = di_panel_plugin:events_per_rank",
    )
    trace = report_job()
    single, parted = stores(trace, tmp_path, ranks_per_group=3)
    one = page(single, tmp_path, None)
    assert page(parted, tmp_path, 3) == one
    per_rank = trace.events.join(trace.locations.select("loc", "rank"), on="loc").group_by("rank").len()
    assert f"0:{per_rank.filter(pl.col('rank') == 0).item(0, 'len')} 1:" in one


FAILING_REDUCTION = """
import sys

import di.parallel.report
from di.cli import main


def fails(*args, **kwargs):
    raise ValueError("the reduction failed")


di.parallel.report.reduce_aggregates = fails  # process 0 alone reduces: the others wait for its broadcast
sys.exit(main(sys.argv[1:]))
"""


@need_mpi
def test_a_reduction_that_fails_on_process_0_fails_every_process(tmp_path: Path) -> None:
    """Process 0 reduces the parts alone while the others wait for its broadcast: its error (an input's,
    not a bug: no MPI_Abort) reaches them, and every process ends with one line, none waits forever."""
    import subprocess
    import sys

    from test_parallel import MPIEXEC

    _, parted = stores(report_job(), tmp_path, ranks_per_group=4)
    driver = tmp_path / "failing_reduction.py"
    driver.write_text(FAILING_REDUCTION)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(di.__file__).parents[1]), os.environ.get("PYTHONPATH")])),
    }
    cmd = [str(MPIEXEC), "-n", "2", sys.executable, str(driver), "report", str(parted), "-o", "out.html"]
    lines = error_lines(
        subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env), "report", 2
    )
    assert any("the reduction failed" in x and "process 0 of 2 failed while reducing" in x for x in lines), lines
    assert not (tmp_path / "out.html").exists()


@need_mpi
def test_counters_without_a_rate_are_left_out_by_every_process_count(tmp_path: Path) -> None:
    """The only counters are cumulative byte counters whose two samples share a time: no rate is left (a
    rate needs time between samples), so the counters panel is left out, by one process as by two."""
    trace = report_job()
    ib = trace.samples.filter(pl.col("series") % 2 == 1)
    first = ib.group_by("series").agg(pl.col("ts_ns").min())
    twice = ib.join(first, on=["series", "ts_ns"]).with_columns(pl.col("value") + 1.0)
    samples = pl.concat([ib.join(first, on=["series", "ts_ns"]), twice]).sort("series", "value")
    single, parted = stores(di.Trace.build(meta=trace.meta, **{**trace.tables(), "samples": samples}), tmp_path, 5)
    one = page(single, tmp_path, None)
    assert page(parted, tmp_path, 2) == one
    assert "counters" not in read_page(one)[0] and "failed" not in one
