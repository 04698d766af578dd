"""nccl-tests output of every version: before 2.10 the tables have no ``root`` column, and before 2.13 no
``# Collective test starting:`` line names the test (a run is named by the ``*_perf`` command a job script echoed
before its header). Hand-built logs whose series are known by construction."""

from __future__ import annotations

from pathlib import Path

import polars as pl

import di
from di.convert.logs.reader import families_in

HEADER = """\
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  40015 on    dgx-01 device  0 [0x07] Tesla V100-SXM2-32GB
#   Rank  1 Pid  40015 on    dgx-01 device  1 [0x0a] Tesla V100-SXM2-32GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
ROWS = [  # size, count, busbw out-of-place, busbw in-place
    (8, 2, 0.00, 0.01),
    (1048576, 262144, 40.50, 40.25),
    (134217728, 33554432, 150.56, 150.52),
]


def legacy_run(scale: float = 1.0) -> str:
    """One run of a pre-2.10 nccl-tests binary: no root column, busbw scaled by ``scale``."""
    rows = "".join(
        f"{size:>12} {count:>13}   float     sum    41.00    0.00 {scale * bo:>7.2f}  1e-07    41.00    0.00"
        f" {scale * bi:>7.2f}  1e-07\n"
        for size, count, bo, bi in ROWS
    )
    return HEADER + rows + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 63.5\n#\n"


def busbw(trace: di.Trace) -> dict[str, list[float]]:
    """Per series named ``*.busbw.out-of-place``, its values in row order."""
    s = trace.series.filter(pl.col("name").str.ends_with("busbw.out-of-place"))
    joined = s.join(trace.samples, on="series").sort("ts_ns")
    return {name: g.get_column("value").to_list() for (name,), g in joined.group_by("name", maintain_order=True)}


def test_a_log_before_2_10_is_read_with_its_ranks(tmp_path: Path) -> None:
    log = tmp_path / "nccl_tests.log"
    log.write_text(legacy_run())
    assert families_in(log.read_bytes()) == ["nccl_tests"]
    trace = di.load(log)
    assert busbw(trace) == {"nccl-tests.unnamed.busbw.out-of-place": [r[2] for r in ROWS]}
    info = trace.meta["sources"][0]["info"]["nccl_tests"]
    assert info["layout"] == "no root column (before 2.10)" and info["rows"] == len(ROWS)
    assert [(r["rank"], r["host"], r["device"], r["gpu"]) for r in info["ranks"]] == [
        (0, "dgx-01", 0, "Tesla V100-SXM2-32GB"),
        (1, "dgx-01", 1, "Tesla V100-SXM2-32GB"),
    ]
    assert info["avg_busbw_GBps"] == {"unnamed": 63.5}


def test_runs_are_named_by_the_command_echoed_before_them(tmp_path: Path) -> None:
    log = tmp_path / "sweep.out"
    log.write_text(
        "+ mpirun -np 2 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1\n"
        + legacy_run()
        + "+ mpirun -np 2 ./build/all_gather_perf -b 8 -e 128M -f 2 -g 1\n"
        + legacy_run(scale=0.5)
    )
    got = busbw(di.load(log))
    assert got == {
        "nccl-tests.all_reduce.busbw.out-of-place": [r[2] for r in ROWS],
        "nccl-tests.all_gather.busbw.out-of-place": [round(0.5 * r[2], 2) for r in ROWS],
    }


def test_rows_cut_by_nccl_lines_in_the_old_layout(tmp_path: Path) -> None:
    """An NCCL INFO line printed into the table cuts a row in two (glued after a number, as NCCL prints from another
    thread); the old layout's rows are put back together."""
    text = legacy_run().replace(
        "  float     sum    41.00    0.00  150.56",
        "  float     sum    41.00dgx-01:40015:40015 [0] NCCL INFO Launch mode Parallel\n    0.00  150.56",
    )
    log = tmp_path / "cut.log"
    log.write_text(text)
    assert busbw(di.load(log)) == {"nccl-tests.unnamed.busbw.out-of-place": [r[2] for r in ROWS]}


def test_a_log_of_2_10_to_2_12_has_a_root_column_and_no_test_line(tmp_path: Path) -> None:
    head = HEADER.replace("redop     time", "redop    root     time")
    rows = "".join(
        f"{size:>12} {count:>13}   float     sum      -1    41.00    0.00 {bo:>7.2f}      0    41.00    0.00"
        f" {bi:>7.2f}      0\n"
        for size, count, bo, bi in ROWS
    )
    log = tmp_path / "n.log"
    log.write_text("./build/reduce_scatter_perf -b 8 -e 128M\n" + head + rows)
    trace = di.load(log)
    assert busbw(trace) == {"nccl-tests.reduce_scatter.busbw.out-of-place": [r[2] for r in ROWS]}
    assert trace.meta["sources"][0]["info"]["nccl_tests"]["layout"] == "current"
