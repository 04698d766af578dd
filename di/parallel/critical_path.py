"""The job's critical path computed by the processes together: a parallel forward replay.

The graph is :mod:`di.engine.critical_path_graph`'s, built by each process on
its part (:mod:`di.parallel.ownership`): the nodes of its ranks' timelines, and
the nodes of its ghosts, which stand for nodes of other processes. Each edge
into an owned node is held by that node's process; an edge from a ghost is a
cross-process edge. Node ids are the single-process graph's (timeline by
timeline in ``loc`` order), so ties in time are broken as there; they are not
stored per node (:class:`NodeIds`): owned nodes come first, each timeline one
block of consecutive ids, and only the ghosts' ids are listed.

Longest-path distances are computed in rounds (bulk-synchronous replay):
each process advances through its nodes in (time, node id) order until a node
needs the distance of a ghost not yet known, then the processes send each
other the distances of the nodes others hold as ghosts (``alltoall``), and so
on until every node is done. The globally earliest waiting node always gets
its inputs in the next round, so the replay ends; the number of rounds is the
length of the longest chain of cross-process dependencies (about one per
collective or message round trip). The path is then walked back from the
sink, handing over to the owner of each ghost it crosses, and process 0 turns
the steps of the path into the engine's result tables with the engine's own
code. Per-process memory: its nodes and edges plus one distance per ghost:
about 42 bytes per node in the replay (time, event, owner, flags, CSR offset,
distance, predecessor and edge, replay order), the graph laid out once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import polars as pl
from numba import njit

from di.engine.critical_path import _cross_weights, _local_weight, _result, relax
from di.engine.critical_path_graph import (
    LOCAL,
    Graph,
    _cross_edges,
    _layout,
    in_graph,
)
from di.engine.intervals import sort_order
from di.engine.window import EventFrame
from di.parallel.exchange import Exchange
from di.parallel.ownership import Part

_MIN = np.iinfo(np.int64).min


@dataclass(frozen=True)
class NodeIds:
    """The single-process graph's node ids (timeline by timeline in ``loc`` order) of a part's nodes.

    A part's owned nodes come first, ``[0, n_own)``, in ``loc`` order, so each owned timeline is one block
    of consecutive ids in both numberings; the ghost nodes follow, their ids sent by their owners.

    Attributes:
        n_own: number of owned nodes.
        block_local, block_global: per owned timeline with nodes (ascending), its first node here and its id.
        ghost: id of ghost node ``n_own + i`` (int64).
    """

    n_own: int
    block_local: np.ndarray
    block_global: np.ndarray
    ghost: np.ndarray

    def of(self, nodes: np.ndarray) -> np.ndarray:
        """Ids of local nodes (int64; -1 stays -1)."""
        nodes = np.asarray(nodes, np.int64)
        out = np.full(nodes.size, -1, np.int64)
        own = (nodes >= 0) & (nodes < self.n_own)
        b = np.searchsorted(self.block_local, nodes[own], side="right") - 1
        out[own] = self.block_global[b] + (nodes[own] - self.block_local[b])
        ghost = nodes >= self.n_own
        out[ghost] = self.ghost[nodes[ghost] - self.n_own]
        return out

    def owned(self, gid: int) -> int:
        """The local node of an owned node's id."""
        b = int(np.searchsorted(self.block_global, gid, side="right")) - 1
        return int(self.block_local[b] + (gid - self.block_global[b]))


LAYOUT_BATCH = 1 << 18
"""Graph events laid out per call of the layout kernel (whole timelines): its sort's scratch is ~60 bytes each."""


