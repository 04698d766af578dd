"""The temporal-breakdown section: each scope's span split into exclusive states (compute, comm, io, idle ...)."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.engine.breakdown import STATE_LABELS, STATE_NAMES as STATES
from di.viewers.terminal.tables import ms_text, pct_text, print_table


def render_breakdown(result: Analysis, console: Any) -> None:
    from rich.table import Table

    if result.breakdown is None:
        return
    wide = result.breakdown.pivot(on="state", index=["rank", "scope", "step", "span_ns"], values="share").sort(
        "rank", "scope", "step", nulls_last=False
    )
    shown = [s for s in STATES if s == "idle" or (s in wide.columns and (wide.get_column(s).fill_null(0) > 0).any())]
    hidden = [STATE_LABELS.get(s, s) for s in STATES if s not in shown]
    t = Table(
        title="Temporal breakdown (% of each scope's span; states exclusive, never summed overlaps)",
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
