"""Kernels and operators by name, kernels renamed or re-tiled, and GPU time by the CPU call stack that launched
it (:mod:`di.viewers.diff.names`) in the terminal summary: the rows that changed, largest |Δ| first."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.terminal.cells import TOP, cut, ms, new_table, signed_ms, us
from di.viewers.terminal import print_table


def print_named(console: Any, df: pl.DataFrame, title: str) -> None:
    rows = df.filter(pl.col("status") != "same")
    if not rows.height:
        console.print(f"{title}: no change")
        return
    t = new_table(
        f"{title}: {rows.height} changed, added or removed (largest |Δ| first)",
        "name",
        "status",
        "count A→B",
        "A ms",
        "B ms",
        "Δ ms",
        "mean µs A→B",
    )
    for r in rows.head(TOP).iter_rows(named=True):
        t.add_row(
            cut(r["name"]),
            str(r["status"]),
            f"{r['a_count']}→{r['b_count']}",
            ms(r["a_total_ns"]),
            ms(r["b_total_ns"]),
            signed_ms(r["delta_ns"]),
            f"{us(r['a_mean_ns'])}→{us(r['b_mean_ns'])}",
        )
    print_table(console, t)


def print_renamed(console: Any, d: Diff) -> None:
    pairs = d.kernels.filter((pl.col("match") == "op") & (pl.col("status") == "removed"))
    if not pairs.height:
        return
    b = d.kernels.select(
        pl.col("name").alias("matched_name"),
        pl.col("b_total_ns").alias("partner_b_ns"),
        pl.col("b_count").alias("partner_b_count"),
    )
    t = new_table(
        "Kernels renamed or re-tiled (A's name → B's name, launched from the same CPU call stack)",
        "A name",
        "B name",
        "launched from",
        "A ms",
        "B ms",
        "Δ ms",
    )
    for r in pairs.join(b, on="matched_name").iter_rows(named=True):
        t.add_row(
            cut(r["name"], 45),
            cut(r["matched_name"], 45),
            cut(r["match_stack"], 50),
            ms(r["a_total_ns"]),
            ms(r["partner_b_ns"]),
            signed_ms(r["partner_b_ns"] - r["a_total_ns"]),
        )
    print_table(console, t)


def print_stacks(console: Any, d: Diff) -> None:
    rows = d.kernel_stacks.filter(pl.col("delta_ns") != 0)
    if not rows.height:
        return
    t = new_table(
        "GPU time by the CPU call stack that launched it (largest |Δ| first)",
        "launched from",
        "A count",
        "B count",
        "A ms",
        "B ms",
        "Δ ms",
    )
    for r in rows.head(TOP).iter_rows(named=True):
        t.add_row(
            cut(r["stack"], 90),
            str(r["a_count"]),
            str(r["b_count"]),
            ms(r["a_total_ns"]),
            ms(r["b_total_ns"]),
            signed_ms(r["delta_ns"]),
        )
    print_table(console, t)
