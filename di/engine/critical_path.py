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
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.engine.classify import NONE
from di.engine.groups import runs
from di.engine.intervals import scatter_max
from di.engine.critical_path_graph import EDGE_KINDS, LAUNCH, LAUNCH_INFERRED, LOCAL, Graph, build_graph
from di.engine.window import EventFrame
from di.trace import CATS

_MIN = np.iinfo(np.int64).min
UNTRACED_CAT = "untraced"
"""Category of a path segment of untraced work between the calls of a call-only timeline."""
UNTRACED_NAME = "(outside traced calls)"
"""Its name in ``by_name`` (no event carries it)."""
PATH_TEXTS: tuple[str, ...] = tuple(dict.fromkeys([*CATS, "gpu_gap", UNTRACED_CAT, *EDGE_KINDS]))
"""What a step of the path is counted as: an event category of the model, ``gpu_gap``, :data:`UNTRACED_CAT` or an
edge kind, each once (an edge kind may be spelled as a category, ``sync``, and ``by_category`` counts them together)."""
PATH_CATEGORY = pl.Enum(PATH_TEXTS)
"""dtype of the ``cat`` and ``category`` columns of the result: like the events' ``cat``, a closed vocabulary, so
a path of millions of steps holds one small code per row, not a text (the real-shaped 1.2 M-event trace's path of
1.5 M steps: segments and events 158 MB with the texts as strings, 101 MB so, by polars' estimate), and the results
of two traces concatenate and join."""
EDGE_KIND = pl.Enum(EDGE_KINDS)
"""dtype of the ``kind`` columns of the result (:data:`EDGE_KINDS`)."""
_CODE = np.int8 if len(PATH_TEXTS) <= np.iinfo(np.int8).max else np.int16
"""numpy dtype of a step's kind, cat and category codes (positions in :data:`EDGE_KINDS` and :data:`PATH_TEXTS`)."""


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
    steps = [pred[v].astype(np.int64), v, kind, w]
    del v, kind, w, edge, local, local_w, pred, via, in_src, in_w, in_kind
    return _result(frame, g, steps, dropped, int(length), arrival=arrival)


def _result(
    frame: EventFrame,
    g: Graph,
    steps: list[np.ndarray] | tuple[np.ndarray, ...],
    dropped: int,
    length: int,
    arrival: np.ndarray | None = None,
) -> dict[str, Any]:
    """The result tables of the path's ``steps`` (u, v, kind, weight per step, in path order) through ``g``
    (see :func:`critical_path`); without ``arrival`` (a_v per node) neither launch delays nor waits are told.
    A list of steps is emptied, so that the caller's arrays are freed once the steps are weighed: the peak comes
    while the result tables are built (with the steps' codes int8, the critical path of the real-shaped 1.2 M-event
    trace of bench/realshape.py peaked 517 -> 378 MB above the loaded trace).

    The steps are grouped (per event, category, rank, name) as integer columns, sorted and reduced in numpy;
    texts are made only for the rows of the result. Grouping the text columns with polars took 0.55 CPU-s of
    the 0.93 this function took on a 1.2 M-event trace whose path has 1.5 M steps."""
    u, v, kind, w = steps
    if isinstance(steps, list):
        steps.clear()
    event = np.where(kind == LOCAL, g.owner[v] if v.size else v, g.event[v] if v.size else v)
    waits = _waits(frame, g, u, v, kind, w, arrival, event) if arrival is not None else _waits_empty()
    path = _weighted_steps(frame, g, v, kind, w, event, arrival)
    del u, v, kind, w, event
    seg = _segments(frame, path)
    events = _path_events(path, seg)
    total = max(length, 1)
    return {
        "summary": _summary(frame, seg, events, length, dropped),
        "segments": seg,
        "events": events,
        "by_category": _shares(
            "category", path.category, path.contrib, total, lambda rows: _texts(path, path.category[rows])
        ),
        "by_rank": _shares("rank", path.rank, path.contrib, total, lambda rows: pl.Series(path.rank[rows])),
        "by_name": _shares(
            "name", _name_codes(frame, path), path.contrib, total, lambda rows: _names(frame, path, rows)
        ),
        "waits": waits,
    }


