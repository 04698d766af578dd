"""The collective-bandwidth section: each collective group's bus bandwidth over the calls and after the last
member's arrival."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.viewers.terminal.tables import print_table, short_name, size_text

COMM_ROWS_SHOWN = 10
"""Collective groups shown (the most total call time first; all are in ``--csv``/``--json``)."""


def render_comm_bandwidth(result: Analysis, console: Any) -> None:
    """The collectives' bus bandwidth over the calls and once all members had arrived (traces with collectives)."""
    from rich.table import Table

    groups = result.comm_bandwidth
    if groups is None or not groups.height:
        return
    t = Table(
        title="Collective bandwidth (busbw, GB/s)",
        caption="call: over each rank's call, as nccl-tests; xfer: from the last member's arrival to the end; "
        "skew: last arrival less first; n: ranks",
    )
    for c in ("op", "size", "n", "scope", "calls", "call ms", "skew ms", "call", "xfer"):
        t.add_column(c, justify="left" if c in ("op", "scope") else "right")
    for r in groups.head(COMM_ROWS_SHOWN).iter_rows(named=True):
        t.add_row(
            short_name(r["op"], 14),
            size_text(r["bytes"]),
            "—" if r["ranks"] is None else str(r["ranks"]),
            (r["scope"] or "—").removesuffix("-node"),
            f"{r['calls']:,}",
            "—" if r["mean_call_ns"] is None else f"{r['mean_call_ns'] / 1e6:.3f}",
            "—" if r["mean_skew_ns"] is None else f"{r['mean_skew_ns'] / 1e6:.3f}",
            _gbps(r["busbw_gbps"]),
            _gbps(r["transfer_busbw_gbps"]),
        )
    print_table(console, t)


def _gbps(value: float | None) -> str:
    """GB/s: whole from 100, three significant digits from 1, else four decimals."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}" if value >= 1 else f"{value:.4f}"
