"""Counters on the page: each series' samples, mean and max over the window in A and B, and the relative change
of the mean."""

from __future__ import annotations

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import ROWS
from di.viewers.report.page import Section, num, pct, table


def counters_section(d: Diff) -> Section | None:
    c = d.counters
    if not c.height:
        return None
    rows = [
        (
            r["location"] or "",
            r["name"],
            r["unit"] or "",
            num(r["a_samples"]),
            num(r["b_samples"]),
            num(r["a_mean"], "{:,.4g}"),
            num(r["b_mean"], "{:,.4g}"),
            pct(r["rel_mean"]),
            num(r["a_max"], "{:,.4g}"),
            num(r["b_max"], "{:,.4g}"),
        )
        for r in c.head(ROWS).iter_rows(named=True)
    ]
    cols = ["where", "counter", "unit", "a_samples", "b_samples", "a_mean", "b_mean", "rel_mean", "a_max", "b_max"]
    note = (
        '<p class="note">Mean over the window (cumulative counters as rates per second); rel_mean = (B - A) / |A|.</p>'
    )
    return Section("counters", "Counters", table("counters", cols, rows) + note)