class _Steps(NamedTuple):
    """The path's steps that weigh something (contrib_ns > 0), in path order, as columns: texts as codes."""

    start: np.ndarray
    """int64 ns: when the step's time on the path begins."""
    end: np.ndarray
    """int64 ns: when it ends (the time of its node)."""
    contrib: np.ndarray
    """int64 ns: the time it puts on the path."""
    kind: np.ndarray
    """:data:`_CODE`: the edge's position in :data:`EDGE_KINDS`."""
    event: np.ndarray
    """int64: the event row it runs through, -1 for none (a gap)."""
    rank: np.ndarray
    """int32: the rank of the node's timeline."""
    cat: np.ndarray
    """:data:`_CODE`: the segment's cat, a position in ``texts`` (-1: null)."""
    category: np.ndarray
    """:data:`_CODE`: what ``by_category`` counts it as: a local step's cat, a cross step's kind; a position in
    ``texts``."""
    untraced: np.ndarray
    """bool: a stretch of untraced work between the calls of a call-only timeline."""
    texts: pl.Series
    """:data:`PATH_TEXTS` as a :data:`PATH_CATEGORY` column: what ``cat`` and ``category`` codes name."""


def _weighted_steps(
    frame: EventFrame,
    g: Graph,
    v: np.ndarray,
    kind: np.ndarray,
    w: np.ndarray,
    event: np.ndarray,
    arrival: np.ndarray | None,
) -> _Steps:
    """The steps into nodes ``v`` that weigh something; a local step through no event is a GPU gap or, on a CPU
    thread, untraced work, and a GPU gap that only began when the launch arrived is launch delay (whichever
    edge the path took)."""
    keep = np.flatnonzero(w > 0)
    v, kind, w, event = v[keep], kind[keep].astype(_CODE), w[keep], event[keep]
    cat_codes = _path_cat_codes(frame.trace.events.get_column("cat"))
    known = {text: at for at, text in enumerate(PATH_TEXTS)}
    texts = pl.Series(PATH_TEXTS, dtype=PATH_CATEGORY)
    gpu_gap, untraced_cat = known["gpu_gap"], known[UNTRACED_CAT]
    kinds = np.array([known[k] for k in EDGE_KINDS], _CODE)
    node_event = g.event[v]
    has = event >= 0
    gap = ~has & (kind == LOCAL)
    on_gpu = frame.on_gpu[node_event]
    cat = cat_codes[np.maximum(event, 0)] if cat_codes.size else np.full(v.size, -1, _CODE)
    cat[~has] = -1
    cat[gap & on_gpu] = gpu_gap
    cat[gap & ~on_gpu] = untraced_cat
    category = np.where(kind == LOCAL, cat, kinds[kind])
    if arrival is not None and v.size:
        delayed = (cat == gpu_gap) & ~g.first_of_loc[v] & (arrival[v] > g.time_ns[np.maximum(v - 1, 0)])
        if delayed.any():
            inferred = _arrival_kinds(g, v[delayed]) == LAUNCH_INFERRED
            category[delayed] = kinds[np.where(inferred, LAUNCH_INFERRED, LAUNCH)]
    t = g.time_ns[v]
    rank = frame.rank[node_event].astype(np.int32)
    return _Steps(t - w, t, w, kind, event, rank, cat, category, gap & ~on_gpu, texts)


def _path_cat_codes(col: pl.Series) -> np.ndarray:
    """Per row of an events ``cat`` column, the position of its text in :data:`PATH_TEXTS` (:data:`_CODE`, -1:
    null): the model's Enum's own codes (:data:`PATH_TEXTS` begins with its categories); another column (the
    parallel replay's String cats) cast to :data:`PATH_CATEGORY`, a text outside it counted as ``other``."""
    if col.dtype == pl.Enum(CATS):
        return _codes(col).astype(_CODE)
    text = col.cast(pl.String)
    codes = _codes(text.cast(PATH_CATEGORY, strict=False))
    return np.where((codes < 0) & text.is_not_null().to_numpy(), PATH_TEXTS.index("other"), codes).astype(_CODE)


def _codes(col: pl.Series) -> np.ndarray:
    """The physical codes of a Categorical or Enum column as int64, -1 for null."""
    return col.to_physical().cast(pl.Int64).fill_null(-1).to_numpy()


def _texts(path: _Steps, codes: np.ndarray) -> pl.Series:
    """The texts of ``codes`` (positions in ``path.texts``; -1: null)."""
    return path.texts.gather(pl.Series(codes).cast(pl.UInt32, strict=False))


def _names(frame: EventFrame, path: _Steps, rows: np.ndarray) -> pl.Series:
    """The ``name`` of the steps ``rows`` (Categorical, as the events'): their event's, :data:`UNTRACED_NAME` for
    untraced work, else null."""
    event = path.event[rows]
    names = frame.trace.events.get_column("name")
    got = (
        names.cast(pl.Categorical).gather(np.maximum(event, 0))
        if names.len()
        else pl.Series([None] * rows.size, dtype=pl.Categorical)
    )
    return pl.select(
        pl.when(pl.lit(pl.Series(path.untraced[rows])))
        .then(pl.lit(UNTRACED_NAME, pl.Categorical))
        .when(pl.lit(pl.Series(event >= 0)))
        .then(pl.lit(got))
        .alias("name")
    ).to_series()


