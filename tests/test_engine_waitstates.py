"""Wait states and imbalance on hand-built traces whose answer is known by construction."""

from __future__ import annotations

import polars as pl
import pytest

from di.engine import analyze
from engine_jobs import MS, Job, late_allreduce


def _waits(trace, **kw):
    return analyze(trace, analyses=("wait_states",), **kw).wait_states


def test_one_rank_30ms_late_into_allreduce():
    waits = _waits(late_allreduce(late_rank=2, late_ms=30).build())
    assert waits.height == 3
    assert set(waits.get_column("kind")) == {"wait_nxn"}
    assert sorted(waits.get_column("rank").to_list()) == [0, 1, 3]
    assert waits.get_column("wait_ns").to_list() == [30 * MS] * 3
    assert set(waits.get_column("cause_rank")) == {2}


def test_barrier_and_rooted_collectives():
    job = Job()
    th = [job.thread(r) for r in range(3)]
    # barrier: enters at 0, 5, 20; all leave at 21
    job.collective([job.ev(th[r], e, 21, "MPI_Barrier", "mpi_coll") for r, e in enumerate((0, 5, 20))], "barrier")
    # broadcast from root 1 entering at 40; others enter at 30 and 35 and leave at 42
    job.collective(
        [job.ev(th[r], e, 42, "MPI_Bcast", "mpi_coll") for r, e in enumerate((30, 40, 35))], "broadcast", root=1
    )
    # reduce to root 0 entering at 50; others enter at 58 and 60; all leave at 61
    job.collective(
        [job.ev(th[r], e, 61, "MPI_Reduce", "mpi_coll") for r, e in enumerate((50, 58, 60))], "reduce", root=0
    )
    got = {
        (k, r): (w, c) for k, r, w, c in _waits(job.build()).select("kind", "rank", "wait_ns", "cause_rank").iter_rows()
    }
    assert got == {
        ("wait_barrier", 0): (20 * MS, 2),
        ("wait_barrier", 1): (15 * MS, 2),
        ("late_broadcast", 0): (10 * MS, 1),
        ("late_broadcast", 2): (5 * MS, 1),
        ("early_reduce", 0): (8 * MS, 1),
    }


def test_late_sender():
    job = Job()
    a, b = job.thread(0), job.thread(1)
    job.message(job.ev(a, 50, 55, "MPI_Send", "mpi_p2p"), job.ev(b, 20, 56, "MPI_Recv", "mpi_p2p"))
    waits = _waits(job.build())
    assert waits.select("kind", "rank", "cause_rank", "wait_ns", "start_ns").rows() == [
        ("late_sender", 1, 0, 30 * MS, 20 * MS)
    ]


def test_late_receiver():
    job = Job()
    a, b = job.thread(0), job.thread(1)
    # a synchronous send blocked from 10 ms until the receive is posted at 60 ms
    job.message(job.ev(a, 10, 61, "MPI_Ssend", "mpi_p2p"), job.ev(b, 60, 62, "MPI_Recv", "mpi_p2p"))
    # an eager send that left before its receive was posted: no wait
    job.message(job.ev(a, 70, 71, "MPI_Send", "mpi_p2p"), job.ev(b, 80, 81, "MPI_Recv", "mpi_p2p"))
    waits = _waits(job.build())
    assert waits.select("kind", "rank", "cause_rank", "wait_ns").rows() == [("late_receiver", 0, 1, 50 * MS)]


def test_per_step_waits_and_window():
    trace = late_allreduce(late_rank=1, late_ms=30, steps=3).build()
    waits = _waits(trace)
    assert waits.group_by("step").agg(pl.col("wait_ns").sum()).sort("step").rows() == [
        (s, 3 * 30 * MS) for s in range(3)
    ]
    last_dropped = _waits(trace, window="steps=:-1")
    assert sorted(set(last_dropped.get_column("step"))) == [0, 1]


def test_imbalance_names_the_straggler():
    trace = late_allreduce(late_rank=2, late_ms=30, steps=2).build()
    imb = analyze(trace, analyses=("imbalance",)).imbalance
    work = imb.filter((pl.col("state") == "work") & (pl.col("side") == "host"))
    for row in work.iter_rows(named=True):
        scale = 2 if row["step"] is None else 1
        assert row["max_rank"] == 2
        assert row["max_ns"] == scale * 130 * MS
        assert row["mean_ns"] == pytest.approx(scale * 107.5 * MS)
        assert row["imbalance"] == pytest.approx(130 / 107.5 - 1)
        assert row["percent_imbalance"] == pytest.approx(22.5 / 130)
    assert work.height == 3


def test_steps_detected_from_regions_then_collectives():
    """No step markers: a repeating top-level region that covers most of the
    thread marks the steps; without one, the repeating collective does."""
    job = Job()
    th = job.thread(0)
    for k in range(3):
        job.ev(th, 100 * k, 100 * k + 90, "train_step", "compute")
        job.ev(th, 100 * k + 91, 100 * k + 92, "log", "compute")
    steps = analyze(job.build(), analyses=()).steps
    assert steps.select("step", "start_ns", "source").rows() == [(k, 100 * k * MS, "detected") for k in range(3)]

    job = Job()
    th = [job.thread(r) for r in range(2)]
    for k in range(3):  # operators named per iteration: only the allreduce repeats
        t0 = 100 * k
        members = []
        for r in range(2):
            job.ev(th[r], t0, t0 + 80 + 10 * r, f"layer{k}_r{r}", "compute")
            members.append(job.ev(th[r], t0 + 80 + 10 * r, t0 + 95, "MPI_Allreduce", "mpi_coll"))
        job.collective(members, "allreduce")
    trace = job.build()
    steps = analyze(trace, analyses=()).steps
    assert steps.filter(pl.col("rank") == 0).select("step", "start_ns").rows() == [
        (k, (100 * k + 80) * MS) for k in range(3)
    ]
    assert set(steps.get_column("label")) == {f"allreduce #{k}" for k in range(3)}
    waits = analyze(trace, window="steps=:-1", analyses=("wait_states",)).wait_states
    assert waits.select("rank", "step", "wait_ns").rows() == [(0, 0, 10 * MS), (0, 1, 10 * MS)]
