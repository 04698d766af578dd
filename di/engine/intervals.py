"""Interval-set algebra: union, intersection, difference, measure, clipping.

An :class:`IntervalSet` holds half-open intervals ``[start_ns, end_ns)`` in
int64 ns, each tagged with an int64 ``group`` (a rank, a (rank, device) scope,
a (rank, step) pair...). A *normal* set is sorted by (group, start) and its
intervals are disjoint and non-adjacent within a group; every operation
returns a normal set. ``union`` sorts once (O(n log n)); intersection and
difference of normal sets are linear merges (O(n + m)). Empty intervals
(``end <= start``) are dropped.

Each numba kernel has a pure-Python reference in ``tests/oracles.py`` used by the
tests to check the kernels on random inputs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler


class IntervalSet(NamedTuple):
    """Intervals ``[start_ns, end_ns)`` tagged by ``group`` (all int64 arrays of one length)."""

    group: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.group.size)


def empty() -> IntervalSet:
    """A set with no intervals."""
    z = np.zeros(0, dtype=np.int64)
    return IntervalSet(z, z.copy(), z.copy())


def _outputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Room for ``n`` intervals (group, start, end), allocated here rather than in the kernels: numba compiles
    its ``np.empty`` once per signature per process, part of every command's cold start (issue 15)."""
    return np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)


@njit(cache=True, nogil=True, _nrt=False)
def _merge_sorted(group, start, end, og, os_, oe):
    """Union of intervals sorted by (group, start) into ``og, os_, oe``; returns how many, or -1 (nothing
    usable written) when the input is not sorted. In place (``og is group``...) is allowed: k never passes i."""
    k = -1
    for i in range(group.size):
        if i > 0 and (group[i] < group[i - 1] or (group[i] == group[i - 1] and start[i] < start[i - 1])):
            return -1
        s = start[i]
        e = end[i]
        if e <= s:
            continue
        if k >= 0 and og[k] == group[i] and s <= oe[k]:
            if e > oe[k]:
                oe[k] = e
        else:
            k += 1
            og[k] = group[i]
            os_[k] = s
            oe[k] = e
    return k + 1


