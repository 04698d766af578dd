"""Nesting of events on their timelines: ``depth`` and ``parent`` columns.

Definition: events are sorted by (loc, start_ns, -end_ns). An event's parent
is the innermost earlier event on the same timeline that is still open at its
start (``parent.start_ns <= start_ns < parent.end_ns``, or an instant at the
parent's start); depth is the number of such open ancestors. An event that
starts inside an open one but ends after it (overlap without nesting, common
in Kineto traces) still gets that parent; writers that need proper nesting
move such events to lanes (:mod:`di.convert.lanes`).

:func:`enclosing` (:func:`enclosing_all`) and :func:`names_at` read the columns back: the ancestor of
given rows that has some mark (the outermost operator around a launch or an
allocation), and names of rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler


def nest(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (depth int32, parent int64 with -1 for none) for sorted events.
    Integer inputs of any width (one compiled kernel: all go in as read-only int64)."""
    n = np.asarray(loc).size
    depth = np.zeros(n, dtype=np.int32)
    parent = np.full(n, -1, dtype=np.int64)
    # The outputs and the kernel's stack are made here: numba's np.zeros/np.full/np.empty
    # overloads compile again in every kernel that calls them.
    _nest(*(readonly_int64(a) for a in (loc, start_ns, end_ns)), depth, parent, np.empty(n, dtype=np.int64))
    return depth, parent


