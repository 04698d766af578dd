"""The step-time section: each rank's step durations, then the steps slowest against their rank's median."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.viewers.rows_shown import more_note
from di.viewers.terminal.tables import RANKS_SHOWN, ms_text, pct_text, print_table

SLOWEST_STEPS_SHOWN = 5


def render_step_times(result: Analysis, console: Any) -> None:
    """Each rank's step durations (the :data:`RANKS_SHOWN` longest medians first), then the steps slowest against their rank's
    median."""
    from rich.table import Table

    from di.engine.slow_steps import NOTES
    from di.engine.step_times import SLOW_SLOWDOWN

    st = result.step_times
    if st is None or not st.height:
        return
    shown = st.sort("median_ns", "rank", descending=[True, False]).head(RANKS_SHOWN)
    more = more_note(shown.height, st.height, rule="with the longest median step")
    sources = ", ".join(st.get_column("source").unique(maintain_order=True).to_list())
    t = Table(
        title=f"Step times per rank (steps from {sources}; slow = over {1 + SLOW_SLOWDOWN:g}x the rank's median{more})"
    )
    columns = ("rank", "steps", "median ms", "p90 ms", "max ms", "slowest", "cv %", "slow")
    several = st.height > 1
    for c in (*columns, "vs fastest %") if several else columns:
        t.add_column(c, justify="right")
    for r in shown.iter_rows(named=True):
        cells = [
            str(r["rank"]),
            f"{r['steps']:,}",
            ms_text(r["median_ns"]),
            ms_text(r["p90_ns"]),
            ms_text(r["max_ns"]),
            str(r["slowest_step"]),
            pct_text(r["cv"]),
            f"{r['slow_steps']:,}",
        ]
        t.add_row(*cells, pct_text(r["vs_fastest"])) if several else t.add_row(*cells)
    print_table(console, t)
    slow = result.slow_steps
    if slow is None or not slow.height:
        return
    t = Table(title=f"Slowest steps against their rank's median ({slow.height:,} over {1 + SLOW_SLOWDOWN:g}x)")
    why = slow.select(pl.any_horizontal(pl.col(NOTES).is_not_null()).any()).item()
    for c in ("rank", "step", "label", "ms", "vs median %", *(("in the step",) if why else ())):
        t.add_column(c, justify="left" if c in ("label", "in the step") else "right")
    for r in (
        slow.sort("slowdown", "rank", "step", descending=[True, False, False])
        .head(SLOWEST_STEPS_SHOWN)
        .iter_rows(named=True)
    ):
        cells = [str(r["rank"]), str(r["step"]), r["label"] or "", ms_text(r["duration_ns"]), pct_text(r["slowdown"])]
        notes = "; ".join(r[c] for c in NOTES if r[c])
        t.add_row(*cells, notes) if why else t.add_row(*cells)
    print_table(console, t)
