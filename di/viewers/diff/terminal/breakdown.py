"""Where the time went, in the terminal summary: the time per state summed over ranks with the overlap of
activities, and the GPUs' idle time per cause (:func:`di.viewers.diff.results.breakdown_totals`,
:func:`di.viewers.diff.results.gpu_idle_totals`); the rows that changed."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.sides import by_change
from di.viewers.diff.terminal.cells import TOP, ms, new_table, pct, rel, signed_ms
from di.viewers.terminal import print_table


def print_gpu_idle(console: Any, d: Diff) -> None:
    from di.engine.gpu_idle import CAUSE_LABELS
    from di.viewers.diff.results import gpu_idle_totals

    tot = gpu_idle_totals(d.gpu_idle).filter(pl.col("delta_ns") != 0)
    if not tot.height:
        return
    t = new_table(
        "Why the GPUs are idle: idle time per cause, summed over the GPUs", "cause", "A ms", "B ms", "Δ ms", "Δ %"
    )
    for r in tot.iter_rows(named=True):
        t.add_row(
            CAUSE_LABELS.get(r["cause"], r["cause"]),
            ms(r["a_time_ns"]),
            ms(r["b_time_ns"]),
            signed_ms(r["delta_ns"]),
            rel(r["a_time_ns"], r["b_time_ns"]),
        )
    print_table(console, t)


def print_breakdown(console: Any, d: Diff) -> None:
    from di.viewers.diff.results import breakdown_totals

    tot = breakdown_totals(d.breakdown).filter(pl.col("delta_ns") != 0)
    if not tot.height:
        console.print("Breakdown: no change")
        return
    t = new_table(
        "Breakdown: time per state, summed over ranks (gpu: the devices, host: CPU threads)",
        "where",
        "state",
        "A ms",
        "B ms",
        "Δ ms",
        "Δ %",
    )
    for r in tot.iter_rows(named=True):
        t.add_row(
            r["kind"],
            r["state"],
            ms(r["a_time_ns"]),
            ms(r["b_time_ns"]),
            signed_ms(r["delta_ns"]),
            rel(r["a_time_ns"], r["b_time_ns"]),
        )
    print_table(console, t)
    ov = d.overlap.filter(pl.col("delta_ratio").abs() > 1e-9)
    if ov.height:
        more = f"; {TOP} of {ov.height} rows, all in --json" if ov.height > TOP else ""
        t = new_table(
            f"Overlap (% of the first activity hidden behind the second; largest |Δ| first{more})",
            "rank",
            "pair",
            "A %",
            "B %",
            "Δ points",
        )
        for r in by_change(ov, "delta_ratio", "rank", "pair").head(TOP).iter_rows(named=True):
            t.add_row(str(r["rank"]), r["pair"], pct(r["a_ratio"]), pct(r["b_ratio"]), f"{100 * r['delta_ratio']:+.1f}")
        print_table(console, t)
