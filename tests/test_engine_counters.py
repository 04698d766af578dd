"""Counters (di.engine.counters): each series' statistics on a job whose samples are known by construction, in a
window, under mpiexec, and a text log's series, which are never read as running totals."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from analyze_cli import MPIEXEC, analyze_json, one_and_many
from parallel_jobs import RANKS, SAMPLE_MS, report_job

import di
from di.engine.counters import COLUMNS

MS = 1_000_000


def expected(trace: di.Trace, lo: int | None = None, hi: int | None = None) -> dict[str, dict]:
    """Per series name, its statistics from report_job's formulas: GPU s's utilisation (s * 13 + i * 7) % 100
    at sample i; IB port counter s grows 1000 (s + 1) bytes a sample, a rate of 1000 (s + 1) per SAMPLE_MS."""
    ts = trace.samples.filter(pl.col("series") == 0).get_column("ts_ns").to_list()
    out = {}
    for r in range(RANKS):
        gpu, ib = 2 * r, 2 * r + 1
        keep = [(i, t) for i, t in enumerate(ts) if (lo is None or t >= lo) and (hi is None or t < hi)]
        util = [float((gpu * 13 + i * 7) % 100) for i, _ in keep]
        out[f"GPU {r} utilization"] = {
            "unit": "%",
            "samples": len(util),
            "min": min(util),
            "max": max(util),
            "mean": sum(util) / len(util),
            "last": util[-1],
            "first_ns": keep[0][1],
            "last_ns": keep[-1][1],
        }
        rate = 1000.0 * (ib + 1) / (SAMPLE_MS / 1000)
        rated = [t for i, t in keep if i > 0]  # a rate sits at the later sample; the first has none
        out[f"ib port {r} rcv bytes"] = {
            "unit": "bytes/s",
            "samples": len(rated),
            "min": rate,
            "max": rate,
            "mean": rate,
            "last": rate,
            "first_ns": rated[0],
            "last_ns": rated[-1],
        }
    return out


def check(got: pl.DataFrame, want: dict[str, dict]) -> None:
    assert got.schema == pl.Schema(COLUMNS)
    rows = {r["name"]: r for r in got.iter_rows(named=True)}
    assert set(rows) == set(want)
    for name, w in want.items():
        for key, value in w.items():
            assert rows[name][key] == (pytest.approx(value) if isinstance(value, float) else value), (name, key)


def test_each_series_reads_as_built_and_cumulative_counters_as_rates() -> None:
    trace = report_job()
    got = di.analyze(trace, analyses=("counters",)).counters
    check(got, expected(trace))
    assert got.get_column("rank").to_list() == [r for r in range(RANKS) for _ in range(2)]


def test_a_time_window_keeps_its_samples() -> None:
    trace = report_job()
    base = int(trace.meta["time_range"]["start_ns"])
    got = di.analyze(trace, window="time=50ms:100ms", analyses=("counters",)).counters
    check(got, expected(trace, base + 50 * MS, base + 100 * MS))


def test_a_steps_window_keeps_the_samples_of_its_steps() -> None:
    trace = report_job()
    result = di.analyze(trace, window="steps=1:3", analyses=("counters",))
    lo, hi = int(result.steps.get_column("start_ns").min()), int(result.steps.get_column("end_ns").max())
    check(result.counters, expected(trace, lo, hi))


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec of the mpich wheel not installed")
@pytest.mark.parametrize("window", ["all", "steps=1:3"])
def test_the_same_counters_under_mpiexec(window: str, tmp_path: Path) -> None:
    one, many = one_and_many(report_job(), tmp_path, 3, 3, "--window", window)
    assert one["counters"] == many["counters"] and len(one["counters"]) == 2 * RANKS


NCCL_TESTS = """# nThread 1 nGpus 8 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    60.00   17.48   26.21      0    61.00   17.19   25.78      0
     2097152        524288     float     sum      -1    90.00   23.30   34.95      0    91.00   23.05   34.57      0
     4194304       1048576     float     sum      -1   150.00   27.96   41.94      0   152.00   27.59   41.39      0
# Avg bus bandwidth    : 34.14
"""


def test_a_logs_growing_series_stay_readings(tmp_path: Path) -> None:
    """nccl-tests' message sizes grow row after row, in bytes: they are sizes, not a byte counter to rate."""
    log = tmp_path / "allreduce.log"
    log.write_text(NCCL_TESTS)
    got = di.analyze(di.load(log), analyses=("counters",)).counters
    size = got.filter(pl.col("name").str.ends_with(".size")).row(0, named=True)
    assert (size["unit"], size["samples"], size["min"], size["max"]) == ("bytes", 3, 1048576.0, 4194304.0)
    busbw = got.filter(pl.col("name").str.contains("busbw.out-of-place")).row(0, named=True)
    assert (busbw["unit"], busbw["max"], busbw["last"]) == ("GB/s", 41.94, 41.94)


MEGATRON = (
    " iteration {i:>8}/    1000 | consumed samples: {s:>10} | elapsed time per iteration (ms): 1000.0 |"
    " learning rate: 1.500E-04 | global batch size:     8 | lm loss: {loss} | grad norm: {gn} |"
)


def test_nan_and_infinite_readings_are_counted_and_the_json_stays_json(tmp_path: Path) -> None:
    """A diverged step logs ``lm loss: nan``, an overflowed one ``grad norm: inf``: the statistics are of the finite
    readings, the others counted, and the analysis JSON holds no NaN (which no strict JSON reader accepts)."""
    log = tmp_path / "train.log"
    rows = [("6.0", "1.0"), ("5.0", "2.0"), ("nan", "3.0"), ("4.0", "inf")]
    log.write_text(
        "\n".join(MEGATRON.format(i=10 * (k + 1), s=80 * (k + 1), loss=a, gn=b) for k, (a, b) in enumerate(rows)) + "\n"
    )
    got = {r["name"]: r for r in di.analyze(di.load(log), analyses=("counters",)).counters.iter_rows(named=True)}
    assert (got["loss"]["samples"], got["loss"]["nonfinite"], got["loss"]["mean"], got["loss"]["last"]) == (
        4,
        1,
        5.0,
        4.0,
    )
    assert (got["grad_norm"]["nonfinite"], got["grad_norm"]["max"], got["grad_norm"]["last"]) == (1, 3.0, 3.0)
    doc = analyze_json(log, tmp_path / "r.json")  # read strictly: no NaN in it
    assert {c["name"]: c["nonfinite"] for c in doc["counters"]}["loss"] == 1
