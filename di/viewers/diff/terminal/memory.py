"""Peak device memory in the terminal summary: the headline of the largest change
(:func:`di.viewers.diff.results.memory_headline`) and the table per rank and device, in MiB."""

from __future__ import annotations

from typing import Any

from di.viewers.diff import Diff
from di.viewers.diff.terminal.cells import TOP, cut, new_table, pair, rel, short, signed_mib
from di.viewers.terminal import mib_text, print_table


def memory_line(d: Diff) -> str | None:
    """The headline of the largest peak-memory change (MiB), when it is at least
    :data:`di.viewers.diff.results.MEMORY_HEADLINE_SHARE` of A's peak; else None."""
    from rich.markup import escape

    from di.viewers.diff.results import memory_headline

    r = memory_headline(d.memory)
    if r is None:
        return None
    return (
        f"Peak memory (rank {r['rank']}, {escape(r['device'])}): {mib_text(r['a_peak_bytes'])} → {mib_text(r['b_peak_bytes'])} MiB "
        f"({signed_mib(r['delta_peak_bytes'])} MiB, {rel(r['a_peak_bytes'], r['b_peak_bytes'])})"
    )


def print_memory(console: Any, d: Diff) -> None:
    m = d.memory
    if not m.height:
        return
    t = new_table(
        "Peak device memory (MiB)",
        "rank",
        "device",
        "A",
        "B",
        "Δ",
        "Δ %",
        "reserved at peak A→B",
        "growth/step A→B",
        "op at peak A → B",
    )
    for r in m.head(TOP).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            cut(r["device"]),
            mib_text(r["a_peak_bytes"]),
            mib_text(r["b_peak_bytes"]),
            signed_mib(r["delta_peak_bytes"]),
            rel(r["a_peak_bytes"], r["b_peak_bytes"]),
            f"{mib_text(r['a_reserved_at_peak_bytes'])}→{mib_text(r['b_reserved_at_peak_bytes'])}",
            f"{mib_text(r['a_growth_bytes_per_step'])}→{mib_text(r['b_growth_bytes_per_step'])}",
            pair(short(r["a_op"], 40), short(r["b_op"], 40)),
        )
    print_table(console, t)
    if m.height > TOP:
        console.print(f"[dim]{m.height - TOP} more rank/device rows in the JSON and the HTML page[/dim]")
