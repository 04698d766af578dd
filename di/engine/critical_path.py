"""Critical path of the whole job: the longest path through its dependency graph.

The graph is :mod:`di.engine.critical_path_graph`'s: start/end nodes of
every event, program order on each timeline (with nesting), launch, sync,
stream-wait, user, message and collective edges. Edge weights are the time
(int64 ns) that the edge puts on a path:

- a local edge into node v (time t_v) from its predecessor p (t_p): the time
  the timeline spent on the innermost event open between them (its self
  time), counted only after every cross dependency of v had arrived:
  t_v - max(t_p, a_v), a_v the latest source time of v's cross edges. On a
  CPU thread a stretch with no work open (or only annotations) weighs 0; on
  a GPU stream the gap between two GPU activities weighs the gap (the GPU
  waited for nothing it knew of: HolisticTraceAnalysis's kernel-kernel delay).
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

from di.engine.classify import NONE
from di.engine.critical_path_graph import EDGE_KINDS, LOCAL, Graph, build_graph
from di.engine.window import EventFrame

_MIN = np.iinfo(np.int64).min


def weights(frame: EventFrame, g: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(local weight per node, weight per cross edge, arrival a_v per node), int64 ns."""
    t = g.time_ns
    prev_t = np.where(g.first_of_loc, _MIN, np.roll(t, 1))
    arrival = np.full(t.size, _MIN, np.int64)
    np.maximum.at(arrival, g.dst, t[g.src])
    owner_act = np.where(g.owner >= 0, frame.activity[np.maximum(g.owner, 0)], NONE)
    on_gpu = frame.on_gpu[g.event]
    counted = (owner_act != NONE) | (on_gpu & ~g.first_of_loc)
    local = np.where(g.first_of_loc | ~counted, 0, t - np.maximum(prev_t, arrival))
    cross = t[g.dst] - np.maximum(t[g.src], prev_t[g.dst])
    return np.maximum(local, 0), np.maximum(cross, 0), arrival


@njit(cache=True, nogil=True)
def _longest(order, first_of_loc, local_w, in_ptr, in_src, in_w, pos):
    m = order.size
    dist = np.zeros(m, np.int64)
    pred = np.full(m, -1, np.int64)
    via = np.full(m, -1, np.int64)  # -1 none, -2 local, e >= 0 cross edge e (CSR position)
    for k in range(m):
        v = order[k]
        best = 0
        if not first_of_loc[v]:
            best = dist[v - 1] + local_w[v]
            pred[v] = v - 1
            via[v] = -2
        for e in range(in_ptr[v], in_ptr[v + 1]):
            u = in_src[e]
            if pos[u] < k:
                cand = dist[u] + in_w[e]
                if cand > best:
                    best = cand
                    pred[v] = u
                    via[v] = e
        dist[v] = best
    return dist, pred, via


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
        return _result(frame, g, [], dropped, 0)
    order = np.argsort(g.time_ns, kind="stable").astype(np.int64)
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    # an edge tied in time with its target but ordered after it cannot be honoured: drop it everywhere
    honoured = pos[g.src] < pos[g.dst]
    dropped += int((~honoured).sum())
    g = replace(g, src=g.src[honoured], dst=g.dst[honoured], kind=g.kind[honoured])
    local_w, cross_w, arrival = weights(frame, g)
    by_dst = np.argsort(g.dst, kind="stable")
    in_src, in_w, in_kind = g.src[by_dst], cross_w[by_dst], g.kind[by_dst]
    in_ptr = np.searchsorted(g.dst[by_dst], np.arange(g.event.size + 1)).astype(np.int64)
    dist, pred, via = _longest(order, g.first_of_loc, local_w, in_ptr, in_src, in_w, pos)
    sink = int(np.flatnonzero(dist == dist.max())[-1]) if dist.size else -1
    steps = []
    v = sink
    while v >= 0 and pred[v] >= 0:
        u = int(pred[v])
        if via[v] == -2:
            steps.append((u, v, LOCAL, int(local_w[v])))
        else:
            e = int(via[v])
            steps.append((u, v, int(in_kind[e]), int(in_w[e])))
        v = u
    steps.reverse()
    return _result(frame, g, steps, dropped, int(dist[sink]) if sink >= 0 else 0, arrival=arrival)