def _lay_out(frame: EventFrame, rows: np.ndarray, ev_loc: np.ndarray, out: tuple, closed: np.ndarray) -> None:
    """The nodes of graph events ``rows`` (ascending) into ``out`` = (event, time_ns, is_end, first_of_loc,
    owner), views of room for ``2 * rows.size`` nodes (``is_end`` and ``first_of_loc`` zeroed), as
    :func:`di.engine.critical_path_graph.build_graph` lays them out; ``closed``: its scratch, one flag per event.
    Timelines are independent there, so they are laid out a batch of whole timelines at a time."""
    if not rows.size:
        return
    loc = ev_loc[rows]
    edges = np.concatenate([[0], np.flatnonzero(loc[1:] != loc[:-1]) + 1, [rows.size]])  # timelines' bounds
    bounds = [0]
    while bounds[-1] < rows.size:
        lo = bounds[-1]
        hi = int(edges[np.searchsorted(edges, lo + LAYOUT_BATCH, side="right") - 1])
        bounds.append(hi if hi > lo else int(edges[np.searchsorted(edges, lo, side="right")]))
    del edges
    stack = np.empty(min(rows.size, LAYOUT_BATCH) + 1, np.int32)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        r, lc = rows[lo:hi], loc[lo:hi].astype(np.int64)
        start, end = frame.start_ns[r], frame.end_ns[r]
        rev = np.arange(r.size - 1, -1, -1, dtype=np.int64)
        end_order = rev[sort_order(lc[rev], end[rev], stable=True)].astype(np.int64)
        del rev
        if stack.size <= r.size:
            stack = np.empty(r.size + 1, np.int32)
        _layout(r, lc, start, end, end_order, *(a[2 * lo : 2 * hi] for a in out), closed, stack)


