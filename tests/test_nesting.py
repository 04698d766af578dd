"""Nesting kernel (:func:`di.nesting.nest`) against its pure-Python reference on
random timelines, plus hand cases whose depth and parent are known."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import nest_reference

from di.nesting import nest, nesting_order


def sorted_events(rng: np.random.Generator, n: int, n_locs: int, horizon: int) -> tuple[np.ndarray, ...]:
    """Random events (many ties, instants, overlaps) sorted by (loc, start_ns, -end_ns)."""
    loc = rng.integers(0, n_locs, n).astype(np.uint32)
    start = rng.integers(0, horizon, n).astype(np.int64)
    dur = np.where(rng.random(n) < 0.2, 0, rng.integers(1, horizon, n)).astype(np.int64)
    end = start + dur
    order = np.lexsort((-end, start, loc))
    return loc[order], start[order], end[order]


def check_definition(
    loc: np.ndarray, start: np.ndarray, end: np.ndarray, depth: np.ndarray, parent: np.ndarray
) -> None:
    """Every parent is an earlier event on the same timeline, open at the child's start."""
    for k, p in enumerate(parent):
        if p < 0:
            assert depth[k] == 0
            continue
        assert p < k and loc[p] == loc[k] and depth[k] == depth[p] + 1
        assert start[p] <= start[k]
        assert start[k] < end[p] or (start[k] == start[p] and (end[k] == start[k] or end[p] == start[p]))


@pytest.mark.parametrize("seed", range(40))
def test_kernel_matches_reference_on_random_timelines(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    loc, start, end = sorted_events(rng, n, int(rng.integers(1, 5)), int(rng.integers(2, 60)))
    depth, parent = nest(loc, start, end)
    ref_depth, ref_parent = nest_reference(loc, start, end)
    assert depth.dtype == np.int32 and parent.dtype == np.int64
    np.testing.assert_array_equal(depth, ref_depth)
    np.testing.assert_array_equal(parent, ref_parent)
    check_definition(loc, start, end, depth, parent)


def run(spans: list[tuple[int, int]], locs: list[int] | None = None) -> tuple[list[int], list[int]]:
    loc = np.array(locs if locs is not None else [0] * len(spans), dtype=np.uint32)
    start = np.array([s for s, _ in spans], dtype=np.int64)
    end = np.array([e for _, e in spans], dtype=np.int64)
    depth, parent = nest(loc, start, end)
    ref = nest_reference(loc, start, end)
    assert depth.tolist() == ref[0].tolist() and parent.tolist() == ref[1].tolist()
    return depth.tolist(), parent.tolist()


@pytest.mark.parametrize(
    ("spans", "locs", "depth", "parent"),
    [
        ([], None, [], []),
        ([(0, 10), (2, 5), (5, 8)], None, [0, 1, 1], [-1, 0, 0]),  # siblings touching at 5
        ([(0, 10), (2, 8), (3, 4)], None, [0, 1, 2], [-1, 0, 1]),  # proper nesting
        ([(0, 10), (5, 15), (12, 13)], None, [0, 1, 2], [-1, 0, 1]),  # overlap without nesting keeps the parent
        ([(0, 10), (0, 0)], None, [0, 1], [-1, 0]),  # instant at the parent's start
        ([(0, 10), (10, 10)], None, [0, 0], [-1, -1]),  # instant at the parent's end is outside
        ([(5, 8), (5, 5), (6, 7)], None, [0, 1, 1], [-1, 0, 0]),  # an instant is closed for later starts
        ([(0, 10), (2, 3), (2, 3)], [0, 0, 1], [0, 1, 0], [-1, 0, -1]),  # a new timeline starts at depth 0
        ([(0, 100), (10, 20), (30, 40), (50, 60)], None, [0, 1, 1, 1], [-1, 0, 0, 0]),
    ],
)
def test_hand_cases(spans: list[tuple[int, int]], locs: list[int] | None, depth: list[int], parent: list[int]) -> None:
    assert run(spans, locs) == (depth, parent)


def test_deep_nesting_does_not_overflow_the_stack() -> None:
    n = 5000
    spans = [(k, 2 * n - k) for k in range(n)]
    depth, parent = run(spans)
    assert depth == list(range(n)) and parent == [-1] + list(range(n - 1))


@pytest.mark.parametrize("shuffle", ["sorted", "few late", "reversed", "random"])
@pytest.mark.parametrize("seed", range(4))
def test_nesting_order_equals_lexsort(seed: int, shuffle: str) -> None:
    """The order equals a full lexicographic sort by (loc, start, -end, idx),
    whether the input is in time order, nearly so, reversed or random."""
    rng = np.random.default_rng(seed)
    n = 3000
    loc = rng.integers(0, 5 if seed % 2 else 600, n).astype(np.uint32)  # long timelines, or many short ones
    start = rng.integers(0, 400, n).astype(np.int64)
    end = start + np.where(rng.random(n) < 0.2, 0, rng.integers(1, 50, n))
    idx = rng.permutation(n).astype(np.int64)
    order = {
        "sorted": np.lexsort((idx, -end, start)),
        "few late": np.lexsort((idx, -end, start)),
        "reversed": np.lexsort((idx, -end, start))[::-1],
        "random": rng.permutation(n),
    }[shuffle]
    if shuffle == "few late":
        late = rng.choice(n, 30, replace=False)
        order = np.concatenate([np.delete(order, late), order[late]])
    loc, start, end, idx = loc[order], start[order], end[order], idx[order]
    expected = np.lexsort((idx, -end, start, loc))
    assert np.array_equal(nesting_order(loc, start, end, idx), expected)


@pytest.mark.parametrize("n_locs", [3, 70_000])
def test_nesting_order_is_stable_for_equal_keys(n_locs: int) -> None:
    """Events equal in (loc, start, -end, idx) keep their input order, with
    timeline indices that fit 16 bits (radix sort) and ones that do not."""
    rng = np.random.default_rng(n_locs)
    n = 5000
    loc = rng.integers(0, n_locs, n)
    start = rng.integers(0, 40, n)
    end = start + rng.integers(0, 3, n)
    idx = rng.integers(0, 4, n)  # many exact ties
    assert np.array_equal(nesting_order(loc, start, end, idx), np.lexsort((idx, -end, start, loc)))
    assert nesting_order(loc[:0], start[:0], end[:0], idx[:0]).size == 0


def test_enclosing_finds_the_outermost_and_innermost_marked_ancestor() -> None:
    """Against a walk up the parent chain row by row, on random forests and on one chain 5,000 deep (overlapping
    Kineto events nest hundreds deep)."""
    from di.nesting import enclosing

    def walk(parent: np.ndarray, row: int, marked: np.ndarray, outermost: bool) -> int:
        found, at = -1, row
        while at >= 0:
            at = int(parent[at])
            if at >= 0 and marked[at] and (outermost or found < 0):
                found = at
        return found

    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(1, 200))
        parent = np.array([int(rng.integers(-1, k)) if k else -1 for k in range(n)], dtype=np.int64)
        marked = rng.random(n) < rng.random()
        rows = rng.integers(-1, n, size=int(rng.integers(0, 40)))
        for outermost in (True, False):
            want = [walk(parent, int(r), marked, outermost) if r >= 0 else -1 for r in rows]
            assert enclosing(parent, rows, marked, outermost=outermost).tolist() == want
    chain = np.arange(-1, 4999, dtype=np.int64)
    marked = np.zeros(5000, dtype=bool)
    marked[[10, 2000, 4000]] = True
    assert enclosing(chain, np.array([4999, 2000, 5]), marked, outermost=True).tolist() == [10, 10, -1]
    assert enclosing(chain, np.array([4999, 2000, 5]), marked, outermost=False).tolist() == [4000, 10, -1]


