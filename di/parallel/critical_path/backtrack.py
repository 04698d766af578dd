"""Walking the critical path back from its sink across processes.

:func:`path_sink` finds the path's end (the node of the longest distance,
the last one on a tie) among every process's nodes; :func:`backtrack` walks
the path back from there (:func:`_walk`), handing over to the owner of each
ghost it crosses, and keeps this process's stretches of it as frames of what
process 0 needs to build the result (:func:`_steps_frame`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from numba import njit

from di.engine.critical_path import _MIN, _local_weight
from di.engine.critical_path_graph import LOCAL, Graph
from di.engine.window import EventFrame
from di.parallel.critical_path.node_ids import NodeIds
from di.parallel.exchange import Exchange
from di.parallel.ownership import Part


def path_sink(ex: Exchange, ids: NodeIds, dist: np.ndarray) -> tuple[int, int, int]:
    """(length in ns, owning process, id) of the path's last node: of the longest distance, the largest id."""
    best = (-1, -1)
    if ids.n_own:
        length = int(dist[: ids.n_own].max())
        # owned ids grow with the node: the last node of the longest distance has the largest id
        best = (length, int(ids.of(np.flatnonzero(dist[: ids.n_own] == length)[-1:])[0]))
    every = ex.allgather(best, "sink")
    sink_p = max(range(ex.size), key=lambda p: every[p])
    length, sink = every[sink_p]
    return length, sink_p, sink


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


def backtrack(
    ex: Exchange,
    part: Part,
    g: Graph,
    ids: NodeIds,
    sink_p: int,
    sink: int,
    pred: np.ndarray,
    via: np.ndarray,
    edges: tuple[np.ndarray, ...],
    args: tuple[np.ndarray, ...],
    frame: EventFrame,
) -> list[tuple[int, pl.DataFrame]]:
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


def _steps_frame(
    part: Part,
    g: Graph,
    frame: EventFrame,
    u: np.ndarray,
    v: np.ndarray,
    kind: np.ndarray,
    w: np.ndarray,
    arrival: np.ndarray,
    akind: np.ndarray,
) -> pl.DataFrame:
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
