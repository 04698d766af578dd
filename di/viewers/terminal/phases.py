"""The training-phases section: each rank's share of its steps in each phase, and how long its GPUs sat idle in it."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.viewers.rows_shown import unusual_rank_rows
from di.viewers.terminal.tables import RANKS_SHOWN, ms_text, pct_text, print_table

PHASE_IDLE_NOTE = 0.05
"""A note under the phases table names the rank and phase whose GPUs sit idle longest when that is at least this share
of the rank's time."""


def render_phases(result: Analysis, console: Any) -> None:
    """Each rank's share of its steps in each training phase, with the share its GPUs sat idle in it; of more than
    :data:`RANKS_SHOWN` ranks, those whose shares are least like the median rank's."""
    from rich.table import Table

    from di.engine.phases import PHASES

    ph = result.phases
    if ph is None or not ph.height:
        return
    whole = ph.filter(pl.col("step").is_null())
    present = [p for p in PHASES if p in set(whole.get_column("phase").to_list())]
    gpu = whole.get_column("gpu_ns").null_count() < whole.height
    idle_share = (pl.col("gpu_idle_ns") / pl.col("time_ns")).fill_nan(None)
    per_rank = whole.with_columns(idle_share.alias("idle_share")).pivot(
        on="phase", index="rank", values=["host_share", "idle_share"], sort_columns=True
    )
    per_rank, more = unusual_rank_rows(per_rank, [pl.all().exclude("rank")], RANKS_SHOWN)
    shown = per_rank.get_column("rank").to_list()
    how = "; GPU idle: the part with the rank's GPUs idle" if gpu else ""
    t = Table(title=f"Training phases: % of each rank's steps on the host{how}{more}")
    for c in ("rank", "time ms", *(("",) if gpu else ()), *present):
        t.add_column(c, justify="left" if c == "" else "right")
    cells = {(r["rank"], r["phase"]): r for r in whole.iter_rows(named=True)}
    for rank in shown:
        rows = [cells.get((rank, p)) for p in present]
        time_ns = next(r["time_ns"] for r in rows if r is not None)
        host = [pct_text(r["host_share"]) if r is not None else "—" for r in rows]
        if not gpu:
            t.add_row(str(rank), ms_text(time_ns), *host)
            continue
        idle = [
            pct_text(r["gpu_idle_ns"] / time_ns) if r is not None and r["gpu_idle_ns"] is not None and time_ns else "—"
            for r in rows
        ]
        t.add_row(str(rank), ms_text(time_ns), "host", *host)
        t.add_row("", "", "GPU idle", *idle)
    print_table(console, t)
    worst = (
        whole.filter(pl.col("gpu_idle_ns").is_not_null() & (pl.col("time_ns") > 0))
        .with_columns((pl.col("gpu_idle_ns") / pl.col("time_ns")).alias("idle"))
        .sort("idle", "rank", descending=[True, False])
        .head(1)
    )
    for r in worst.filter(pl.col("idle") >= PHASE_IDLE_NOTE).iter_rows(named=True):
        console.print(
            f"Rank {r['rank']}'s GPUs sat idle {ms_text(r['gpu_idle_ns'])} ms ({pct_text(r['idle'])}% of its steps) in its "
            f"{r['phase']} phase."
        )
