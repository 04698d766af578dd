"""Interval kernels against their pure-Python reference, on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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
    ra = iv.union_reference(*_set(a_items))
    rb = iv.union_reference(*_set(b_items))
    assert _tuples(a) == ra
    pa, pb = iv.points_reference(ra), iv.points_reference(rb)
    assert iv.points_reference(_tuples(iv.intersect(a, b))) == pa & pb
    assert iv.points_reference(_tuples(iv.subtract(a, b))) == pa - pb
    assert iv.points_reference(_tuples(iv.union_sets(a, b))) == pa | pb
    for s in (iv.intersect(a, b), iv.subtract(a, b)):
        assert _tuples(iv.union(*s)) == _tuples(s), "results are normal sets"
    m = iv.measure(a, 4)
    for g in range(4):
        assert m[g] == sum(1 for p in pa if p[0] == g)


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
    from di.engine.breakdown import GPU_PRIORITY, HOST_PRIORITY, _sweep, sweep_reference

    g = np.array([x[0] for x in items], np.int64)
    s = np.array([x[1] for x in items], np.int64)
    e = s + np.array([x[2] for x in items], np.int64)
    a = np.array([x[3] for x in items], np.int64)
    keep = e > s
    g, s, e, a = g[keep], s[keep], e[keep], a[keep]
    gg, tt = np.concatenate([g, g]), np.concatenate([s, e])
    order = iv.sort_order(gg, tt) if gg.size else np.zeros(0, np.int64)
    delta = np.concatenate([np.ones(g.size, np.int64), -np.ones(g.size, np.int64)])
    host_group = np.array(host)
    got = _sweep(gg[order], tt[order], delta[order], np.concatenate([a, a])[order], 3, host_group,
                 np.asarray(HOST_PRIORITY, np.int64), np.asarray(GPU_PRIORITY, np.int64))
    want = sweep_reference(g, s, e, a, host_group, 3)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
