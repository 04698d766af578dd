"""combine: text logs aligned to the clock of a real trace of the same job, and joined to it.

The trace is a real Kineto trace of ../shared/data (skipped when absent). The logs are
written from it, so the answer is known by construction: a DeepSpeed log whose step lines
carry the trace's step ends in zone-less local time two hours ahead of UTC, and an NCCL
log (``NCCL_DEBUG_TIMESTAMP_FORMAT``) whose COLL lines carry the traced collectives'
starts in the same local time, for a communicator of two ranks on two hosts.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

TRACE = DATA / "kineto" / "hta_nccl_parser_config" / "nccl_data.json.gz"
ZONE_NS = 2 * 3600 * 10**9
DTYPE = {"Float": 7, "Long": 4}
NAMES = {"allreduce": "AllReduce", "broadcast": "Broadcast"}


def local(ns: int, digits: int) -> str:
    d = dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc) + dt.timedelta(hours=2)
    frac = f"{ns % 10**9:09d}"[:digits]
    return d.strftime("%Y-%m-%d %H:%M:%S") + ("," if digits == 3 else ".") + frac


@pytest.fixture(scope="module")
def trace() -> di.Trace:
    if not TRACE.is_file():
        pytest.skip("shared test data absent: kineto/hta_nccl_parser_config not found under ../shared/data")
    return di.load(TRACE)


def deepspeed_log(trace: di.Trace, path: Path) -> Path:
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    lines = [
        f"[{local(steps.get_column('start_ns')[0], 3)}] [INFO] [logging.py:96:log_dist] [Rank 0] step=3, skipped=0"
    ]
    for name, end in steps.select(pl.col("name").cast(pl.String), "end_ns").rows():
        n = name.split("#")[1]
        lines.append(f"[{local(end, 3)}] [INFO] [logging.py:96:log_dist] [Rank 0] step={n}, skipped=0, lr=[0.001]")
    path.write_text("\n".join(lines) + "\n")
    return path


def nccl_log(trace: di.Trace, path: Path) -> Path:
    ts = local(trace.meta["time_range"]["start_ns"], 6)
    lines = [
        "NCCL version 2.18.1+cuda12.1",
        f"[{ts}] nodeA:100:101 [0] NCCL INFO comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",
        f"[{ts}] nodeB:200:201 [0] NCCL INFO comm 0xb0 rank 1 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE",
        f"[{ts}] nodeA:100:105 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1b000] [send] via NET/IB/0",
        f"[{ts}] nodeB:200:205 [0] NCCL INFO Channel 00 : 1[1b000] -> 0[1b000] [send] via NET/IB/0",
    ]
    coll = trace.collectives.join(
        trace.events.with_row_index("event").select(pl.col("event").cast(pl.Int64), "start_ns"), on="event"
    ).sort("start_ns")
    for op, nbytes, dtype, start in coll.select("op", "bytes", "dtype", "start_ns").rows():
        size = 4 if dtype == "Float" else 8
        lines.append(
            f"[{local(start, 6)}] nodeA:100:101 [0] NCCL INFO {NAMES[op]}: opCount 0 sendbuff 0x1 recvbuff 0x2 "
            f"count {nbytes // size} datatype {DTYPE[dtype]} op 0 root 0 comm 0xa0 [nranks=2] stream 0x9"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


def alignment(trace: di.Trace, name: str) -> dict:
    return next(s["info"]["alignment"] for s in trace.meta["sources"] if s["path"].endswith(name))


def test_zone_less_log_steps_align_to_the_trace_steps(trace: di.Trace, tmp_path: Path) -> None:
    job = di.load([TRACE, deepspeed_log(trace, tmp_path / "train.log")])
    job.validate()
    a = alignment(job, "train.log")
    # the log's local times are two hours ahead: its steps put it back, to within its millisecond printing
    assert a["method"] == "steps" and a["matched"] == 3
    assert (a["steps_joined"], a["step_number_shift"]) == (3, 0)  # DeepSpeed step=N ends ProfilerStep#N
    assert abs(a["offset_ns"] + ZONE_NS) < 1_000_000 and a["residual_ns"] < 1_000_000
    log_steps = job.events.filter((pl.col("cat") == "step") & pl.col("name").cast(pl.String).str.starts_with("step"))
    trace_steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    assert (log_steps.sort("end_ns").get_column("end_ns") - trace_steps.get_column("end_ns")).abs().max() < 1_000_000


def test_nccl_log_aligns_by_collectives_and_joins_its_communicator(trace: di.Trace, tmp_path: Path) -> None:
    job = di.load([TRACE, nccl_log(trace, tmp_path / "nccl.log")])
    job.validate()
    a = alignment(job, "nccl.log")
    n = trace.collectives.height
    assert a["method"] == "collectives" and a["matched"] == n
    assert abs(a["offset_ns"] + ZONE_NS) < 1_000 and a["residual_ns"] < 1_000
    coll = job.collectives
    traced = coll.filter(pl.col("log_comm").is_not_null())
    assert traced.height == n  # every traced collective, none of the log's own
    assert traced.get_column("comm_hosts").unique().to_list() == [json.dumps(["nodeA", "nodeB"])]
    assert traced.get_column("transports").unique().to_list() == ["NET"]
    assert job.meta["combine"] == {"collectives_traced": n, "collectives_joined": n}
    # the log's own collectives sit at the traced ones' starts
    log_coll = coll.filter(pl.col("log_comm").is_null()).join(
        job.events.with_row_index("event").select(pl.col("event").cast(pl.Int64), "start_ns"), on="event"
    )
    traced_starts = traced.join(
        job.events.with_row_index("event").select(pl.col("event").cast(pl.Int64), "start_ns"), on="event"
    )
    assert (
        log_coll.sort("start_ns").get_column("start_ns") - traced_starts.sort("start_ns").get_column("start_ns")
    ).abs().max() < 1_000


def test_a_log_with_nothing_to_align_by_says_so(trace: di.Trace, tmp_path: Path) -> None:
    log = tmp_path / "smi.csv"
    log.write_text("index, power.draw [W]\n0, 50.0\n1, 60.0\n")
    job = di.load([TRACE, log])
    a = alignment(job, "smi.csv")
    assert a == {"method": "none", "offset_ns": 0, "matched": 0, "residual_ns": None}
    assert any("not aligned to the job's clock" in w for w in job.meta["warnings"])


def test_steps_of_a_log_give_per_step_results_to_a_trace_without_step_markers(tmp_path: Path) -> None:
    found = sorted((DATA / "kineto" / "hta_cupti_profiler").glob("benchmark_result_*.json.gz"))
    if not found:
        pytest.skip("shared test data absent: kineto/hta_cupti_profiler not found under ../shared/data")
    alone = di.load(found[0])
    assert di.analyze(alone).steps.height == 0  # no step markers, no repeating region
    start, end = alone.meta["time_range"]["start_ns"], alone.meta["time_range"]["end_ns"]
    marks = [start + (end - start) * k // 4 for k in range(5)]

    def utc(ns: int) -> str:
        d = dt.datetime.fromtimestamp(ns // 10**9, dt.timezone.utc)
        return d.strftime("%Y-%m-%d %H:%M:%S,") + f"{ns % 10**9 // 10**6:03d}"

    log = tmp_path / "train.log"
    log.write_text("".join(f"[{utc(m)}] [INFO] [Rank 0] step={k}, skipped=0, lr=[0.1]\n" for k, m in enumerate(marks)))
    job = di.load([found[0], log])
    assert alignment(job, "train.log")["method"] == "timestamps"
    result = di.analyze(job, per_step=True)
    steps = result.steps.sort("step")
    assert steps.get_column("step").to_list() == [1, 2, 3, 4]
    assert steps.get_column("end_ns").to_list() == [m // 10**6 * 10**6 for m in marks[1:]]
    # the breakdown per step, by the log's steps
    per_step = result.breakdown.filter(pl.col("step").is_not_null())
    assert set(per_step.get_column("step")) == {1, 2, 3, 4}


def test_the_report_names_the_transport_of_the_longest_traced_collective(trace: di.Trace, tmp_path: Path) -> None:
    from di.viewers.report import write_report

    job = di.load([TRACE, nccl_log(trace, tmp_path / "nccl.log")])
    write_report(job, di.analyze(job), tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    longest = (
        trace.collectives.join(
            trace.events.with_row_index("event").select(
                pl.col("event").cast(pl.Int64), (pl.col("end_ns") - pl.col("start_ns")).alias("d")
            ),
            on="event",
        )
        .get_column("d")
        .max()
    )
    assert f"({longest / 1e6:,.2f} ms), ran over NET between hosts" in page
    assert "nodeA" in page and "nodeB" in page