def test_enclosing_takes_parents_stored_after_their_children() -> None:
    """A parent column in any row order (a store written by another tool) gives the same ancestors as a walk up;
    a cycle, which no sound trace has, ends the walk instead of looping."""
    from di.nesting import enclosing_all

    rng = np.random.default_rng(11)
    for _ in range(50):
        n = int(rng.integers(1, 300))
        ordered = np.array([int(rng.integers(-1, k)) if k else -1 for k in range(n)], dtype=np.int64)
        perm = rng.permutation(n)  # row r of the shuffled forest is row perm[r] of the ordered one
        inv = np.empty(n, np.int64)
        inv[perm] = np.arange(n)
        shuffled = np.where(ordered[perm] >= 0, inv[np.maximum(ordered[perm], 0)], -1)
        marked = rng.random(n) < 0.4
        for outermost in (True, False):
            want = enclosing_all(ordered, marked, outermost=outermost)
            got = enclosing_all(shuffled, marked[perm], outermost=outermost)
            mapped = np.where(want[:-1][perm] >= 0, inv[np.maximum(want[:-1][perm], 0)], -1)
            assert got[:-1].tolist() == mapped.tolist() and got[-1] == -1
    cycle = np.array([1, 2, 0, 0], dtype=np.int64)  # 0 -> 1 -> 2 -> 0, and 3 under 0
    got = enclosing_all(cycle, np.array([True, True, True, False]), outermost=True)
    assert got.size == 5 and got[-1] == -1 and got[3] >= 0


def test_nesting_order_of_unsigned_and_narrow_columns() -> None:
    """Columns of any integer width (the ends and idx read only where (loc, start) repeat) order as int64 ones."""
    rng = np.random.default_rng(11)
    n = 4000
    loc = rng.integers(0, 4, n).astype(np.uint8)
    start = rng.integers(0, 30, n).astype(np.int32)
    end = (start + rng.integers(0, 3, n)).astype(np.uint32)
    idx = rng.permutation(n).astype(np.uint16)
    wide = [a.astype(np.int64) for a in (loc, start, end, idx)]
    assert np.array_equal(nesting_order(loc, start, end, idx), np.lexsort((wide[3], -wide[2], wide[1], wide[0])))
