"""The wait-state section (Scalasca): per rank and kind, the time it waited and the time it made others wait."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.viewers.rows_shown import more_note
from di.viewers.terminal.tables import RANKS_SHOWN, ms_text, print_table


def render_waits(result: Analysis, console: Any) -> None:
    """Per rank and kind of wait, the time the rank waited and the time it made others wait; of more than
    :data:`RANKS_SHOWN` ranks, those that waited and caused the most (summed over the kinds)."""
    from rich.table import Table

    w = result.wait_states
    if w is None:
        return
    if not w.height:
        console.print("Wait states: none (no messages or collectives with waits in the window)")
        return
    waited = w.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited"))
    caused = w.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused"))
    both = waited.join(caused, on=["rank", "kind"], how="full", coalesce=True).fill_null(0)
    per_rank = both.group_by("rank").agg((pl.col("waited") + pl.col("caused")).sum().alias("total"))
    picked = per_rank.sort("total", "rank", descending=[True, False]).head(RANKS_SHOWN).get_column("rank")
    both = both.filter(pl.col("rank").is_in(picked.implode())).sort("rank", "kind")
    more = more_note(picked.len(), per_rank.height, rule="that waited and caused the most")
    t = Table(title=f"Wait states (Scalasca): time waited, and time caused to others{more}")
    for c in ("rank", "kind", "waited ms", "caused ms"):
        t.add_column(c, justify="right")
    for r in both.iter_rows(named=True):
        t.add_row(str(r["rank"]), r["kind"], ms_text(r["waited"]), ms_text(r["caused"]))
    print_table(console, t)
