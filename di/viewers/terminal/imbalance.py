"""The imbalance section: per step, side and state, the busiest rank against the mean over the ranks."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.breakdown import STATE_LABELS
from di.engine.imbalance import WORK
from di.viewers.terminal.tables import ms_text, pct_text, print_table


IMBALANCE_ROWS_SHOWN = 40
"""The most rows of the imbalance table: the whole window's, then the steps' most imbalanced (all in ``--csv``)."""


def render_imbalance(result: Analysis, console: Any) -> None:
    """Per side and state, the busiest rank against the mean over the ranks: the whole window's rows, then the
    steps' rows with the largest max/mean-1, up to :data:`IMBALANCE_ROWS_SHOWN` rows."""
    from rich.table import Table

    imb = result.imbalance
    if imb is None or not imb.height:
        return
    busy = imb.filter(pl.col("max_ns") > 0)
    whole = busy.filter(pl.col("step").is_null()).sort("side", "state")
    steps = busy.filter(pl.col("step").is_not_null())
    worst = steps.sort("imbalance", "step", "side", "state", descending=[True, False, False, False], nulls_last=True)
    rows = pl.concat([whole, worst]).head(IMBALANCE_ROWS_SHOWN)
    left = busy.height - rows.height
    more = f"; then the steps' most imbalanced rows; {left} more in --csv/--json" if left else ""
    t = Table(
        title=f"Imbalance across ranks (work = {' + '.join(STATE_LABELS.get(w, w) for w in WORK)}; max rank of work "
        f"= straggler{more})"
    )
    for c in ("step", "side", "state", "max ms", "mean ms", "max/mean-1 %", "(max-mean)/max %", "max rank"):
        t.add_column(c, justify="right")
    for r in rows.iter_rows(named=True):
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
