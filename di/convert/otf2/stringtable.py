"""The OTF2 writer's string definitions: one table, ref = insertion order, ``""`` is ref 0.

Names that are few (communicators, attributes, the kinds of region) are added one
by one (:meth:`Strings.ref`); a column of strings (args texts, ``di.flows_in``
lists, location and region names: a region per distinct event name, which may be
a hundred thousand) is added whole (:meth:`Strings.add_many`, or
:meth:`Strings.add_texts` for texts in a buffer of their own) and numbered by
polars, never through a Python dict or loop per row.
:meth:`Strings.chunks` hands the table to :func:`emit.write_strings` in ref order;
after it only lookups are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.columns import code_index, readonly, text_spans, utf8_buffers
from di.convert.otf2 import emit

__all__ = ["DISTINCT_SAMPLE", "MOSTLY_DISTINCT", "Strings", "TextColumn", "mostly_distinct"]


@dataclass
class TextColumn:
    """Strings a column added whole (:meth:`Strings.add_many`): ref ``first_ref + i`` is the text of row ``rows[i]``,
    ``data[starts[r]:ends[r]]`` (UTF-8); ``ids``: the id (ref - first_ref) of every row, -1 for a null."""

    first_ref: int
    values: pl.Series | None
    """The texts as a column; None: made from the buffers when looked up (:meth:`column`)."""
    data: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    rows: np.ndarray
    ids: np.ndarray

    def column(self) -> pl.Series:
        """The texts of the rows as a String column."""
        if self.values is None:  # texts one after another (:meth:`Strings.add_texts`)
            self.values = _texts(self.data, np.append(self.starts, self.ends[-1:]))
        return self.values


DISTINCT_SAMPLE = 4096
"""Rows of a string column sampled (evenly spread) to tell whether its texts are nearly all distinct."""
MOSTLY_DISTINCT = 0.9
"""Share of distinct texts in the sample above which a column's texts are not searched for repeats."""


def mostly_distinct(values: pl.Series, valid: np.ndarray) -> bool:
    """True when the texts of the ``valid`` rows of ``values`` are nearly all distinct, judged on
    :data:`DISTINCT_SAMPLE` rows spread evenly over the column (False for a column of fewer than four times as many
    rows: those are numbered whole). A column of a million distinct texts (a PyTorch profile's args as written, when
    a reader kept Kineto's per-event ids in them) would be numbered by hash for nothing; writing the rare repeat of
    such a column twice only costs its bytes."""
    n_valid = int(np.count_nonzero(valid))
    take = _sampled(n_valid)
    if take is None:
        return False
    if n_valid < valid.size:
        take = np.flatnonzero(valid)[take]
    return _distinct_enough(values.gather(take))


def _sampled(n: int) -> np.ndarray | None:
    """The positions :func:`mostly_distinct` samples among ``n`` texts, None when it takes them all."""
    if n < 4 * DISTINCT_SAMPLE:
        return None
    return np.linspace(0, n - 1, DISTINCT_SAMPLE).astype(np.int64)


def _distinct_enough(sample: pl.Series) -> bool:
    return sample.n_unique() >= MOSTLY_DISTINCT * sample.len()


