"""Counters whose mean over the window changed, in the terminal summary (largest change first)."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.terminal.cells import TOP, cut, new_table, rel
from di.viewers.terminal import print_table


def print_counters(console: Any, d: Diff) -> None:
    c = d.counters.filter((pl.col("delta_mean") != 0) | pl.col("delta_mean").is_null())
    if not c.height:
        console.print("Counters: " + ("no change" if d.counters.height else "none in either run"))
        return
    t = new_table(
        "Counters (A→B, mean over the window; largest change first)", "where", "counter", "unit", "mean", "Δ", "max"
    )
    for r in c.head(TOP).iter_rows(named=True):
        t.add_row(
            cut(r["location"], 24),
            cut(r["name"], 40),
            r["unit"] or "",
            f"{_val(r['a_mean'])}→{_val(r['b_mean'])}",
            rel(r["a_mean"], r["b_mean"]),
            f"{_val(r['a_max'])}→{_val(r['b_max'])}",
        )
    print_table(console, t)


def _val(x: float | None) -> str:
    return "—" if x is None else f"{x:,.4g}"
