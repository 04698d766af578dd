"""Lanes: split one timeline's events into properly nested stacks.

A Chrome/Perfetto thread track can only show slices that nest (a child starts
and ends inside its parent). Sources such as async GPU activity or merged
threads produce events that overlap without nesting; instead of dropping them,
each event gets a *lane*: lane 0 is the timeline itself, lanes 1, 2... become
extra tracks beside it.

Rule (per location, events in order of (loc, start_ns, -end_ns), times in ns):
an event goes to the lowest lane whose stack of open events it nests in.
On each lane, open events that end at or before the new event's start are
closed first (``end_ns <= start_ns``: touching is not overlapping); the event
then fits when the lane is empty or the innermost open event ends at or after
the new event's end. Instants (``end_ns == start_ns``) therefore always fit
lane 0. Each lane is checked independently (greedy).

:func:`innermost_points` answers the related question a flow marker poses:
at what time is a given event the innermost open one on its location, so that
a marker placed there binds to it and not to a child that starts with it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.columns import readonly
from di.nesting import readonly_int64

__all__ = ["assign_lanes", "canonical_events", "canonical_lanes", "innermost_points", "lanes_of_rows"]

NO_POINT = np.iinfo(np.int64).min
"""What :func:`innermost_points` returns for an event that is never the innermost one after the bound."""


def canonical_lanes(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The (loc, start_ns, -end_ns) order of the events and the lane of each event in that order.

    Args:
        loc: location of each event (any integer dtype).
        start_ns: start of each event, int64 ns.
        end_ns: end of each event, int64 ns (``>= start_ns``; an instant's is its start).

    Returns:
        (order, lane): ``order`` the rows in (loc, start_ns, -end_ns) order, None when they are in it already (as
        ``events`` is); ``lane`` int32, one per event in that order (0, 1, ...). The kernel checks the order as it
        goes: rows in order cost no pass of their own (a vectorized check was 0.02 CPU-s per 1.2 M events).
    """
    n = len(loc)
    if len(start_ns) != n or len(end_ns) != n:
        raise ValueError(f"lanes: arrays differ in length ({n}, {len(start_ns)}, {len(end_ns)})")
    lane = np.zeros(n, np.int32)
    if n == 0:
        return None, lane
    # one signature whatever the caller has; the kernel's room allocated here (numba's np.empty compiles per caller)
    loc, start_ns, end_ns = (readonly_int64(a) for a in (loc, start_ns, end_ns))
    below, top = np.empty(n, np.int64), np.empty(n, np.int64)
    if _lanes_kernel(loc, start_ns, end_ns, lane, below, top) < 0:
        return None, lane
    order = np.lexsort((-end_ns, start_ns, loc))
    lane[:] = 0
    _lanes_kernel(*(readonly(a[order]) for a in (loc, start_ns, end_ns)), lane, below, top)
    return order, lane


def canonical_events(
    loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, loc, start_ns, end_ns, lane): :func:`canonical_lanes` with the three columns in its order (the
    arrays themselves when ``order`` is None), as the writers lay the events out."""
    order, lane = canonical_lanes(loc, start_ns, end_ns)
    if order is None:
        return None, loc, start_ns, end_ns, lane
    return order, loc[order], start_ns[order], end_ns[order], lane


def assign_lanes(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Lane of each event row (int32), 0 for events that nest on their location; rows in any order
    (:func:`canonical_lanes` on their (loc, start_ns, -end_ns) order; times int64 ns)."""
    return lanes_of_rows(*canonical_lanes(loc, start_ns, end_ns))


def lanes_of_rows(order: np.ndarray | None, lane: np.ndarray) -> np.ndarray:
    """The lanes :func:`canonical_lanes` gives in (loc, start_ns, -end_ns) order, put back on the rows they came from."""
    if order is None:
        return lane
    rows = np.empty_like(lane)
    rows[order] = lane
    return rows


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _lanes_kernel(
    loc: np.ndarray, start: np.ndarray, end: np.ndarray, lane: np.ndarray, below: np.ndarray, top: np.ndarray
) -> int:
    # lane: out, zeroed; below: the event under each one on its lane's stack, -1 at the bottom;
    # top: innermost open event of each lane, -1 when empty; set when a lane opens.
    # Returns -1, or the first row out of (loc, start, -end) order, where it stopped.
    n = loc.shape[0]
    used = 0  # lanes in use on the current location
    for i in range(n):
        s = start[i]
        e = end[i]
        if i > 0:
            if loc[i] != loc[i - 1]:
                if loc[i] < loc[i - 1]:
                    return i
                top[:used] = -1
                used = 0
            elif s < start[i - 1] or (s == start[i - 1] and e > end[i - 1]):
                return i
        k = 0
        while True:
            if k == used:
                top[k] = -1
                used += 1
            t = top[k]
            while t >= 0 and end[t] <= s:
                t = below[t]
            top[k] = t
            if t < 0 or end[t] >= e:
                below[i] = t
                top[k] = i
                lane[i] = k
                break
            k += 1
    return -1


def innermost_points(
    loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, rows: np.ndarray, lower_ns: np.ndarray
) -> np.ndarray:
    """For each queried event, the first time at or after a bound when it is the innermost open event of its location.

    A point in time binds to an event the way Perfetto and di's reader bind a
    flow marker (``s``, or ``f`` with ``bp: "e"``): to the innermost event that
    encloses it (``start_ns <= t < end_ns``, or ``t == start_ns``). Events
    after the queried one (same location, any lane) that enclose ``t`` block it.

    Args:
        loc, start_ns, end_ns: all events, sorted by (loc, start_ns, -end_ns); int64 ns.
        rows: the queried events (positions in those arrays).
        lower_ns: per query, the earliest acceptable time (>= the event's start), int64 ns.

    Returns:
        int64 ns per query, or :data:`NO_POINT` where every time from the bound
        to the event's end is covered by another event.
    """
    out = np.empty(len(rows), np.int64)
    _points_kernel(*(readonly_int64(a) for a in (loc, start_ns, end_ns, rows, lower_ns)), out)
    return out


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _points_kernel(
    loc: np.ndarray, start: np.ndarray, end: np.ndarray, rows: np.ndarray, lower: np.ndarray, out: np.ndarray
) -> None:
    for q in range(rows.shape[0]):
        r = rows[q]
        t = lower[q]
        zero = start[r] == end[r]
        j = r + 1
        while (t < end[r] or (zero and t == start[r])) and j < loc.shape[0] and loc[j] == loc[r] and start[j] <= t:
            if end[j] > t:
                t = end[j]  # covered until this event ends
            elif start[j] == t:
                t += 1  # a zero-length event sits exactly at t
            j += 1
        out[q] = t if t < end[r] or (zero and t == start[r]) else NO_POINT
