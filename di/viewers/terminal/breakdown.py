"""The temporal-breakdown section: each scope's span split into exclusive states (compute, comm, io, idle ...)."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.breakdown import STATE_LABELS, STATE_NAMES as STATES
from di.viewers.rows_shown import unusual_rank_rows
from di.viewers.terminal.tables import RANKS_SHOWN, ms_text, pct_text, print_table


def render_breakdown(result: Analysis, console: Any) -> None:
    """Each scope's span and its states' shares; of more than :data:`RANKS_SHOWN` ranks, the rows of those with the
    scopes least like the median one of their kind (host, GPU) and step."""
    from rich.table import Table

    if result.breakdown is None:
        return
    wide = result.breakdown.pivot(on="state", index=["rank", "scope", "step", "span_ns"], values="share").sort(
        "rank", "scope", "step", nulls_last=False
    )
    shown = [s for s in STATES if s == "idle" or (s in wide.columns and (wide.get_column(s).fill_null(0) > 0).any())]
    hidden = [STATE_LABELS.get(s, s) for s in STATES if s not in shown]
    kind = pl.struct(pl.col("scope").str.replace(r"\d+$", ""), "step").rank("dense")  # a GPU against GPUs, per step
    states = [pl.col(s) for s in shown if s in wide.columns]
    wide, more = unusual_rank_rows(wide, states, RANKS_SHOWN, "whose scopes are least like the median one", kind)
    t = Table(
        title=f"Temporal breakdown (% of each scope's span; states exclusive, never summed overlaps{more})",
        caption=f"0.0 everywhere: {', '.join(hidden)}" if hidden else None,
    )
    for c in ("rank", "scope", *(("step",) if wide.get_column("step").is_not_null().any() else ()), "span ms"):
        t.add_column(c, justify="right")
    for s in shown:
        t.add_column(STATE_LABELS.get(s, s), justify="right")
    per_step = "step" in [c.header for c in t.columns]
    for r in wide.iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["scope"],
            *(("" if r["step"] is None else str(r["step"]),) if per_step else ()),
            ms_text(r["span_ns"]),
            *(pct_text(r.get(s)) for s in shown),
        )
    print_table(console, t)
