"""The counter section: each counter series' samples and values in the window, or with many series, each name's."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.viewers.terminal.tables import print_table

COUNTER_ROWS_SHOWN = 24
"""Counter series shown one per row; with more, one row per counter name (over its timelines)."""


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:,.4g}"


def render_counters(result: Analysis, console: Any) -> None:
    """Each counter series' samples, min, mean, max and last value, those whose value changed first; with more
    than :data:`COUNTER_ROWS_SHOWN` series, one row per name and unit over its timelines."""
    from rich.table import Table

    c = result.counters
    if c is None or not c.height:
        return
    # the series that moved first (utilisation, power, clocks, loss), then the constant ones (sizes, limits)
    c = c.sort(pl.col("max") == pl.col("min"), maintain_order=True)
    odd = bool(c.get_column("nonfinite").sum())  # NaN or infinite readings: a column of their own
    if c.height <= COUNTER_ROWS_SHOWN:
        t = Table(title="Counters in the window (cumulative ones as rates; min to last of the finite readings)")
        cols = ("timeline", "counter", "unit", "samples", *(("NaN/inf",) if odd else ()), "min", "mean", "max", "last")
        for col in cols:
            t.add_column(col, justify="left" if col in ("timeline", "counter", "unit") else "right")
        for r in c.iter_rows(named=True):
            t.add_row(
                r["location"] or "",
                r["name"],
                r["unit"] or "",
                f"{r['samples']:,}",
                *((f"{r['nonfinite']:,}",) if odd else ()),
                *(_num(r[k]) for k in ("min", "mean", "max", "last")),
            )
        print_table(console, t)
        return
    finite = pl.col("samples") - pl.col("nonfinite")  # the readings each series' mean is of
    by_name = (
        c.with_columns((pl.col("mean") * finite).alias("total"), finite.alias("finite"))
        .group_by("name", "unit", maintain_order=True)
        .agg(
            pl.len().alias("timelines"),
            pl.col("samples").sum(),
            pl.col("min").min(),
            (pl.col("total").sum() / pl.col("finite").sum()).alias("mean"),
            pl.col("max").max(),
            pl.col("location").get(pl.col("max").arg_max()).alias("max_at"),
        )
    )
    t = Table(title=f"Counters in the window, {c.height:,} series by name (cumulative ones as rates; all in --csv)")
    for col in ("counter", "unit", "timelines", "samples", "min", "mean", "max", "max on"):
        t.add_column(col, justify="left" if col in ("counter", "unit", "max on") else "right")
    for r in by_name.head(COUNTER_ROWS_SHOWN).iter_rows(named=True):
        t.add_row(
            r["name"],
            r["unit"] or "",
            f"{r['timelines']:,}",
            f"{r['samples']:,}",
            *(_num(r[k]) for k in ("min", "mean", "max")),
            r["max_at"] or "",
        )
    print_table(console, t)
