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


@njit(cache=True)
def _before(p, q, start_ns, end_ns, idx):
    """Event p sorts before event q by (start_ns, -end_ns, idx)."""
    if start_ns[p] != start_ns[q]:
        return start_ns[p] < start_ns[q]
    if end_ns[p] != end_ns[q]:
        return end_ns[p] > end_ns[q]
    return idx[p] < idx[q]


@njit(cache=True)
def _sort_run(seg, start_ns, end_ns, idx):
    """``seg`` (event indices) sorted by (start_ns, -end_ns, idx), in O(n + m log m)
    for m events out of order: those below the running maximum are taken out,
    sorted, and merged back into the ordered rest."""
    n = seg.size
    kept = np.empty(n, dtype=np.int64)
    out_of_order = np.empty(n, dtype=np.int64)
    nk = 0
    no = 0
    for j in range(n):
        q = seg[j]
        if nk == 0 or not _before(q, kept[nk - 1], start_ns, end_ns, idx):
            kept[nk] = q
            nk += 1
        else:
            out_of_order[no] = q
            no += 1
    rest = out_of_order[:no]
    rest = rest[np.argsort(idx[rest], kind="mergesort")]
    rest = rest[np.argsort(-end_ns[rest], kind="mergesort")]
    rest = rest[np.argsort(start_ns[rest], kind="mergesort")]
    out = np.empty(n, dtype=np.int64)
    i = 0
    j = 0
    for k in range(n):
        if j >= no or (i < nk and not _before(rest[j], kept[i], start_ns, end_ns, idx)):
            out[k] = kept[i]
            i += 1
        else:
            out[k] = rest[j]
            j += 1
    return out


@njit(cache=True)
def nesting_order(loc, start_ns, end_ns, idx):
    """The permutation that sorts events by (loc, start_ns, -end_ns, idx), the
    order :func:`nest` needs.

    ``loc`` is a dense timeline index (0 <= loc < number of timelines). A
    stable counting sort by ``loc`` keeps each timeline's events in their input
    order; a timeline whose events are out of order is sorted in time linear in
    its length plus m log m for its m events that come too late (traces are
    written nearly in time order).
    """
    n = loc.size
    nloc = 0
    for k in range(n):
        if loc[k] + 1 > nloc:
            nloc = loc[k] + 1
    first = np.zeros(nloc + 1, dtype=np.int64)
    for k in range(n):
        first[loc[k] + 1] += 1
    for t in range(nloc):
        first[t + 1] += first[t]
    fill = first[:nloc].copy()
    perm = np.empty(n, dtype=np.int64)
    for k in range(n):
        t = loc[k]
        perm[fill[t]] = k
        fill[t] += 1
    for t in range(nloc):
        a, b = first[t], first[t + 1]
        for j in range(a + 1, b):
            if _before(perm[j], perm[j - 1], start_ns, end_ns, idx):
                perm[a:b] = _sort_run(perm[a:b], start_ns, end_ns, idx)
                break
    return perm


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
