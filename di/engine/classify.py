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
    """int8 activity code of every event row (see the module docstring).

    Works on the physical codes of ``cat`` (Enum) and ``name`` (Categorical),
    so names are matched once per distinct name, not once per event.
    """
    ev = trace.events
    cats = ev.schema["cat"].categories.to_list()  # type: ignore[attr-defined]
    by_cat = np.array([_BY_CAT.get(c, NONE) for c in cats], np.int8)
    cat_code = ev.get_column("cat").to_physical().to_numpy()
    out = by_cat[cat_code]
    names = ev.get_column("name")
    name_code = names.to_physical().to_numpy()
    distinct = names.unique().drop_nulls()
    comm_name = np.zeros(int(name_code.max()) + 1 if name_code.size else 0, bool)
    hits = distinct.filter(distinct.cast(pl.String).str.contains(COMM_KERNEL_NAME))
    comm_name[hits.to_physical().to_numpy()] = True
    out[(cat_code == cats.index("kernel")) & comm_name[name_code]] = COMM
    kind = _loc_kinds(trace)[ev.get_column("loc").to_numpy()]
    host_cat = np.isin(cat_code, [cats.index(c) for c in ("compute", "cuda_api", "python")])
    out[host_cat & (kind == 1)] = COMPUTE
    out[(kind == 0) | ev.get_column("instant").to_numpy()] = NONE
    members = np.concatenate([
        trace.collectives.get_column("event").to_numpy(),
        trace.messages.get_column("send").to_numpy(),
        trace.messages.get_column("recv").to_numpy(),
    ]).astype(np.int64)
    if members.size:
        busy = out[members] != NONE
        out[members[busy]] = COMM
    return out


def _loc_kinds(trace: Trace) -> np.ndarray:
    """Per loc id: 0 not an activity timeline, 1 GPU stream, 2 CPU thread or async track."""
    locs = trace.locations
    n = max(int(locs.get_column("loc").max() or 0) + 1 if locs.height else 0,
            int(trace.events.get_column("loc").max() or 0) + 1 if trace.events.height else 0)
    out = np.zeros(n, np.int8)
    li = locs.get_column("loc").to_numpy().astype(np.int64)
    kind = locs.get_column("kind").cast(pl.String).to_numpy()
    out[li[kind == "gpu_stream"]] = 1
    out[li[(kind == "cpu_thread") | (kind == "async")]] = 2
    return out


def location_arrays(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per event row: rank (int32), on_gpu (bool), device (int32, -1 off GPU)."""
    locs = trace.locations.sort("loc")
    n_loc = int(locs.get_column("loc").max() or 0) + 1 if locs.height else 0
    rank_of = np.zeros(n_loc, np.int32)
    gpu_of = np.zeros(n_loc, bool)
    dev_of = np.full(n_loc, -1, np.int32)
    li = locs.get_column("loc").to_numpy().astype(np.int64)
    rank_of[li] = locs.get_column("rank").to_numpy()
    gpu_of[li] = (locs.get_column("kind") == "gpu_stream").to_numpy()
    dev_of[li] = locs.get_column("device").fill_null(-1).to_numpy()
    loc = trace.events.get_column("loc").to_numpy().astype(np.int64)
    return rank_of[loc], gpu_of[loc], dev_of[loc]
