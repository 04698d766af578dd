"""Critical path of the whole job: the longest path through its dependency graph.

The graph is :mod:`di.engine.critical_path_graph`'s: start/end nodes of
every event, program order on each timeline (with nesting), launch, sync,
stream-wait, user, message and collective edges, and the launch and sync
edges inferred where the trace records none (kinds ``launch_inferred`` and
``sync_inferred``, which segments, ``by_category`` and ``waits`` keep, so an
inferred dependency is never mistaken for a recorded one). Edge weights are the time
(int64 ns) that the edge puts on a path:

- a local edge into node v (time t_v) from its predecessor p (t_p): the time
  the timeline spent on the innermost event open between them (its self
  time), counted only after every cross dependency of v had arrived:
  t_v - max(t_p, a_v), a_v the latest source time of v's cross edges. On a
  CPU thread a stretch with no work open (or only annotations) weighs 0; on
  a GPU stream the gap before a launched activity weighs the gap after the
  launch arrived (queued behind the previous one: HolisticTraceAnalysis's
  kernel-kernel delay); a gap before an activity with no known launch weighs 0.
  On a timeline that records only calls (PMPI/I-O capture, an OTF2 location
  of MPI regions only) a stretch between calls is the program's untraced
  work and weighs like any work (Scalasca's reading), so the path runs
  through a late sender's computation, never through its receiver's wait.
- a cross edge u -> v: t_v - max(t_u, t_p): the time from the dependency's
  arrival to v (launch delay when the stream was idle; the transfer after
  the last member arrived in a collective; the receive after its send began;
  the return of a sync call after the GPU finished).

So, as HolisticTraceAnalysis does for one GPU, host idle time, the wait
inside a blocking call before its dependency arrives and launch delays of
kernels queued behind others weigh 0, while GPU work, host work, launch
delays and GPU gaps count. The critical path is the longest path (ties go to
program order); its length lies between the busiest timeline's busy time
and the span of the window. Wait time is attributed Scalasca-style: where
the path crosses to another timeline through an edge into v, the local
timeline had waited a_v - t_p for it, and that wait is charged to the
activity the path ran on just before the edge (the activity that caused it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.engine.classify import NONE
from di.engine.intervals import scatter_max
from di.engine.critical_path_graph import EDGE_KINDS, LAUNCH_INFERRED, LOCAL, Graph, build_graph
from di.engine.window import EventFrame

_MIN = np.iinfo(np.int64).min
UNTRACED_CAT = "untraced"
"""Category of a path segment of untraced work between the calls of a call-only timeline."""
UNTRACED_NAME = "(outside traced calls)"
"""Its name in ``by_name`` (no event carries it)."""


def weights(frame: EventFrame, g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(local weight per node, weight per cross edge, arrival a_v per node), int64 ns."""
    arrival = _arrivals(g)
    return _local_weights(frame, g, arrival), _cross_weights(g), arrival


def _local_weights(frame: EventFrame, g: Graph, arrival: np.ndarray) -> np.ndarray:
    """Weight of the local edge into each node (0 for a timeline's first): t_v - max(t_p, a_v) when the
    segment counts (an event other than an annotation open, a launched GPU activity, a call-only timeline)."""
    t = g.time_ns
    prev = np.empty_like(t)
    prev[1:] = t[:-1]
    prev[:1] = _MIN
    np.maximum(prev, arrival, out=prev)
    np.subtract(t, prev, out=prev)
    w = np.maximum(prev, 0, out=prev)
    owner = g.owner
    counts = frame.on_gpu[g.event] & (arrival > _MIN)
    counts |= frame.call_only[g.event]
    counts |= (owner >= 0) & (frame.activity[np.maximum(owner, 0)] != NONE)
    counts &= ~g.first_of_loc
    w[~counts] = 0
    return w


@njit(cache=True, nogil=True, _nrt=False)
def _local_weight(v, t, first, owner, event, activity, on_gpu, call_only, a_v):
    """:func:`_local_weights` of one node, its arrival ``a_v`` given, for kernels that weigh nodes as they go
    (:mod:`di.parallel.critical_path`'s replay; compiled only where that runs)."""
    if first[v]:
        return 0
    o = owner[v]
    if (o >= 0 and activity[o] != NONE) or (on_gpu[event[v]] and a_v > _MIN) or call_only[event[v]]:
        w = t[v] - max(t[v - 1], a_v)
        return w if w > 0 else 0
    return 0


def _arrivals(g: Graph) -> np.ndarray:
    return scatter_max(g.dst, g.time_ns[g.src], np.full(g.time_ns.size, _MIN, np.int64))


