"""The writers' inputs read in place: nullable integer columns (:mod:`di.convert.intcolumns`, the Perfetto and OTF2
event kernels') and the OTF2 string table's texts added from a buffer (:meth:`Strings.add_texts`), against polars'
own view of the same values."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from di.convert.intcolumns import NULL, int_columns, value_at
from di.convert.otf2.stringtable import DISTINCT_SAMPLE, Strings

pytest.importorskip("otf2")


def _as_read(columns: list[pl.Series | None]) -> list[list[int | None] | None]:
    """Each column as :func:`value_at` reads it (None: absent)."""
    ints, valid, cols = int_columns(columns)
    assert not (ints.flags.writeable or valid.flags.writeable or cols.flags.writeable)
    out: list[list[int | None] | None] = []
    for at, bit in cols.T.tolist():
        read = value_at.py_func  # the kernels' helper has no wrapper to be called from Python
        values = [read(ints, valid, at, bit, i) for i in range(len(columns[0]))] if at >= 0 else None
        out.append(None if values is None else [None if v == NULL else v for v in values])
    return out


def test_int_columns_sliced_chunked_narrow_null_or_absent() -> None:
    rng = np.random.default_rng(3)
    n = 1000
    a = pl.Series("a", rng.integers(-(2**62), 2**62, n), pl.Int64)
    b = pl.Series("b", [None if i % 3 else i * 7 for i in range(n)], pl.Int64)
    c = pl.Series("c", rng.integers(-(2**31), 2**31 - 1, n), pl.Int32)  # cast to int64 first
    d = pl.concat([pl.Series("d", list(range(400)), pl.Int64), pl.Series("d", [None] * 600, pl.Int64)], rechunk=False)
    ev = pl.DataFrame([a, b, c, d, pl.Series("e", [None] * n, pl.Int64)])
    assert ev.get_column("d").n_chunks() == 2
    for frame in (ev, ev.slice(17, 500)):
        got = _as_read([frame.get_column(name) for name in "abcde"] + [None])
        assert got[4] is None and got[5] is None  # all null, absent
        for name, values in zip("abcd", got):
            assert values == frame.get_column(name).cast(pl.Int64).to_list(), name


def test_no_int_columns() -> None:
    ints, valid, cols = int_columns([])
    assert ints.size == valid.size == 0 and cols.shape == (2, 0)


@pytest.mark.parametrize("distinct", [True, False])
def test_texts_from_a_buffer_take_the_refs_of_the_same_column(distinct: bool) -> None:
    n = 5 * DISTINCT_SAMPLE
    texts = [json.dumps([i if distinct else i % 50, "x" * (i % 7)]) for i in range(n)]
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    by_buffer, by_column = Strings(), Strings()
    for s in (by_buffer, by_column):
        s.ref("first")  # refs after one already taken
    refs = by_buffer.add_texts(data, offsets)
    assert refs.tolist() == by_column.add_many(pl.Series(texts)).tolist()
    assert (len(set(refs.tolist())) == n) is distinct
    by_buffer.chunks()  # frozen: a text is then looked up in the columns added
    assert by_buffer.ref(texts[123]) == refs[123]
