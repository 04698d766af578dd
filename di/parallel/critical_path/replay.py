"""The bulk-synchronous forward replay: longest-path distances of a part's nodes, computed in rounds.

Each process advances through its owned nodes in (time, node id) order
(:func:`_advance`) until a node needs the distance of a ghost not yet known,
then the processes send each other the distances of the nodes others hold as
ghosts (``alltoall``), and so on until every node is done (:func:`replay`).
Before that, :func:`honoured_edges` drops the cross edges a single process
could not honour either, and :func:`in_edges` lays the rest out as the
per-node lists of incoming edges the replay reads.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit

from di.engine.critical_path import _MIN, _cross_weights, _local_weight, relax
from di.engine.critical_path_graph import Graph
from di.parallel.critical_path.node_ids import NodeIds
from di.parallel.exchange import Exchange


def honoured_edges(g: Graph, ids: NodeIds) -> tuple[Graph, int]:
    """The graph without the cross edges tied in time with their target but ordered after it (which cannot be
    honoured, as in one process), and how many were dropped."""
    ts, td = g.time_ns[g.src], g.time_ns[g.dst]
    honoured = ts < td
    tie = np.flatnonzero(ts == td)
    honoured[tie] = ids.of(g.src[tie]) < ids.of(g.dst[tie])
    dropped = int((~honoured).sum())
    del ts, td, tie
    return replace(g, src=g.src[honoured], dst=g.dst[honoured], kind=g.kind[honoured]), dropped


def in_edges(g: Graph) -> tuple[Graph, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The cross edges into each node (CSR, int32 offsets): (in_ptr, in_src, in_w, in_kind), and the graph
    without its edge list (not needed after) nor ``is_end``.

    Raises:
        DIError: more cross edges than int32 offsets can index.
    """
    m = g.event.size
    if g.src.size >= np.iinfo(np.int32).max:
        from di.errors import DIError

        raise DIError(f"parallel critical path: {g.src.size} cross edges in one process; run more processes")
    by_dst = np.argsort(g.dst, kind="stable")
    in_src, in_w, in_kind = g.src[by_dst], _cross_weights(g)[by_dst], g.kind[by_dst].astype(np.int8)
    in_ptr = np.zeros(m + 1, np.int32)
    np.cumsum(np.bincount(g.dst, minlength=m), out=in_ptr[1:])
    none = np.zeros(0, np.int64)
    return replace(g, is_end=np.zeros(0, np.bool_), src=none, dst=none, kind=none), (in_ptr, in_src, in_w, in_kind)


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


def replay(
    ex: Exchange,
    ids: NodeIds,
    wanted: list[np.ndarray],
    order: np.ndarray,
    dist: np.ndarray,
    pred: np.ndarray,
    via: np.ndarray,
    args: tuple,
    in_ptr: np.ndarray,
    in_src: np.ndarray,
    in_w: np.ndarray,
) -> None:
    """Rounds of :func:`_advance` and of sending the distances of the nodes other processes hold as ghosts
    (``wanted[q]``: the local nodes process q holds), until every process has settled all its nodes.

    Raises:
        DIError: a round in which no process moved (a cycle across processes).
    """
    known = np.zeros(dist.size, np.bool_)
    sent = [np.zeros(w.size, np.bool_) for w in wanted]
    ghost_by_id = np.argsort(ids.ghost, kind="stable")
    ghost_ids = ids.ghost[ghost_by_id]
    k = 0
    while True:
        k_before = k
        k = _advance(k, order, known, dist, pred, via, *args, in_ptr, in_src, in_w)
        received = _swap_distances(ex, ids, wanted, sent, known, dist, ghost_by_id, ghost_ids)
        state = ex.allgather((k == order.size, k > k_before or received > 0), "replay state")
        if all(done for done, _ in state):
            return
        if not any(moved for _, moved in state):
            from di.errors import DIError

            raise DIError("parallel critical path: the replay made no progress (a cycle across processes)")


def _swap_distances(
    ex: Exchange,
    ids: NodeIds,
    wanted: list[np.ndarray],
    sent: list[np.ndarray],
    known: np.ndarray,
    dist: np.ndarray,
    ghost_by_id: np.ndarray,
    ghost_ids: np.ndarray,
) -> int:
    """One round's exchange: send each process the distances newly known of the nodes it holds as ghosts
    (``sent[q]`` marks those sent before), take the ghosts' distances sent here; returns how many came."""
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
    return received
