"""Training phases in the terminal summary: the headline of the largest host-time change
(:func:`di.viewers.diff.results.phases_headline`) and the rank/phase rows that changed."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.terminal.cells import TOP, ms, new_table, pct, signed_ms
from di.viewers.terminal import print_table


def phases_line(d: Diff) -> str | None:
    """The headline of the largest change of a training phase's host time (ms, and % of the rank's steps), with the
    GPUs' idle time in it, when it is at least :data:`di.viewers.diff.results.PHASES_HEADLINE_SHARE` of the rank's
    step time in A; else None."""
    from di.viewers.diff.results import phases_headline

    r = phases_headline(d.phases)
    if r is None:
        return None
    idle = ""
    if r["a_gpu_idle_ns"] is not None or r["b_gpu_idle_ns"] is not None:
        idle = f"; GPUs idle in it {ms(r['a_gpu_idle_ns'])} → {ms(r['b_gpu_idle_ns'])} ms"
    return (
        f"Training phase (rank {r['rank']}, {r['phase']}): host {ms(r['a_host_ns'])} → {ms(r['b_host_ns'])} ms "
        f"({signed_ms(r['delta_host_ns'])} ms), {pct(r['a_host_share'])}% → {pct(r['b_host_share'])}% of its "
        f"steps{idle}"
    )


def print_phases(console: Any, d: Diff) -> None:
    p = d.phases
    if not p.height:
        return
    moved = p.filter(
        pl.col("a_host_ns").ne_missing(pl.col("b_host_ns"))
        | pl.col("a_gpu_idle_ns").ne_missing(pl.col("b_gpu_idle_ns"))
    )
    if not moved.height:
        console.print("Training phases: no change")
        return
    t = new_table(
        "Training phases that changed: host time (largest |Δ| first)",
        "rank",
        "phase",
        "A ms",
        "B ms",
        "Δ ms",
        "% A→B",
        "idle Δ ms",
    )
    moved = moved.sort(pl.col("delta_host_ns").abs(), descending=True, nulls_last=True, maintain_order=True)
    for r in moved.head(TOP).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["phase"],
            ms(r["a_host_ns"]),
            ms(r["b_host_ns"]),
            signed_ms(r["delta_host_ns"]),
            f"{pct(r['a_host_share'])}→{pct(r['b_host_share'])}",
            signed_ms(r["delta_gpu_idle_ns"]),
        )
    print_table(console, t)
    console.print("[dim]%: of the rank's steps; idle: the GPUs' idle time during the phase[/dim]")
    if moved.height > TOP:
        console.print(f"[dim]{moved.height - TOP} more changed rank/phase rows in the JSON and the HTML page[/dim]")
