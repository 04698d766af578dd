"""Nesting of events on their timelines: ``depth`` and ``parent`` columns.

Definition: events are sorted by (loc, start_ns, -end_ns). An event's parent
is the innermost earlier event on the same timeline that is still open at its
start (``parent.start_ns <= start_ns < parent.end_ns``, or an instant at the
parent's start); depth is the number of such open ancestors. An event that
starts inside an open one but ends after it (overlap without nesting, common
in Kineto traces) still gets that parent; writers that need proper nesting
move such events to lanes (:mod:`di.convert.lanes`).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def nest(loc, start_ns, end_ns):
    """Return (depth int32, parent int64 with -1 for none) for sorted events."""
    n = loc.size
    depth = np.zeros(n, dtype=np.int32)
    parent = np.full(n, -1, dtype=np.int64)
    stack = np.empty(max(n, 1), dtype=np.int64)
    top = 0
    for k in range(n):
        if k > 0 and loc[k] != loc[k - 1]:
            top = 0
        s = start_ns[k]
        while top > 0:
            p = stack[top - 1]
            if s < end_ns[p] or (s == start_ns[p] and (end_ns[k] == s or end_ns[p] == start_ns[p])):
                break
            top -= 1
        if top > 0:
            parent[k] = stack[top - 1]
        depth[k] = top
        stack[top] = k
        top += 1
    return depth, parent


def nest_reference(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure-Python reference of :func:`nest` (for tests)."""
    depth = np.zeros(loc.size, dtype=np.int32)
    parent = np.full(loc.size, -1, dtype=np.int64)
    stack: list[int] = []
    for k in range(loc.size):
        if k and loc[k] != loc[k - 1]:
            stack = []
        s = start_ns[k]
        while stack:
            p = stack[-1]
            if s < end_ns[p] or (s == start_ns[p] and (end_ns[k] == s or end_ns[p] == start_ns[p])):
                break
            stack.pop()
        if stack:
            parent[k] = stack[-1]
        depth[k] = len(stack)
        stack.append(k)
    return depth, parent