def _name_codes(frame: EventFrame, path: _Steps) -> np.ndarray:
    """Per step, a code of its name (equal names, equal codes): a Categorical's physical code, -1 for null and
    -2 for :data:`UNTRACED_NAME`."""
    names = frame.trace.events.get_column("name")
    if names.dtype != pl.Categorical and not isinstance(names.dtype, pl.Enum):
        names = names.cast(pl.String).cast(pl.Categorical)
    codes = _codes(names)
    out = np.where(path.event >= 0, codes[np.maximum(path.event, 0)] if codes.size else -1, -1)
    out[path.untraced] = -2
    return out


def _segments(frame: EventFrame, path: _Steps) -> pl.DataFrame:
    """One row per weighted step: start_ns, end_ns, contrib_ns, kind, event (null: none), rank, cat, name and
    category."""
    rows = np.arange(path.event.size)
    return pl.DataFrame(
        {
            "start_ns": path.start,
            "end_ns": path.end,
            "contrib_ns": path.contrib,
            "kind": pl.Series(EDGE_KINDS, dtype=EDGE_KIND).gather(path.kind),
            "event": pl.Series(path.event).cast(pl.UInt64, strict=False).cast(pl.Int64),  # -1: null
            "rank": path.rank,
            "cat": _texts(path, path.cat),
            "name": _names(frame, path, rows),
            "category": _texts(path, path.category),
        },
        schema=_SEGMENT_SCHEMA,
    )


_SEGMENT_SCHEMA = {
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "contrib_ns": pl.Int64,
    "kind": EDGE_KIND,
    "event": pl.Int64,
    "rank": pl.Int32,
    "cat": PATH_CATEGORY,
    "name": pl.Categorical,
    "category": PATH_CATEGORY,
}


def _shares(
    col: str, codes: np.ndarray, contrib: np.ndarray, total: int, labels: Callable[[np.ndarray], pl.Series]
) -> pl.DataFrame:
    """contrib_ns per value of ``col`` (the steps' ``codes``, one per value) and its share of ``total``, largest
    first and ties by value (a text's ties by the text, the same order whatever the source); ``labels`` gives the
    value of given steps."""
    order, starts = runs(codes)
    sums = np.add.reduceat(contrib[order], starts) if starts.size else np.zeros(0, np.int64)
    out = pl.DataFrame({col: labels(order[starts]), "contrib_ns": sums.astype(np.int64)}).with_columns(
        (pl.col("contrib_ns") / total).alias("share")
    )
    tie = pl.col(col).cast(pl.String) if out.schema[col] in (pl.Categorical, PATH_CATEGORY) else pl.col(col)
    return out.sort(pl.col("contrib_ns"), tie, descending=[True, False], nulls_last=True)


def _path_events(path: _Steps, seg: pl.DataFrame) -> pl.DataFrame:
    """Per event on the path, its rank, name, cat, first start, last end and contrib_ns, by start (ties in the
    order the path reaches them); names and cats are those of the event's first row of ``seg`` (the segments
    of ``path``)."""
    on = np.flatnonzero(path.event >= 0)
    order, starts = runs(path.event[on])
    steps = on[order]
    first = steps[starts]  # each event's first step on the path
    if starts.size:
        start = np.minimum.reduceat(path.start[steps], starts)
        end = np.maximum.reduceat(path.end[steps], starts)
        contrib = np.add.reduceat(path.contrib[steps], starts)
    else:
        start = end = contrib = np.zeros(0, np.int64)
    by_start = np.lexsort((first, start))
    first = first[by_start]
    return pl.DataFrame(
        {
            "event": path.event[first],
            "rank": path.rank[first],
            "name": seg.get_column("name").gather(first),
            "cat": seg.get_column("cat").gather(first),
            "start_ns": start[by_start],
            "end_ns": end[by_start],
            "contrib_ns": contrib[by_start],
        },
        schema={
            "event": pl.Int64,
            "rank": pl.Int32,
            "name": pl.Categorical,
            "cat": PATH_CATEGORY,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "contrib_ns": pl.Int64,
        },
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
        wanted = np.zeros(g.time_ns.size, np.bool_)
        wanted[nodes] = True
        into = np.flatnonzero(wanted[g.dst])  # only the edges into ``nodes`` are sorted
        if not into.size:
            return out
        o = into[np.lexsort((g.time_ns[g.src[into]], g.dst[into]))]
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
            "kind": EDGE_KIND,
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
            "kind": pl.Series(EDGE_KINDS, dtype=EDGE_KIND).gather(kind[cross]),
            "wait_ns": wait,
            "cause_rank": frame.rank[cause].astype(np.int32),
            "cause_event": cause.astype(np.int64),
        }
    )
    return out.filter(pl.col("wait_ns") > 0)
