"""A pair of hand-built two-rank jobs for ``di diff`` whose differences are known by construction.

Each step of each rank runs, one after the other (times in ms):

1. ``aten::linear`` (0.5) whose ``cudaLaunchKernel`` launches the GEMM kernel
   (``gemm`` ms, 0.3 after the op starts); the CPU waits for it in a
   ``cudaStreamSynchronize``;
2. optionally ``aten::dropout`` (0.4) launching ``dropout_kernel`` (0.1);
3. ``nccl:all_reduce`` (0.2) launching ``ncclAllReduceKernel`` (1.0 ms, 4 MiB,
   an allreduce across both ranks) on another stream; the step ends 1.2 after it began.

So a step lasts 0.3 + gemm + 1.2 (+ 0.4 with the dropout op).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl
from engine_jobs import MS, Job

from di.trace import Trace

STEPS = 3
RANKS = 2
ALLREDUCE_BYTES = 4 << 20


def step_ms(gemm_ms: float, dropout: bool) -> float:
    """The length of one step of :func:`job`."""
    return 0.3 + gemm_ms + 1.2 + (0.4 if dropout else 0.0)


def job(
    *, gemm_ms: float = 2.0, gemm_name: str = "gemm_128x128_kernel", dropout: bool = False, steps: int = STEPS
) -> Trace:
    """The job described in the module doc."""
    j = Job()
    members: list[list[int]] = [[] for _ in range(steps)]
    for rank in range(RANKS):
        th, compute, comm = (
            j.thread(rank),
            j.stream(rank, device=rank, stream=7),
            j.stream(rank, device=rank, stream=20),
        )
        t = 0.0
        for k in range(steps):
            start = t
            j.ev(th, t, t + 0.5, "aten::linear", "compute")
            j.flow(
                j.ev(th, t + 0.1, t + 0.2, "cudaLaunchKernel", "cuda_api"),
                j.ev(compute, t + 0.3, t + 0.3 + gemm_ms, gemm_name, "kernel"),
            )
            j.ev(th, t + 0.5, t + 0.3 + gemm_ms, "cudaStreamSynchronize", "sync")
            t += 0.3 + gemm_ms
            if dropout:
                j.ev(th, t, t + 0.4, "aten::dropout", "compute")
                j.flow(
                    j.ev(th, t + 0.1, t + 0.2, "cudaLaunchKernel", "cuda_api"),
                    j.ev(compute, t + 0.25, t + 0.35, "dropout_kernel", "kernel"),
                )
                t += 0.4
            j.ev(th, t, t + 0.2, "nccl:all_reduce", "nccl")
            kernel = j.ev(comm, t + 0.15, t + 1.15, "ncclAllReduceKernel", "nccl")
            j.flow(j.ev(th, t + 0.05, t + 0.1, "cudaLaunchKernel", "cuda_api"), kernel)
            members[k].append(kernel)
            t += 1.2
            j.ev(th, start, t, f"ProfilerStep#{k}", "step")
    for m in members:
        j.collective(m, "allreduce")
    trace = j.build()
    coll = trace.collectives.with_columns(
        pl.lit(ALLREDUCE_BYTES, pl.Int64).alias("bytes"), pl.lit(RANKS, pl.Int32).alias("group_size")
    )
    return replace(trace, collectives=coll)


def ns(ms: float) -> int:
    return round(ms * MS)