def _result(frame: EventFrame, g: Graph, steps: list, dropped: int, length: int, arrival: np.ndarray | None = None) -> dict[str, Any]:
    ev = frame.trace.events
    names = ev.get_column("name").cast(pl.String)
    cats = ev.get_column("cat").cast(pl.String)
    u = np.array([s[0] for s in steps], np.int64)
    v = np.array([s[1] for s in steps], np.int64)
    kind = np.array([s[2] for s in steps], np.int64)
    w = np.array([s[3] for s in steps], np.int64)
    event = np.where(kind == LOCAL, g.owner[v] if v.size else v, g.event[v] if v.size else v)
    has = event >= 0
    seg = pl.DataFrame({
        "start_ns": g.time_ns[v] - w if v.size else w, "end_ns": g.time_ns[v] if v.size else w, "contrib_ns": w,
        "kind": [EDGE_KINDS[k] for k in kind.tolist()],
        "event": pl.Series(np.where(has, event, 0)).set(pl.Series(~has), None) if v.size else pl.Series([], dtype=pl.Int64),
        "rank": frame.rank[g.event[v]].astype(np.int32) if v.size else np.zeros(0, np.int32),
    }, schema_overrides={"event": pl.Int64})
    idx = seg.get_column("event")
    seg = seg.with_columns(
        pl.Series("cat", [None] * seg.height, pl.String) if not seg.height else cats.gather(idx.fill_null(0)).alias("cat"),
        pl.Series("name", [None] * seg.height, pl.String) if not seg.height else names.gather(idx.fill_null(0)).alias("name"),
    ).with_columns(
        pl.when(pl.col("event").is_null() & (pl.col("kind") == "local")).then(pl.lit("gpu_gap")).otherwise(pl.col("cat")).alias("cat"),
        pl.when(pl.col("event").is_null()).then(pl.lit(None, pl.String)).otherwise(pl.col("name")).alias("name"),
    )
    seg = seg.with_columns(
        pl.when(pl.col("kind") == "local").then(pl.col("cat")).otherwise(pl.col("kind")).alias("category")
    ).filter(pl.col("contrib_ns") > 0)
    waits = _waits(frame, g, u, v, kind, w, arrival, event) if arrival is not None else _waits_empty()
    total = max(length, 1)

    def by(col: str) -> pl.DataFrame:
        return seg.group_by(col).agg(pl.col("contrib_ns").sum()).with_columns((pl.col("contrib_ns") / total).alias("share")).sort("contrib_ns", descending=True)

    events = seg.filter(pl.col("event").is_not_null()).group_by("event", maintain_order=True).agg(
        pl.col("rank").first(), pl.col("name").first(), pl.col("cat").first(), pl.col("start_ns").min(),
        pl.col("end_ns").max(), pl.col("contrib_ns").sum()
    ).sort("start_ns")
    lo = int(frame.start_ns[frame.selected].min()) if frame.selected.any() else 0
    hi = int(frame.end_ns[frame.selected].max()) if frame.selected.any() else 0
    summary = {
        "length_ns": length, "start_ns": int(seg.get_column("start_ns").min()) if seg.height else None,
        "end_ns": int(seg.get_column("end_ns").max()) if seg.height else None, "window_span_ns": hi - lo,
        "segments": seg.height, "events": events.height, "dropped_edges": dropped,
    }
    return {"summary": summary, "segments": seg, "events": events, "by_category": by("category"), "by_rank": by("rank"),
            "by_name": by("name"), "waits": waits}


def _waits_empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"rank": pl.Int32, "event": pl.Int64, "kind": pl.String, "wait_ns": pl.Int64,
                                "cause_rank": pl.Int32, "cause_event": pl.Int64})


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
    out = pl.DataFrame({
        "rank": frame.rank[g.event[vv]].astype(np.int32), "event": g.event[vv],
        "kind": [EDGE_KINDS[k] for k in kind[cross].tolist()], "wait_ns": wait,
        "cause_rank": frame.rank[cause].astype(np.int32), "cause_event": cause,
    })
    return out.filter(pl.col("wait_ns") > 0)
