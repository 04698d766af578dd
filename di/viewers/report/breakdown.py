"""Temporal breakdown per rank: stacked bars of each scope's exclusive states over the window.

Numbers are the engine's (:mod:`di.engine.breakdown`): exclusive time per
state, idle included, as a share of the scope's span; the table lists the
exact ns (``data-v``) that ``di analyze --json`` reports under
``ranks[].breakdown`` (step null).
"""

from __future__ import annotations

import polars as pl

from di.engine.breakdown import STATE_LABELS, STATE_NAMES as STATES
from di.viewers.report.page import Section, ms, new_figure, svg_plot, table

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
    labels = [f"rank {r} {s}" for r, s in zip(wide.get_column("rank"), wide.get_column("scope"))]
    fig = new_figure(9, max(1.6, 0.32 * len(labels) + 0.9))
    ax = fig.add_subplot()
    left = [0.0] * len(labels)
    spans = wide.get_column("span_ns").to_list()
    for state in STATES:
        if state not in wide.columns:
            continue
        vals = [100 * (t or 0) / s if s else 0.0 for t, s in zip(wide.get_column(state).to_list(), spans)]
        ax.barh(labels, vals, left=left, color=COLORS[state], label=STATE_LABELS.get(state, state))
        left = [a + v for a, v in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlabel("% of the scope's span")
    ax.set_xlim(0, 100)
    ax.legend(ncol=len(STATES), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False, fontsize=8)
    states = [st for st in STATES if st in wide.columns]
    rows = [
        (r["rank"], r["scope"], ms(r["span_ns"]), *(ms(r[st]) for st in states)) for r in wide.iter_rows(named=True)
    ]
    body = (
        svg_plot(fig, "temporal breakdown per rank")
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
