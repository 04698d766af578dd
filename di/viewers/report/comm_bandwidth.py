"""Collective bandwidth: per operation, size, ranks and scope, the bus bandwidth of the calls (as nccl-tests reports
it) and of the transfers once every member had arrived, with the arrivals' skew.

Numbers are the engine's (:mod:`di.engine.comm_bandwidth`, where the terms are defined): times in ms with the exact
ns in ``data-v``, bandwidths in GB/s (1e9 bytes per second), as ``di analyze --json`` reports them under
``comm_bandwidth``.
"""

from __future__ import annotations

import html

import polars as pl

from di.engine.comm_bandwidth import ALGBW_FORMULA, BUSBW_FORMULA
from di.viewers.report.page import Cell, Section, ms, num, table
from di.viewers.terminal import size_text

SKEW_BOUND = 0.5
"""A hint when a group's calls reach under this share of its transfers' bus bandwidth: the calls mostly wait."""
MIN_SHARE = 0.05
"""Groups with less than this share of all collective call time get no hint."""
HINTS_SHOWN = 3


def gbps(value: float | None) -> Cell:
    """A bandwidth cell in GB/s."""
    return Cell("—", None) if value is None else Cell(f"{value:,.3g}" if value < 100 else f"{value:,.0f}", value)


def panel(ctx) -> Section | None:  # noqa: ANN001
    groups = ctx.result.comm_bandwidth
    if groups is None or not groups.height:
        return None
    body = (
        '<p class="note">call: each rank\'s call, waiting for late members included, as nccl-tests times it; skew: '
        "the last member's start less the first's; transfer: from the last member's start to the end, the time the "
        "data moved once all had arrived (instances with every member in the trace). "
        f"{html.escape(ALGBW_FORMULA)}. {html.escape(BUSBW_FORMULA)}.</p>"
        + table(
            "comm_bandwidth",
            [
                "op",
                "size",
                "ranks",
                "scope",
                "calls",
                "call (ms)",
                "skew (ms)",
                "transfer (ms)",
                "algbw (GB/s)",
                "busbw (GB/s)",
                "transfer busbw (GB/s)",
            ],
            [
                (
                    r["op"],
                    Cell(size_text(r["bytes"]), r["bytes"]),
                    num(r["ranks"]),
                    r["scope"] or "—",
                    num(r["calls"]),
                    ms(r["mean_call_ns"]),
                    ms(r["mean_skew_ns"]),
                    ms(r["mean_transfer_ns"]),
                    gbps(r["algbw_gbps"]),
                    gbps(r["busbw_gbps"]),
                    gbps(r["transfer_busbw_gbps"]),
                )
                for r in groups.iter_rows(named=True)
            ],
        )
    )
    return Section("comm_bandwidth", "Collective bandwidth", body, hints=_hints(groups))


def _hints(groups: pl.DataFrame) -> list[str]:
    total = (groups.get_column("parts") * groups.get_column("mean_call_ns")).sum()
    if not total:
        return []
    waiting = groups.filter(
        (pl.col("parts") * pl.col("mean_call_ns") >= MIN_SHARE * total)
        & (pl.col("busbw_gbps") < SKEW_BOUND * pl.col("transfer_busbw_gbps"))
    ).head(HINTS_SHOWN)
    return [
        f"{r['op']} of {size_text(r['bytes'])} over {r['ranks']} ranks: the calls reach {r['busbw_gbps']:.3g} GB/s of "
        f"bus bandwidth but the data moves at {r['transfer_busbw_gbps']:.3g} once every member has arrived; the last "
        f"member starts {r['mean_skew_ns'] / 1e6:.3f} ms after the first on average, so the calls wait for late ranks "
        "(the wait states name them) rather than for the network."
        for r in waiting.iter_rows(named=True)
    ]