@njit(cache=True, nogil=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _merge_rows(rows, group, start, end, og, os_, oe):
    """Union of the intervals ``rows`` (positions in ``group, start, end``, in (group, start) order) into
    ``og, os_, oe``; returns how many. Reads through ``rows``: no gathered copy of the columns."""
    k = -1
    for i in range(rows.size):
        r = rows[i]
        s = start[r]
        e = end[r]
        if e <= s:
            continue
        if k >= 0 and og[k] == group[r] and s <= oe[k]:
            if e > oe[k]:
                oe[k] = e
        else:
            k += 1
            og[k] = group[r]
            os_[k] = s
            oe[k] = e
    return k + 1


def _readonly(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only contiguous int64 view (one numba signature whatever the caller passes)."""
    a = np.ascontiguousarray(a, dtype=np.int64).view()
    a.flags.writeable = False
    return a


def rows_order(rows: np.ndarray, group: np.ndarray, time_ns: np.ndarray, n_groups: int) -> np.ndarray:
    """``rows`` (int64 positions in ``group`` and ``time_ns``, with ``group[rows]`` in 0..n_groups-1) sorted
    by (group, time), as a new array.

    Sorts one packed int64 key built in place (no second gathered column alive at the sort) when the
    groups and the range of ``time_ns`` fit in it (:func:`_packed_bits`), else falls back to :func:`sort_order`. Stable: rows
    of equal (group, time) keep their order."""
    if not rows.size:
        return rows.copy()
    lo = int(time_ns.min())
    bits = _packed_bits(0, max(n_groups - 1, 0), lo, int(time_ns.max()))
    if bits is None:
        return rows[sort_order(group[rows], time_ns[rows])]
    key = group[rows].astype(np.int64, copy=False)
    key <<= bits
    time = time_ns[rows]
    time -= lo
    key |= time
    del time
    order = np.argsort(key, kind="stable")  # timsort: rows come nearly in order (by end: 5 ms, not 36, for 1.2 M)
    del key
    return rows[order]


def union_rows(
    rows: np.ndarray, group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, n_groups: int
) -> IntervalSet:
    """The union per group of the intervals at ``rows`` (int64 positions in the columns, ``group[rows]`` in
    0..n_groups-1), as a normal set: :func:`union` of the gathered columns without gathering them."""
    rows = rows_order(rows, group, start_ns, n_groups)
    out = _outputs(rows.size)
    k = _merge_rows(rows, _readonly(group), _readonly(start_ns), _readonly(end_ns), *out)
    return IntervalSet(*(a[:k] for a in out))


def union(group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> IntervalSet:
    """The union of arbitrary intervals per group, as a normal set."""
    g = np.asarray(group, dtype=np.int64)
    s = np.asarray(start_ns, dtype=np.int64)
    if g.size and int(g.min()) >= 0:
        return union_rows(np.arange(g.size), g, s, end_ns, int(g.max()) + 1)
    out = _outputs(g.size)
    k = _merge_rows(sort_order(g, s) if g.size else np.arange(0), _readonly(g), _readonly(s), _readonly(end_ns), *out)
    return IntervalSet(*(a[:k] for a in out))


def sort_order(group: np.ndarray, time_ns: np.ndarray, *, stable: bool = False) -> np.ndarray:
    """Permutation sorting by (group, time): one argsort of a packed key when
    groups and the time range fit in it (:func:`_packed_bits`), else a lexsort (always stable).
    ``stable`` keeps the input order among equal (group, time)."""
    lo = int(time_ns.min())
    bits = _packed_bits(int(group.min()), int(group.max()), lo, int(time_ns.max())) if group.size else None
    if bits is not None:
        return np.argsort(_packed(group, time_ns, lo, bits), kind="stable" if stable else "quicksort")
    return np.lexsort((time_ns, group))


def _packed_bits(group_lo: int, group_hi: int, time_lo: int, time_hi: int) -> int | None:
    """The bits of the time part when (group, time - time_lo) pairs of these ranges pack into one int64 key of at
    most 62 bits (:func:`_packed`) that sorts as the pairs do; None when they do not."""
    bits = max(time_hi - time_lo, 1).bit_length()
    return bits if group_lo >= 0 and group_hi.bit_length() + bits <= 62 else None


def _packed(group: np.ndarray, time_ns: np.ndarray, lo: int, bits: int) -> np.ndarray:
    """The int64 keys ``group << bits | (time_ns - lo)`` (:func:`_packed_bits`)."""
    return (group.astype(np.int64) << bits) | (time_ns - lo)


def union_sets(*sets: IntervalSet) -> IntervalSet:
    """The union of normal sets, as a normal set (linear merges)."""
    out = sets[0] if sets else empty()
    for other in sets[1:]:
        merged = _outputs(len(out) + len(other))
        k = _merge_two(*out, *other, *merged)
        out = IntervalSet(*(a[:k] for a in merged))
    return out


@njit(cache=True, nogil=True, _nrt=False)
def _merge_two(ag, as_, ae, bg, bs, be, g, s, e):
    """Merge two normal sets into ``g, s, e`` (room for both), then their union in place; returns its size."""
    n = ag.size + bg.size
    i = j = 0
    for k in range(n):
        if j >= bg.size or (i < ag.size and (ag[i] < bg[j] or (ag[i] == bg[j] and as_[i] <= bs[j]))):
            g[k], s[k], e[k] = ag[i], as_[i], ae[i]
            i += 1
        else:
            g[k], s[k], e[k] = bg[j], bs[j], be[j]
            j += 1
    return _merge_sorted(g, s, e, g, s, e)


@njit(cache=True, nogil=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _combine(ag, as_, ae, bg, bs, be, keep_b, og, os_, oe):
    # keep_b True: a ∩ b; False: a \ b.  Both inputs normal, so the result has at
    # most na + nb intervals (each b interval ends at most one piece of a): the room in og, os_, oe.
    # Comparisons rather than min/max, one store per statement: numba compiles each builtin overload it
    # meets once per process, on every analysing command's first run (issue 15).
    nb = bg.size
    k = 0
    j = 0
    for i in range(ag.size):
        g = ag[i]
        cur = as_[i]
        end = ae[i]
        while j < nb and (bg[j] < g or (bg[j] == g and be[j] <= cur)):
            j += 1
        jj = j
        while jj < nb and bg[jj] == g and bs[jj] < end:
            lo = bs[jj]
            if cur > lo:
                lo = cur
            hi = be[jj]
            if end < hi:
                hi = end
            if keep_b:
                if hi > lo:
                    og[k] = g
                    os_[k] = lo
                    oe[k] = hi
                    k += 1
            else:
                if lo > cur:
                    og[k] = g
                    os_[k] = cur
                    oe[k] = lo
                    k += 1
                if hi > cur:
                    cur = hi
            jj += 1
        if not keep_b and end > cur:
            og[k] = g
            os_[k] = cur
            oe[k] = end
            k += 1
    return k


def _combined(a: IntervalSet, b: IntervalSet, keep_b: bool) -> IntervalSet:
    out = _outputs(len(a) + len(b))
    k = _combine(*a, *b, keep_b, *out)
    return IntervalSet(*(x[:k] for x in out))


def intersect(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a ∩ b`` per group (both normal)."""
    return _combined(a, b, True)


def subtract(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a \\ b`` per group (both normal)."""
    return _combined(a, b, False)


def measure(s: IntervalSet, n_groups: int) -> np.ndarray:
    """Total length in ns of each group 0..n_groups-1 (int64)."""
    return group_sum(s.group, s.end_ns - s.start_ns, n_groups)


# The scatters below are numpy's ufunc.at (exact in int64, ~1.5x a numba loop, which is negligible next to
# the sorts around them): a numba kernel each would add its compile to every analysis's cold start.


def group_sum(group: np.ndarray, value: np.ndarray, n_groups: int) -> np.ndarray:
    """Sum of int64 ``value`` per group 0..n_groups-1."""
    out = np.zeros(n_groups, np.int64)
    np.add.at(out, group, value)
    return out


def pair_positions(
    group_sorted: np.ndarray, time_sorted: np.ndarray, group: np.ndarray, time: np.ndarray
) -> np.ndarray:
    """For each pair (``group[i]``, ``time[i]``), the number of pairs of (``group_sorted``, ``time_sorted``), which are
    sorted by (group, time), that come before it: ``np.searchsorted(side="left")`` over pairs, int64.

    One search of packed int64 keys (:func:`_packed`) when the groups and the range of times fit in them, else one
    lexsort of both sets of pairs."""
    n, m = group_sorted.size, group.size
    if not n or not m:
        return np.zeros(m, np.int64)
    lo = min(int(time_sorted.min()), int(time.min()))
    bits = _packed_bits(
        min(int(group_sorted.min()), int(group.min())),
        max(int(group_sorted.max()), int(group.max())),
        lo,
        max(int(time_sorted.max()), int(time.max())),
    )
    if bits is not None:
        keys = _packed(group_sorted, time_sorted, lo, bits)
        return np.searchsorted(keys, _packed(group, time, lo, bits), side="left").astype(np.int64)
    # the queries first among equal pairs: a query's place less the queries before it counts the sorted pairs before it
    order = np.lexsort(
        (np.r_[np.ones(n, np.int8), np.zeros(m, np.int8)], np.r_[time_sorted, time], np.r_[group_sorted, group])
    )
    at = np.flatnonzero(order >= n)
    out = np.empty(m, np.int64)
    out[order[at] - n] = at - np.arange(m)
    return out


def group_extent(group: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """First start and last end per group (both 0 for a group with no interval), int64."""
    lo = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, group, start)
    np.maximum.at(hi, group, end)
    none = hi < lo
    lo[none] = 0
    hi[none] = 0
    return lo, hi


def scatter_max(index: np.ndarray, value: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[index[i]] = max(out[index[i]], value[i])`` in place; returns ``out``."""
    np.maximum.at(out, index, value)
    return out


def clip(s: IntervalSet, lo_ns: np.ndarray, hi_ns: np.ndarray) -> IntervalSet:
    """Each interval cut to ``[lo_ns[group], hi_ns[group])``; emptied ones dropped."""
    st = np.maximum(s.start_ns, lo_ns[s.group])
    en = np.minimum(s.end_ns, hi_ns[s.group])
    keep = en > st
    return IntervalSet(s.group[keep], st[keep], en[keep])
