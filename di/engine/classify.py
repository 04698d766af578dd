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
- ``untraced``: no event has it; the analyses give it to the time *between*
  the calls of a timeline that records only calls (below).

Gaps: idle, or work that was not traced. Whether the time between a
timeline's events means "nothing ran" depends on what its source records,
and is decided per timeline from its events (:func:`call_only_locations`):

- a CPU thread whose events are all calls (MPI, I/O, host syncs, CUDA API,
  NCCL; annotations such as ``user`` regions allowed) and that holds at
  least one MPI or I/O call is a *call-only* timeline: what the PMPI and
  I/O shims of ``di record`` write, or an OTF2 location whose user regions
  Score-P filtered out. Between its calls the program computes; that time,
  from the thread's first event to its last, is ``untraced`` work (Scalasca's
  reading of a trace: the time between MPI calls is computation).
- a GPU stream's gaps are idle: CUPTI, Kineto and Nsight record every kernel,
  copy and memset a stream runs.
- a CPU thread that records application work (``compute`` operators or
  ``python`` functions: Kineto's CPU ops, di's Python regions) records what
  the host did, and its gaps are idle. This is HolisticTraceAnalysis's
  definition too: its idle time is the time no recorded event runs (HTA
  computes it for GPU streams from kernels; a Kineto CPU thread carries the
  profiler's operators, so a gap there is time PyTorch did not run an op).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from di.trace import Trace

ACTIVITIES: tuple[str, ...] = ("none", "compute", "comm", "memory", "sync", "cpu", "io", "untraced")
NONE, COMPUTE, COMM, MEMORY, SYNC, CPU, IO, UNTRACED = range(len(ACTIVITIES))

CALL_CATS = ("mpi_p2p", "mpi_coll", "io", "sync", "cuda_api", "nccl", "user", "step", "other")
"""Categories a call-only timeline may hold (calls and annotations)."""
TRACED_CALL_CATS = ("mpi_p2p", "mpi_coll", "io")
"""A call-only timeline holds at least one of these (what PMPI and I/O tracing record)."""

COMM_KERNEL_NAME = r"(?i)^(nccl|ncclDevKernel|rccl|hccl)|rccl|hccl|nccl"
"""Kernel-name fallback for communication kernels (covers nccl*, ncclDevKernel*, rccl, hccl)."""

_BY_CAT = {
    "kernel": COMPUTE,
    "nccl": COMM,
    "mpi_p2p": COMM,
    "mpi_coll": COMM,
    "memcpy": MEMORY,
    "memset": MEMORY,
    "sync": SYNC,
    "compute": CPU,
    "cuda_api": CPU,
    "python": CPU,
    "io": IO,
}


def name_codes(names: pl.Series, patterns: Sequence[str]) -> np.ndarray:
    """Per event of a ``name`` column (Categorical), the index (int8) of the first of ``patterns`` (regular
    expressions, searched) its name matches; -1 for none, or a null name. Each distinct name is tested once and the
    events are looked up by their categorical codes, never matched one by one."""
    distinct = names.unique().drop_nulls()
    codes = np.full(distinct.len(), -1, np.int8)
    text = distinct.cast(pl.String)
    for i in reversed(range(len(patterns))):  # the first pattern that matches wins
        codes[text.str.contains(patterns[i]).fill_null(False).to_numpy()] = i
    physical = names.to_physical()
    top = int(distinct.to_physical().max() or 0) if distinct.len() else 0
    lookup = np.full(top + 2, -1, np.int8)  # the last entry: a null name
    lookup[distinct.to_physical().to_numpy().astype(np.int64)] = codes
    if physical.null_count():
        physical = physical.fill_null(lookup.size - 1)
    return lookup[physical.to_numpy()]


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
    comm_name = name_codes(ev.get_column("name"), [COMM_KERNEL_NAME]) == 0
    out[(cat_code == cats.index("kernel")) & comm_name] = COMM
    kind = _loc_kinds(trace)[ev.get_column("loc").to_numpy()]
    host_cat = np.isin(cat_code, [cats.index(c) for c in ("compute", "cuda_api", "python")])
    out[host_cat & (kind == 1)] = COMPUTE
    out[(kind == 0) | ev.get_column("instant").to_numpy()] = NONE
    members = np.concatenate(
        [
            trace.collectives.get_column("event").to_numpy(),
            trace.messages.get_column("send").to_numpy(),
            trace.messages.get_column("recv").to_numpy(),
        ]
    ).astype(np.int64)
    if members.size:
        busy = out[members] != NONE
        out[members[busy]] = COMM
    return out


def call_only_locations(trace: Trace) -> np.ndarray:
    """Per loc id: True for a CPU thread that records only calls, whose gaps are untraced work
    (see the module docstring)."""
    ev = trace.events
    n = _loc_kinds(trace).size
    thread = np.zeros(n, bool)
    locs = trace.locations
    thread[locs.filter(pl.col("kind") == "cpu_thread").get_column("loc").to_numpy().astype(np.int64)] = True
    if not ev.height:
        return thread & False
    cats = ev.schema["cat"].categories.to_list()  # type: ignore[attr-defined]
    code = ev.get_column("cat").to_physical().to_numpy()
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    other = ~np.isin(code, [cats.index(c) for c in CALL_CATS])
    traced = np.isin(code, [cats.index(c) for c in TRACED_CALL_CATS])
    has_other = np.bincount(loc[other], minlength=n) > 0
    has_traced = np.bincount(loc[traced], minlength=n) > 0
    return thread & has_traced & ~has_other


def _loc_kinds(trace: Trace) -> np.ndarray:
    """Per loc id: 0 not an activity timeline, 1 GPU stream, 2 CPU thread or async track."""
    locs = trace.locations
    n = max(
        int(locs.get_column("loc").max() or 0) + 1 if locs.height else 0,
        int(trace.events.get_column("loc").max() or 0) + 1 if trace.events.height else 0,
    )
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
