"""Imbalance: a rank x step heat map of work, the engine's imbalance table, and the stragglers.

Work = compute + memory + cpu + io exclusive time (:mod:`di.engine.imbalance`),
on the GPU side when the trace has GPUs, else on the host side. The heat map
colour is a rank's work in a step relative to that step's mean over ranks.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.imbalance import WORK
from di.viewers.report.page import Section, cells, label_ticks, ms, new_figure, pct, svg_plot, table


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
        ranks, steps, z = _relative_work(ctx.result.breakdown.get_column("rank"), work)
        lim = max(5.0, float(np.abs(z).max()))
        fig = new_figure(min(10, 2 + 0.5 * len(steps)), min(8, 1.2 + 0.35 * len(ranks)))
        ax = fig.add_subplot()
        im = ax.imshow(z, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
        label_ticks(ax.yaxis, range(len(ranks)), [f"rank {r}" for r in ranks])
        label_ticks(ax.xaxis, range(len(steps)), [str(s) for s in steps])
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


def _relative_work(rank: pl.Series, work: pl.DataFrame) -> tuple[list[int], list[int], np.ndarray]:
    """(ranks, steps, z): the ranks of the breakdown (``rank``; one without work in a step counts 0 there), the steps
    of ``work`` (rank, step, work_ns), both sorted, and per rank and step the % of its work above the step's mean over
    the ranks (0 where that mean is 0)."""
    ranks = rank.unique().sort().to_numpy()
    steps = work.get_column("step").unique().sort().to_numpy()
    grid = cells(ranks, steps, work.get_column("rank"), work.get_column("step"), work.get_column("work_ns"))
    mean = grid.mean(axis=0)
    z = np.zeros_like(grid)
    np.divide(grid, mean, out=z, where=mean != 0)
    z = np.where(mean != 0, 100 * (z - 1), 0.0)
    return ranks.tolist(), steps.tolist(), z


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