@njit(cache=True, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _nest(loc, start_ns, end_ns, depth, parent, stack):
    """:func:`nest` on read-only int64 arrays, into ``depth`` (zeros) and ``parent`` (-1s);
    ``stack`` is scratch of the same length."""
    top = 0
    for k in range(loc.size):
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


def nesting_order(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The permutation that sorts events by (loc, start_ns, -end_ns, idx), stably: the
    order :func:`nest` needs. ``loc`` is a dense timeline index (0 <= loc < number of
    timelines); integer inputs of any width.

    numpy's stable sorts are fast on nearly sorted keys (timsort; radix for 16-bit
    keys) and traces are written nearly in time order, so this sorts by start, then
    by timeline, and then only the few groups of equal (timeline, start) whose ends
    or ``idx`` are out of order by the full key: a four-key ``np.lexsort`` of all
    events is several times slower on big traces.
    """
    loc, start_ns, end_ns, idx = (np.asarray(a) for a in (loc, start_ns, end_ns, idx))
    if loc.size == 0:
        return np.zeros(0, dtype=np.int64)
    start_ns = start_ns.astype(np.int64, copy=False)
    # a timeline index that fits sorts as uint16; the ends and idx are gathered only for the
    # neighbours of equal (timeline, start), whose order they decide
    narrow = loc.astype(np.uint16) if 0 <= loc.min() and loc.max() < 1 << 16 else loc.astype(np.int64, copy=False)
    perm = np.argsort(start_ns, kind="stable")
    perm = perm[np.argsort(narrow[perm], kind="stable")]
    tl, s = narrow[perm], start_ns[perm]
    same_start = (tl[1:] == tl[:-1]) & (s[1:] == s[:-1])
    pairs = np.flatnonzero(same_start)
    if not pairs.size:
        return perm
    first, second = perm[pairs], perm[pairs + 1]
    e1, e2 = end_ns[first].astype(np.int64, copy=False), end_ns[second].astype(np.int64, copy=False)
    i1, i2 = idx[first].astype(np.int64, copy=False), idx[second].astype(np.int64, copy=False)
    tied = (e2 > e1) | ((e2 == e1) & (i2 < i1))
    if not tied.any():
        return perm
    # Whole groups of equal (timeline, start) with a pair out of order; they are
    # contiguous, so sorting their rows by the full key keeps each in its positions.
    group = np.concatenate(([0], np.cumsum(~same_start)))
    unsorted = np.zeros(int(group[-1]) + 1, dtype=np.bool_)
    unsorted[group[1:][pairs[tied]]] = True
    rows = np.flatnonzero(unsorted[group])
    at = perm[rows]
    perm[rows] = at[
        np.lexsort((idx[at].astype(np.int64, copy=False), -end_ns[at].astype(np.int64, copy=False), s[rows], tl[rows]))
    ]
    return perm


def readonly_int64(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only contiguous int64 array (a view when it is one already),
    so that every call has the same numba signature."""
    a = np.ascontiguousarray(a, dtype=np.int64).view()
    a.flags.writeable = False
    return a


def parent_rows(events: pl.DataFrame) -> np.ndarray:
    """The events' ``parent`` column as int64 rows, -1 for none (the input :func:`enclosing` walks)."""
    return events.get_column("parent").fill_null(-1).to_numpy().astype(np.int64)


def enclosing(parent: np.ndarray, rows: np.ndarray, marked: np.ndarray, *, outermost: bool) -> np.ndarray:
    """For each of ``rows`` (event rows, -1: none), the row of its outermost (or innermost) ancestor whose
    ``marked`` is true, by the ``parent`` column (-1 for none); -1 where there is none (:func:`enclosing_all`)."""
    at = np.asarray(rows, dtype=np.int64)
    return enclosing_all(parent, marked, outermost=outermost)[np.where(at >= 0, at, parent.size)]


def enclosing_all(parent: np.ndarray, marked: np.ndarray, *, outermost: bool) -> np.ndarray:
    """For every event and one more (position ``parent.size``: "no event", -1), the row of its outermost (or
    innermost) ancestor whose ``marked`` is true; -1 where there is none.

    One pass in row order (:func:`_enclosing`): a parent row comes before its children in a trace's order, so
    each event reads its parent's answer; a parent stored after its child is resolved first on the way up. Any
    depth costs the same: pointer jumping in numpy (log2 of the deepest nesting rounds of gathers, 10 for the
    depth of 752 that overlapping Kineto events reach) took 0.12 CPU-s per call on 1.2 M events."""
    n = parent.size
    best = np.empty(n + 1, dtype=np.int64)
    hit = np.ascontiguousarray(marked, dtype=np.bool_).view()
    hit.flags.writeable = False  # read-only, as the parent column: one compiled signature
    _enclosing(readonly_int64(parent), hit, np.bool_(outermost), best, np.zeros(n, np.uint8), np.empty(n, np.int64))
    return best


@njit(cache=True, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _enclosing(parent, marked, outermost, best, state, stack):
    """:func:`enclosing_all` into ``best`` (n + 1); ``state`` (zeros: unresolved, 1: on the walk, 2: resolved) and
    ``stack`` are scratch of n. A parent out of range, or one met again on the same walk (a cycle, which a sound
    trace never has), counts as none."""
    n = parent.size
    best[n] = -1
    for i in range(n):
        if state[i] == 2:
            continue
        top = 0
        v = i
        while 0 <= v < n and state[v] == 0:
            state[v] = 1
            stack[top] = v
            top += 1
            v = parent[v]
        while top > 0:
            top -= 1
            w = stack[top]
            p = parent[w]
            found = -1
            if 0 <= p < n and state[p] == 2:
                b = best[p]
                if outermost:
                    found = b if b >= 0 else (p if marked[p] else -1)
                else:
                    found = p if marked[p] else b
            best[w] = found
            state[w] = 2


def names_at(names: pl.Series, rows: np.ndarray) -> pl.Series:
    """The ``names`` (an events ``name`` column) of ``rows``, as text; null where a row is -1. Only the rows
    gathered are cast from the categorical."""
    rows = np.asarray(rows, dtype=np.int64)
    picked = pl.DataFrame({"name": names.gather(np.maximum(rows, 0)).cast(pl.String), "found": rows >= 0})
    return picked.select(pl.when(pl.col("found")).then(pl.col("name"))).to_series()
