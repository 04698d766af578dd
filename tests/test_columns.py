"""Dense row ids (``di.convert.columns``): the ids and first rows equal those of a Python dict
numbering the keys in order of first appearance, across the hash table's growth (it starts at
4,096 slots and grows sixteenfold, moving the ids found so far, when half full)."""

from __future__ import annotations

import numpy as np
import pytest

import polars as pl

from di.convert.columns import _FIRST_SLOTS, DIRECT_SPAN, dense_codes, dense_row_ids, match_rows, packed_key


def _reference(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    seen: dict[tuple[int, ...], int] = {}
    ids, first = [], []
    for r in range(rows.shape[1]):
        key = tuple(int(v) for v in rows[:, r])
        if key not in seen:
            seen[key] = len(first)
            first.append(r)
        ids.append(seen[key])
    return np.array(ids, dtype=np.int64), np.array(first, dtype=np.int64)


@pytest.mark.parametrize("n", [0, 1, 7, _FIRST_SLOTS // 2, _FIRST_SLOTS // 2 + 1, 3 * _FIRST_SLOTS, 40_000])
@pytest.mark.parametrize("distinct", [1, 3, _FIRST_SLOTS // 2, _FIRST_SLOTS, 2**62])
@pytest.mark.parametrize("k", [1, 3])
def test_dense_row_ids_number_keys_in_order_of_first_appearance(n: int, distinct: int, k: int) -> None:
    rows = np.random.default_rng(n * 7 + k).integers(-distinct, distinct, size=(k, n), dtype=np.int64)
    ids, first = dense_row_ids(rows)
    want_ids, want_first = _reference(rows)
    assert ids.dtype == first.dtype == np.int64
    assert np.array_equal(ids, want_ids) and np.array_equal(first, want_first)


def test_dense_row_ids_of_keys_that_differ_only_late_in_their_columns() -> None:
    """Keys equal in their first columns, distinct in the last: each is its own id, also after growth."""
    n = 3 * _FIRST_SLOTS
    rows = np.stack([np.zeros(n, np.int64), np.full(n, 5, np.int64), np.arange(n, dtype=np.int64) // 2])
    ids, first = dense_row_ids(rows)
    assert np.array_equal(ids, np.arange(n) // 2) and np.array_equal(first, np.arange(0, n, 2))


@pytest.mark.parametrize("distinct", [2, 50, 3 * _FIRST_SLOTS])
def test_dense_row_ids_of_runs_of_equal_keys(distinct: int) -> None:
    """Runs of equal adjacent columns (which take the id of the one before without a look-up), also where the
    table grows inside or at the end of a run."""
    rng = np.random.default_rng(distinct)
    values = rng.integers(0, distinct, size=(2, 4 * distinct), dtype=np.int64)
    rows = np.repeat(values, rng.integers(1, 6, size=values.shape[1]), axis=1)
    ids, first = dense_row_ids(rows)
    want_ids, want_first = _reference(rows)
    assert np.array_equal(ids, want_ids) and np.array_equal(first, want_first)


@pytest.mark.parametrize("where", ["lowest", "zero", "highest"])
@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_dense_row_ids_through_a_slot_per_value(where: str, extra: int) -> None:
    """One row whose values lie within DIRECT_SPAN * n of each other is numbered through a slot per value: the
    same ids and first rows as the dict, at both ends of int64, for a range just under, at and just over the
    widest one numbered so (the next is hashed)."""
    n = 5000
    span = DIRECT_SPAN * n + extra
    lo = {"lowest": -(2**63), "zero": 0, "highest": 2**63 - span}[where]
    rng = np.random.default_rng(span)
    offsets = rng.integers(0, span, size=n)
    offsets[rng.permutation(n)[:2]] = (0, span - 1)  # the whole range taken
    rows = np.array([[lo + int(v) for v in offsets]], dtype=np.int64)
    ids, first = dense_row_ids(rows)
    want_ids, want_first = _reference(rows)
    assert np.array_equal(ids, want_ids) and np.array_equal(first, want_first)


def test_packed_key_numbers_columns_as_the_columns_apart() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    columns = [
        rng.integers(-3, 3, n).astype(np.int8),
        rng.integers(0, 3, n).astype(np.uint8),
        rng.integers(-(2**20), 2**20, n).astype(np.int32),
        rng.integers(2**40, 2**40 + 9, n).astype(np.int64),
    ]
    key = packed_key(columns)
    assert key is not None and key.shape == (1, n) and key.dtype == np.int64
    for got, want in zip(dense_row_ids(key), dense_row_ids(np.stack([c.astype(np.int64) for c in columns]))):
        assert np.array_equal(got, want)
    assert packed_key([np.array([0, 2**62]), np.array([0, 3])]) is None  # 63 + 2 bits
    assert packed_key([np.array([-(2**63), 2**63 - 1])]) is None  # a range of 64 bits
    assert packed_key([np.array([1, 2], dtype=np.uint64)]) is None
    assert packed_key([np.array([1.0, 2.0])]) is None
    assert packed_key([np.zeros(0, np.int64)]).shape == (1, 0)


def test_match_rows_finds_the_first_equal_table_column_or_minus_one() -> None:
    table = np.array([[1, 2, 1, 3], [10, 20, 10, 30]], dtype=np.int64)
    queries = np.array([[1, 3, 2, 4], [10, 30, 21, 40]], dtype=np.int64)
    assert match_rows(table, queries).tolist() == [0, 3, -1, -1]
    joined = np.concatenate([table, queries], axis=1)
    assert match_rows(joined[:, :4], joined[:, 4:], joined=joined).tolist() == [0, 3, -1, -1]


def test_launch_flows_not_known_equals_a_lookup_of_the_pairs() -> None:
    """``kineto._not_known`` (by destination, pairs looked up only where several known flows with
    different sources enter one event) against the lookup of every (src, dst) pair."""
    import polars as pl

    from di.convert.chrome.kineto import _not_known

    rng = np.random.default_rng(3)
    n_events = 50
    for several in (False, True):
        kd = rng.permutation(n_events)[:30] if not several else rng.integers(0, n_events, 60)
        ks = rng.integers(0, n_events, kd.size)
        known = pl.DataFrame({"src": ks, "dst": kd}, schema={"src": pl.Int64, "dst": pl.Int64})
        src = np.concatenate([ks[::2], rng.integers(0, n_events, 40)])
        dst = np.concatenate([kd[::2], rng.integers(0, n_events, 40)])
        want = match_rows(np.stack([ks, kd]), np.stack([src, dst])) < 0
        got = _not_known(known, src, dst, n_events)
        assert np.array_equal(got, want) and (~got).sum() >= ks[::2].size


@pytest.mark.parametrize("dtype", [pl.String, pl.Categorical, pl.Enum(["z", "b", "a", "c", "unused"])])
@pytest.mark.parametrize("seed", range(4))
def test_dense_codes_number_the_values_in_order_of_first_appearance(dtype: pl.DataType, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = [None if v == "n" else v for v in rng.choice(["z", "b", "a", "c", "n"], int(rng.integers(0, 60)))]
    codes, distinct = dense_codes(pl.Series(values, dtype=pl.String).cast(dtype))
    want: dict[str, int] = {}
    for v in values:
        if v is not None:
            want.setdefault(v, len(want))
    assert codes.dtype == np.int32
    assert distinct.dtype == pl.String and distinct.to_list() == list(want)  # unused categories left out
    assert codes.tolist() == [-1 if v is None else want[v] for v in values]


def test_gather_spans_copies_each_valid_span_in_order() -> None:
    """Spans in any order, overlapping, empty and invalid (an empty text), read-only data: the bytes of a join."""
    from di.convert.columns import readonly
    from di.convert.stringviews import gather_spans

    rng = np.random.default_rng(7)
    data = readonly(rng.integers(32, 127, 100_000, dtype=np.uint8))
    starts = rng.integers(0, 99_000, 2_000)
    ends = starts + rng.integers(0, 1_000, starts.size)
    valid = rng.random(starts.size) > 0.2
    out, offsets = gather_spans(data, starts, ends, valid)
    expected = [bytes(data[a:b]) if v else b"" for a, b, v in zip(starts, ends, valid)]
    assert out.tobytes() == b"".join(expected)
    assert [out[offsets[i] : offsets[i + 1]].tobytes() for i in range(starts.size)] == expected
    none, at = gather_spans(data, starts[:0], ends[:0], valid[:0])
    assert none.size == 0 and at.tolist() == [0]
    one = np.ones(1, np.bool_)
    for lo, hi in ((99_990, 100_001), (-1, 5), (10, 9)):  # past the end, before the start, backwards
        with pytest.raises(IndexError):
            gather_spans(data, np.array([lo]), np.array([hi]), one)
    assert gather_spans(data, np.array([-5]), np.array([200_000]), ~one)[0].size == 0  # an invalid span is not read