def _cross_weights(g: Graph) -> np.ndarray:
    t = g.time_ns
    prev_dst = np.where(g.first_of_loc[g.dst], _MIN, t[np.maximum(g.dst - 1, 0)])
    return np.maximum(t[g.dst] - np.maximum(t[g.src], prev_dst), 0)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def relax(v, local_w, first, in_ptr, in_src, in_w, dist, pred, via):
    """Settle node ``v`` (int64) of the longest path, its inputs' ``dist`` known: ``dist[v]`` is the best of
    the local edge (weight ``local_w``, int64 ns) and its cross edges ``in_ptr[v]:in_ptr[v + 1]`` (CSR), and
    ``pred[v]``, ``via[v]`` (-2: local edge, e >= 0: cross edge e) say which. Inlined into :func:`_longest`
    and :mod:`di.parallel.critical_path`'s replay (compiled on its own it adds ~0.1 CPU-s to a cold start)."""
    best = 0
    if not first[v]:
        best = dist[v - 1] + local_w
        pred[v] = v - 1
        via[v] = -2
    for e in range(in_ptr[v], in_ptr[v + 1]):
        u = in_src[e]
        cand = dist[u] + in_w[e]
        if cand > best:
            best = cand
            pred[v] = u
            via[v] = e
    dist[v] = best


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _longest(order, first, local_w, in_ptr, in_src, in_w, dist, pred, via):
    """Longest path: ``dist`` (zeroed), ``pred`` and ``via`` (-1: none, -2: local edge, e >= 0: cross edge e,
    its CSR position) per node, filled in ``order``. Then the path from its last longest end ``sink`` back to
    its first node is written over ``order[:n]``, sink first (``order`` is spent).

    Returns:
        (sink, length in ns, n): the path ends at ``sink`` and has n steps, each (pred[v], v) of the listed v.
    """
    # every cross edge goes to a later position in ``order`` (the caller drops the others)
    for k in range(order.size):
        v = np.int64(order[k])
        relax(v, local_w[v], first, in_ptr, in_src, in_w, dist, pred, via)
    sink = -1
    length = 0
    for v in range(dist.size):
        if sink < 0 or dist[v] >= length:
            sink = v
            length = dist[v]
    n = 0
    v = sink
    while v >= 0 and pred[v] >= 0:
        order[n] = v
        n += 1
        v = pred[v]
    return sink, length, n


def critical_path(frame: EventFrame) -> dict[str, Any]:
    """The job's critical path.

    Returns:
        dict with ``summary`` (length_ns, start_ns, end_ns, window_span_ns,
        segments, dropped_edges) and frames ``segments`` (each weighted step
        of the path in time order: start_ns, end_ns, contrib_ns, kind, event,
        rank, cat, name), ``events`` (time each event contributes),
        ``by_category``, ``by_rank``, ``by_name`` (contrib_ns and share of the
        length), and ``waits`` (waiting rank/event, wait_ns, cause rank/event).
    """
    g, dropped = build_graph(frame)
    if not g.event.size:
        z = np.zeros(0, np.int64)
        return _result(frame, g, (z, z, z, z), dropped, 0)
    order = np.argsort(g.time_ns, kind="stable").astype(np.int32)
    pos = np.empty(order.size, np.int32)
    pos[order] = np.arange(order.size, dtype=np.int32)
    # an edge tied in time with its target but ordered after it cannot be honoured: drop it everywhere
    honoured = pos[g.src] < pos[g.dst]
    del pos
    dropped += int((~honoured).sum())
    # the edges in (dst, input) order: the CSR in-edge lists are the graph's own arrays, not copies of them
    by_dst = np.argsort(g.dst[honoured], kind="stable")
    kept = np.flatnonzero(honoured)[by_dst]
    del honoured, by_dst
    g = replace(g, src=g.src[kept], dst=g.dst[kept], kind=g.kind[kept])
    del kept
    local_w = _local_weights(frame, g, _arrivals(g))
    in_src, in_w, in_kind = g.src, _cross_weights(g), g.kind
    m = order.size
    in_ptr = np.zeros(m + 1, np.int32)
    np.cumsum(np.bincount(g.dst, minlength=m), out=in_ptr[1:])
    dist, pred, via = np.zeros(m, np.int64), np.full(m, -1, np.int32), np.full(m, -1, np.int32)
    _, length, n = _longest(order, g.first_of_loc, local_w, in_ptr, in_src, in_w, dist, pred, via)
    del dist, in_ptr
    v = order[:n][::-1].astype(np.int64)
    del order
    arrival = _arrivals(g)  # again, not held through the longest path: one int64 per node less at the peak
    edge = via[v].astype(np.int64)
    local = edge == -2
    edge[local] = 0
    kind = np.where(local, LOCAL, in_kind[edge] if in_kind.size else 0).astype(np.int64)
    w = np.where(local, local_w[v], in_w[edge] if in_w.size else 0).astype(np.int64)
    steps = (pred[v].astype(np.int64), v, kind, w)
    return _result(frame, g, steps, dropped, int(length), arrival=arrival)


