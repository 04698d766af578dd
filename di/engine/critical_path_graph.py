"""The job's dependency graph for the critical path (see :mod:`di.engine.critical_path`).

Nodes are the start and end of every selected event with positive duration
on a CPU thread or GPU stream (GPU ``sync`` records and instants are not
work and are left out). On each timeline the nodes are in program order:
by time, an end before a start at the same instant, outer starts before
inner ones, inner ends before outer ones (nesting). Edges:

- local: each node from the previous node on its timeline;
- cross, src -> dst, only where src is not later than dst:
  ``launch`` (launch flow): API call start -> GPU activity start;
  ``launch_inferred``: the same for a rank whose GPU activity has no launch
  flow, launches matched to kernels per stream in order
  (:mod:`di.engine.inferred_edges`); a kernel that leads its launch by
  device clock skew hangs on the launching thread's last node before it;
  ``sync``: the latest GPU activity of the rank (of the stream, for a
  stream or event sync) ending inside a host call that waits for the device
  -> the call's first node from then on (its end, or the start of a record
  nested in it after the device finished); ``sync_inferred`` where no ``sync`` flow records the call
  (which calls wait, and for which stream: :mod:`di.engine.inferred_edges`);
  ``stream_wait`` / ``user`` flows: src end -> dst start;
  ``message``: send side -> receive end. The send side is the send call's
  start, or for a non-blocking send whose receive completed only after the
  sender reached the call that completed it (its ``MPI_Wait*``/``Test*``:
  a transfer that needed the sender's progress), that call's start: the
  edge never weighs the sender's own work between ``MPI_Isend`` and its wait.
  The reverse edge (a late receiver) goes from where the receive was posted
  (its ``MPI_Irecv``, or the blocking call) to the end of the call that
  completed the send (its wait, or the blocking send), when that call was
  still running then;
  ``collective``: the last member to enter (the root, for broadcast and
  scatter with a known root) -> every member's end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.engine.classify import NONE, SYNC
from di.engine.inferred_edges import launch_edges, sync_calls
from di.engine.intervals import sort_order
from di.engine.window import EventFrame

EDGE_KINDS = (
    "local",
    "launch",
    "sync",
    "stream_wait",
    "user",
    "message",
    "collective",
    "launch_inferred",
    "sync_inferred",
)
LOCAL, LAUNCH, SYNC_EDGE, STREAM_WAIT, USER, MESSAGE, COLLECTIVE, LAUNCH_INFERRED, SYNC_INFERRED = range(
    len(EDGE_KINDS)
)
INFERRED = {LAUNCH_INFERRED: LAUNCH, SYNC_INFERRED: SYNC_EDGE}
"""Inferred edge kinds and the recorded kind each stands for."""


@dataclass(frozen=True)
class Graph:
    """Nodes in per-timeline program order and cross edges (int64 arrays where not said otherwise).

    Attributes:
        event (int32 row), time_ns, is_end: per node.
        first_of_loc: True where a node has no local predecessor.
        owner: per node, the innermost event (int32 row) open in the segment
            that ends at the node (-1: nothing open).
        start_node, end_node: per event row, its nodes (int32, -1: not in the graph);
            empty once the edges are built.
        src, dst, kind: cross edges.
    """

    event: np.ndarray
    time_ns: np.ndarray
    is_end: np.ndarray
    first_of_loc: np.ndarray
    owner: np.ndarray
    start_node: np.ndarray
    end_node: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    kind: np.ndarray


def in_graph(frame: EventFrame) -> np.ndarray:
    """Events that become nodes: selected, positive duration, on a CPU thread or GPU stream, not GPU sync records."""
    kinds = frame.trace.locations.select(pl.col("loc").cast(pl.Int64), pl.col("kind").cast(pl.String))
    loc = frame.trace.events.get_column("loc").to_numpy().astype(np.int64)
    timeline = np.zeros(max(int(loc.max()) if loc.size else 0, int(kinds.get_column("loc").max() or 0)) + 1, bool)
    timeline[kinds.filter(pl.col("kind").is_in(["cpu_thread", "gpu_stream"])).get_column("loc").to_numpy()] = True
    gpu_sync = frame.on_gpu & ((frame.activity == SYNC) | (frame.activity == NONE))
    return frame.selected & (frame.end_ns > frame.start_ns) & timeline[loc] & ~gpu_sync


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _layout(rows, loc, start, end, end_order, ev, t, is_end, first, owner, closed, stack):
    """The nodes in program order, into ev, t, is_end, first, owner (two nodes per event; ``is_end`` and
    ``first`` zeroed by the caller). Scratch from the caller: ``closed``, one zeroed flag per event row of
    the trace; ``stack``, room for one entry per graph event.

    rows (int32 event rows), loc (int32), start, end (int64 ns): graph events in (loc, start, -end) order;
    end_order (int32): the same events by (loc, end, -start) (:func:`by_end`). Int32 where int64 is not needed:
    on a 64-rank job of 10.6 M events the layout's inputs were 510 MB as int64.
    ``owner`` of a node: the innermost event open just before it on its timeline (-1: none).
    """
    n = rows.size
    i = 0
    j = 0
    top = 0
    prev_loc = -1
    for k in range(2 * n):
        take_end = i >= n
        if not take_end:
            a = end_order[j]
            take_end = loc[a] < loc[i] or (loc[a] == loc[i] and end[a] <= start[i])
        if take_end:
            a = end_order[j]
            ev[k] = rows[a]
            t[k] = end[a]
            here = loc[a]
            is_end[k] = True
            j += 1
        else:
            ev[k] = rows[i]
            t[k] = start[i]
            here = loc[i]
            i += 1
        first[k] = here != prev_loc
        prev_loc = here
        if first[k]:
            top = 0
            owner[k] = -1
        else:
            owner[k] = stack[top - 1] if top > 0 else -1
        if is_end[k]:
            closed[ev[k]] = True
            while top > 0 and closed[stack[top - 1]]:
                top -= 1
        else:
            stack[top] = ev[k]
            top += 1


def _nodes(
    rows: np.ndarray, loc: np.ndarray, start: np.ndarray, end: np.ndarray, end_order: np.ndarray, n_events: int
) -> tuple[np.ndarray, ...]:
    """(event, time_ns, is_end, first_of_loc, owner, start_node, end_node) of the graph's nodes (:func:`_layout`)."""
    m = 2 * rows.size
    ev, t, owner = np.empty(m, np.int32), np.empty(m, np.int64), np.empty(m, np.int32)
    is_end, first = np.zeros(m, np.bool_), np.zeros(m, np.bool_)
    _layout(
        rows,
        loc,
        start,
        end,
        end_order,
        ev,
        t,
        is_end,
        first,
        owner,
        np.zeros(n_events, np.bool_),
        np.empty(rows.size + 1, np.int32),
    )
    start_node, end_node = np.full(n_events, -1, np.int32), np.full(n_events, -1, np.int32)
    ends = np.flatnonzero(is_end)
    end_node[ev[ends]] = ends
    del ends
    starts = np.flatnonzero(~is_end)
    start_node[ev[starts]] = starts
    return ev, t, is_end, first, owner, start_node, end_node


