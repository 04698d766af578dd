"""The overlap section: the share of one activity hidden behind another (communication behind compute ...)."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
import polars as pl

from di.viewers.rows_shown import unusual_rank_rows
from di.viewers.terminal.tables import RANKS_SHOWN, pct_text, print_table


def render_overlap(result: Analysis, console: Any) -> None:
    """Each rank's (and step's) share of each activity hidden behind another; of more than :data:`RANKS_SHOWN`
    ranks, those whose shares are least like the median rank's (each step's rows against that step's)."""
    from rich.table import Table

    if result.overlap is None:
        return
    pairs = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")
    wide = result.overlap.pivot(on="pair", index=["rank", "step"], values="ratio").sort(
        "rank", "step", nulls_last=False
    )
    ratios = [pl.col(p) for p in pairs if p in wide.columns]
    wide, more = unusual_rank_rows(wide, ratios, RANKS_SHOWN, groups=pl.col("step").fill_null(-1))
    t = Table(title=f"Overlap (% of the first activity hidden behind the second; — = undefined{more})")
    for c in ("rank", "step", *pairs):
        t.add_column(c, justify="right")
    for r in wide.iter_rows(named=True):
        t.add_row(str(r["rank"]), "" if r["step"] is None else str(r["step"]), *(pct_text(r.get(p)) for p in pairs))
    print_table(console, t)
