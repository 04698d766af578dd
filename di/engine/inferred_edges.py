"""Launch and sync edges a hybrid trace does not record, inferred from what it does hold.

Score-P writes CUDA, HIP and OpenCL traces without launch -> kernel or
sync -> device edges (no flows), so the critical path would stop at the host's
waits. As CASITA does (github rdietric/casita: ``KernelExecutionRule``,
``SyncRule``, ``EventSyncRule``), the edges are inferred from the model alone:
event names, the stream and event references a source keeps in ``args``, and
times. Edges a source records as ``flows`` always win; an inferred edge is
marked as such by its kind in the graph (``launch_inferred``,
``sync_inferred``), so the critical path's segments and ``by_category`` say so.

Launches (:func:`launch_edges`), only for a rank none of whose GPU activity is
the destination of a ``launch`` flow:

- a launch is a host call named like a kernel launch (:data:`LAUNCH_NAME`:
  ``cuLaunchKernel``, ``cudaLaunchKernel``, ``hipLaunchKernel``,
  ``hipModuleLaunchKernel``, ``clEnqueueNDRangeKernel``, ...); a launch call
  nested inside another (a runtime call wrapping the driver's) is one launch,
  the innermost;
- its stream is the GPU stream of the same rank that its ``args`` reference
  (Score-P's ``CUDA_STREAM_REF`` attribute, any ``*_STREAM_REF`` or
  ``*_QUEUE_REF`` key: an OTF2 location ref, the stream timeline's ``tid``);
- per stream, in time order, the k-th launch to it -> the k-th kernel
  (cat ``kernel`` or ``nccl``) on it; launches whose stream is unknown are
  matched the same way per rank to the kernels on the rank's streams that no
  known launch targets (per device when the rank has one), in start order;
- a launch whose kernel the trace lost (see :data:`LOST_KERNEL_NS`) is
  passed over, so the kernel after it takes the next launch;
- never a kernel that starts before its launch: a kernel that starts more
  than :data:`CLOCK_SKEW_NS` before the pending launch has no launch record
  (one the trace lost, or a launch API this module does not know) and is
  left out, and the next kernel takes the pending launch, so a lost record
  does not shift every later match. Within the allowance the kernel keeps
  its launch (the k-th stays the k-th) but the graph drops the edge as
  pointing back in time (counted in the path's ``dropped_edges``).

Syncs (:func:`sync_calls`): a host call that waits for the device is a call
whose name says so (:data:`DEVICE_SYNC_NAME`: ``cudaDeviceSynchronize``,
``cudaStreamSynchronize``, ``cudaEventSynchronize``, ``cuCtxSynchronize``,
``hipEventSynchronize``, ``clFinish``, ``acc_wait``, ...), a blocking copy
(:data:`BLOCKING_COPY_NAME`: ``cuMemcpyHtoD_v2``, ``cudaMemcpy``, ``hipMemcpy``,
not the ``Async`` ones; CASITA's ``OFLD_BLOCKING_DATA``), or a call that is
the source of a ``sync`` flow. It waits for the stream named by its ``sync``
flow (a GPU record with "stream" in its name), else by its ``args`` stream
reference, else, for an event sync, the stream of the latest earlier event
record (``cuEventRecord``/``cudaEventRecord``/``hipEventRecord``) of the rank
with the same ``*_EVENT_REF``, else every stream of its rank. The graph links
the last device activity of that stream (or rank) that ended inside the call
to the call's end; the edge is ``sync`` when the call has a ``sync`` flow,
``sync_inferred`` otherwise.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.engine.classify import name_codes
from di.engine.window import EventFrame

LAUNCH_NAME = r"(?i)^((cu|cuda|hip|hipModule|hipExt|hipExtModule)Launch(Kernel|CooperativeKernel|Cooperative|Grid|GridAsync)?(_v\d+|_ptsz|_spt)?$|clEnqueueNDRangeKernel$|clEnqueueTask$)"
"""Host calls that enqueue one kernel (CASITA's FTABLE_CUDA_LAUNCH plus the runtime, HIP and OpenCL names)."""
DEVICE_SYNC_NAME = r"(?i)^((cu|cuda|hip)(Ctx|Device|Thread|Stream|Event)?Synchronize(_v\d+|_ptsz|_spt)?$|clFinish$|clWaitForEvents$|acc_wait(_all)?\b)"
"""Host calls that block until the device (a stream, an event) is done."""
BLOCKING_COPY_NAME = r"(?i)^(cu|cuda|hip)Memcpy\w*$"
"""Host copies that return only once the device copy is done (CASITA's FTABLE_CUDA_BLOCKING_COMM, generalised),
except those that :data:`ASYNC_NAME` matches."""
ASYNC_NAME = r"(?i)async"
EVENT_RECORD_NAME = r"(?i)^(cu|cuda|hip)EventRecord(WithFlags)?(_v\d+|_ptsz|_spt)?$"
CLOCK_SKEW_NS = 200_000
"""How much earlier than its launch call a kernel may appear to start and still be its launch's: device
timestamps converted to the host clock (Score-P's CUPTI adapter) lead the host and drift; in the casita
jacobi_blame_cpu_015 trace by 8 us at the start and ~50 us after one second. The allowance matters only where
records are missing (a kernel without launch is one that starts more than this before the pending launch)."""
LOST_KERNEL_NS = 100_000
"""A pending launch whose kernel the trace lost: the stream was idle when it came, the next kernel starts more
than this after it and within :data:`CLOCK_SKEW_NS` of the next launch (on an idle stream a kernel starts a few
us after its launch; the casita
jacobi_blame_cpu_015 trace lost 20 of 2000 kernels per rank, and without this every later kernel took the
launch before its own)."""
STREAM_REF = r'"\w*(?:STREAM|QUEUE)_REF"\s*:\s*(\d+)'
EVENT_REF = r'"\w*EVENT_REF"\s*:\s*(\d+)'


def _matching(frame: EventFrame, rows: np.ndarray, pattern: str, unless: str | None = None) -> np.ndarray:
    """The rows among ``rows`` whose event name matches ``pattern`` and not ``unless`` (each distinct name tested once)."""
    if not rows.size:
        return rows
    patterns = [unless, pattern] if unless else [pattern]  # the first match wins: a name matching unless is out
    return rows[name_codes(frame.trace.events.get_column("name"), patterns)[rows] == len(patterns) - 1]


def _arg_int(frame: EventFrame, rows: np.ndarray, pattern: str) -> np.ndarray:
    """Per row, the integer the first group of ``pattern`` finds in its ``args`` text (-1: none)."""
    if not rows.size:
        return np.zeros(0, np.int64)
    got = frame.trace.events.get_column("args").gather(rows).str.extract(pattern, 1).cast(pl.Int64, strict=False)
    return got.fill_null(-1).to_numpy().astype(np.int64)


def _stream_of_ref(frame: EventFrame, rows: np.ndarray) -> np.ndarray:
    """Per host row, the GPU stream timeline (loc) of its rank that its args reference (-1: none)."""
    ref = _arg_int(frame, rows, STREAM_REF)
    out = np.full(rows.size, -1, np.int64)
    if not (ref >= 0).any():
        return out
    locs = frame.trace.locations.filter(pl.col("kind") == "gpu_stream").select(
        pl.col("rank").cast(pl.Int64), pl.col("tid").cast(pl.Int64).alias("ref"), pl.col("loc").cast(pl.Int64)
    )
    q = pl.DataFrame({"i": np.arange(rows.size), "rank": frame.rank[rows].astype(np.int64), "ref": ref})
    hit = q.join(locs.drop_nulls().unique(["rank", "ref"], keep="first"), on=["rank", "ref"], how="inner")
    out[hit.get_column("i").to_numpy()] = hit.get_column("loc").to_numpy()
    return out


def launch_edges(frame: EventFrame) -> tuple[np.ndarray, np.ndarray]:
    """(launch call rows, kernel rows) inferred for the ranks without launch flows (see the module docstring).

    Matches over all events of the trace, whatever the window, so a window
    does not shift the order; the caller keeps the pairs inside its graph.
    """
    ev = frame.trace.events
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    flows = frame.trace.flows.filter(pl.col("kind") == "launch")
    flowed = np.unique(frame.rank[flows.get_column("dst").to_numpy()]) if flows.height else np.zeros(0, np.int32)
    open_rank = ~np.isin(frame.rank, flowed)
    timed = ~ev.get_column("instant").to_numpy() & (
        ev.get_column("end_ns").to_numpy() > ev.get_column("start_ns").to_numpy()
    )
    cat = ev.get_column("cat")  # the Enum's codes compared: a text per row costs 0.18 CPU-s on 10.6 M events
    kernel = np.flatnonzero(open_rank & frame.on_gpu & timed & cat.is_in(["kernel", "nccl"]).to_numpy())
    calls = _matching(frame, np.flatnonzero(open_rank & ~frame.on_gpu & timed), LAUNCH_NAME)
    calls = _innermost(ev.get_column("parent").fill_null(-1).to_numpy().astype(np.int64), calls)
    if not kernel.size or not calls.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    start = ev.get_column("start_ns").to_numpy()
    rank = frame.rank.astype(np.int64)
    stream = _stream_of_ref(frame, calls)
    call_key = np.where(stream >= 0, stream, -1 - rank[calls])
    targeted = np.zeros(int(loc.max()) + 1, bool)
    targeted[stream[stream >= 0]] = True
    kernel_key = np.where(targeted[loc[kernel]], loc[kernel], -1 - rank[kernel])
    end = ev.get_column("end_ns").to_numpy()
    return _fifo(call_key, calls, start[calls], kernel_key, kernel, start[kernel], end[kernel], loc[kernel])


def _innermost(parent: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """``calls`` without those that enclose another of them (a runtime launch wrapping the driver's)."""
    is_call = np.zeros(parent.size, bool)
    is_call[calls] = True
    outer = np.zeros(parent.size, bool)
    cur = parent[calls]
    while cur.size:
        cur = cur[cur >= 0]
        outer[cur[is_call[cur]]] = True
        cur = parent[cur]
    return calls[~outer[calls]]


def _fifo(
    call_key, calls, call_t, kernel_key, kernels, kernel_t, kernel_end, kernel_loc
) -> tuple[np.ndarray, np.ndarray]:
    """Per key, the k-th call to the k-th kernel in time order (:func:`_queue`); (call rows, kernel rows)."""
    co = np.lexsort((calls, call_t, call_key))
    ko = np.lexsort((kernels, kernel_loc, kernel_t, kernel_key))
    keys = np.union1d(call_key, kernel_key)
    call_ptr = np.searchsorted(call_key[co], keys, side="left")
    call_ptr = np.append(call_ptr, co.size).astype(np.int64)
    kern_ptr = np.append(np.searchsorted(kernel_key[ko], keys, side="left"), ko.size).astype(np.int64)
    got = _queue(
        call_ptr,
        call_t[co].astype(np.int64),
        kern_ptr,
        kernel_t[ko].astype(np.int64),
        kernel_end[ko].astype(np.int64),
        np.int64(CLOCK_SKEW_NS),
        np.int64(LOST_KERNEL_NS),
        np.full(ko.size, -1, np.int64),
    )
    ok = got >= 0
    return calls[co][got[ok]].astype(np.int64), kernels[ko][ok].astype(np.int64)


_NO_END = np.int64(np.iinfo(np.int64).min)


@njit(cache=True, nogil=True, _nrt=False)
def _queue(call_ptr, call_t, kern_ptr, kern_t, kern_end, skew_ns, lost_ns, out):
    """Per group g (calls ``call_ptr[g]:call_ptr[g+1]``, kernels likewise, each sorted by time), the call
    position each kernel takes (-1: none): the pending call, unless it started after the kernel (by more
    than ``skew_ns``: the kernel's launch is missing); a pending call is passed over as lost when the
    stream was idle at it, the kernel starts more than ``lost_ns`` after it and within ``skew_ns`` of the next call.
    Written into ``out`` (one int64 per kernel, -1 from the caller), which is returned."""
    for g in range(call_ptr.size - 1):
        j = call_ptr[g]
        stop = call_ptr[g + 1]
        prev_end = _NO_END
        for i in range(kern_ptr[g], kern_ptr[g + 1]):
            while (
                j + 1 < stop
                and abs(call_t[j + 1] - kern_t[i]) <= skew_ns
                and kern_t[i] - call_t[j] > lost_ns
                and prev_end <= call_t[j]
            ):
                j += 1
            if j < stop and call_t[j] <= kern_t[i] + skew_ns:
                out[i] = j
                j += 1
            prev_end = max(prev_end, kern_end[i])
    return out


def sync_calls(frame: EventFrame, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(host call rows among ``keep`` that wait for the device, the stream loc each waits for or -1 for its whole
    rank, whether a ``sync`` flow records it), see the module docstring.

    A row's answer depends on the trace, not on ``keep``: the calls of all rows are found once per frame (its
    ``memo``) and each caller takes its rows of them (GPU idle asks twice, the critical path once: 0.035 CPU-s
    each on a 1.2 M-event trace)."""
    got = frame.memo.get("sync_calls")
    if got is None:
        got = frame.memo["sync_calls"] = _sync_calls(frame)
    calls, stream, recorded = got
    mine = keep[calls]
    return calls[mine], stream[mine], recorded[mine]


def _sync_calls(frame: EventFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`sync_calls` of every row."""
    ev = frame.trace.events
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    host = np.flatnonzero(~frame.on_gpu)
    named = np.union1d(_matching(frame, host, DEVICE_SYNC_NAME), _matching(frame, host, BLOCKING_COPY_NAME, ASYNC_NAME))
    stream_of = np.full(frame.rank.size, -1, np.int64)
    flowed = np.zeros(frame.rank.size, bool)
    f = frame.trace.flows.filter(pl.col("kind") == "sync")
    if f.height:
        src = f.get_column("src").to_numpy()
        flowed[src] = True
        names = ev.get_column("name").gather(f.get_column("dst")).cast(pl.String).str.contains("(?i)stream").to_numpy()
        stream_of[src[names]] = loc[f.get_column("dst").to_numpy()[names]]
    calls = np.union1d(named, np.flatnonzero(flowed & ~frame.on_gpu)).astype(np.int64)
    stream = stream_of[calls]
    guess = np.flatnonzero(~flowed[calls])
    stream[guess] = _stream_of_ref(frame, calls[guess])
    by_event = guess[stream[guess] < 0]
    stream[by_event] = _event_streams(frame, calls[by_event])
    return calls, stream, flowed[calls]


def _event_streams(frame: EventFrame, rows: np.ndarray) -> np.ndarray:
    """Per event-sync row, the stream its event was last recorded on before it (-1: unknown)."""
    out = np.full(rows.size, -1, np.int64)
    ref = _arg_int(frame, rows, EVENT_REF)
    if not (ref >= 0).any():
        return out
    ev = frame.trace.events
    records = _matching(frame, np.flatnonzero(~frame.on_gpu), EVENT_RECORD_NAME)
    rec_ref = _arg_int(frame, records, EVENT_REF)
    rec_stream = _stream_of_ref(frame, records)
    ok = (rec_ref >= 0) & (rec_stream >= 0)
    if not ok.any():
        return out
    start = ev.get_column("start_ns").to_numpy()
    rank = frame.rank.astype(np.int64)
    recs = pl.DataFrame(
        {"rank": rank[records[ok]], "ref": rec_ref[ok], "t": start[records[ok]], "stream": rec_stream[ok]}
    ).sort("t")
    q = pl.DataFrame({"i": np.arange(rows.size), "rank": rank[rows], "ref": ref, "t": start[rows]}).sort("t")
    hit = q.join_asof(recs, on="t", by=["rank", "ref"], strategy="backward", check_sortedness=False).drop_nulls(
        "stream"
    )
    out[hit.get_column("i").to_numpy()] = hit.get_column("stream").to_numpy()
    return out
