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

from di.nesting import readonly_int64

__all__ = ["assign_lanes", "innermost_points", "is_sorted"]

NO_POINT = np.iinfo(np.int64).min
"""What :func:`innermost_points` returns for an event that is never the innermost one after the bound."""


def assign_lanes(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Lane of each event, 0 for events that nest on their location.

    Args:
        loc: location of each event (any integer dtype), grouped: equal values adjacent.
        start_ns: start of each event, int64 ns.
        end_ns: end of each event, int64 ns (``>= start_ns``).

    The three arrays are sorted by (loc, start_ns, -end_ns), as ``events`` is.

    Returns:
        int32 array, one lane per event (0, 1, ...).
    """
    n = len(loc)
    if len(start_ns) != n or len(end_ns) != n:
        raise ValueError(f"assign_lanes: arrays differ in length ({n}, {len(start_ns)}, {len(end_ns)})")
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    lane = np.zeros(n, np.int32)
    # one signature whatever the caller has; the kernel's room allocated here (numba's np.empty compiles per caller)
    _lanes_kernel(
        *(readonly_int64(a) for a in (loc, start_ns, end_ns)), lane, np.empty(n, np.int64), np.empty(n, np.int64)
    )
    return lane


def is_sorted(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> bool:
    """True when the events are in (loc, start_ns, -end_ns) order, as :func:`assign_lanes` needs."""
    if len(loc) < 2:
        return True
    loc, start_ns, end_ns = (np.asarray(a, dtype=np.int64) for a in (loc, start_ns, end_ns))
    d_loc = np.diff(loc)
    tie = d_loc == 0
    d_start = np.diff(start_ns)
    # vectorised (a numba kernel would add its compile to every writer's cold start)
    return not (
        (d_loc < 0).any() or (tie & (d_start < 0)).any() or (tie & (d_start == 0) & (np.diff(end_ns) > 0)).any()
    )


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _lanes_kernel(
    loc: np.ndarray, start: np.ndarray, end: np.ndarray, lane: np.ndarray, below: np.ndarray, top: np.ndarray
) -> None:
    # lane: out, zeroed; below: the event under each one on its lane's stack, -1 at the bottom;
    # top: innermost open event of each lane, -1 when empty; set when a lane opens
    n = loc.shape[0]
    used = 0  # lanes in use on the current location
    for i in range(n):
        if i > 0 and loc[i] != loc[i - 1]:
            top[:used] = -1
            used = 0
        s = start[i]
        e = end[i]
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
