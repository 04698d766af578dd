"""Interval kernels against their pure-Python reference, on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import oracles

from di.engine import intervals as iv

spans = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 20)), max_size=30)


def _set(items):
    g = np.array([x[0] for x in items], np.int64)
    s = np.array([x[1] for x in items], np.int64)
    e = s + np.array([x[2] for x in items], np.int64)
    return g, s, e


def _tuples(s: iv.IntervalSet):
    return list(zip(s.group.tolist(), s.start_ns.tolist(), s.end_ns.tolist()))


@settings(max_examples=150, deadline=None)
@given(spans, spans)
def test_kernels_match_reference(a_items, b_items):
    a = iv.union(*_set(a_items))
    b = iv.union(*_set(b_items))
    ra = oracles.union_reference(*_set(a_items))
    rb = oracles.union_reference(*_set(b_items))
    assert _tuples(a) == ra
    pa, pb = oracles.points_reference(ra), oracles.points_reference(rb)
    assert oracles.points_reference(_tuples(iv.intersect(a, b))) == pa & pb
    assert oracles.points_reference(_tuples(iv.subtract(a, b))) == pa - pb
    assert oracles.points_reference(_tuples(iv.union_sets(a, b))) == pa | pb
    for s in (iv.intersect(a, b), iv.subtract(a, b)):
        assert _tuples(iv.union(*s)) == _tuples(s), "results are normal sets"
    m = iv.measure(a, 4)
    for g in range(4):
        assert m[g] == sum(1 for p in pa if p[0] == g)


@settings(max_examples=100, deadline=None)
@given(spans, st.lists(st.booleans(), max_size=30), st.booleans())
def test_union_rows_is_union_of_the_rows(items, picked, wide):
    """Read through row positions (ungrouped rows elsewhere marked -1; a time range too wide for one
    packed key takes the fallback sort): the same normal set as the union of the gathered columns."""
    g, s, e = _set(items)
    rows = np.flatnonzero(np.resize(np.asarray(picked + [True], bool), g.size))
    g_all = np.full(g.size, -1, np.int64)
    g_all[rows] = g[rows]
    if wide and s.size:
        s[0], e[0] = -(2**61), -(2**61)  # an empty interval that only widens the range
    want = oracles.union_reference(g[rows], s[rows], e[rows])
    assert _tuples(iv.union_rows(rows, g_all, s, e, 4)) == want
    assert _tuples(iv.union(g[rows] - 2, s[rows], e[rows])) == [(x - 2, a, b) for x, a, b in want]


def test_union_never_sums_overlaps():
    s = iv.union(np.zeros(3, np.int64), np.array([0, 5, 20]), np.array([10, 15, 30]))
    assert _tuples(s) == [(0, 0, 15), (0, 20, 30)]
    assert iv.measure(s, 1)[0] == 25
    clipped = iv.clip(s, np.array([12]), np.array([25]))
    assert _tuples(clipped) == [(0, 12, 15), (0, 20, 25)]


events = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 15), st.integers(1, 6)), max_size=25)


@settings(max_examples=100, deadline=None)
@given(events, st.lists(st.booleans(), min_size=3, max_size=3))
def test_breakdown_sweep_matches_reference(items, host):
    from types import SimpleNamespace

    from oracles import sweep_reference

    from di.engine.breakdown import _sweep_arrays

    g = np.array([x[0] for x in items], np.int64)
    s = np.array([x[1] for x in items], np.int64)
    e = s + np.array([x[2] for x in items], np.int64)
    a = np.array([x[3] for x in items], np.int8)
    keep = e > s
    g, s, e, a = g[keep], s[keep], e[keep], a[keep]
    host_group = np.array(host)
    frame = SimpleNamespace(start_ns=s, end_ns=e, activity=a, call_only=np.zeros(s.size, bool))
    got = _sweep_arrays(frame, g, np.arange(g.size), 3, host_group)
    want = sweep_reference(g, s, e, a, host_group, 3)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(-3, 3)), max_size=40),
    st.lists(st.tuples(st.integers(-1, 6), st.integers(-4, 4)), max_size=20),
    st.sampled_from([0, 2**61, -(2**62)]),
)
def test_pair_positions_is_searchsorted_over_pairs(sorted_items, queries, shift):
    """Each query pair's count of the sorted pairs before it, as Python's bisect over tuples gives it; with times
    near int64's ends the packed keys do not fit and the lexsort path answers the same."""
    import bisect

    pairs = sorted(sorted_items)
    g = np.array([p[0] for p in pairs], np.int64)
    t = np.array([p[1] for p in pairs], np.int64) + shift
    qg = np.array([q[0] for q in queries], np.int64)
    qt = np.array([q[1] for q in queries], np.int64) + shift
    want = [bisect.bisect_left(pairs, (a, b)) for a, b in queries]
    assert iv.pair_positions(g, t, qg, qt).tolist() == want
    if pairs and queries:  # the same with a time range too wide to pack
        wide_t, wide_qt = t.copy(), qt.copy()
        wide_t[t == t.max()] += 2**62 if shift <= 0 else 0
        wide = sorted(zip(g.tolist(), wide_t.tolist()))
        g2, t2 = np.array([p[0] for p in wide], np.int64), np.array([p[1] for p in wide], np.int64)
        assert iv.pair_positions(g2, t2, qg, wide_qt).tolist() == [
            bisect.bisect_left(wide, (a, b)) for a, b in zip(qg.tolist(), wide_qt.tolist())
        ]
