"""Laying out a part's graph nodes as the engine does, and indexing them per event.

:func:`lay_out` writes the start and end nodes of graph events in the order
of :func:`di.engine.critical_path_graph.build_graph` (timeline by timeline,
program order with nesting), a batch of whole timelines at a time so that
the layout kernel's sort scratch stays bounded; :func:`index_nodes` fills the
per-event start and end node of a span of laid-out nodes.
"""

from __future__ import annotations

import numpy as np

from di.engine.critical_path_graph import _layout, by_end
from di.engine.window import EventFrame

LAYOUT_BATCH = 1 << 18
"""Graph events laid out per call of the layout kernel (whole timelines): its sort's scratch is ~60 bytes each."""


def lay_out(frame: EventFrame, rows: np.ndarray, ev_loc: np.ndarray, out: tuple, closed: np.ndarray) -> None:
    """The nodes of graph events ``rows`` (ascending) into ``out`` = (event, time_ns, is_end, first_of_loc,
    owner), views of room for ``2 * rows.size`` nodes (``is_end`` and ``first_of_loc`` zeroed), as
    :func:`di.engine.critical_path_graph.build_graph` lays them out; ``closed``: its scratch, one flag per event.
    Timelines are independent there, so they are laid out a batch of whole timelines at a time."""
    if not rows.size:
        return
    loc = ev_loc[rows]
    bounds = _batch_bounds(loc)
    stack = np.empty(min(rows.size, LAYOUT_BATCH) + 1, np.int32)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        r, lc = rows[lo:hi].astype(np.int32), loc[lo:hi].astype(np.int32)
        start, end = frame.start_ns[r], frame.end_ns[r]
        end_order = by_end(lc, end)
        if stack.size <= r.size:
            stack = np.empty(r.size + 1, np.int32)
        _layout(r, lc, start, end, end_order, *(a[2 * lo : 2 * hi] for a in out), closed, stack)


def _batch_bounds(loc: np.ndarray) -> list[int]:
    """Bounds of the batches of whole timelines (``loc`` of the events, grouped by timeline): each batch at most
    :data:`LAYOUT_BATCH` events, or one timeline longer than that."""
    edges = np.concatenate([[0], np.flatnonzero(loc[1:] != loc[:-1]) + 1, [loc.size]])  # timelines' bounds
    bounds = [0]
    while bounds[-1] < loc.size:
        lo = bounds[-1]
        hi = int(edges[np.searchsorted(edges, lo + LAYOUT_BATCH, side="right") - 1])
        bounds.append(hi if hi > lo else int(edges[np.searchsorted(edges, lo, side="right")]))
    return bounds


def index_nodes(
    ev: np.ndarray, is_end: np.ndarray, lo: int, hi: int, start_node: np.ndarray, end_node: np.ndarray
) -> None:
    """``start_node``/``end_node`` (per event row) of the nodes ``lo:hi``."""
    ends = np.flatnonzero(is_end[lo:hi]) + lo
    end_node[ev[ends]] = ends
    del ends
    starts = np.flatnonzero(~is_end[lo:hi]) + lo
    start_node[ev[starts]] = starts
