"""The OTF2 writer's inputs read in place: the id columns (:mod:`di.convert.otf2.idcolumns`) and texts added from a
buffer (:meth:`Strings.add_texts`), against polars' own view of the same values."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from di.convert.otf2.idcolumns import id_columns
from di.convert.otf2.stringtable import DISTINCT_SAMPLE, Strings

pytest.importorskip("otf2")


def _as_read(ev: pl.DataFrame, names: tuple[str, ...]) -> dict[str, list[int | None]]:
    ids = id_columns(ev, names)
    assert not ids.values.flags.writeable and not ids.valid.flags.writeable
    out = {}
    for j, name in enumerate(ids.names):
        values = ids.values[ids.at[j] : ids.at[j] + ev.height]
        out[name] = [int(v) if ok else None for v, ok in zip(values, ids.valid[j])]
    return out


def test_id_columns_sliced_chunked_narrow_null_or_absent() -> None:
    rng = np.random.default_rng(3)
    n = 1000
    a = pl.Series("a", rng.integers(-(2**62), 2**62, n), pl.Int64)
    b = pl.Series("b", [None if i % 3 else i * 7 for i in range(n)], pl.Int64)
    c = pl.Series("c", rng.integers(-(2**31), 2**31 - 1, n), pl.Int32)  # cast to int64 first
    chunked = pl.concat(
        [pl.Series("d", list(range(400)), pl.Int64), pl.Series("d", [None] * 600, pl.Int64)], rechunk=False
    )
    ev = pl.DataFrame([a, b, c, chunked, pl.Series("e", [None] * n, pl.Int64)])
    assert ev.get_column("d").n_chunks() == 2
    for frame in (ev, ev.slice(17, 500)):
        got = _as_read(frame, ("a", "b", "c", "d", "e", "missing"))
        assert list(got) == ["a", "b", "c", "d"]  # all-null and absent columns are left out, the order kept
        for name, values in got.items():
            assert values == frame.get_column(name).cast(pl.Int64).to_list(), name


def test_no_id_columns() -> None:
    ids = id_columns(pl.DataFrame({"x": [1, 2]}), ("a",))
    assert ids.names == () and ids.at.size == 0 and ids.valid.shape == (0, 2)


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
