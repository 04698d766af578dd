"""The imbalance section: per step, side and state, the busiest rank against the mean over the ranks."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.breakdown import STATE_LABELS
from di.engine.imbalance import WORK
from di.viewers.terminal.tables import ms_text, pct_text, print_table


def render_imbalance(result: Analysis, console: Any) -> None:
    from rich.table import Table

    imb = result.imbalance
    if imb is None or not imb.height:
        return
    t = Table(
        title=f"Imbalance across ranks (work = {' + '.join(STATE_LABELS.get(w, w) for w in WORK)}; max rank of work = straggler)"
    )
    for c in ("step", "side", "state", "max ms", "mean ms", "max/mean-1 %", "(max-mean)/max %", "max rank"):
        t.add_column(c, justify="right")
    rows = imb.filter(pl.col("max_ns") > 0).sort("step", "side", "state", nulls_last=False)
    for r in rows.head(40).iter_rows(named=True):
        t.add_row(
            "all" if r["step"] is None else str(r["step"]),
            r["side"],
            r["state"],
            ms_text(r["max_ns"]),
            ms_text(r["mean_ns"]),
            pct_text(r["imbalance"]),
            pct_text(r["percent_imbalance"]),
            str(r["max_rank"]),
        )
    print_table(console, t)