def _owned_blocks(ex: Exchange, loc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(block_local, block_global) of :class:`NodeIds` from the ``loc`` of the owned graph events (ascending):
    each event is two nodes; a timeline's ids follow those of every timeline with a smaller ``loc``."""
    locs, counts = np.unique(loc, return_counts=True)
    counts = 2 * counts.astype(np.int64)
    every = ex.allgather((locs.astype(np.int64), counts), "node counts")
    all_locs = np.concatenate([e[0] for e in every])
    all_counts = np.concatenate([e[1] for e in every])
    by_loc = np.argsort(all_locs, kind="stable")
    all_locs, all_counts = all_locs[by_loc], all_counts[by_loc]
    offset = np.concatenate([[0], np.cumsum(all_counts)[:-1]]).astype(np.int64)
    local = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return local, offset[np.searchsorted(all_locs, locs)]


def _part_graph(
    ex: Exchange, part: Part, frame: EventFrame
) -> tuple[EventFrame, Graph, NodeIds, int, list[np.ndarray]]:
    """The part's graph, laid out once: owned nodes first, then the ghosts' (each timeline is either
    owned or a ghost's, so both keep the engine's per-timeline order), with edges into owned nodes only.

    Each process first tells the others, for the events they hold as ghosts, whether they are nodes, their
    activity and their nodes' ids; the frame returned has the ghosts' ``selected`` and ``activity`` as their
    owners see them.

    Returns:
        (frame, graph, node ids, cross edges dropped for pointing back in time, per process q the local
        nodes q holds as ghosts).
    """
    keep = in_graph(frame)
    ev_loc = frame.trace.events.get_column("loc").to_numpy()
    n_events = ev_loc.size
    own_rows = np.flatnonzero(keep & part.own).astype(np.int64)
    ghost_rows = np.flatnonzero(~part.own).astype(np.int64)
    room = 2 * (own_rows.size + ghost_rows.size)
    ev, t, owner = np.empty(room, np.int32), np.empty(room, np.int64), np.empty(room, np.int32)
    is_end, first = np.zeros(room, np.bool_), np.zeros(room, np.bool_)
    closed = np.zeros(n_events, np.bool_)
    n_own = 2 * own_rows.size
    _lay_out(frame, own_rows, ev_loc, (ev[:n_own], t[:n_own], is_end[:n_own], first[:n_own], owner[:n_own]), closed)
    block_local, block_global = _owned_blocks(ex, ev_loc[own_rows].astype(np.int64))
    del own_rows
    index = np.int32 if room < np.iinfo(np.int32).max else np.int64
    start_node, end_node = np.full(n_events, -1, index), np.full(n_events, -1, index)
    _index_nodes(ev, is_end, 0, n_own, start_node, end_node)
    ids = NodeIds(n_own, block_local, block_global, np.zeros(0, np.int64))
    replies, wanted = [], []
    for rows in part.requests:
        at = part.local(rows)
        replies.append((rows, keep[at], frame.activity[at], ids.of(start_node[at]), ids.of(end_node[at])))
        nodes = np.concatenate([start_node[at], end_node[at]])
        wanted.append(nodes[nodes >= 0])
    got = ex.alltoall(replies, "ghost nodes")
    del replies, keep
    selected, activity = frame.selected.copy(), frame.activity.copy()
    ghost_start, ghost_end = np.full(ghost_rows.size, -1, np.int64), np.full(ghost_rows.size, -1, np.int64)
    for reply in got:
        if reply is None or not reply[0].size:
            continue
        rows, kept, act, s, e = reply
        at = part.local(rows)
        selected[at], activity[at] = kept, act
        at = np.searchsorted(ghost_rows, at)
        ghost_start[at], ghost_end[at] = s, e
    frame = replace(frame, selected=selected, activity=activity)
    keep = in_graph(frame)
    ghost_kept = np.flatnonzero(keep & ~part.own).astype(np.int64)
    m = n_own + 2 * ghost_kept.size
    _lay_out(
        frame, ghost_kept, ev_loc, (ev[n_own:m], t[n_own:m], is_end[n_own:m], first[n_own:m], owner[n_own:m]), closed
    )
    del closed, ghost_kept
    _index_nodes(ev, is_end, n_own, m, start_node, end_node)
    at = np.searchsorted(ghost_rows, ev[n_own:m])
    ids = replace(ids, ghost=np.where(is_end[n_own:m], ghost_end[at], ghost_start[at]))
    del at, ghost_start, ghost_end, ghost_rows
    g = Graph(ev[:m], t[:m], is_end[:m], first[:m], owner[:m], start_node, end_node, *(np.zeros(0, np.int64),) * 3)
    src, dst, kind = _cross_edges(frame, g, keep)
    ok = (src >= 0) & (dst >= 0)
    ok[ok] = dst[ok] < n_own
    src, dst, kind = src[ok], dst[ok], kind[ok]
    del ok
    forward = t[src] <= t[dst]
    none = np.zeros(0, np.int64)  # the per-event node index is only needed to build the edges
    g = Graph(ev[:m], t[:m], is_end[:m], first[:m], owner[:m], none, none, src[forward], dst[forward], kind[forward])
    return frame, g, ids, int((~forward).sum()), wanted


def _index_nodes(
    ev: np.ndarray, is_end: np.ndarray, lo: int, hi: int, start_node: np.ndarray, end_node: np.ndarray
) -> None:
    """``start_node``/``end_node`` (per event row) of the nodes ``lo:hi``."""
    ends = np.flatnonzero(is_end[lo:hi]) + lo
    end_node[ev[ends]] = ends
    del ends
    starts = np.flatnonzero(~is_end[lo:hi]) + lo
    start_node[ev[starts]] = starts


@njit(cache=True, nogil=True)
def _advance(
    k0,
    order,
    known,
    dist,
    pred,
    via,
    t,
    first,
    owner,
    event,
    activity,
    on_gpu,
    call_only,
    in_ptr,
    in_src,
    in_w,
):
    """Longest-path distances of the nodes ``order[k0:]`` (owned nodes in (time, id) order), settled by
    :func:`di.engine.critical_path.relax` as in the engine's ``_longest``, up to the first node with an input
    not ``known`` yet; returns its position in ``order`` (``order.size``: all done). A node's arrival (the
    latest source of its cross edges) is taken from its edges as it is settled."""
    for k in range(k0, order.size):
        v = np.int64(order[k])
        a_v = _MIN
        for e in range(in_ptr[v], in_ptr[v + 1]):
            u = in_src[e]
            if not known[u]:
                return k
            a_v = max(a_v, t[u])
        w = _local_weight(v, t, first, owner, event, activity, on_gpu, call_only, a_v)
        relax(v, w, first, in_ptr, in_src, in_w, dist, pred, via)
        known[v] = True
    return order.size


@njit(cache=True, nogil=True)
def _walk(v0, n_own, pred, via, in_ptr, in_src, in_w, in_kind, t, first, owner, event, activity, on_gpu, call_only):
    """The path's steps (u, v, kind, weight, arrival of v, kind of the cross edge deciding that arrival
    or -1) from ``v0`` back to its start or to the first ghost source (a node from ``n_own`` on), last step
    first. Ties in arrival go to the last such edge, as :func:`di.engine.critical_path._arrival_kinds` does."""
    n = 0
    v = v0
    while pred[v] >= 0:
        n += 1
        u = pred[v]
        if u >= n_own:
            break
        v = u
    u_out = np.empty(n, np.int64)
    v_out = np.empty(n, np.int64)
    kind = np.empty(n, np.int64)
    w = np.empty(n, np.int64)
    arrival = np.empty(n, np.int64)
    akind = np.empty(n, np.int64)
    v = v0
    for k in range(n):
        u = pred[v]
        u_out[k] = u
        v_out[k] = v
        a_v = _MIN
        akind[k] = -1
        for e in range(in_ptr[v], in_ptr[v + 1]):
            if t[in_src[e]] >= a_v:
                a_v = t[in_src[e]]
                akind[k] = in_kind[e]
        arrival[k] = a_v
        if via[v] == -2:
            kind[k] = LOCAL
            w[k] = _local_weight(v, t, first, owner, event, activity, on_gpu, call_only, a_v)
        else:
            kind[k] = in_kind[via[v]]
            w[k] = in_w[via[v]]
        v = u
    return u_out, v_out, kind, w, arrival, akind


def critical_path(ex: Exchange, part: Part, frame: EventFrame) -> dict[str, Any] | None:
    """The job's critical path (:func:`di.engine.critical_path.critical_path`'s result) on process 0, None elsewhere."""
    frame, g, ids, dropped, wanted = _part_graph(ex, part, frame)
    n_own = ids.n_own
    # an edge tied in time with its target but ordered after it cannot be honoured (as in one process)
    ts, td = g.time_ns[g.src], g.time_ns[g.dst]
    honoured = ts < td
    tie = np.flatnonzero(ts == td)
    honoured[tie] = ids.of(g.src[tie]) < ids.of(g.dst[tie])
    dropped += int((~honoured).sum())
    del ts, td, tie
    g = replace(g, src=g.src[honoured], dst=g.dst[honoured], kind=g.kind[honoured])
    del honoured
    # owned nodes are numbered in id order, so a stable sort by time orders them by (time, id)
    order = np.argsort(g.time_ns[:n_own], kind="stable").astype(np.int32)
    m = g.event.size
    if g.src.size >= np.iinfo(np.int32).max:
        from di.errors import DIError

        raise DIError(f"parallel critical path: {g.src.size} cross edges in one process; run more processes")
    # the cross edges into each node (CSR, int32 offsets); the edge list itself is not needed after
    by_dst = np.argsort(g.dst, kind="stable")
    in_src, in_w, in_kind = g.src[by_dst], _cross_weights(g)[by_dst], g.kind[by_dst].astype(np.int8)
    in_ptr = np.zeros(m + 1, np.int32)
    np.cumsum(np.bincount(g.dst, minlength=m), out=in_ptr[1:])
    none = np.zeros(0, np.int64)
    g = replace(g, is_end=np.zeros(0, np.bool_), src=none, dst=none, kind=none)
    args = (g.time_ns, g.first_of_loc, g.owner, g.event, frame.activity, frame.on_gpu, frame.call_only)
    del by_dst
    dist, pred, via = np.zeros(m, np.int64), np.full(m, -1, np.int32), np.full(m, -1, np.int32)
    known = np.zeros(m, np.bool_)
    _replay(ex, ids, wanted, order, known, dist, pred, via, args, in_ptr, in_src, in_w)
    del order, known, wanted
    dropped = sum(ex.allgather(dropped, "dropped edges"))
    best = (-1, -1)
    if n_own:
        length = int(dist[:n_own].max())
        # owned ids grow with the node: the last node of the longest distance has the largest id
        best = (length, int(ids.of(np.flatnonzero(dist[:n_own] == length)[-1:])[0]))
    every = ex.allgather(best, "sink")
    sink_p = max(range(ex.size), key=lambda p: every[p])
    length, sink = every[sink_p]
    ranges = ex.allgather(_selected_range(part, frame), "window span")
    pieces = _backtrack(ex, part, g, ids, sink_p, sink, pred, via, (in_ptr, in_src, in_w, in_kind), args, frame)
    gathered = ex.gather(pieces, "critical path")
    if gathered is None:
        return None
    steps = [p for per in gathered for p in per]
    steps.sort(key=lambda hp: -hp[0])
    table = pl.concat([s for _, s in steps]) if steps else None
    return _assemble(table, dropped, max(length, 0), ranges)


def _replay(ex, ids, wanted, order, known, dist, pred, via, args, in_ptr, in_src, in_w) -> None:
    """Rounds of :func:`_advance` and of sending the distances of the nodes other processes hold as ghosts
    (``wanted[q]``: the local nodes process q holds)."""
    sent = [np.zeros(w.size, np.bool_) for w in wanted]
    ghost_by_id = np.argsort(ids.ghost, kind="stable")
    ghost_ids = ids.ghost[ghost_by_id]
    k = 0
    while True:
        k_before = k
        k = _advance(k, order, known, dist, pred, via, *args, in_ptr, in_src, in_w)
        out = []
        for q, nodes in enumerate(wanted):
            new = known[nodes] & ~sent[q]
            sent[q] |= new
            out.append((ids.of(nodes[new]), dist[nodes[new]]) if new.any() else None)
        got = ex.alltoall(out, "critical path replay")
        received = 0
        for item in got:
            if item is None:
                continue
            gids, d = item
            at = ids.n_own + ghost_by_id[np.searchsorted(ghost_ids, gids)]
            dist[at] = d
            known[at] = True
            received += gids.size
        state = ex.allgather((k == order.size, k > k_before or received > 0), "replay state")
        if all(done for done, _ in state):
            return
        if not any(moved for _, moved in state):
            from di.errors import DIError

            raise DIError("parallel critical path: the replay made no progress (a cycle across processes)")


def _selected_range(part: Part, frame: EventFrame) -> tuple[int, int] | None:
    sel = frame.selected & part.own
    if not sel.any():
        return None
    return int(frame.start_ns[sel].min()), int(frame.end_ns[sel].max())


def _backtrack(ex, part, g, ids, sink_p, sink, pred, via, edges, args, frame) -> list:
    """This process's stretches of the path, each (hop, frame of its steps in path order)."""
    pieces = []
    owner_p, at_gid, hop = sink_p, sink, 0
    while at_gid >= 0:
        nxt = None
        if ex.rank == owner_p:
            u, v, *more = _walk(ids.owned(at_gid), np.int64(ids.n_own), pred, via, *edges, *args)
            steps = (u[::-1], v[::-1], *(a[::-1] for a in more))
            pieces.append((hop, _steps_frame(part, g, frame, *steps)))
            if u.size and u[-1] >= ids.n_own:
                nxt = (int(part.ghost_owner[g.event[u[-1]]]), int(ids.of(u[-1:])[0]))
            else:
                nxt = (-1, -1)
        owner_p, at_gid = ex.bcast(nxt, owner_p, "critical path walk")
        hop += 1
    return pieces


def _steps_frame(part, g, frame, u, v, kind, w, arrival, akind) -> pl.DataFrame:
    """What process 0 needs of each step of the path to build the result: times, events (global rows) and
    their rank, GPU side, name and category."""
    ev = frame.trace.events
    names, cats = ev.get_column("name"), ev.get_column("cat")  # cast to text after the gather: the path's rows only
    cols: dict[str, Any] = {
        "t_prev": g.time_ns[np.maximum(v - 1, 0)],
        "t_v": g.time_ns[v],
        "first_v": g.first_of_loc[v],
        "arrival_v": arrival,
        "akind_v": akind,
        "kind": kind,
        "w": w,
    }
    for key, rows in (("v", g.event[v]), ("o", g.owner[v]), ("u", g.event[u])):
        rows = rows.astype(np.int64)
        has = rows >= 0
        r = np.where(has, rows, 0)
        cols[f"ev_{key}"] = np.where(has, part.global_row[r], -1)
        cols[f"rank_{key}"] = frame.rank[r]
        cols[f"gpu_{key}"] = frame.on_gpu[r]
        cols[f"name_{key}"] = names.gather(r).cast(pl.String) if r.size else pl.Series([], dtype=pl.String)
        cols[f"cat_{key}"] = cats.gather(r).cast(pl.String) if r.size else pl.Series([], dtype=pl.String)
    return pl.DataFrame(cols)


def _assemble(table: pl.DataFrame | None, dropped: int, length: int, ranges: list) -> dict[str, Any]:
    """The engine's result tables from the path's steps (the engine's own :func:`_result` on a graph of
    the path's nodes only), event ids mapped back to rows of the whole job's ``events``."""
    n = table.height if table is not None else 0
    known = [r for r in ranges if r is not None]
    if table is None or not n:
        table = pl.DataFrame(
            {c: [] for c in ("ev_v", "ev_o", "ev_u")}, schema={c: pl.Int64 for c in ("ev_v", "ev_o", "ev_u")}
        )
    rows = pl.concat([table.get_column(c) for c in ("ev_v", "ev_o", "ev_u")]).to_numpy()
    ids = np.unique(rows[rows >= 0])
    attrs = {}
    for key in ("v", "o", "u"):
        if n:
            part = table.select(
                pl.col(f"ev_{key}").alias("row"),
                pl.col(f"rank_{key}").alias("rank"),
                pl.col(f"gpu_{key}").alias("gpu"),
                pl.col(f"name_{key}").alias("name"),
                pl.col(f"cat_{key}").alias("cat"),
            )
            attrs[key] = part
    ev = (
        pl.concat(list(attrs.values())).filter(pl.col("row") >= 0).unique("row").sort("row")
        if attrs
        else pl.DataFrame(
            schema={"row": pl.Int64, "rank": pl.Int32, "gpu": pl.Boolean, "name": pl.String, "cat": pl.String}
        )
    )
    lo = min((r[0] for r in known), default=0)
    hi = max((r[1] for r in known), default=0)
    mini = SimpleNamespace(
        trace=SimpleNamespace(events=ev.select("name", "cat")),
        rank=np.append(ev.get_column("rank").to_numpy().astype(np.int32), 0),
        on_gpu=np.append(ev.get_column("gpu").to_numpy().astype(bool), False),
        start_ns=np.append(np.zeros(ev.height, np.int64), lo),
        end_ns=np.append(np.zeros(ev.height, np.int64), hi),
        selected=np.append(np.zeros(ev.height, bool), bool(known)),
    )

    def mini_id(col: str) -> np.ndarray:
        r = table.get_column(col).to_numpy() if n else np.zeros(0, np.int64)
        return np.where(r >= 0, np.searchsorted(ids, r), -1)

    node_event = np.zeros(3 * n, np.int64)
    node_event[0::3] = mini_id("ev_v")
    node_event[1::3] = mini_id("ev_v")
    node_event[2::3] = mini_id("ev_u")
    time_ns = np.zeros(3 * n, np.int64)
    time_ns[0::3] = table.get_column("t_prev").to_numpy() if n else 0
    time_ns[1::3] = table.get_column("t_v").to_numpy() if n else 0
    first = np.zeros(3 * n, bool)
    first[1::3] = table.get_column("first_v").to_numpy() if n else False
    owner = np.full(3 * n, -1, np.int64)
    owner[1::3] = mini_id("ev_o")
    arrival = np.full(3 * n, _MIN, np.int64)
    arrival[1::3] = table.get_column("arrival_v").to_numpy() if n else _MIN
    akind = table.get_column("akind_v").to_numpy() if n else np.zeros(0, np.int64)
    with_edge = np.flatnonzero(akind >= 0)
    v = 3 * np.arange(n, dtype=np.int64) + 1
    g = Graph(
        node_event,
        time_ns,
        np.zeros(3 * n, bool),
        first,
        owner,
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        v[with_edge],
        v[with_edge],
        akind[with_edge],
    )
    kind = table.get_column("kind").to_numpy() if n else np.zeros(0, np.int64)
    w = table.get_column("w").to_numpy() if n else np.zeros(0, np.int64)
    out = _result(mini, g, (v + 1, v, kind, w), dropped, length, arrival=arrival if known or n else None)
    back = pl.Series(ids, dtype=pl.Int64)

    def to_rows(df: pl.DataFrame, cols: tuple[str, ...]) -> pl.DataFrame:
        return (
            df.with_columns(
                [
                    back.gather(pl.Series(df.get_column(c)).fill_null(0))
                    .zip_with(df.get_column(c).is_not_null(), pl.Series([None] * df.height, dtype=pl.Int64))
                    .alias(c)
                    for c in cols
                ]
            )
            if df.height
            else df
        )

    out["segments"] = to_rows(out["segments"], ("event",))
    out["events"] = to_rows(out["events"], ("event",))
    out["waits"] = to_rows(out["waits"], ("event", "cause_event"))
    return out
