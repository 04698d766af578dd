"""Dense ids of a column's distinct values (each row's id, and each id's first row), and work done once per distinct
value: the repeats of log lines (messages, timestamps, table cells, series keys) are numbered by one hash per row and
integer work.

:func:`dense_ids` numbers integer codes (0 to their count - 1 in the order of their first rows, UInt32) by polars, or
by :mod:`~di.convert.logs.idtable`'s numba table where that pays (:func:`_table_pays`), the same ids either way;
:func:`distinct_ids` numbers any values through their hashes (a join on the values where two share a hash);
:func:`by_distinct` adds columns computed once per distinct value. :mod:`di.convert.logs.text` re-exports them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import polars as pl

__all__ = [
    "NUMBA_ALONE_ROWS",
    "NUMBA_LOADED_ROWS",
    "NUMBA_MIN_ROWS",
    "by_distinct",
    "dense_ids",
    "distinct_ids",
    "distinct_ids_by_join",
]


def by_distinct(df: pl.DataFrame, on: str, add: Callable[[pl.DataFrame], pl.DataFrame]) -> pl.DataFrame:
    """``df`` with the columns ``add`` adds (functions of column ``on`` alone), worked out once per distinct value of
    ``on`` and joined back (row order kept, a null ``on`` matching a null): log lines repeat their messages,
    timestamps and table cells, and a regex or a parse costs several times the hashing."""
    distinct = add(df.select(pl.col(on).unique()))
    return df.join(distinct, on=on, how="left", maintain_order="left", nulls_equal=True)


def distinct_ids(values: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Each row's value id (0 to the count of distinct values - 1) and, per id, the first row of its value: from one
    hash per row and integer work (unique values joined back cost several times more). Values that share a hash
    (never seen) are told apart by that join instead."""
    ids, firsts = dense_ids(values.hash())
    if values[firsts[ids]].eq_missing(values).all():
        return ids, firsts
    return distinct_ids_by_join(values)


NUMBA_MIN_ROWS = 1 << 16
"""The codes from which :func:`dense_ids` numbers them by :mod:`~di.convert.logs.idtable`'s numba table, in a process
that runs numba already (``di convert`` and ``di analyze``, whose writers and analyses run kernels anyway): the table
takes about 10 ns a code where polars takes 40-55, and its kernel's load costs about 7 CPU ms once per process. An
NCCL parse numbers about 2.3 codes per NCCL line (heads, messages, collectives), so the first call of this size (the
heads of as many lines) starts a parse that wins the load back. On a cold cache the kernel compiles once, in about
0.45 CPU s; in a process that has run no kernel yet, numba's own start costs about 0.2 CPU s more."""
NUMBA_ALONE_ROWS = 1 << 25
"""The same where numba has not been imported yet (``di info`` of a log): its import and start (about 1 CPU s and
110 MB) are won back from about this many codes; a shorter log never imports numba here."""
NUMBA_LOADED_ROWS = 1 << 12
"""The same once the table's kernel is loaded in this process: from here on the table costs less than polars' hash
join (about 0.3 ms fixed)."""


def _table_pays(rows: int) -> bool:
    """Whether ``rows`` codes are numbered by the numba table: from :data:`NUMBA_LOADED_ROWS` once its kernel is
    loaded, else from :data:`NUMBA_MIN_ROWS` where numba is, else from :data:`NUMBA_ALONE_ROWS`."""
    if "di.convert.logs.idtable" in sys.modules:
        return rows >= NUMBA_LOADED_ROWS
    return rows >= (NUMBA_MIN_ROWS if "numba" in sys.modules else NUMBA_ALONE_ROWS)


def dense_ids(codes: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Each row's id among the distinct integer ``codes`` (0 to their count - 1, in the order of their first rows,
    UInt32) and, per id, the first row of its code (ascending): by :mod:`~di.convert.logs.idtable`'s numba table where
    it pays (:func:`_table_pays`; no nulls), else by polars (:func:`_dense_ids_by_join`), the same ids either way."""
    if codes.len() and _table_pays(codes.len()) and not codes.has_nulls():
        from di.convert.logs import idtable

        return idtable.dense_ids(codes)
    return _dense_ids_by_join(codes)


def _dense_ids_by_join(codes: pl.Series) -> tuple[pl.Series, pl.Series]:
    """:func:`dense_ids` by polars: one join of the rows' codes to the distinct ones, no sort (a rank, or a binary
    search in the sorted distinct codes, costs more where they are many)."""
    firsts = codes.is_first_distinct().arg_true()
    distinct = pl.DataFrame(
        [codes[firsts].alias("code"), pl.int_range(len(firsts), dtype=pl.UInt32, eager=True).alias("kid")]
    )
    ids = codes.alias("code").to_frame().join(distinct, on="code", how="left", maintain_order="left")
    return ids.get_column("kid"), firsts


def distinct_ids_by_join(values: pl.Series) -> tuple[pl.Series, pl.Series]:
    """:func:`distinct_ids` by a join on the values themselves (ids in order of first row)."""
    rows = values.rename("v").to_frame().with_row_index("row")
    firsts = rows.unique("v", keep="first", maintain_order=True).with_row_index("kid")
    ids = rows.join(firsts[["v", "kid"]], on="v", how="left", maintain_order="left", nulls_equal=True)
    return ids.get_column("kid"), firsts.get_column("row")
