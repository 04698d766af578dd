"""Time outside traced calls is work: jobs recorded by PMPI/I-O capture (threads of calls
only) whose straggler computes between its calls. Breakdown, imbalance, wait states and
the critical path must all name the straggler, and the path must run through the late
sender's computation, never through its receiver's wait."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from engine_jobs import MS, Job

import di
from di.engine.classify import call_only_locations
from di.engine.critical_path import UNTRACED_CAT, UNTRACED_NAME
from di.engine.critical_path_graph import MESSAGE, build_graph
from di.engine.window import prepare

COMPUTE_MS = [10.0, 10.0, 20.0]  # rank 2 computes twice as long between its calls
STRAGGLER = 2


def ring_then_allreduce() -> Job:
    """Three call-only ranks: MPI_Init, untraced compute, a ring exchange (Isend to the next
    rank, Irecv from the previous, Waitall of at least 0.1 ms: the data arrives 0.3 ms after
    its Isend), an Allreduce that ends 1 ms after the last entry, MPI_Finalize."""
    job = Job()
    th = [job.thread(r) for r in range(3)]
    isend_at = [1 + c for c in COMPUTE_MS]
    waitall_end = []
    sends, waits = [], []
    for r in range(3):
        job.ev(th[r], 0, 1, "MPI_Init", "mpi_coll")
        t = isend_at[r]
        sends.append(job.ev(th[r], t, t + 0.1, "MPI_Isend", "mpi_p2p"))
        job.ev(th[r], t + 0.1, t + 0.2, "MPI_Irecv", "mpi_p2p")
        end = max(t + 0.3, isend_at[(r - 1) % 3] + 0.3)
        waitall_end.append(end)
        waits.append(job.ev(th[r], t + 0.2, end, "MPI_Waitall", "mpi_p2p"))
    for r in range(3):
        job.message(sends[(r - 1) % 3], waits[r], send_done=waits[(r - 1) % 3])
    last = max(waitall_end)
    job.collective(
        [job.ev(th[r], waitall_end[r], last + 1, "MPI_Allreduce", "mpi_coll") for r in range(3)], "allreduce"
    )
    job.collective([job.ev(th[r], last + 1, last + 1.5, "MPI_Finalize", "mpi_coll") for r in range(3)], "barrier")
    return job


def test_call_only_timelines_are_told_from_the_events() -> None:
    job = Job()
    mpi_only, with_region, kineto_like, annotations, stream = (
        job.thread(0),
        job.thread(0),
        job.thread(1),
        job.thread(1),
        job.stream(1),
    )
    job.ev(mpi_only, 0, 1, "MPI_Send", "mpi_p2p")
    job.ev(with_region, 0, 5, "forward", "user")
    job.ev(with_region, 1, 2, "read", "io")
    job.ev(kineto_like, 0, 5, "aten::mm", "compute")
    job.ev(kineto_like, 1, 2, "MPI_Allreduce", "mpi_coll")
    job.ev(annotations, 0, 5, "ProfilerStep#0", "step")
    job.ev(stream, 1, 2, "gemm", "kernel")
    assert call_only_locations(job.build()).tolist() == [True, True, False, False, False]


def test_breakdown_imbalance_waits_and_path_name_the_straggler() -> None:
    result = di.analyze(ring_then_allreduce().build())
    host = result.breakdown.filter(pl.col("step").is_null())
    untraced = dict(host.filter(pl.col("state") == "untraced").select("rank", "time_ns").iter_rows())
    idle = dict(host.filter(pl.col("state") == "idle").select("rank", "time_ns").iter_rows())
    # the time between a rank's calls is its work (1 -> 1 + C: its compute), never idle
    assert untraced == {r: round(COMPUTE_MS[r] * MS) for r in range(3)}
    assert set(idle.values()) == {0}
    work = result.imbalance.filter(pl.col("step").is_null() & (pl.col("state") == "work"))
    assert work.get_column("max_rank").to_list() == [STRAGGLER]
    waits = result.wait_states.filter(pl.col("step").is_null())
    late = waits.filter(pl.col("kind") == "late_sender").row(0, named=True)
    assert (late["rank"], late["cause_rank"], late["wait_ns"]) == (
        0,
        STRAGGLER,
        round(9.8 * MS),
    )  # rank 0 waits for the straggler's data
    waited = dict(waits.group_by("rank").agg(pl.col("wait_ns").sum()).iter_rows())
    assert waited.get(STRAGGLER, 0) < min(
        v for r, v in waited.items() if r != STRAGGLER
    )  # and the straggler waits least
    cp = result.critical_path
    by_rank = dict(cp["by_rank"].select("rank", "share").iter_rows())
    assert max(by_rank, key=by_rank.get) == STRAGGLER and by_rank[STRAGGLER] > 0.8
    top = cp["by_category"].row(0, named=True)
    assert top["category"] == UNTRACED_CAT and top["contrib_ns"] == round(COMPUTE_MS[STRAGGLER] * MS)
    names = dict(cp["by_name"].select("name", "contrib_ns").iter_rows())
    assert names[UNTRACED_NAME] == top["contrib_ns"]
    assert (
        names.get("MPI_Waitall", 0) <= 0.3 * MS
    )  # waiting never lies on the path; only the transfer after the send does
    # the path runs from the start to the end of the job: Init, the straggler's work, transfer, allreduce, finalize
    assert cp["summary"]["length_ns"] == cp["summary"]["window_span_ns"]


def _sender_computing_after_isend(recv_end_ms: float) -> Job:
    """Rank 0 posts MPI_Isend at 2 ms, computes (untraced) until 50 ms, then waits in MPI_Wait
    until 51 ms; rank 1 blocks in MPI_Recv from 1.5 ms until ``recv_end_ms`` and ends at 60 ms."""
    job = Job()
    a, b = job.thread(0), job.thread(1)
    job.ev(a, 0, 1, "MPI_Init", "mpi_coll")
    send = job.ev(a, 2, 2.1, "MPI_Isend", "mpi_p2p")
    done = job.ev(a, 50, 51, "MPI_Wait", "mpi_p2p")
    job.ev(b, 0, 1, "MPI_Init", "mpi_coll")
    recv = job.ev(b, 1.5, recv_end_ms, "MPI_Recv", "mpi_p2p")
    job.ev(b, 59, 60, "MPI_Finalize", "mpi_coll")
    job.message(send, recv, send_done=done)
    return job


@pytest.mark.parametrize(("recv_end_ms", "ready_ms"), [(50.5, 50.0), (2.5, 2.0)], ids=["rendezvous", "eager"])
def test_a_nonblocking_send_is_ready_at_its_wait_or_at_the_call(recv_end_ms: float, ready_ms: float) -> None:
    """The message edge leaves the sender where it could make progress: its MPI_Wait when the
    data arrived only after the sender reached it, else the MPI_Isend itself."""
    frame = prepare(_sender_computing_after_isend(recv_end_ms).build())
    g, _ = build_graph(frame)
    into_recv_end = np.flatnonzero((g.kind == MESSAGE) & (g.time_ns[g.dst] == round(recv_end_ms * MS)))
    assert g.time_ns[g.src[into_recv_end]].tolist() == [round(ready_ms * MS)]


def test_the_edge_never_weighs_the_senders_work_after_isend() -> None:
    cp = di.analyze(_sender_computing_after_isend(50.5).build()).critical_path
    seg = cp["segments"]
    message = seg.filter(pl.col("kind") == "message").get_column("contrib_ns").sum()
    assert message == round(0.5 * MS)  # from the sender's MPI_Wait at 50 ms to the receive's end
    sender_work = (
        seg.filter((pl.col("rank") == 0) & (pl.col("category") == UNTRACED_CAT)).get_column("contrib_ns").sum()
    )
    assert sender_work == round((1 + 47.9) * MS)  # 1..2 and 2.1..50 ms: its computation lies on the path
    assert cp["summary"]["length_ns"] == 60 * MS


def test_steps_of_a_call_only_job_come_from_its_recurring_collective() -> None:
    """A long MPI_Waitall is no step function, and a one-off Bcast does not hide the per-step allreduce."""
    job = Job()
    th = [job.thread(r) for r in range(3)]
    job.collective([job.ev(th[r], 0, 1, "MPI_Bcast", "mpi_coll") for r in range(3)], "broadcast")
    t = 1.0
    for _ in range(3):
        arrive = [t + (20 if r == STRAGGLER else 10) for r in range(3)]
        for r in range(3):
            if r != STRAGGLER:  # the others wait most of the step in MPI_Waitall
                job.ev(th[r], arrive[r] - 9, arrive[r], "MPI_Waitall", "mpi_p2p")
        job.collective(
            [job.ev(th[r], arrive[r], max(arrive) + 1, "MPI_Allreduce", "mpi_coll") for r in range(3)], "allreduce"
        )
        t = max(arrive) + 1
    steps = di.analyze(job.build(), per_step=True).steps
    assert (
        steps.group_by("rank").agg(pl.col("label").sort_by("step")).sort("rank").get_column("label").to_list()
        == [["allreduce #0", "allreduce #1", "allreduce #2"]] * 3
    )
