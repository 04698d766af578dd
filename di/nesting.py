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


def nest(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (depth int32, parent int64 with -1 for none) for sorted events.
    Integer inputs of any width (one compiled kernel: all go in as read-only int64)."""
    return _nest(*(readonly_int64(a) for a in (loc, start_ns, end_ns)))


@njit(cache=True)
def _nest(loc, start_ns, end_ns):
    """:func:`nest` on read-only int64 arrays."""
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
def _merge_sort(items, start_ns, end_ns, idx):
    """``items`` (event indices) sorted by (start_ns, -end_ns, idx): bottom-up merge sort."""
    n = items.size
    a = items.copy()
    b = np.empty(n, dtype=np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j = lo, mid
            for k in range(lo, hi):
                if i < mid and (j >= hi or not _before(a[j], a[i], start_ns, end_ns, idx)):
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
        a, b = b, a
        width *= 2
    return a


@njit(cache=True)
def _sort_run(perm, lo, hi, start_ns, end_ns, idx):
    """Sort perm[lo:hi] (event indices) in place by (start_ns, -end_ns, idx), in
    O(n + m log m) for m events out of order: those below the running maximum are
    taken out, sorted, and merged back into the ordered rest."""
    n = hi - lo
    kept = np.empty(n, dtype=np.int64)
    late = np.empty(n, dtype=np.int64)
    nk = 0
    nl = 0
    for j in range(lo, hi):
        q = perm[j]
        if nk == 0 or not _before(q, kept[nk - 1], start_ns, end_ns, idx):
            kept[nk] = q
            nk += 1
        else:
            late[nl] = q
            nl += 1
    late = _merge_sort(late[:nl], start_ns, end_ns, idx)
    i = 0
    j = 0
    for k in range(lo, hi):
        if j >= nl or (i < nk and not _before(late[j], kept[i], start_ns, end_ns, idx)):
            perm[k] = kept[i]
            i += 1
        else:
            perm[k] = late[j]
            j += 1


def nesting_order(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The permutation that sorts events by (loc, start_ns, -end_ns, idx); see :func:`_nesting_order`.
    Integer inputs of any width (one compiled kernel: all go in as int64)."""
    return _nesting_order(*(readonly_int64(a) for a in (loc, start_ns, end_ns, idx)))


def readonly_int64(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only contiguous int64 array (a view when it is one already),
    so that every call has the same numba signature."""
    a = np.ascontiguousarray(a, dtype=np.int64).view()
    a.flags.writeable = False
    return a


@njit(cache=True)
def _nesting_order(loc, start_ns, end_ns, idx):
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
    fill = np.empty(nloc, dtype=np.int64)
    for t in range(nloc):
        fill[t] = first[t]
    perm = np.empty(n, dtype=np.int64)
    for k in range(n):
        t = loc[k]
        perm[fill[t]] = k
        fill[t] += 1
    for t in range(nloc):
        a, b = first[t], first[t + 1]
        for j in range(a + 1, b):
            if _before(perm[j], perm[j - 1], start_ns, end_ns, idx):
                if b - a <= 16:
                    _insertion_sort(perm, a, b, start_ns, end_ns, idx)
                else:
                    _sort_run(perm, a, b, start_ns, end_ns, idx)
                break
    return perm


@njit(cache=True)
def _insertion_sort(perm, a, b, start_ns, end_ns, idx):
    """Sort perm[a:b] in place by (start_ns, -end_ns, idx): for short runs."""
    for j in range(a + 1, b):
        q = perm[j]
        k = j
        while k > a and _before(q, perm[k - 1], start_ns, end_ns, idx):
            perm[k] = perm[k - 1]
            k -= 1
        perm[k] = q
