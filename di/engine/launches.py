"""The host call that enqueued each piece of GPU work (its *launch*).

Per GPU event row, in this order of evidence:

1. the source of its ``launch`` flow (Kineto's ``ac2g``, CUPTI's correlation) or, for a GPU wait record, its
   ``sync`` flow;
2. on a rank with no such flow at all, the launch :func:`di.engine.inferred_edges.launch_edges` matches to it (the
   k-th launch call of a stream to its k-th kernel, as CASITA does);
3. for a copy with neither, the rank's host call named :data:`COPY_CALL_NAME` running when the copy starts
   (Score-P writes copies as RMA records with no launch).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.classify import MEMORY, name_codes
from di.engine.inferred_edges import launch_edges
from di.engine.window import EventFrame

__all__ = ["COPY_CALL_NAME", "launch_calls"]

COPY_CALL_NAME = r"(?i)^(cu|cuda|hip)Memcpy\w*$"
"""Host calls that issue a device copy: a copy with no launch record belongs to the one running when it starts."""


def launch_calls(frame: EventFrame, *, copies: bool = True) -> np.ndarray:
    """Event row -> row of the host call that enqueued it (-1: none; host rows are -1), read-only. ``copies=False``
    leaves out the third kind of evidence (a copy's running host copy call) for a reader of kernels only.

    Found once per frame (its ``memo``): GPU idle, phases and flops each ask for it."""
    got = frame.memo.get(("launch_calls", copies))
    if got is None:
        got = _launches(frame) if not copies else _with_copies(frame, launch_calls(frame, copies=False))
        got.flags.writeable = False
        frame.memo[("launch_calls", copies)] = got
    return got


def _launches(frame: EventFrame) -> np.ndarray:
    """The launch of each event row from the first two kinds of evidence (flows, inferred edges)."""
    out = np.full(frame.rank.size, -1, np.int64)
    f = frame.trace.flows.filter(pl.col("kind").is_in(["launch", "sync"]))
    if f.height:
        dst = f.get_column("dst").to_numpy().astype(np.int64)
        on = frame.on_gpu[dst]
        out[dst[on]] = f.get_column("src").to_numpy().astype(np.int64)[on]
    gpu_ranks = np.unique(frame.rank[frame.on_gpu])
    if np.isin(gpu_ranks, np.unique(frame.rank[out >= 0]), invert=True).any():  # a rank with no launch flow
        calls, kernels = launch_edges(frame)
        out[kernels] = calls
    return out


def _with_copies(frame: EventFrame, launches: np.ndarray) -> np.ndarray:
    """``launches`` (not changed) with the third kind of evidence added: each copy's running host copy call."""
    out = launches.copy()
    unlaunched = np.flatnonzero(frame.on_gpu & (frame.activity == MEMORY) & (out < 0) & frame.selected)
    if unlaunched.size:
        out[unlaunched] = _copy_calls(frame, unlaunched)
    return out


def _copy_calls(frame: EventFrame, copies: np.ndarray) -> np.ndarray:
    """Per copy row, the latest-starting host call of its rank named :data:`COPY_CALL_NAME` that runs when the copy
    starts, else -1."""
    host = np.flatnonzero(~frame.on_gpu & frame.selected & (frame.end_ns > frame.start_ns))
    calls = host[name_codes(frame.trace.events.get_column("name"), [COPY_CALL_NAME])[host] == 0]  # per distinct name
    if not calls.size:
        return np.full(copies.size, -1, np.int64)
    table = pl.DataFrame(
        {
            "rank": frame.rank[calls].astype(np.int64),
            "t": frame.start_ns[calls],
            "e": frame.end_ns[calls],
            "call": calls,
        }
    ).sort("rank", "t")
    query = pl.DataFrame(
        {"i": np.arange(copies.size), "rank": frame.rank[copies].astype(np.int64), "t": frame.start_ns[copies]}
    ).sort("rank", "t")
    hit = query.join_asof(table, on="t", by="rank", strategy="backward", check_sortedness=False)
    found = pl.when(pl.col("e") >= pl.col("t")).then(pl.col("call")).otherwise(-1).fill_null(-1)
    return hit.sort("i").select(found).to_series().to_numpy().astype(np.int64)
