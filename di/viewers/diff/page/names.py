"""Kernels (with those renamed or re-tiled), operators and GPU time by launching call stack on the page
(:mod:`di.viewers.diff.names`): every row, largest |Δ total| first."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import ROWS, more
from di.viewers.report.page import Section, ms, num, table

NAMED = [
    "name",
    "cat",
    "status",
    "a_count",
    "b_count",
    "a_total_ns",
    "b_total_ns",
    "delta_ns",
    "a_mean_ns",
    "b_mean_ns",
]


def kernels_section(d: Diff) -> Section | None:
    sec = named_section(d.kernels, "kernels", "GPU kernels by name", extra=("match", "matched_name"))
    if sec is None:
        return None
    pairs = d.kernels.filter((pl.col("match") == "op") & (pl.col("status") == "removed"))
    if pairs.height:
        partner = d.kernels.select(pl.col("name").alias("matched_name"), pl.col("b_total_ns").alias("p_ns"))
        rows = [
            (
                r["name"],
                r["matched_name"],
                r["match_stack"],
                ms(r["a_total_ns"]),
                ms(r["p_ns"]),
                ms(r["p_ns"] - r["a_total_ns"]),
            )
            for r in pairs.join(partner, on="matched_name").iter_rows(named=True)
        ]
        sec.body += "<h3>Renamed or re-tiled (paired by the CPU call stack that launched them)</h3>" + table(
            "renamed", ["a_name", "b_name", "launched_from", "a_total_ns", "b_total_ns", "delta_ns"], rows
        )
        sec.hints.append(f"{pairs.height} kernel(s) of A appear under another name in B, launched from the same op.")
    return sec


def named_section(df: pl.DataFrame, key: str, title: str, extra: tuple[str, ...] = ()) -> Section | None:
    if not df.height:
        return None
    rows = [tuple(_value(c, r[c]) for c in (*NAMED, *extra)) for r in df.head(ROWS).iter_rows(named=True)]
    counts = df.group_by("status").len().rows_by_key("status")
    said = ", ".join(f"{counts[s][0][0]} {s}" for s in ("changed", "added", "removed", "same") if s in counts)
    body = f'<p class="note">{said}; largest |Δ total| first.{more(df)}</p>' + table(key, [*NAMED, *extra], rows)
    return Section(key, title, body, [])


def stacks_section(d: Diff) -> Section | None:
    df = d.kernel_stacks
    if not df.height:
        return None
    rows = [
        (
            r["stack"],
            r["status"],
            num(r["a_count"]),
            num(r["b_count"]),
            ms(r["a_total_ns"]),
            ms(r["b_total_ns"]),
            ms(r["delta_ns"]),
            ", ".join(r["names"] or []),
        )
        for r in df.head(ROWS).iter_rows(named=True)
    ]
    body = (
        '<p class="note">GPU time by the CPU call stack (outermost first) whose runtime call launched it; kernels renamed or re-tiled under '
        f"the same stack stay on one row.{more(df)}</p>"
        + table(
            "kernel_stacks",
            ["stack", "status", "a_count", "b_count", "a_total_ns", "b_total_ns", "delta_ns", "names"],
            rows,
        )
    )
    return Section("kernel_stacks", "GPU time by launching call stack", body)


def _value(col: str, v: Any) -> Any:
    if col.endswith("_ns"):
        return ms(v)
    if col.endswith("_count"):
        return num(v)
    return v
