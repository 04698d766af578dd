"""Imbalance: a rank x step heat map of work, the engine's imbalance table, and the stragglers.

Work = compute + memory + cpu + io exclusive time (:mod:`di.engine.imbalance`),
on the GPU side when the trace has GPUs, else on the host side. The heat map
colour is a rank's work in a step relative to that step's mean over ranks.
"""

from __future__ import annotations

import polars as pl

from di.engine.imbalance import WORK
from di.viewers.report.page import Section, ms, new_figure, pct, svg_plot, table


def work_per_step(result) -> tuple[str, pl.DataFrame]:  # noqa: ANN001
    """(side, frame of rank, step, work_ns) from the per-step breakdown rows; side is gpu or host."""
    b = result.breakdown
    if b is None:
        return "gpu", pl.DataFrame()
    b = b.filter(pl.col("step").is_not_null()).with_columns(
        pl.when(pl.col("scope") == "host").then(pl.lit("host")).otherwise(pl.lit("gpu")).alias("side")
    )
    side = "gpu" if b.filter(pl.col("side") == "gpu").height else "host"
    work = (
        b.filter((pl.col("side") == side) & pl.col("state").is_in(WORK))
        .group_by("rank", "step")
        .agg(pl.col("time_ns").sum().alias("work_ns"))
        .sort("rank", "step")
    )
    return side, work


def panel(ctx) -> Section | None:  # noqa: ANN001
    imb = ctx.result.imbalance
    if imb is None or not imb.height:
        return None
    side, work = work_per_step(ctx.result)
    body, hints = "", []
    if work.height:
        ranks = sorted(
            set(ctx.result.breakdown.get_column("rank").to_list())
        )  # ranks without work in a step count as 0
        steps = sorted(set(work.get_column("step").to_list()))
        grid = {(r, s): w for r, s, w in work.iter_rows()}
        means = {s: sum(grid.get((r, s), 0) for r in ranks) / len(ranks) for s in steps}
        z = [[100 * (grid.get((r, s), 0) / means[s] - 1) if means[s] else 0.0 for s in steps] for r in ranks]
        lim = max(5.0, max(abs(v) for row in z for v in row))
        fig = new_figure(min(10, 2 + 0.5 * len(steps)), min(8, 1.2 + 0.35 * len(ranks)))
        ax = fig.add_subplot()
        im = ax.imshow(z, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks])
        ax.set_xticks(range(len(steps)), [str(s) for s in steps])
        ax.set_xlabel("step")
        fig.colorbar(im, ax=ax, label="work vs step mean (%)")
        body += (
            svg_plot(fig, "imbalance heat map")
            + f'<p class="note">{side} work per rank and step, relative to the step mean (red: more work than the others, the others wait).</p>'
        )
        hints += _straggler_hint(imb, side)
    whole = imb.filter(pl.col("step").is_null() & (pl.col("max_ns") > 0)).sort("side", "state")
    rows = [
        (
            r["side"],
            r["state"],
            ms(r["min_ns"]),
            ms(r["mean_ns"]),
            ms(r["max_ns"]),
            r["max_rank"],
            pct(r["imbalance"]),
            pct(r["percent_imbalance"]),
        )
        for r in whole.iter_rows(named=True)
    ]
    body += table(
        "imbalance",
        ["side", "state", "min_ns", "mean_ns", "max_ns", "max_rank", "imbalance", "percent_imbalance"],
        rows,
    )
    return Section("imbalance", "Load imbalance across ranks", body, hints)


def _straggler_hint(imb: pl.DataFrame, side: str) -> list[str]:
    per_step = imb.filter(
        pl.col("step").is_not_null() & (pl.col("state") == "work") & (pl.col("side") == side) & (pl.col("max_ns") > 0)
    )
    if not per_step.height:
        return []
    top = (
        per_step.group_by("max_rank")
        .agg(pl.len().alias("n"), pl.col("percent_imbalance").mean().alias("p"))
        .sort(["n", "p", "max_rank"], descending=[True, True, False], nulls_last=True)
        .row(0, named=True)
    )
    share = top["n"] / per_step.height
    if share < 0.5 or (top["p"] or 0) < 0.05:
        return []
    return [
        f"Rank {top['max_rank']} has the most work in {100 * share:.0f} % of steps ({100 * top['p']:.0f} % above the balanced time): "
        "check its data shard, input pipeline or placement."
    ]
