"""Collective bandwidth (di.engine.comm_bandwidth): a two-rank Kineto job whose NCCL kernels' sizes, arrivals and
transfers are known, read through the Kineto reader; the shared Score-P trace against its own collectives; the
viewers; one process against several."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl
import pytest
from analyze_cli import analyze_outputs
from conftest import DATA

import di
from di.engine.comm_bandwidth import collective_rows, comm_bandwidth
from di.engine.window import prepare

STEPS = 4
BIG = 64 * 2**20  # bytes of each rank's part of the large allreduce
SMALL = 2**20
SKEW_US = 2000  # rank 1 starts the large allreduce this late in every step
TRANSFER_US = 800  # both finish this long after rank 1 started
SMALL_US = 100
CLOVERLEAF = DATA / "otf2" / "casita_2_cloverleaf_oaccregions_cudafull" / "traces.otf2"


def nccl_job(rank: int) -> dict:
    """One rank: per step a 64 MiB allreduce (rank 1 arrives SKEW_US late; both end TRANSFER_US after it) and a
    1 MiB allreduce both start together and run SMALL_US; rank 0 alone runs one more 1 MiB allreduce at the end,
    whose other member the trace lacks."""
    events: list[dict] = []

    def kernel(ts: float, dur: float, nbytes: int) -> None:
        args = {
            "Collective name": "allreduce",
            "In msg nelems": nbytes // 4,
            "dtype": "Float",
            "Group size": 2,
            "Process Group Name": "0",
            "Process Group Ranks": "[0, 1]",
        }
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                "pid": 0,
                "tid": 7,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    for k in range(STEPS):
        t = 1_000_000 + k * 10_000
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{k}",
                "pid": 100,
                "tid": 1,
                "ts": t,
                "dur": 9_999,
            }
        )
        arrive = t + 1000 + (SKEW_US if rank == 1 else 0)
        kernel(arrive, t + 1000 + SKEW_US + TRANSFER_US - arrive, BIG)
        kernel(t + 5000, SMALL_US, SMALL)
    if rank == 0:
        kernel(1_000_000 + STEPS * 10_000 - 500, SMALL_US, SMALL)
    return {"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}


def write_job(tmp: Path) -> list[Path]:
    files = []
    for rank in (0, 1):
        f = tmp / f"rank{rank}.json"
        f.write_text(json.dumps(nccl_job(rank)))
        files.append(f)
    return files


def test_known_job(tmp_path: Path) -> None:
    trace = di.load(write_job(tmp_path))
    groups = comm_bandwidth(collective_rows(prepare(trace)))
    big = groups.filter(pl.col("bytes") == BIG).row(0, named=True)
    assert (big["op"], big["ranks"], big["scope"], big["calls"], big["parts"]) == (
        "allreduce",
        2,
        None,
        STEPS,
        2 * STEPS,
    )
    assert big["mean_call_ns"] == (TRANSFER_US + SKEW_US / 2) * 1000  # rank 0 waits SKEW_US more than rank 1
    assert (big["mean_skew_ns"], big["mean_transfer_ns"]) == (SKEW_US * 1000, TRANSFER_US * 1000)
    assert big["algbw_gbps"] == pytest.approx(BIG / big["mean_call_ns"])
    assert big["busbw_gbps"] == pytest.approx(big["algbw_gbps"] * 2 * (2 - 1) / 2)  # allreduce: 2(n-1)/n
    assert big["transfer_busbw_gbps"] == pytest.approx(BIG / (TRANSFER_US * 1000))
    small = groups.filter(pl.col("bytes") == SMALL).row(0, named=True)
    # the unmatched call is a call but has neither skew nor transfer: its other member is not in the trace
    assert (small["calls"], small["parts"]) == (STEPS + 1, 2 * STEPS + 1)
    assert (small["mean_skew_ns"], small["mean_transfer_ns"]) == (0, SMALL_US * 1000)
    assert groups.get_column("op").to_list() == ["allreduce", "allreduce"]  # the most total call time first
    assert groups.row(0, named=True)["bytes"] == BIG


def test_wait_states_agree(tmp_path: Path) -> None:
    """The skew is the wait at N x N that the wait states charge to rank 1, the late member."""
    result = di.analyze(di.load(write_job(tmp_path)), analyses=("wait_states", "comm_bandwidth"))
    waits = result.wait_states.filter(pl.col("kind") == "wait_nxn")
    late = (
        waits.group_by("rank", "cause_rank")
        .agg(pl.col("wait_ns").sum())
        .sort("wait_ns", descending=True)
        .row(0, named=True)
    )
    assert (late["rank"], late["cause_rank"], late["wait_ns"]) == (0, 1, SKEW_US * 1000 * STEPS)
    big = result.comm_bandwidth.filter(pl.col("bytes") == BIG).row(0, named=True)
    assert big["mean_skew_ns"] * big["calls"] == late["wait_ns"]


def test_shared_trace_against_its_own_collectives() -> None:
    """Score-P's CloverLeaf on two nodes: every group's calls, parts and skew from its own collectives table."""
    if not CLOVERLEAF.exists():
        pytest.skip("shared data absent")
    trace = di.load(CLOVERLEAF)
    groups = comm_bandwidth(collective_rows(prepare(trace)))
    assert set(groups.get_column("scope")) == {"inter-node"}  # its two ranks ran on two hosts
    ev = trace.events
    coll = trace.collectives.filter(pl.col("op") != "barrier").with_columns(
        ev.get_column("start_ns")
        .gather(trace.collectives.filter(pl.col("op") != "barrier").get_column("event"))
        .alias("s")
    )
    for r in groups.iter_rows(named=True):
        mine = coll.filter((pl.col("op") == r["op"]) & (pl.col("bytes") == r["bytes"]))
        assert (r["parts"], r["calls"]) == (mine.height, mine.get_column("instance").n_unique())
        skew = mine.group_by("instance").agg((pl.col("s").max() - pl.col("s").min()).alias("k")).get_column("k").mean()
        assert r["mean_skew_ns"] == round(skew)
        assert r["mean_transfer_ns"] <= r["mean_call_ns"] + r["mean_skew_ns"]


def test_viewers(tmp_path: Path) -> None:
    files = write_job(tmp_path)
    text, doc, csv_dir = analyze_outputs(files, tmp_path)
    assert "Collective bandwidth" in text and "64.0 MiB" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    big = next(r for r in doc["comm_bandwidth"] if r["bytes"] == BIG)
    assert big["mean_transfer_ns"] == TRANSFER_US * 1000
    assert (csv_dir / "comm_bandwidth.csv").exists()


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists(), reason="mpiexec of the mpich wheel absent")
def test_under_mpiexec_the_same_answer(tmp_path: Path) -> None:
    """Each process reads its ranks of a partitioned store; the groups equal one process's."""
    from test_parallel import analysis, stores

    single, parted = stores(di.load(write_job(tmp_path)), tmp_path, ranks_per_group=1)
    one = analysis(single, tmp_path, None, "--steps")
    assert [r["mean_transfer_ns"] for r in one["comm_bandwidth"] if r["bytes"] == BIG] == [TRANSFER_US * 1000]
    assert analysis(parted, tmp_path, 2, "--steps") == one


def test_report_panel_and_its_hint(tmp_path: Path) -> None:
    from report_tables import read_page, run_report, section_hints

    page = run_report(write_job(tmp_path), tmp_path)
    tables, _ = read_page(page)
    big = next(r for r in tables["comm_bandwidth"] if r["size"] == BIG)
    assert (big["skew (ms)"], big["transfer (ms)"]) == (SKEW_US * 1000, TRANSFER_US * 1000)
    (hint,) = section_hints(page, "comm_bandwidth")
    # the calls last 0.8 + 2.0 / 2 = 1.8 ms on average, the transfers 0.8: the calls' busbw is under half
    assert hint.startswith("allreduce of 64.0 MiB over 2 ranks: the calls reach 37.3 GB/s of bus bandwidth")
    assert "moves at 83.9 once every member has arrived" in hint and "starts 2.000 ms after the first" in hint
