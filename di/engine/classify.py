"""What each event does, for the analyses: its *activity* and the side it runs on.

Activities (int8 codes, :data:`ACTIVITIES`):

- ``compute``: a GPU kernel that is not communication (cat ``kernel`` on a GPU stream).
- ``comm``: communication: cat ``nccl``, ``mpi_p2p``, ``mpi_coll`` (the source's
  own classification: Kineto NCCL kernels and ``record_param_comms``, PMPI
  records, OTF2 MPI regions), any event that is a member of a ``collectives``
  row or an end of a ``messages`` row, and, only as a fallback for
  ``kernel`` events a source did not classify, kernel names matching
  :data:`COMM_KERNEL_NAME` (``nccl*``, ``ncclDevKernel*``, ``rccl``, ``hccl``).
- ``memory``: ``memcpy`` and ``memset``.
- ``sync``: ``sync`` (host waits such as ``cudaDeviceSynchronize``, GPU
  ``cuda_sync`` records). A wait state of its own, never busy compute.
- ``cpu``: host work: ``compute`` (CPU operators), ``cuda_api``, ``python``
  on CPU threads.
- ``io``: ``io``.
- ``none``: annotations and containers (``user``, ``step``, ``other``),
  instants, counter and marker timelines: never busy time.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.trace import Trace

ACTIVITIES: tuple[str, ...] = ("none", "compute", "comm", "memory", "sync", "cpu", "io")
NONE, COMPUTE, COMM, MEMORY, SYNC, CPU, IO = range(len(ACTIVITIES))

COMM_KERNEL_NAME = r"(?i)^(nccl|ncclDevKernel|rccl|hccl)|rccl|hccl|nccl"
"""Kernel-name fallback for communication kernels (covers nccl*, ncclDevKernel*, rccl, hccl)."""

_BY_CAT = {
    "kernel": COMPUTE, "nccl": COMM, "mpi_p2p": COMM, "mpi_coll": COMM, "memcpy": MEMORY, "memset": MEMORY,
    "sync": SYNC, "compute": CPU, "cuda_api": CPU, "python": CPU, "io": IO,
}


def activities(trace: Trace) -> np.ndarray:
    """int8 activity code of every event row (see the module docstring)."""
    ev = trace.events
    kinds = trace.locations.select(pl.col("loc").cast(pl.UInt32), pl.col("kind").cast(pl.String))
    on = ev.select("loc", "cat", "name", "instant").join(kinds, on="loc", how="left", maintain_order="left")
    cat = pl.col("cat").cast(pl.String)
    code = (
        pl.when(pl.col("instant") | ~pl.col("kind").is_in(["cpu_thread", "gpu_stream", "async"])).then(pl.lit(NONE))
        .when((cat == "kernel") & pl.col("name").cast(pl.String).str.contains(COMM_KERNEL_NAME)).then(pl.lit(COMM))
        .when(cat.is_in(["compute", "cuda_api", "python"]) & (pl.col("kind") == "gpu_stream")).then(pl.lit(COMPUTE))
        .otherwise(cat.replace_strict(_BY_CAT, default=NONE, return_dtype=pl.Int8))
    )
    out = on.select(code.cast(pl.Int8)).to_series().to_numpy().copy()
    members = np.concatenate([
        trace.collectives.get_column("event").to_numpy(),
        trace.messages.get_column("send").to_numpy(),
        trace.messages.get_column("recv").to_numpy(),
    ]).astype(np.int64)
    if members.size:
        busy = out[members] != NONE
        out[members[busy]] = COMM
    return out


def location_arrays(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per event row: rank (int64), on_gpu (bool), device (int64, -1 off GPU)."""
    locs = trace.locations.sort("loc")
    n_loc = int(locs.get_column("loc").max() or 0) + 1 if locs.height else 0
    rank_of = np.zeros(n_loc, np.int64)
    gpu_of = np.zeros(n_loc, bool)
    dev_of = np.full(n_loc, -1, np.int64)
    li = locs.get_column("loc").to_numpy().astype(np.int64)
    rank_of[li] = locs.get_column("rank").to_numpy()
    gpu_of[li] = (locs.get_column("kind") == "gpu_stream").to_numpy()
    dev_of[li] = locs.get_column("device").fill_null(-1).to_numpy()
    loc = trace.events.get_column("loc").to_numpy().astype(np.int64)
    return rank_of[loc], gpu_of[loc], dev_of[loc]
