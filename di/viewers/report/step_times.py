"""Step times: each step's duration per rank over the run, each rank's median, p90 and slow steps.

Reads the engine's :mod:`di.engine.step_times` (the statistics and their definitions), the steps of the window and
:mod:`di.engine.slow_steps` (the grown breakdown states, marks and grown timed phases in the slow steps, listed
where there are some).
The plot draws at most :data:`RANKS_PLOTTED` ranks: those with the longest median step and the one with the
shortest, so that a straggler stands out against the fastest.
"""

from __future__ import annotations

import polars as pl

from di.engine.slow_steps import NOTES
from di.engine.step_times import SLOW_SLOWDOWN, step_durations
from di.viewers.report.page import Section, ms, new_figure, num, pct, svg_plot, table

RANKS_PLOTTED = 8
SLOW_ROWS = 20
"""The most slow steps listed with what happened in them (the slowest first)."""
STRAGGLER_SHARE = 0.05
"""A rank whose median step is this much longer than the fastest rank's is named in a hint (5 %: beyond the
jitter of a healthy synchronous job)."""


def panel(ctx) -> Section | None:  # noqa: ANN001
    st = ctx.result.step_times
    if st is None or not st.height:
        return None
    d = step_durations(ctx.result.steps)
    by_median = st.sort("median_ns", "rank", descending=[True, False])
    plotted = by_median.head(RANKS_PLOTTED - 1).get_column("rank").to_list()
    fastest = by_median.get_column("rank")[-1]
    plotted += [fastest] if fastest not in plotted else []
    fig = new_figure(9, 2.6)
    ax = fig.add_subplot()
    for rank in sorted(plotted):
        mine = d.filter(pl.col("rank") == rank)
        ax.plot(
            mine.get_column("step").to_list(), (mine.get_column("duration_ns") / 1e6).to_list(), label=f"rank {rank}"
        )
    ax.set_xlabel("step")
    ax.set_ylabel("ms")
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    body = svg_plot(fig, "step duration per rank")
    rows = [
        (
            r["rank"],
            r["source"],
            num(r["steps"]),
            ms(r["median_ns"]),
            ms(r["p90_ns"]),
            ms(r["max_ns"]),
            r["slowest_step"],
            pct(r["cv"]),
            num(r["slow_steps"]),
            pct(r["vs_fastest"]),
        )
        for r in st.iter_rows(named=True)
    ]
    columns = ["rank", "from", "steps", "median", "p90", "max", "slowest step", "cv", "slow steps", "vs fastest"]
    body += table("step_times", columns, rows)
    slow = ctx.result.slow_steps
    noted = slow.filter(pl.any_horizontal(pl.col(NOTES).is_not_null())) if slow is not None else None
    if noted is not None and noted.height:  # what the trace says happened in them (di.engine.slow_steps)
        noted = noted.sort("slowdown", "rank", "step", descending=[True, False, False]).head(SLOW_ROWS)
        body += table(
            "slow_steps",
            [
                "rank",
                "step",
                "duration",
                "vs median",
                "states that grew",
                "marks in the step",
                "timed phases that grew",
            ],
            [
                (r["rank"], r["step"], ms(r["duration_ns"]), pct(r["slowdown"]), *(r[c] or "" for c in NOTES))
                for r in noted.iter_rows(named=True)
            ],
        )
    return Section("step_times", "Step times", body, _hints(st, slow))


def _hints(st: pl.DataFrame, slow: pl.DataFrame | None) -> list[str]:
    hints = []
    worst = st.sort("vs_fastest", "rank", descending=[True, False], nulls_last=True).row(0, named=True)
    if st.height > 1 and (worst["vs_fastest"] or 0) > STRAGGLER_SHARE:
        hints.append(
            f"Rank {worst['rank']}'s typical step ({worst['median_ns'] / 1e6:,.1f} ms) is "
            f"{100 * worst['vs_fastest']:.0f} % longer than the fastest rank's: a straggler; the imbalance and "
            "wait-state panels say where its time goes."
        )
    if slow is not None and slow.height:
        s = slow.sort("slowdown", descending=True).row(0, named=True)
        hints.append(
            f"{slow.height:,} step(s) took over {1 + SLOW_SLOWDOWN:g}x their rank's median; the slowest, step "
            f"{s['step']} on rank {s['rank']}, {100 * s['slowdown']:.0f} % longer (GPU clocks, I/O and "
            "collectives during it are in the panels below)."
        )
    return hints
