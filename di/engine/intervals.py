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


@njit(cache=True, nogil=True)
def _merge_sorted(group, start, end):
    n = group.size
    og = np.empty(n, np.int64)
    os_ = np.empty(n, np.int64)
    oe = np.empty(n, np.int64)
    k = -1
    for i in range(n):
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
    return og[: k + 1], os_[: k + 1], oe[: k + 1]


def union(group: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> IntervalSet:
    """The union of arbitrary intervals per group, as a normal set."""
    g = np.asarray(group, dtype=np.int64)
    s = np.asarray(start_ns, dtype=np.int64)
    e = np.asarray(end_ns, dtype=np.int64)
    if g.size and not _sorted(g, s):
        order = sort_order(g, s)
        g, s, e = g[order], s[order], e[order]
    return IntervalSet(*_merge_sorted(g, s, e))


def sort_order(group: np.ndarray, time_ns: np.ndarray, *, stable: bool = False) -> np.ndarray:
    """Permutation sorting by (group, time): one argsort of a packed key when
    groups and the time range fit in 63 bits, else a lexsort (always stable).
    ``stable`` keeps the input order among equal (group, time)."""
    lo, hi = int(time_ns.min()), int(time_ns.max())
    bits = max(hi - lo, 1).bit_length()
    gmax = int(group.max()) if group.size else 0
    if group.size and int(group.min()) >= 0 and gmax.bit_length() + bits <= 62:
        key = (group.astype(np.int64) << bits) | (time_ns - lo)
        return np.argsort(key, kind="stable" if stable else "quicksort")
    return np.lexsort((time_ns, group))


@njit(cache=True, _nrt=False)
def _sorted(g, s):
    for i in range(1, g.size):
        if g[i] < g[i - 1] or (g[i] == g[i - 1] and s[i] < s[i - 1]):
            return False
    return True


def union_sets(*sets: IntervalSet) -> IntervalSet:
    """The union of normal sets, as a normal set (linear merges)."""
    out = sets[0] if sets else empty()
    for other in sets[1:]:
        out = IntervalSet(*_merge_two(*out, *other))
    return out


@njit(cache=True, nogil=True)
def _merge_two(ag, as_, ae, bg, bs, be):
    n = ag.size + bg.size
    g = np.empty(n, np.int64)
    s = np.empty(n, np.int64)
    e = np.empty(n, np.int64)
    i = j = 0
    for k in range(n):
        if j >= bg.size or (i < ag.size and (ag[i] < bg[j] or (ag[i] == bg[j] and as_[i] <= bs[j]))):
            g[k], s[k], e[k] = ag[i], as_[i], ae[i]
            i += 1
        else:
            g[k], s[k], e[k] = bg[j], bs[j], be[j]
            j += 1
    return _merge_sorted(g, s, e)


@njit(cache=True, nogil=True)
def _combine(ag, as_, ae, bg, bs, be, keep_b):
    # keep_b True: a ∩ b; False: a \ b.  Both inputs normal, so the result has at
    # most na + nb intervals (each b interval ends at most one piece of a).
    na, nb = ag.size, bg.size
    og = np.empty(na + nb, np.int64)
    os_ = np.empty(na + nb, np.int64)
    oe = np.empty(na + nb, np.int64)
    k = 0
    j = 0
    for i in range(na):
        g = ag[i]
        cur = as_[i]
        end = ae[i]
        while j < nb and (bg[j] < g or (bg[j] == g and be[j] <= cur)):
            j += 1
        jj = j
        while jj < nb and bg[jj] == g and bs[jj] < end:
            lo = max(cur, bs[jj])
            hi = min(end, be[jj])
            if keep_b and hi > lo:
                og[k], os_[k], oe[k] = g, lo, hi
                k += 1
            elif not keep_b:
                if lo > cur:
                    og[k], os_[k], oe[k] = g, cur, lo
                    k += 1
                cur = max(cur, hi)
            jj += 1
        if not keep_b and end > cur:
            og[k], os_[k], oe[k] = g, cur, end
            k += 1
    return og[:k], os_[:k], oe[:k]


def intersect(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a ∩ b`` per group (both normal)."""
    return IntervalSet(*_combine(*a, *b, True))


def subtract(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a \\ b`` per group (both normal)."""
    return IntervalSet(*_combine(*a, *b, False))


def measure(s: IntervalSet, n_groups: int) -> np.ndarray:
    """Total length in ns of each group 0..n_groups-1 (int64)."""
    return group_sum(s.group, s.end_ns - s.start_ns, n_groups)


@njit(cache=True, nogil=True)
def group_sum(group, value, n_groups):
    """Sum of int64 ``value`` per group 0..n_groups-1 (``np.add.at`` without its overhead)."""
    out = np.zeros(n_groups, np.int64)
    for i in range(group.size):
        out[group[i]] += value[i]
    return out


@njit(cache=True, nogil=True)
def group_extent(group, start, end, n_groups):
    """First start and last end per group (both 0 for a group with no interval)."""
    lo = np.full(n_groups, np.iinfo(np.int64).max, np.int64)
    hi = np.full(n_groups, np.iinfo(np.int64).min, np.int64)
    for i in range(group.size):
        g = group[i]
        if start[i] < lo[g]:
            lo[g] = start[i]
        if end[i] > hi[g]:
            hi[g] = end[i]
    for g in range(n_groups):
        if hi[g] < lo[g]:
            lo[g] = 0
            hi[g] = 0
    return lo, hi


@njit(cache=True, nogil=True, _nrt=False)
def scatter_max(index, value, out):
    """``out[index[i]] = max(out[index[i]], value[i])`` in place; returns ``out``."""
    for i in range(index.size):
        if value[i] > out[index[i]]:
            out[index[i]] = value[i]
    return out


def clip(s: IntervalSet, lo_ns: np.ndarray, hi_ns: np.ndarray) -> IntervalSet:
    """Each interval cut to ``[lo_ns[group], hi_ns[group])``; emptied ones dropped."""
    st = np.maximum(s.start_ns, lo_ns[s.group])
    en = np.minimum(s.end_ns, hi_ns[s.group])
    keep = en > st
    return IntervalSet(s.group[keep], st[keep], en[keep])
