"""A generated many-rank job with a known answer, for the parallel analysis tests."""

from __future__ import annotations

from engine_jobs import Job, late_allreduce

RANKS = 16
STEPS = 3
LATE_RANK = 5
LATE_MS = 30.0
RING_WAIT_MS = 4.0
"""Each rank's receive from r-1 starts at once and its sender sends only this much later (a late sender)."""


def ring_job() -> Job:
    """``RANKS`` ranks, ``STEPS`` steps (ProfilerStep markers): 100 ms compute (``LATE_RANK`` 100 + ``LATE_MS``), an
    allreduce until 10 ms after the last arrival; then ``STEPS`` ring exchanges: each rank receives from r-1 in
    [t, t + RING_WAIT_MS] and sends to r+1 in [t + RING_WAIT_MS, t + RING_WAIT_MS + 1 ms]."""
    job = late_allreduce(late_rank=LATE_RANK, late_ms=LATE_MS, ranks=RANKS, steps=STEPS)
    t0 = STEPS * (100 + LATE_MS + 10)
    for k in range(STEPS):
        base = t0 + k * 10
        sends, recvs = [], []
        for r in range(RANKS):  # late_allreduce made thread r for rank r
            recvs.append(job.ev(r, base, base + RING_WAIT_MS, "MPI_Recv", "mpi_p2p"))
            sends.append(job.ev(r, base + RING_WAIT_MS, base + RING_WAIT_MS + 1, "MPI_Send", "mpi_p2p"))
        for r in range(RANKS):
            job.message(sends[r], recvs[(r + 1) % RANKS])
    return job
