"""The device-memory section: each device's allocator peak and the allocations that held the memory then."""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.phases import BACKWARD_PREFIX
from di.viewers.rows_shown import more_note
from di.viewers.terminal.tables import RANKS_SHOWN, mib_text, pct_text, print_table, short_name

HOLDERS_SHOWN = 5
"""Rows of the held-at-the-peak table per device (all of :data:`di.engine.memory.HOLDERS_SHOWN` are in
``--csv``/``--json``)."""


def holder_label(row: dict[str, Any]) -> str:
    """What a row of :func:`di.engine.memory.memory_holders` names: the operator (and module) that allocated, or
    what the trace cannot tell apart."""
    if row["kind"] == "before_trace":
        return "(before the trace)"
    if row["kind"] == "rest":
        return "(the other operators)"
    if row["op"] is None and row["module"] is None:
        return "(no operator)"
    op = row["op"]
    if op is not None and op.startswith(BACKWARD_PREFIX):  # the autograd node that ran: AddmmBackward0
        op = op.removeprefix(BACKWARD_PREFIX)
    op = short_name(op, 40) if op is not None else "—"
    return op if row["module"] is None else f"{op} in {row['module'].removeprefix('nn.Module: ')}"


def render_memory(result: Analysis, console: Any) -> None:
    """Each device's allocator peak and what held the memory then (traces with allocator events); of more than
    :data:`RANKS_SHOWN` ranks, those with the highest peaks."""
    from rich.table import Table

    mem = result.memory
    if mem is None or not mem.height:
        return
    whole = mem.filter(pl.col("step").is_null())
    total = whole.get_column("rank").n_unique()
    peaks = whole.group_by("rank").agg(pl.col("peak_bytes").max()).sort("peak_bytes", "rank", descending=[True, False])
    ranks = peaks.head(RANKS_SHOWN).get_column("rank").implode()
    whole = whole.filter(pl.col("rank").is_in(ranks))
    more = more_note(min(total, RANKS_SHOWN), total, rule="with the highest peaks")
    t = Table(
        title=f"Device memory (the framework's allocator, MiB{more})",
        caption="reserved: held by the allocator at the peak (allocated + cached); growth: per step, of the memory "
        "left at each step's end",
    )
    for c in ("rank", "device", "peak", "reserved", "growth", "step", "at the peak"):
        t.add_column(c, justify="left" if c == "at the peak" else "right")
    for r in whole.iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            r["device"],
            mib_text(r["peak_bytes"]),
            mib_text(r["reserved_at_peak_bytes"]),
            mib_text(r["growth_bytes_per_step"]),
            "—" if r["peak_step"] is None else str(r["peak_step"]),
            holder_label({**r, "kind": "allocated"}),
        )
    print_table(console, t)
    held = result.memory_holders
    if held is None or not held.height:
        return
    h = Table(title="Held at each device's peak (allocations alive then, by the operator and module that made them)")
    for c in ("rank", "device", "MiB", "%", "allocs", "phase", "allocated by"):
        h.add_column(c, justify="left" if c in ("phase", "allocated by") else "right")
    held = held.filter(pl.col("rank").is_in(ranks))
    shown = held.filter(pl.col("bytes").rank("ordinal", descending=True).over("rank", "device") <= HOLDERS_SHOWN)
    for r in shown.iter_rows(named=True):
        h.add_row(
            str(r["rank"]),
            r["device"],
            mib_text(r["bytes"]),
            pct_text(r["share"]),
            "—" if r["allocations"] is None else f"{r['allocations']:,}",
            r["phase"] or "—",
            holder_label(r),
        )
    print_table(console, h)