def _result(
    frame: EventFrame,
    g: Graph,
    steps: tuple[np.ndarray, ...],
    dropped: int,
    length: int,
    arrival: np.ndarray | None = None,
) -> dict[str, Any]:
    """The result tables of the path's ``steps`` (u, v, kind, weight per step, in path order) through ``g``
    (see :func:`critical_path`); without ``arrival`` (a_v per node) neither launch delays nor waits are told."""
    u, v, kind, w = steps
    event = np.where(kind == LOCAL, g.owner[v] if v.size else v, g.event[v] if v.size else v)
    seg = _with_categories(_segments(frame, g, v, kind, w, event), g, v, kind, arrival)
    waits = _waits(frame, g, u, v, kind, w, arrival, event) if arrival is not None else _waits_empty()
    total = max(length, 1)
    events = _path_events(seg)
    return {
        "summary": _summary(frame, seg, events, length, dropped),
        "segments": seg,
        "events": events,
        "by_category": _shares(seg, "category", total),
        "by_rank": _shares(seg, "rank", total),
        "by_name": _shares(seg, "name", total),
        "waits": waits,
    }


def _segments(
    frame: EventFrame, g: Graph, v: np.ndarray, kind: np.ndarray, w: np.ndarray, event: np.ndarray
) -> pl.DataFrame:
    """One row per step into node v: start_ns, end_ns, contrib_ns, kind, event (null: none), rank, and the
    event's cat and name; a local step through no event is a GPU gap or, on a CPU thread, untraced work."""
    ev = frame.trace.events
    names = ev.get_column("name")
    cats = ev.get_column("cat")
    has = event >= 0
    seg = pl.DataFrame(
        {
            "start_ns": g.time_ns[v] - w if v.size else w,
            "end_ns": g.time_ns[v] if v.size else w,
            "contrib_ns": w,
            "kind": pl.Series(EDGE_KINDS, dtype=pl.String).gather(kind),
            "event": pl.Series(np.where(has, event, 0)).set(pl.Series(~has), None)
            if v.size
            else pl.Series([], dtype=pl.Int64),
            "rank": frame.rank[g.event[v]].astype(np.int32) if v.size else np.zeros(0, np.int32),
        },
        schema_overrides={"event": pl.Int64},
    )
    idx = seg.get_column("event")
    seg = seg.with_columns(
        pl.Series("cat", [None] * seg.height, pl.String)
        if not seg.height
        else cats.gather(idx.fill_null(0)).cast(pl.String).alias("cat"),
        pl.Series("name", [None] * seg.height, pl.String)
        if not seg.height
        else names.gather(idx.fill_null(0)).cast(pl.String).alias("name"),
    )
    on_gpu = pl.lit(pl.Series(frame.on_gpu[g.event[v]] if v.size else np.zeros(0, bool)))
    gap = pl.col("event").is_null() & (pl.col("kind") == "local")
    return seg.with_columns(
        pl.when(gap & on_gpu)
        .then(pl.lit("gpu_gap"))
        .when(gap)
        .then(pl.lit(UNTRACED_CAT))
        .otherwise(pl.col("cat"))
        .alias("cat"),
        pl.when(gap & ~on_gpu)
        .then(pl.lit(UNTRACED_NAME))
        .when(pl.col("event").is_null())
        .then(pl.lit(None, pl.String))
        .otherwise(pl.col("name"))
        .alias("name"),
    )


def _with_categories(
    seg: pl.DataFrame, g: Graph, v: np.ndarray, kind: np.ndarray, arrival: np.ndarray | None
) -> pl.DataFrame:
    """The segments that weigh something, with their ``category``: a local step's cat, a cross step's kind."""
    # a GPU gap that only began when the launch arrived is launch delay, whichever edge the path took
    if arrival is not None and v.size:
        after_launch = (kind == LOCAL) & ~g.first_of_loc[v] & (arrival[v] > g.time_ns[np.maximum(v - 1, 0)])
        inferred = _arrival_kinds(g, v) == LAUNCH_INFERRED
    else:
        after_launch = inferred = np.zeros(v.size, bool)
    return seg.with_columns(
        pl.when(pl.Series(after_launch) & (pl.col("cat") == "gpu_gap"))
        .then(pl.when(pl.Series(inferred)).then(pl.lit("launch_inferred")).otherwise(pl.lit("launch")))
        .when(pl.col("kind") == "local")
        .then(pl.col("cat"))
        .otherwise(pl.col("kind"))
        .alias("category")
    ).filter(pl.col("contrib_ns") > 0)


