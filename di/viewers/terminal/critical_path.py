"""The critical-path section: its length, then its time by category, rank and event name."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.viewers.terminal.tables import ms_text, pct_text, print_table, short_name


def render_critical_path(result: Analysis, console: Any) -> None:
    from rich.table import Table

    cp = result.critical_path
    if not cp:
        return
    s = cp["summary"]
    if not s["events"]:
        console.print("Critical path: none (no program events in the window)")
        return
    console.print(
        f"[bold]Critical path[/bold]: {ms_text(s['length_ns'])} ms of a {ms_text(s['window_span_ns'])} ms window, "
        f"{s['events']:,} events on it"
        + (f", {s['dropped_edges']:,} edges dropped (pointing back in time)" if s["dropped_edges"] else "")
    )
    for key, label in (("by_category", "category"), ("by_rank", "rank"), ("by_name", "name")):
        t = Table(title=f"Critical path by {label}")
        t.add_column(label)
        t.add_column("ms", justify="right")
        t.add_column("%", justify="right")
        for r in cp[key].head(8).iter_rows(named=True):
            if key == "by_name":
                label_text = short_name(r["name"]) if r["name"] is not None else "(no event: GPU gaps, launches)"
            else:
                label_text = str(r[key.removeprefix("by_")] if key != "by_category" else r["category"])
            t.add_row(
                label_text,
                ms_text(r["contrib_ns"]),
                pct_text(r["share"]),
            )
        print_table(console, t)
