"""The one-pass sort of a Perfetto trace's debug annotations (di.convert.perfetto.annotations._sort_annotations)
agrees with a plain-Python reference, and annotation_columns reads the edge cases: no annotations, annotations of
no slice and of dropped slices, nested ones, a key repeated on one event, a uint past int64's range."""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.perfetto.annotations import LIFTED, _sort_annotations, annotation_columns
from di.convert.perfetto.decode import A_BOOL, A_INT, A_JSON, A_NESTED, A_STRING, A_UINT

CODES = 2 + len(LIFTED)
"""args, bytes, then the lifted keys (the codes of _name_codes)."""


def _reference(events, names, vtype, ival, end, slice_of, slice_row, lut, n_rows):  # type: ignore[no-untyped-def]
    """_sort_annotations in plain Python: (first, has, args_end, rest, counts)."""
    first, has = np.zeros((CODES, n_rows), np.int64), np.zeros((CODES, n_rows), np.bool_)
    args_end, counts, rest = np.zeros(n_rows, np.int64), np.zeros(CODES + 1, np.int64), []
    for a in range(len(events)):
        s = slice_of[events[a]]
        if s < 0:
            continue
        counts[-1] += vtype[a] == A_NESTED
        r = slice_row[s]
        if r < 0:
            continue
        c, t, v = lut[names[a]], vtype[a], ival[a]
        fits = {0: t == A_JSON, 1: t == A_INT, -1: False}.get(c, t == A_INT or (t == A_UINT and v >= 0))
        if fits and not has[c, r]:
            has[c, r], first[c, r] = True, v
            counts[c] += 1
            if c == 0:
                args_end[r] = end[a]
        elif c < 0 or c > 1 or not fits:
            rest.append(a)
    return first, has, args_end, rest, counts


def _sorted(events, names, vtype, ival, end, slice_of, slice_row, lut, n_rows):  # type: ignore[no-untyped-def]
    first, has = np.zeros((CODES, n_rows), np.int64), np.zeros((CODES, n_rows), np.bool_)
    args_end, counts, rest = np.zeros(n_rows, np.int64), np.zeros(CODES + 1, np.int64), np.empty_like(events)
    n = _sort_annotations(events, names, vtype, ival, end, slice_of, slice_row, lut, first, has, args_end, rest, counts)
    return first, has, args_end, rest[:n].tolist(), counts


def test_sort_annotations_agrees_with_the_reference() -> None:
    rng = np.random.default_rng(7)
    for n_ann in (0, 1, 5, 200, 3000):
        n_events, n_slices, n_names = 40, 25, 12
        slice_of = rng.integers(-1, n_slices, n_events)  # -1: an event of no slice (an end, a counter)
        kept = rng.random(n_slices) < 0.8
        slice_row = np.full(n_slices, -1, np.int64)
        slice_row[kept] = rng.permutation(int(kept.sum()))
        lut = np.full(n_names + 1, -1, np.int64)  # the last entry: no name (-1)
        lut[rng.permutation(n_names)[: CODES - 2]] = np.arange(2, CODES)
        lut[:2] = [0, 1]
        columns = (
            rng.integers(0, n_events, n_ann),
            rng.integers(-1, n_names, n_ann),
            rng.choice([A_BOOL, A_INT, A_UINT, A_JSON, A_STRING, A_NESTED], n_ann),
            rng.choice([-(2**63), -5, 0, 3, 2**62], n_ann),
            rng.integers(0, 100, n_ann),
        )
        args = (*columns, slice_of, slice_row, lut, int(kept.sum()))
        got, want = _sorted(*args), _reference(*args)
        for g, w in zip(got, want):
            assert np.array_equal(np.asarray(g), np.asarray(w)), n_ann


def _columns(
    ann: list[tuple[int, int, int, int, int]],
    slice_of: list[int],
    slice_row: list[int],
    n_rows: int,
    strings: list[str],
) -> tuple[pl.Series, pl.Series, dict[str, pl.Series], int]:
    rows = np.array(ann, np.int64).reshape(-1, 5).T.copy()
    return annotation_columns(
        rows,
        rows[3].view(np.float64),
        np.frombuffer(b'{"a":1}{"b":2}', np.uint8),
        pl.Series(strings),
        np.array(slice_of, np.int64),
        np.array(slice_row, np.int64),
        n_rows,
        own=True,
    )


def test_annotation_columns_edge_cases() -> None:
    strings = ["args", "bytes", LIFTED[0][1], "x"]
    args, nbytes, lifted, nested = _columns([], [0, 1], [0, 1], 2, strings)
    assert args.to_list() == [None, None] and nbytes.to_list() == [None, None] and lifted == {} and nested == 0
    ext = LIFTED[0][0]
    ann = [
        (0, 0, A_JSON, 0, 7),  # event 0 (slice 1, row 0): args {"a":1}
        (0, 0, A_JSON, 7, 14),  # a second args on one event: dropped
        (0, 2, A_INT, 5, 0),  # the lifted key: its column
        (0, 2, A_INT, 6, 0),  # the key again on one event: into an args text (which replaces di's)
        (1, 1, A_INT, 64, 0),  # event 1 (slice 0, row 1): bytes
        (1, 2, A_UINT, -1, 0),  # a uint past int64's range: into args
        (1, 3, A_NESTED, 0, 0),  # nested: null in args, counted
        (2, 3, A_NESTED, 0, 0),  # of a dropped slice: counted only
        (3, 2, A_INT, 9, 0),  # of no slice: left out
    ]
    args, nbytes, lifted, nested = _columns(ann, [1, 0, 2, -1], [1, 0, -1], 2, strings)
    assert args.to_list() == ['{"External id":6}', '{"External id":18446744073709551615,"x":null}']
    assert nbytes.to_list() == [None, 64] and list(lifted) == [ext] and lifted[ext].to_list() == [5, None]
    assert nested == 2
