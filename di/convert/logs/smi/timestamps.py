"""``--query-gpu`` timestamps (``YYYY/MM/DD HH:MM:SS.fff``) as int64 ns since the epoch, local time read as UTC.

:func:`epoch_ns` is the reading, an expression; :func:`timestamps` gives the same numbers, reading the usual
timestamps (:data:`PLAIN_TS_RE`) in two cheaper parts; :func:`_ts_once` reads each distinct text once where they
repeat. Null where a text is not a timestamp.
"""

from __future__ import annotations

import polars as pl

from di.convert.logs.text import fraction_ns

TS_RE = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$"
""":data:`~di.convert.logs.smi.query_heads.NOHEADER_RE`'s timestamp, a whole cell."""

PLAIN_TS_RE = r"(?-u)^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?$"
"""The timestamps :func:`timestamps` reads in two parts: ASCII digits, no padding, at most 9 fraction digits."""


def epoch_ns(col: pl.Expr) -> pl.Expr:
    """``--query-gpu`` timestamps (``YYYY/MM/DD HH:MM:SS.fff``, maybe padded) as int64 ns since the epoch (local time
    read as UTC), null where not one."""
    return col.str.strip_chars().str.to_datetime("%Y/%m/%d %H:%M:%S%.f", strict=False, time_unit="ns").dt.epoch("ns")


def timestamps(text: pl.Series, plain: pl.Series | None = None) -> pl.Series:
    """:func:`epoch_ns` of each of ``text``. Those of :data:`PLAIN_TS_RE` (``plain``, when known) are read as whole
    seconds, which polars parses several times faster than a format with a fraction, plus the fraction as an integer
    of ns; the others by :func:`epoch_ns`."""
    plain = text.str.contains(PLAIN_TS_RE).fill_null(False) if plain is None else plain
    t = pl.col("t")
    ns = text.to_frame("t").select(
        t.str.slice(0, 19).str.to_datetime("%Y/%m/%d %H:%M:%S", strict=False, time_unit="ns").dt.epoch("ns")
        + fraction_ns(t)
    )
    ns = ns.to_series().alias(text.name)
    other = (~plain).arg_true()  # (their values above are not theirs)
    if other.len():
        ns = ns.scatter(other, text.gather(other).to_frame("t").select(epoch_ns(pl.col("t"))).to_series())
    return ns


def _ts_once(text: pl.Series) -> pl.Series:
    """``--query-gpu`` timestamps (``text``, strings) as int64 ns, each distinct string read once where they repeat
    (the GPUs of a sample may share theirs)."""
    distinct = text.drop_nulls().unique()
    if 2 * distinct.len() > text.len():
        return timestamps(text)
    return text.replace_strict(distinct, timestamps(distinct), default=None, return_dtype=pl.Int64)