def build_graph(frame: EventFrame) -> tuple[Graph, int]:
    """The graph and the number of cross edges dropped for pointing back in time."""
    keep = in_graph(frame)
    rows = np.flatnonzero(keep).astype(np.int32)
    loc = frame.trace.events.get_column("loc").to_numpy()[rows].astype(np.int32)
    start, end = frame.start_ns[rows], frame.end_ns[rows]
    end_order = by_end(loc, end)
    ev, t, is_end, first, owner, start_node, end_node = _nodes(rows, loc, start, end, end_order, frame.rank.size)
    del rows, loc, start, end, end_order
    g = Graph(ev, t, is_end, first, owner, start_node, end_node, *_empty_edges())
    src, dst, kind = _cross_edges(frame, g, keep)
    ok = (src >= 0) & (dst >= 0)
    src, dst, kind = src[ok], dst[ok], kind[ok]
    forward = t[src] <= t[dst]
    dropped = int((~forward).sum())
    none = np.zeros(0, np.int64)  # the per-event node index is only needed to build the edges
    return Graph(ev, t, is_end, first, owner, none, none, src[forward], dst[forward], kind[forward]), dropped


def by_end(loc: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Positions (int32) of events in (loc, start, -end) order sorted by (loc, end), later starts first among equal
    ends: a stable sort of the reversed order."""
    rev = np.arange(loc.size - 1, -1, -1, dtype=np.int32)
    return rev[sort_order(loc[rev], end[rev], stable=True)] if loc.size else rev


def _empty_edges() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = np.zeros(0, np.int64)
    return z, z.copy(), z.copy()


def _cross_edges(frame: EventFrame, g: Graph, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts: list[tuple[np.ndarray, np.ndarray, int]] = []
    fl = frame.trace.flows
    for name, code, src_at, dst_at in (
        ("launch", LAUNCH, g.start_node, g.start_node),
        ("stream_wait", STREAM_WAIT, g.end_node, g.start_node),
        ("user", USER, g.end_node, g.start_node),
    ):
        f = fl.filter(pl.col("kind") == name)
        if f.height:
            parts.append((src_at[f.get_column("src").to_numpy()], dst_at[f.get_column("dst").to_numpy()], code))
    parts.append(_inferred_launches(frame, g))
    parts.extend(_sync_edges(frame, g, keep))
    m = frame.trace.messages
    if m.height:
        s, r = m.get_column("send").to_numpy(), m.get_column("recv").to_numpy()
        parts.append((g.start_node[_send_side(frame, g, m, s, r)], g.end_node[r], MESSAGE))
        posted = _either(m, "recv_post", r)  # the receive is posted by its Irecv, or is the blocking call
        completes = _either(m, "send_done", s)  # a send completes in its Wait, or is the blocking call
        blocked = frame.start_ns[posted] < frame.end_ns[completes]
        parts.append((g.start_node[posted[blocked]], g.end_node[completes[blocked]], MESSAGE))
    parts.append(_collective_edges(frame, g))
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
    kind = np.concatenate([np.full(p[0].size, p[2], np.int64) for p in parts])
    return src, dst, kind


def _send_side(frame: EventFrame, g: Graph, m: pl.DataFrame, send: np.ndarray, recv: np.ndarray) -> np.ndarray:
    """Per message, the event whose start makes the send side ready (see the module docstring);
    a completing call that is no node (no duration, outside the window) leaves the send call."""
    done = _either(m, "send_done", send)
    later = (frame.end_ns[recv] > frame.start_ns[done]) & (g.start_node[done] >= 0)
    return np.where(later, done, send)


def _either(m: pl.DataFrame, column: str, fallback: np.ndarray) -> np.ndarray:
    """The rows of a message's optional end (``send_done``, ``recv_post``), ``fallback`` where it is null."""
    col = m.get_column(column)
    return np.where(col.is_null().to_numpy(), fallback, col.fill_null(0).to_numpy()).astype(np.int64)


def _sync_edges(frame: EventFrame, g: Graph, keep: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Latest GPU end inside each host call that waits for the device (of the stream it waits for, where known):
    ``sync`` edges for calls a sync flow records, ``sync_inferred`` for the others."""
    loc = frame.trace.events.get_column("loc").to_numpy().astype(np.int64)
    calls, stream, recorded = sync_calls(frame, keep)
    gpu = np.flatnonzero(keep & frame.on_gpu)
    if not calls.size or not gpu.size:
        return []
    # key: per rank (device-wide) or per stream; rank keys are negative to keep the two apart
    rank = frame.rank.astype(np.int64)
    call_key = np.where(stream >= 0, stream, -1 - rank[calls])
    left = pl.DataFrame(
        {"key": call_key, "t": frame.end_ns[calls], "lo": frame.start_ns[calls], "call": calls, "rec": recorded}
    ).sort("t")
    right = pl.concat(
        [
            pl.DataFrame({"key": -1 - rank[gpu], "t": frame.end_ns[gpu], "gev": gpu}),
            pl.DataFrame({"key": loc[gpu], "t": frame.end_ns[gpu], "gev": gpu}),
        ]
    ).sort("t")
    hit = left.join_asof(right, on="t", by="key", strategy="backward", check_sortedness=False)
    hit = hit.filter(pl.col("gev").is_not_null())
    gev = hit.get_column("gev").to_numpy()
    inside = frame.end_ns[gev] > hit.get_column("lo").to_numpy()
    call, rec = hit.get_column("call").to_numpy()[inside], hit.get_column("rec").to_numpy()[inside]
    gev = gev[inside]
    dst = _first_node_from(g, loc, loc[call], frame.end_ns[gev], g.end_node[call])
    return [(g.end_node[gev[rec]], dst[rec], SYNC_EDGE), (g.end_node[gev[~rec]], dst[~rec], SYNC_INFERRED)]


def _inferred_launches(frame: EventFrame, g: Graph) -> tuple[np.ndarray, np.ndarray, int]:
    """Inferred launch -> kernel start edges; a kernel that leads its launch (device clock skew, within
    :data:`~di.engine.inferred_edges.CLOCK_SKEW_NS`) depends on the last node of the launching thread at or
    before its start, so the edge still points forward in time."""
    launches, kernels = launch_edges(frame)
    src, dst = g.start_node[launches], g.start_node[kernels]
    lead = np.flatnonzero((src >= 0) & (dst >= 0) & (frame.start_ns[kernels] < frame.start_ns[launches]))
    if lead.size:
        loc = frame.trace.events.get_column("loc").to_numpy().astype(np.int64)
        src[lead] = _node_at(g, loc, loc[launches[lead]], frame.start_ns[kernels[lead]], src[lead], "backward")
    return src, dst, LAUNCH_INFERRED


def _node_at(
    g: Graph, ev_loc: np.ndarray, loc: np.ndarray, t: np.ndarray, fallback: np.ndarray, strategy: str
) -> np.ndarray:
    """Per query, the first node of timeline ``loc`` at or after time ``t`` (``strategy="forward"``) or the last
    at or before it (``"backward"``); ``fallback`` where there is none."""
    if not t.size:
        return fallback
    node_loc = ev_loc[g.event]
    nodes = np.flatnonzero(np.isin(node_loc, np.unique(loc)))
    # ties in time: forward takes the first node in program order, backward the last
    right = pl.DataFrame({"loc": node_loc[nodes], "t": g.time_ns[nodes], "node": nodes.astype(np.int64)}).sort(
        "t", "node"
    )
    q = pl.DataFrame({"i": np.arange(t.size), "loc": loc, "t": t}).sort("t")
    hit = q.join_asof(right, on="t", by="loc", strategy=strategy, check_sortedness=False).sort("i")  # type: ignore[arg-type]
    node = hit.get_column("node").fill_null(-1).to_numpy()
    return np.where(node >= 0, node, fallback)


def _first_node_from(g: Graph, ev_loc: np.ndarray, loc: np.ndarray, t: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Per query, the first node of timeline ``loc`` at or after time ``t``, at most ``last`` (the waiting call's
    end): a call that waits can hold nested records (Score-P's cuMemcpy* around cuCtxGetCurrent), and the wait
    must reach the first of them that comes after the device finished, not only the call's end."""
    node = _node_at(g, ev_loc, loc, t, last, "forward")
    return np.where(node <= last, node, last)


def _collective_edges(frame: EventFrame, g: Graph) -> tuple[np.ndarray, np.ndarray, int]:
    c = frame.trace.collectives.filter(pl.col("instance").is_not_null() & ~pl.col("op").is_in(["send", "recv"]))
    if not c.height:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), COLLECTIVE
    ev = c.get_column("event").to_numpy()
    c = c.select("instance", "event", "op", "root").with_columns(
        pl.Series("rank", frame.rank[ev], dtype=pl.Int32), pl.Series("E", frame.start_ns[ev])
    )
    last = c.sort("E", "rank").group_by("instance").agg(pl.col("event").last().alias("src_event"))
    root = c.filter((pl.col("rank") == pl.col("root")) & pl.col("op").is_in(["broadcast", "scatter"])).select(
        "instance", pl.col("event").alias("root_event")
    )
    c = c.join(last, on="instance", how="left").join(root, on="instance", how="left")
    src = c.select(pl.coalesce("root_event", "src_event")).to_series().to_numpy()
    return g.start_node[src], g.end_node[c.get_column("event").to_numpy()], COLLECTIVE