def _shares(seg: pl.DataFrame, col: str, total: int) -> pl.DataFrame:
    """contrib_ns per value of ``col`` and its share of ``total``, largest first."""
    out = seg.group_by(col).agg(pl.col("contrib_ns").sum()).with_columns((pl.col("contrib_ns") / total).alias("share"))
    tie = (
        pl.col(col).cast(pl.String)
        if out.schema[col] in (pl.Categorical, pl.Enum) or isinstance(out.schema[col], pl.Enum)
        else pl.col(col)
    )
    return out.sort(
        pl.col("contrib_ns"), tie, descending=[True, False], nulls_last=True
    )  # ties by name: the same order whatever the source


def _path_events(seg: pl.DataFrame) -> pl.DataFrame:
    """Per event on the path, its rank, name, cat, first start, last end and contrib_ns, by start."""
    return (
        seg.filter(pl.col("event").is_not_null())
        .group_by("event", maintain_order=True)
        .agg(
            pl.col("rank").first(),
            pl.col("name").first(),
            pl.col("cat").first(),
            pl.col("start_ns").min(),
            pl.col("end_ns").max(),
            pl.col("contrib_ns").sum(),
        )
        .sort("start_ns")
    )


def _summary(frame: EventFrame, seg: pl.DataFrame, events: pl.DataFrame, length: int, dropped: int) -> dict[str, Any]:
    """The result's ``summary``: the path's length and span, the window's span (ns) and the counts."""
    lo = int(frame.start_ns[frame.selected].min()) if frame.selected.any() else 0
    hi = int(frame.end_ns[frame.selected].max()) if frame.selected.any() else 0
    return {
        "length_ns": length,
        "start_ns": int(seg.get_column("start_ns").min()) if seg.height else None,
        "end_ns": int(seg.get_column("end_ns").max()) if seg.height else None,
        "window_span_ns": hi - lo,
        "segments": seg.height,
        "events": events.height,
        "dropped_edges": dropped,
    }


def _arrival_kinds(g: Graph, nodes: np.ndarray) -> np.ndarray:
    """Per node of ``nodes``, the kind of the cross edge whose source is latest (the one that decides its
    arrival; the last such edge on a tie; -1: none)."""
    out = np.full(nodes.size, -1, np.int64)
    if g.src.size and nodes.size:
        o = np.lexsort((g.time_ns[g.src], g.dst))
        d = g.dst[o]
        last = np.r_[d[1:] != d[:-1], True]
        d, o = d[last], o[last]  # per distinct dst (sorted), its deciding edge
        at = np.minimum(np.searchsorted(d, nodes), d.size - 1)
        hit = d[at] == nodes
        out[hit] = g.kind[o[at[hit]]]
    return out


def _waits_empty() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "rank": pl.Int32,
            "event": pl.Int64,
            "kind": pl.String,
            "wait_ns": pl.Int64,
            "cause_rank": pl.Int32,
            "cause_event": pl.Int64,
        }
    )


def _waits(frame: EventFrame, g: Graph, u, v, kind, w, arrival, event) -> pl.DataFrame:
    """Where the path crosses timelines into v, the wait of v's timeline charged to what ran before."""
    cross = np.flatnonzero(kind != LOCAL)
    if not cross.size:
        return _waits_empty()
    vv = v[cross]
    prev_t = np.where(g.first_of_loc[vv], arrival[vv], g.time_ns[np.maximum(vv - 1, 0)])
    wait = np.maximum(arrival[vv] - prev_t, 0)
    # the last weighted activity the path ran on before the crossing
    worked = np.where((event >= 0) & (w > 0), np.arange(event.size), -1)
    last = np.maximum.accumulate(worked) if worked.size else worked
    before = np.where(cross > 0, last[np.maximum(cross - 1, 0)], -1)
    cause = np.where(before >= 0, event[np.maximum(before, 0)], g.event[u[cross]])
    out = pl.DataFrame(
        {
            "rank": frame.rank[g.event[vv]].astype(np.int32),
            "event": g.event[vv].astype(np.int64),
            "kind": pl.Series(EDGE_KINDS, dtype=pl.String).gather(kind[cross]),
            "wait_ns": wait,
            "cause_rank": frame.rank[cause].astype(np.int32),
            "cause_event": cause.astype(np.int64),
        }
    )
    return out.filter(pl.col("wait_ns") > 0)
