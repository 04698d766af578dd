"""A process's part of the job's dependency graph, laid out once (:func:`part_graph`).

The graph is :mod:`di.engine.critical_path_graph`'s, restricted to the nodes
of the process's ranks' timelines (owned) and of its ghosts' (which stand for
nodes of other processes): owned nodes first, then the ghosts' (each timeline
is either owned or a ghost's, so both keep the engine's per-timeline order),
with the cross edges into owned nodes only. Each process first tells the
others, for the events they hold as ghosts, whether they are nodes, their
activity and their nodes' ids (:class:`~di.parallel.critical_path.node_ids.NodeIds`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from di.engine.critical_path_graph import Graph, _cross_edges, in_graph
from di.engine.window import EventFrame
from di.parallel.critical_path.layout import index_nodes, lay_out
from di.parallel.critical_path.node_ids import NodeIds
from di.parallel.exchange import Exchange
from di.parallel.ownership import Part

Nodes = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Room for a part's nodes: (event, time_ns, is_end, first_of_loc, owner), as :func:`lay_out` fills them."""


def part_graph(ex: Exchange, part: Part, frame: EventFrame) -> tuple[EventFrame, Graph, NodeIds, int, list[np.ndarray]]:
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
    nodes = (
        np.empty(room, np.int32),
        np.empty(room, np.int64),
        np.zeros(room, np.bool_),
        np.zeros(room, np.bool_),
        np.empty(room, np.int32),
    )
    closed = np.zeros(n_events, np.bool_)
    ids = _lay_out_owned(ex, frame, own_rows, ev_loc, nodes, closed)
    del own_rows
    index = np.int32 if room < np.iinfo(np.int32).max else np.int64
    start_node, end_node = np.full(n_events, -1, index), np.full(n_events, -1, index)
    index_nodes(nodes[0], nodes[2], 0, ids.n_own, start_node, end_node)
    got, wanted = _exchange_ghost_nodes(ex, part, frame, keep, ids, start_node, end_node)
    del keep
    frame, ghost_start, ghost_end = _with_ghost_nodes(part, frame, got, ghost_rows)
    keep = in_graph(frame)
    ghost_kept = np.flatnonzero(keep & ~part.own).astype(np.int64)
    n_own, m = ids.n_own, ids.n_own + 2 * ghost_kept.size
    lay_out(frame, ghost_kept, ev_loc, _span(nodes, n_own, m), closed)
    del closed, ghost_kept
    index_nodes(nodes[0], nodes[2], n_own, m, start_node, end_node)
    ids = _with_ghost_ids(ids, nodes, m, ghost_rows, ghost_start, ghost_end)
    del ghost_start, ghost_end, ghost_rows
    g, dropped = _forward_graph(frame, nodes, m, start_node, end_node, keep, n_own)
    return frame, g, ids, dropped, wanted


def _span(nodes: Nodes, lo: int, hi: int) -> tuple[np.ndarray, ...]:
    """Views of the nodes ``lo:hi``."""
    return tuple(a[lo:hi] for a in nodes)


def _lay_out_owned(
    ex: Exchange, frame: EventFrame, own_rows: np.ndarray, ev_loc: np.ndarray, nodes: Nodes, closed: np.ndarray
) -> NodeIds:
    """Lay out the owned graph events ``own_rows`` first in ``nodes``; their ids (no ghosts yet)."""
    n_own = 2 * own_rows.size
    lay_out(frame, own_rows, ev_loc, _span(nodes, 0, n_own), closed)
    block_local, block_global = _owned_blocks(ex, ev_loc[own_rows].astype(np.int64))
    return NodeIds(n_own, block_local, block_global, np.zeros(0, np.int64))


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


def _exchange_ghost_nodes(
    ex: Exchange,
    part: Part,
    frame: EventFrame,
    keep: np.ndarray,
    ids: NodeIds,
    start_node: np.ndarray,
    end_node: np.ndarray,
) -> tuple[list, list[np.ndarray]]:
    """Tell each process q, for the events it holds as ghosts, whether they are nodes, their activity and
    their nodes' ids; returns (what the others told this process, per process q the local nodes q holds)."""
    replies, wanted = [], []
    for rows in part.requests:
        at = part.local(rows)
        replies.append((rows, keep[at], frame.activity[at], ids.of(start_node[at]), ids.of(end_node[at])))
        nodes = np.concatenate([start_node[at], end_node[at]])
        wanted.append(nodes[nodes >= 0])
    return ex.alltoall(replies, "ghost nodes"), wanted


def _with_ghost_nodes(
    part: Part, frame: EventFrame, got: list, ghost_rows: np.ndarray
) -> tuple[EventFrame, np.ndarray, np.ndarray]:
    """The frame with the ghosts' ``selected`` and ``activity`` as their owners told them, and per ghost row
    (``ghost_rows``) the ids of its start and end nodes (-1: none)."""
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
    return replace(frame, selected=selected, activity=activity), ghost_start, ghost_end


def _with_ghost_ids(
    ids: NodeIds, nodes: Nodes, m: int, ghost_rows: np.ndarray, ghost_start: np.ndarray, ghost_end: np.ndarray
) -> NodeIds:
    """``ids`` with the ids of the ghost nodes ``ids.n_own:m``."""
    ev, is_end = nodes[0], nodes[2]
    at = np.searchsorted(ghost_rows, ev[ids.n_own : m])
    return replace(ids, ghost=np.where(is_end[ids.n_own : m], ghost_end[at], ghost_start[at]))


def _forward_graph(
    frame: EventFrame,
    nodes: Nodes,
    m: int,
    start_node: np.ndarray,
    end_node: np.ndarray,
    keep: np.ndarray,
    n_own: int,
) -> tuple[Graph, int]:
    """The graph of the nodes ``:m`` with the cross edges into owned nodes that go forward in time, and the
    number of those that point back."""
    ev, t, is_end, first, owner = nodes
    g = Graph(ev[:m], t[:m], is_end[:m], first[:m], owner[:m], start_node, end_node, *(np.zeros(0, np.int64),) * 3)
    src, dst, kind = _cross_edges(frame, g, keep)
    ok = (src >= 0) & (dst >= 0)
    ok[ok] = dst[ok] < n_own
    src, dst, kind = src[ok], dst[ok], kind[ok]
    del ok
    forward = t[src] <= t[dst]
    none = np.zeros(0, np.int64)  # the per-event node index is only needed to build the edges
    g = Graph(ev[:m], t[:m], is_end[:m], first[:m], owner[:m], none, none, src[forward], dst[forward], kind[forward])
    return g, int((~forward).sum())
