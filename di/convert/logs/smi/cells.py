"""The cell readers every nvidia-smi table shares: numbers and units of cell texts (:func:`read_numbers`,
:func:`read_once`), and the numbering of distinct values (:func:`distinct_codes`) by which work done once per
distinct text is gathered back.

A cell is a number where :data:`NUM_RE` matches it (``22.89``, ``22.89 W``, ``45 %``): ``value`` (float) and
``vunit`` (the unit it carries, null where none); any other text (``[N/A]``, a name) has a null value. With
``no_value``, ``na`` says whether the cell says the GPU gives no value (:data:`NA_CELL_RE`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.text import by_distinct, distinct_ids_by_join

NA_CELL_RE = r"^\s*\[(?:N/A|Not Supported|Unknown Error|Requested functionality)"
"""A ``--query-gpu`` cell that says the GPU gives no value."""

NUM_RE = r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]+)?\s*$"


def distinct_codes(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(each value's number among the distinct ``values``, in the order of their first rows; those distinct values):
    work done once per distinct value is gathered back by number (a null is a value of its own). The same numbers as
    :func:`~di.convert.logs.text.distinct_ids`, from a dense rank of the values' hashes (a sort of integers) and numpy
    gathers, which cost about half of its join; values that share a hash (never seen) are told apart by a join on the
    values themselves."""
    ids, firsts = _ranked_ids(values.hash())
    if values.len() and not values.gather(firsts[ids]).eq_missing(values).all():
        by_join, by_join_firsts = distinct_ids_by_join(values)
        ids, firsts = by_join.to_numpy().astype(np.int64), by_join_firsts.to_numpy()
    return ids, values.gather(firsts)


def _ranked_ids(codes: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct integer ``codes`` (0 to their count - 1, in the order of their first rows)
    and, per number, the first row of its code (ascending), as int64 arrays."""
    rank = codes.rank("dense").to_numpy().astype(np.int64) - 1  # 0 to count - 1, by code
    firsts = np.flatnonzero(codes.is_first_distinct().to_numpy())
    number = np.empty(firsts.size, np.int64)
    number[rank[firsts]] = np.arange(firsts.size)
    return number[rank], firsts


def read_numbers(df: pl.DataFrame, *, no_value: bool = False, distinct: bool = False) -> pl.DataFrame:
    """``df`` with its column ``raw`` (cell texts) read as ``value`` (float) and ``vunit`` (:data:`NUM_RE`'s number
    and unit); null where a text is no number, or one float parsing does not read (digits of other scripts, which
    ``\\d`` matches). A plain integer (what an integer cast reads: ``[-+]?`` and ASCII digits; not a negative zero,
    which :data:`NUM_RE` reads as -0.0) is cast; of the other texts, those :data:`NUM_RE` can match (a digit, a sign or
    a space first) are read by it once per distinct text (``distinct``: the texts are distinct already). With
    ``no_value``, also ``na``: whether the text says the GPU gives no value (:data:`NA_CELL_RE`)."""
    raw = pl.col("raw")
    if df.height < CAST_FIRST_ROWS:
        return _read_matched(df, no_value, distinct=distinct)
    ints = df.select(raw.cast(pl.Int64, strict=False)).to_series()
    # where NUM_RE can match (a digit, maybe of another script, a sign or a space first; not a null) and NA_CELL_RE
    # ("[" or a space first): first bytes, from the texts' string views
    _, (b,) = lead_bytes(df.get_column("raw"))
    if df.get_column("raw").null_count():
        b = np.where(df.get_column("raw").is_null().to_numpy(), np.uint8(ord("a")), b)  # (a byte that says neither)
    num = ((b >= ord("0")) & (b <= ord("9"))) | ((b >= ord("+")) & (b <= ord("-"))) | (b < ord("!")) | (b >= 0x80)
    # a plain integer: what the cast reads, but a zero that starts with "-"
    plain = ints.is_not_null().to_numpy() & ((ints != 0).fill_null(False).to_numpy() | (b != ord("-")))
    value = ints.cast(pl.Float64).alias("value")  # (null where no integer)
    vunit = pl.Series("vunit", [], pl.String).extend_constant(None, df.height)
    na = pl.Series("na", [], pl.Boolean).extend_constant(False, df.height)  # (an integer says a value)
    other = np.flatnonzero(~plain & num)
    if other.size:
        read = _read_matched(df[other].select("raw"), no_value, distinct=distinct)
        value = value.scatter(other, read.get_column("value"))
        vunit = vunit.scatter(other, read.get_column("vunit"))
        na = na.scatter(other, read.get_column("na")) if no_value else na
    bracket = np.flatnonzero(b == ord("["))
    if no_value and bracket.size:
        na = na.scatter(bracket, df[bracket].select(raw.str.contains(NA_CELL_RE)).to_series())
    return df.with_columns(value, vunit, *([na] if no_value else []))


CAST_FIRST_ROWS = 4096
"""From this many texts :func:`read_numbers` casts the plain integers first (fewer, its own steps cost more)."""


def _read_matched(df: pl.DataFrame, no_value: bool, *, distinct: bool = False) -> pl.DataFrame:
    """``df`` with ``value`` and ``vunit`` read from ``raw`` by :data:`NUM_RE` (and ``na``, with ``no_value``), once
    per distinct text (``distinct``: the texts are distinct already, and each is read as it is)."""
    raw = pl.col("raw")

    def add(d: pl.DataFrame) -> pl.DataFrame:
        # one match per text: the groups' struct is taken apart after (a select would run the regex per field)
        read = d.with_columns(raw.str.extract_groups(NUM_RE).alias("g"))
        g = pl.col("g")
        na = [raw.str.contains(NA_CELL_RE).fill_null(False).alias("na")] if no_value else []
        value = [g.struct.field("1").cast(pl.Float64, strict=False).alias("value"), g.struct.field("2").alias("vunit")]
        return read.with_columns(*value, *na).drop("g")

    return add(df) if distinct else by_distinct(df, "raw", add)


def read_once(cells: pl.Series, *, no_value: bool = False) -> pl.DataFrame:
    """:func:`read_numbers` of ``cells`` (column ``raw``), each distinct cell read once where there are at least
    :data:`CAST_FIRST_ROWS` and at most half of them are distinct (a field's readings repeat from row to row: the
    codes cost less than reading every cell; fewer cells are read once per distinct text anyway)."""
    if cells.len() < CAST_FIRST_ROWS:
        return read_numbers(cells.to_frame("raw"), no_value=no_value)
    code, distinct = distinct_codes(cells)
    if 2 * distinct.len() > cells.len():
        return read_numbers(cells.to_frame("raw"), no_value=no_value)
    return read_numbers(distinct.to_frame("raw"), no_value=no_value, distinct=True)[code]
