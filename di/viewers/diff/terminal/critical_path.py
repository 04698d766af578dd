"""The critical path's composition by category and by name in the terminal summary: the rows that changed,
largest |Δ| first."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.terminal.cells import TOP, cut, ms, new_table, pct, signed_ms


def print_critical_path(console: Any, d: Diff) -> None:
    for df, col, title in (
        (d.cp_by_category, "category", "Critical path by category"),
        (d.cp_by_name, "name", "Critical path by name"),
    ):
        rows = df.filter(pl.col("delta_ns") != 0)
        if not rows.height:
            continue
        t = new_table(f"{title} (largest |Δ| first)", col, "A ms", "B ms", "Δ ms", "A %", "B %")
        for r in rows.head(TOP if col == "name" else 20).iter_rows(named=True):
            t.add_row(
                cut(r[col]),
                ms(r["a_contrib_ns"]),
                ms(r["b_contrib_ns"]),
                signed_ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
        console.print(t)
