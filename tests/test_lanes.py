"""Lane assignment: nesting stacks per location, numba kernel against the pure-Python reference."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import assign_lanes_reference, innermost_points_reference

from di.convert.lanes import NO_POINT, assign_lanes, canonical_lanes, innermost_points


def _lanes(rows: list[tuple[int, int, int]]) -> list[int]:
    loc, start, end = (np.array(c, dtype=np.int64) for c in zip(*rows))
    return assign_lanes(loc, start, end).tolist()


def test_nested_events_stay_on_lane_0() -> None:
    assert _lanes([(0, 0, 100), (0, 10, 50), (0, 10, 20), (0, 20, 50), (0, 60, 100)]) == [0, 0, 0, 0, 0]


def test_overlap_without_nesting_moves_to_next_lane() -> None:
    # [0,10) then [5,15): starts inside, ends after -> lane 1; [12,20) nests nowhere open on lane 0 -> lane 0
    assert _lanes([(0, 0, 10), (0, 5, 15), (0, 12, 20)]) == [0, 1, 0]


def test_greedy_uses_lowest_fitting_lane() -> None:
    # staggered overlaps need lanes 0, 1, 2; [3, 4) nests inside [0, 10), so it goes back to lane 0
    assert _lanes([(0, 0, 10), (0, 1, 11), (0, 2, 12), (0, 3, 4)]) == [0, 1, 2, 0]


def test_touching_is_not_overlap() -> None:
    assert _lanes([(0, 0, 10), (0, 10, 20), (0, 20, 20)]) == [0, 0, 0]


def test_instants_always_fit_lane_0() -> None:
    assert _lanes([(0, 0, 10), (0, 5, 15), (0, 7, 7), (0, 12, 12), (0, 15, 15)]) == [0, 1, 0, 0, 0]


def test_lanes_restart_on_each_location() -> None:
    assert _lanes([(0, 0, 10), (0, 5, 15), (1, 5, 20), (1, 6, 7)]) == [0, 1, 0, 0]


def test_empty_input() -> None:
    empty = np.zeros(0, dtype=np.int64)
    assert assign_lanes(empty, empty, empty).dtype == np.int32
    assert len(assign_lanes(empty, empty, empty)) == 0


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError):
        assign_lanes(np.zeros(2), np.zeros(2), np.zeros(3))


def _random_events(rng: np.random.Generator, n: int, span: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    loc = rng.integers(0, 4, n)
    start = rng.integers(0, span, n)
    end = start + np.where(rng.random(n) < 0.2, 0, rng.integers(0, span // 3 + 1, n))
    order = np.lexsort((-end, start, loc))
    return loc[order], start[order], end[order]


@pytest.mark.parametrize("seed", range(20))
def test_kernel_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    loc, start, end = _random_events(rng, int(rng.integers(1, 400)), int(rng.choice([10, 100, 10_000])))
    order, lanes = canonical_lanes(loc, start, end)
    assert order is None  # in (loc, start, -end) order: nothing sorted
    np.testing.assert_array_equal(lanes, assign_lanes_reference(loc, start, end))


@pytest.mark.parametrize("seed", range(10))
def test_rows_out_of_order_get_the_lanes_of_the_sorted_events(seed: int) -> None:
    rng = np.random.default_rng(50 + seed)
    loc, start, end = _random_events(rng, int(rng.integers(2, 400)), int(rng.choice([10, 100, 10_000])))
    shuffle = rng.permutation(len(loc))
    if (shuffle == np.arange(len(loc))).all():
        shuffle = shuffle[::-1]
    rows = loc[shuffle], start[shuffle], end[shuffle]
    order, lanes = canonical_lanes(*rows)
    assert order is not None
    sorted_rows = tuple(a[order] for a in rows)
    np.testing.assert_array_equal(np.lexsort((-sorted_rows[2], sorted_rows[1], sorted_rows[0])), np.arange(len(loc)))
    np.testing.assert_array_equal(lanes, assign_lanes_reference(*sorted_rows))
    by_row = assign_lanes(*rows)  # mapped back to the rows as given
    np.testing.assert_array_equal(by_row[order], lanes)


@pytest.mark.parametrize("seed", range(5))
def test_every_lane_is_properly_nested(seed: int) -> None:
    loc, start, end = _random_events(np.random.default_rng(100 + seed), 300, 50)
    lanes = assign_lanes(loc, start, end)
    for key in set(zip(loc.tolist(), lanes.tolist())):
        rows = [i for i in range(len(loc)) if (loc[i], lanes[i]) == key]
        for a in rows:  # any two events on one track are disjoint or nested
            for b in rows:
                s1, e1, s2, e2 = start[a], end[a], start[b], end[b]
                assert e1 <= s2 or e2 <= s1 or (s1 <= s2 and e2 <= e1) or (s2 <= s1 and e1 <= e2)


def test_order_is_checked_on_loc_start_and_end() -> None:
    loc, start, end = (np.array(c) for c in ([0, 0, 1], [0, 0, 5], [10, 5, 6]))
    assert canonical_lanes(loc, start, end)[0] is None
    assert canonical_lanes(loc, start, end[[1, 0, 2]])[0].tolist() == [1, 0, 2]  # equal start: longer first
    assert canonical_lanes(loc[::-1], start, end)[0].tolist() == [1, 2, 0]  # by loc first
    assert canonical_lanes(loc, start[::-1], end)[0].tolist() == [1, 0, 2]  # then by start


def test_innermost_points_skip_children() -> None:
    loc, start, end = (np.array(c) for c in ([0, 0, 0, 0, 0], [0, 0, 0, 2, 9], [10, 0, 0, 5, 10]))
    # [0,10) holds zero-length twins at 0 and children [2,5), [9,10): free at 1, then from 5; never from 9 on
    got = innermost_points(loc, start, end, np.array([0, 0, 0, 1, 2, 4]), np.array([0, 2, 9, 0, 0, 9]))
    assert got.tolist() == [1, 5, NO_POINT, NO_POINT, 0, 9]


@pytest.mark.parametrize("seed", range(20))
def test_innermost_points_match_reference(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    loc, start, end = _random_events(rng, int(rng.integers(1, 60)), 30)
    rows = rng.integers(0, len(loc), 40)
    lower = start[rows] + rng.integers(0, 5, 40)
    np.testing.assert_array_equal(
        innermost_points(loc, start, end, rows, lower), innermost_points_reference(loc, start, end, rows, lower)
    )
