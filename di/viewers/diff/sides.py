"""Putting one table of run A beside the same table of run B.

Every diff table is a full outer join of A's and B's rows on a key: the key
columns once, then each value column twice (``a_X``, ``b_X``), and the
difference ``delta_X = b_X - a_X`` for the columns that have one. A row
present in one run only keeps nulls on the other side for measurements that
have no meaning there (a ratio, a mean) and zeros for counts and totals (what
B does not run, it spends no time in).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

STATUS = ("added", "removed", "changed", "same")
"""``status`` of a named row: only in B, only in A, in both with another total time, in both with the same."""


def side_by_side(
    a: pl.DataFrame,
    b: pl.DataFrame,
    key: Sequence[str],
    *,
    totals: Sequence[str] = (),
    values: Sequence[str] = (),
    deltas: Sequence[str] = (),
) -> pl.DataFrame:
    """A's and B's rows joined on ``key``.

    Args:
        a, b: frames holding ``key`` and the value columns.
        key: the columns rows are matched on.
        totals: counts and sums: a side that lacks the row gets 0.
        values: other measurements (means, ratios): a side that lacks the row gets null.
        deltas: columns (of ``totals`` or ``values``) that also get ``delta_X = b_X - a_X``.

    Returns:
        key, then ``a_X``, ``b_X`` for each column of ``totals`` and ``values``, then the deltas,
        and ``in_a``/``in_b`` (whether the row exists in that run).
    """
    cols = [*totals, *values]
    left = a.select(*key, *(pl.col(c).alias(f"a_{c}") for c in cols), pl.lit(True).alias("in_a"))
    right = b.select(*key, *(pl.col(c).alias(f"b_{c}") for c in cols), pl.lit(True).alias("in_b"))
    joined = left.join(right, on=list(key), how="full", coalesce=True, nulls_equal=True)
    joined = joined.with_columns(
        pl.col("in_a", "in_b").fill_null(False), *(pl.col(f"{s}_{c}").fill_null(0) for c in totals for s in "ab")
    )
    return joined.with_columns(*((pl.col(f"b_{c}") - pl.col(f"a_{c}")).alias(f"delta_{c}") for c in deltas))


def with_status(df: pl.DataFrame, total: str = "total_ns") -> pl.DataFrame:
    """Add ``status`` (see :data:`STATUS`) to a :func:`side_by_side` frame of named rows."""
    return df.with_columns(
        pl.when(~pl.col("in_a"))
        .then(pl.lit("added"))
        .when(~pl.col("in_b"))
        .then(pl.lit("removed"))
        .when(pl.col(f"a_{total}") != pl.col(f"b_{total}"))
        .then(pl.lit("changed"))
        .otherwise(pl.lit("same"))
        .cast(pl.Enum(STATUS))
        .alias("status")
    )


def by_change(df: pl.DataFrame, delta: str = "delta_ns", *tie: str) -> pl.DataFrame:
    """Rows sorted by ``|delta|``, largest first (ties by the ``tie`` columns, ascending)."""
    return df.sort(pl.col(delta).abs(), *tie, descending=[True, *(False for _ in tie)], nulls_last=True)
