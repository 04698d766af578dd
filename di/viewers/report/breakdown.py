"""Temporal breakdown per rank: stacked bars of each scope's exclusive states over the window.

Numbers are the engine's (:mod:`di.engine.breakdown`): exclusive time per
state, idle included, as a share of the scope's span; the table lists the
exact ns (``data-v``) that ``di analyze --json`` reports under
``ranks[].breakdown`` (step null).
"""

from __future__ import annotations

import polars as pl

from di.engine.breakdown import STATE_LABELS, STATE_NAMES as STATES
from di.viewers.report.page import Section, ms, share_bars, table

COLORS = {
    "compute": "#2e7d32",
    "comm": "#1565c0",
    "memory": "#6a1b9a",
    "sync": "#c62828",
    "cpu": "#ef6c00",
    "io": "#00838f",
    "untraced": "#ffb74d",
    "idle": "#bdbdbd",
}


def whole_window(result) -> pl.DataFrame:  # noqa: ANN001
    """The breakdown rows over the whole window (step null)."""
    b = result.breakdown
    return b.filter(pl.col("step").is_null()) if b is not None else pl.DataFrame()


def panel(ctx) -> Section | None:  # noqa: ANN001
    b = whole_window(ctx.result)
    if not b.height:
        return None
    wide = b.pivot(on="state", index=["rank", "scope", "span_ns"], values="time_ns").sort("rank", "scope")
    states = [st for st in STATES if st in wide.columns]
    bars = share_bars(
        wide,
        [(st, COLORS[st], STATE_LABELS.get(st, st)) for st in states],
        "% of the scope's span",
        "temporal breakdown per rank",
    )
    rows = [
        (r["rank"], r["scope"], ms(r["span_ns"]), *(ms(r[st]) for st in states)) for r in wide.iter_rows(named=True)
    ]
    body = (
        bars
        + '<p class="note">Exclusive states: each instant counts once, for the highest-priority activity; idle = span minus busy time; '
        "untraced = the program's work between the calls of a timeline that records only calls (MPI, I/O).</p>"
        + table("breakdown", ["rank", "scope", "span_ns", *(f"{st}_ns" for st in states)], rows)
    )
    return Section("breakdown", "Temporal breakdown per rank", body, _hints(b))


def _hints(b: pl.DataFrame) -> list[str]:
    hints = []
    gpu = b.filter(pl.col("scope") != "host")
    idle = gpu.filter(pl.col("state") == "idle").sort("share", descending=True)
    if idle.height and (idle.item(0, "share") or 0) > 0.2:
        r = idle.row(0, named=True)
        hints.append(
            f"GPU {r['scope']} of rank {r['rank']} is idle {100 * r['share']:.0f} % of its span: the GPU idle panel "
            "says why (the host launching late, waiting for the device, queued work) and which operators launched "
            "the work after the longest gaps."
        )
    comm = gpu.filter(pl.col("state") == "comm").sort("share", descending=True)
    if comm.height and (comm.item(0, "share") or 0) > 0.25:
        r = comm.row(0, named=True)
        hints.append(
            f"Exposed communication takes {100 * r['share']:.0f} % of rank {r['rank']}'s GPU time: overlap it with compute "
            "(bucketed/async allreduce) or reduce its volume."
        )
    host = b.filter((pl.col("scope") == "host") & (pl.col("state") == "io")).sort("share", descending=True)
    if host.height and (host.item(0, "share") or 0) > 0.1:
        r = host.row(0, named=True)
        hints.append(
            f"Rank {r['rank']} spends {100 * r['share']:.0f} % of its host time in file I/O: prefetch, cache or use more loader workers."
        )
    return hints
