"""The GPU-idle section: each GPU's idle time by cause, then its longest idle gaps."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.gpu_idle import CAUSE_HELP, CAUSE_LABELS, CAUSES
from di.viewers.rows_shown import unusual_rank_rows
from di.viewers.terminal.tables import RANKS_SHOWN, ms_text, pct_text, print_table, short_name

GAPS_SHOWN = 5
"""Longest GPU idle gaps in the terminal (more in ``--json``/``--csv``)."""


def render_gpu_idle(result: Analysis, console: Any) -> None:
    """Each GPU's idle time by cause (the whole window's rows; of more than :data:`RANKS_SHOWN` ranks, those whose
    GPUs are least like the median GPU), then the longest gaps."""
    from rich.table import Table

    idle = result.gpu_idle
    if idle is None or not idle.height:
        return
    whole = idle.filter(pl.col("step").is_null())
    wide = whole.pivot(on="cause", index=["rank", "scope", "idle_ns", "span_ns"], values="share").sort("rank", "scope")
    shown = [c for c in CAUSES if c in wide.columns and (wide.get_column(c).fill_null(0) > 0).any()]
    span_share = pl.col("idle_ns") / pl.col("span_ns").replace(0, None)
    causes = [span_share, *(pl.col(c) for c in shown)]
    wide, more = unusual_rank_rows(wide, causes, RANKS_SHOWN, "whose GPUs are least like the median one")
    t = Table(
        title=f"Why the GPUs are idle (% of each GPU's idle time{more})",
        caption="; ".join(f"{CAUSE_LABELS[c]}: {CAUSE_HELP[c]}" for c in shown),
    )
    for c in ("rank", "gpu", "idle ms", "% span", *(CAUSE_LABELS[c] for c in shown)):
        t.add_column(c, justify="right")
    for r in wide.iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["scope"],
            ms_text(r["idle_ns"]),
            pct_text(r["idle_ns"] / r["span_ns"] if r["span_ns"] else None),
            *(pct_text(r.get(c)) for c in shown),
        )
    print_table(console, t)
    gaps = result.gpu_idle_gaps
    if gaps is None or not gaps.height:
        return
    g = Table(title="Longest GPU idle gaps (the work that ended each, its launch and the operator that launched it)")
    for c in ("rank", "gpu", "ms", "cause", "next", "launch", "operator"):
        g.add_column(c, justify="right" if c in ("rank", "gpu", "ms") else "left")
    for r in gaps.head(GAPS_SHOWN).iter_rows(named=True):
        g.add_row(
            str(r["rank"]),
            str(r["device"]),
            ms_text(r["dur_ns"]),
            CAUSE_LABELS[r["cause"]],
            short_name(r["next"], 40),
            short_name(r["launch"], 24),
            short_name(r["operator"], 32),
        )
    print_table(console, g)