def _texts(data: np.ndarray, offsets: np.ndarray) -> pl.Series:
    """The texts ``data[offsets[i]:offsets[i + 1]]`` (int64 offsets from 0) as a String column (through a pyarrow
    array over the buffers)."""
    import pyarrow as pa

    texts = pa.LargeStringArray.from_buffers(offsets.size - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    return pl.Series("texts", _Capsule(texts))


class _Capsule:
    """An Arrow array offered to polars through the Arrow PyCapsule interface only: polars' pyarrow path imports
    ``pyarrow.compute`` and pandas, 0.1 CPU-s."""

    def __init__(self, array: object) -> None:
        self.array = array

    def __arrow_c_array__(self, requested_schema: object = None) -> object:
        return self.array.__arrow_c_array__(requested_schema)  # type: ignore[attr-defined]


def _texts_at(data: np.ndarray, offsets: np.ndarray, take: np.ndarray) -> pl.Series:
    """The texts ``take`` of :func:`_texts` (a sample), their bytes gathered by numpy."""
    lo, length = offsets[take], offsets[take + 1] - offsets[take]
    at = np.zeros(take.size + 1, np.int64)
    np.cumsum(length, out=at[1:])
    return _texts(data[np.repeat(lo - at[:-1], length) + np.arange(at[-1])], at)


class Strings:
    """The archive's string definitions: ref = insertion order, ``""`` is ref 0.

    A few hundred names (communicators, attributes) are looked up one by one
    through a dict; a column of strings (args texts, a million distinct ones in a
    real PyTorch profile before its ids are lifted out; region names) is
    numbered by polars' categorical hashing (:func:`di.convert.columns.code_index`) and its distinct
    texts take consecutive refs, never through a Python dict or loop; when a
    sample shows them nearly all distinct (:func:`mostly_distinct`), every
    row takes a ref of its own without hashing. Such a column's texts are not
    matched against the dict's: OTF2 allows two refs of one text.
    """

    SMALL = 4096
    """Distinct strings of one :meth:`add_many` up to which the dict takes them."""

    def __init__(self) -> None:
        self.refs: dict[str, int] = {"": 0}
        self.n = 1
        self.pieces: list[str | TextColumn] = [""]
        """The strings in ref order: single strings, and columns of new distinct strings."""
        self.frozen = False

    def ref(self, s: str) -> int:
        """Ref of ``s``, added while planning; after :meth:`chunks` only lookups."""
        got = self.refs.get(s)
        if got is None and self.frozen:
            got = self._in_columns(s)
        if got is None:
            if self.frozen:
                raise KeyError(f"string {s!r} was not planned")
            got = self.refs[s] = self.n
            self.pieces.append(s)
            self.n += 1
        return got

    def _in_columns(self, s: str) -> int | None:
        for col in self.pieces:
            if isinstance(col, TextColumn):
                hit = (col.column().cast(pl.String) == s).arg_true()
                if hit.len():
                    self.refs[s] = col.first_ref + int(col.ids[int(hit[0])])
                    return self.refs[s]
        return None

    def add_many(self, values: pl.Series) -> np.ndarray:
        """Refs (int64, ``emit.NO_VALUE`` for nulls) of a column of strings, adding the new ones. A column whose
        texts are nearly all distinct (:func:`mostly_distinct`) is not searched for repeats: each of its non-null
        rows takes a ref of its own. Other columns are numbered by polars' categorical hashing
        (:func:`di.convert.columns.code_index`: 0.019 CPU-s for a real-shaped trace's 1.2 M args texts, where a hash table over
        their UTF-8 buffer took 0.065), each row's ref read from a table by code; their distinct texts, when more than
        :attr:`SMALL`, copied to a buffer of their own."""
        valid = values.is_not_null().to_numpy()
        if mostly_distinct(values, valid):
            data, starts, ends = text_spans(values)
            if valid.all():  # as args texts are: row i is id i, no masked copies
                rows = ids = np.arange(valid.size, dtype=np.int64)
            else:
                rows = np.flatnonzero(valid)
                ids = np.where(valid, np.cumsum(valid) - 1, -1)
            self.pieces.append(TextColumn(self.n, values, data, starts, ends, rows, ids))
            refs = ids + self.n if valid.all() else np.where(ids >= 0, ids + self.n, emit.NO_VALUE)
            self.n += rows.size
            return refs
        codes, index, distinct = code_index(values)
        if distinct.len() <= self.SMALL:
            refs = np.array([self.ref(v) for v in distinct.to_list()], np.int64)
        else:
            data, offsets = utf8_buffers(distinct)
            rows = np.arange(distinct.len(), dtype=np.int64)
            self.pieces.append(TextColumn(self.n, distinct, data, offsets[:-1], offsets[1:], rows, rows))
            refs = rows + self.n
            self.n += rows.size
        ref_of = np.full(index.size, emit.NO_VALUE, np.int64)  # by code: null and unused codes have none
        used = index >= 0
        ref_of[used] = refs[index[used]]
        return ref_of[codes]

    def add_texts(self, data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Refs (int64) of the texts ``data[offsets[i]:offsets[i + 1]]`` (UTF-8, int64 offsets, one more than texts):
        :meth:`add_many` of the column they make, which is made only when a sample shows them not nearly all
        distinct (:func:`mostly_distinct`); else each takes a ref of its own, read where they are."""
        n = offsets.size - 1
        take = _sampled(n)
        if take is None or not _distinct_enough(_texts_at(data, offsets, take)):
            return self.add_many(_texts(data, offsets))
        rows = np.arange(n, dtype=np.int64)
        self.pieces.append(TextColumn(self.n, None, data, offsets[:-1], offsets[1:], rows, rows))
        self.n += n
        return rows + (self.n - n)

    def chunks(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The strings in ref order as (UTF-8 bytes, int64 starts and ends, rows) for :func:`emit.write_strings`; ref
        lookups only from now on."""
        self.frozen = True
        out, singles = [], []
        for piece in [*self.pieces, None]:
            if isinstance(piece, str):
                singles.append(piece)
                continue
            if singles:
                data, offsets = utf8_buffers(pl.Series(singles, dtype=pl.String))
                out.append((data, offsets[:-1], offsets[1:], np.arange(len(singles), dtype=np.int64)))
                singles = []
            if piece is not None:
                out.append((piece.data, piece.starts, piece.ends, piece.rows))
        return [tuple(readonly(a) for a in chunk) for chunk in out]

    def check_frozen(self) -> None:
        assert self.frozen
