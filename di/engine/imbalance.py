"""Load imbalance across ranks, per step and over the window.

For each state of the temporal breakdown (:mod:`di.engine.breakdown`;
GPU states summed over a rank's devices, host states from its CPU threads)
and for ``work`` (compute + memory + cpu + io + untraced exclusive time: what
a rank does that others may wait for, its work between traced calls included), over the ranks of the job, with x_r the
rank's time in ns:

- ``imbalance`` = max/mean - 1 (0 = balanced; null when the mean is 0),
- ``percent_imbalance`` = (max - mean)/max (the share of the slowest rank's
  time that balancing would save; null when max is 0),
- ``max_rank``: the rank holding the max; for ``work`` that is the
  *straggler* of the step.

Ranks with no activity in a step count as 0 there.
"""

from __future__ import annotations

import polars as pl

from di.engine.breakdown import breakdown
from di.engine.window import EventFrame

WORK = ("compute", "memory", "cpu", "io", "untraced")
"""The breakdown states that are a rank's own work."""


def imbalance(
    frame: EventFrame, *, whole: pl.DataFrame | None = None, by_step: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Long frame: step (null = whole window), side (gpu/host), state, min_ns,
    mean_ns, max_ns, max_rank, imbalance, percent_imbalance.

    ``whole`` / ``by_step``: the window's and the per-step breakdown when already computed.
    """
    parts = [whole if whole is not None else breakdown(frame, per_step=False)]
    if frame.steps.height:
        parts.append(by_step if by_step is not None else breakdown(frame, per_step=True))
    b = pl.concat(parts).with_columns(
        pl.when(pl.col("scope") == "host").then(pl.lit("host")).otherwise(pl.lit("gpu")).alias("side")
    )
    per_rank = b.group_by("step", "side", "rank", "state").agg(pl.col("time_ns").sum())
    work = (
        per_rank.filter(pl.col("state").is_in(WORK))
        .group_by("step", "side", "rank")
        .agg(pl.col("time_ns").sum())
        .with_columns(pl.lit("work").alias("state"))
    )
    per_rank = pl.concat([per_rank, work.select(per_rank.columns)]).filter(pl.col("rank").is_in(list(frame.ranks)))
    # the ranks absent from a (step, side, state) count as 0 there: the stats come from the ranks present and their
    # count, not from a row per rank and state (a trace of 300,000 steps: 2.7 M such rows, 4.4-4.8 -> 2.8 CPU-s)
    n_ranks = len(frame.ranks)
    stats = (
        per_rank.sort("time_ns", "rank", descending=[True, False])
        .group_by("step", "side", "state")
        .agg(
            pl.len().alias("present"),
            pl.col("time_ns").min().alias("min_ns"),
            pl.col("time_ns").sum().alias("sum_ns"),
            pl.col("time_ns").max().alias("max_ns"),
            pl.col("rank").first().alias("max_rank"),
        )
        .with_columns(
            pl.when(pl.col("present") < n_ranks).then(0).otherwise(pl.col("min_ns")).alias("min_ns"),
            (pl.col("sum_ns") / n_ranks).alias("mean_ns"),
            # every rank at 0: the lowest rank, as a row of each would sort
            pl.when(pl.col("max_ns") == 0)
            .then(pl.lit(min(frame.ranks, default=0), pl.Int32))
            .otherwise(pl.col("max_rank"))
            .alias("max_rank"),
        )
        .select("step", "side", "state", "min_ns", "mean_ns", "max_ns", "max_rank")
    )
    return stats.with_columns(
        pl.when(pl.col("mean_ns") > 0)
        .then(pl.col("max_ns") / pl.col("mean_ns") - 1)
        .otherwise(None)
        .alias("imbalance"),
        pl.when(pl.col("max_ns") > 0)
        .then((pl.col("max_ns") - pl.col("mean_ns")) / pl.col("max_ns"))
        .otherwise(None)
        .alias("percent_imbalance"),
    ).sort("step", "side", "state", nulls_last=False)


def stragglers(table: pl.DataFrame) -> pl.DataFrame:
    """The straggler per step (and for the window, step null): rank with the most work."""
    return (
        table.filter(pl.col("state") == "work")
        .sort("side")
        .unique(["step"], keep="first")
        .select("step", pl.col("max_rank").alias("straggler"), "max_ns", "mean_ns", "percent_imbalance")
        .sort("step", nulls_last=False)
    )
