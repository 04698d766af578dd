"""The wait-state section (Scalasca): per rank and kind, the time it waited and the time it made others wait."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.viewers.terminal.tables import ms_text, print_table


def render_waits(result: Analysis, console: Any) -> None:
    from rich.table import Table

    w = result.wait_states
    if w is None:
        return
    if not w.height:
        console.print("Wait states: none (no messages or collectives with waits in the window)")
        return
    t = Table(title="Wait states (Scalasca): time waited, and time caused to others")
    for c in ("rank", "kind", "waited ms", "caused ms"):
        t.add_column(c, justify="right")
    waited = w.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited"))
    caused = w.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused"))
    both = waited.join(caused, on=["rank", "kind"], how="full", coalesce=True).fill_null(0).sort("rank", "kind")
    for r in both.iter_rows(named=True):
        t.add_row(str(r["rank"]), r["kind"], ms_text(r["waited"]), ms_text(r["caused"]))
    print_table(console, t)
