"""Step times: how long each rank's steps took, how much they vary and which ones were slow.

The steps are those of :func:`di.engine.steps.find_steps` inside the window (a time window keeps the steps it
touches, whole), wherever they came from: the trace's step markers, annotations, the repeating pattern, or a
training log's iteration lines (a log alone gives steps too, so ``di analyze train.log`` reads its step times).

Definitions (all times int64 ns):

- ``duration_ns``: a step's ``end_ns - start_ns``.
- ``slowdown``: ``duration_ns`` over the median duration of the rank's steps in the window, minus 1 (0.25: 25 %
  slower than the rank's typical step); null where that median is 0.
- Per rank: ``steps`` (count), ``total_ns`` (sum), ``mean_ns``, ``median_ns`` (the mean of the two middle
  durations for an even count, rounded to ns), ``p90_ns`` (nearest rank: the ``ceil(0.9 n)``-th shortest),
  ``min_ns``, ``max_ns``, ``slowest_step`` (the step of ``max_ns``, the first in time on a tie), ``cv`` (the
  durations' population standard deviation over their mean; null where the mean is 0), ``slow_steps`` (steps
  with ``slowdown`` over :data:`SLOW_SLOWDOWN`), ``vs_fastest`` (the rank's median over the lowest rank median
  minus 1: 0 on the fastest rank, 0.1 on a rank whose typical step is 10 % longer; null where that lowest
  median is 0) and ``source`` (where its steps came from, :mod:`di.engine.steps`).
"""

from __future__ import annotations

import polars as pl

__all__ = ["COLUMNS", "DURATION_COLUMNS", "SLOW_SLOWDOWN", "step_durations", "step_times"]

SLOW_SLOWDOWN = 0.2
"""A step counts as slow when it lasts more than 1.2x its rank's median step (a common straggler threshold:
step-to-step jitter of a healthy data-parallel job stays within a few per cent)."""

DURATION_COLUMNS = {
    "rank": pl.Int64,
    "step": pl.Int64,
    "label": pl.String,
    "source": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "slowdown": pl.Float64,
}
"""The columns of :func:`step_durations`: one row per (rank, step)."""

COLUMNS = {
    "rank": pl.Int64,
    "source": pl.String,
    "steps": pl.Int64,
    "total_ns": pl.Int64,
    "mean_ns": pl.Int64,
    "median_ns": pl.Int64,
    "p90_ns": pl.Int64,
    "min_ns": pl.Int64,
    "max_ns": pl.Int64,
    "slowest_step": pl.Int64,
    "cv": pl.Float64,
    "slow_steps": pl.Int64,
    "vs_fastest": pl.Float64,
}
"""The columns of :func:`step_times`: one row per rank with steps."""


def step_durations(steps: pl.DataFrame) -> pl.DataFrame:
    """Each step of ``steps`` (the frame of :func:`di.engine.steps.find_steps`) with its ``duration_ns`` and
    ``slowdown`` (module docstring), by rank and start."""
    median = pl.col("duration_ns").median().over("rank")
    return (
        steps.select(
            pl.col("rank").cast(pl.Int64),
            pl.col("step").cast(pl.Int64),
            pl.col("label").cast(pl.String),
            pl.col("source").cast(pl.String),
            "start_ns",
            "end_ns",
            (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
        )
        .with_columns(pl.when(median > 0).then(pl.col("duration_ns") / median - 1).alias("slowdown"))
        .select([pl.col(c).cast(t) for c, t in DURATION_COLUMNS.items()])
        .sort("rank", "start_ns", "step")
    )


def step_times(steps: pl.DataFrame) -> pl.DataFrame:
    """Per rank, the statistics of its steps' durations (module docstring); empty (:data:`COLUMNS`) without
    steps. ``steps``: the frame of :func:`di.engine.steps.find_steps` (the window's)."""
    d = step_durations(steps)
    if not d.height:
        return pl.DataFrame(schema=COLUMNS)
    dur = pl.col("duration_ns")
    n = pl.len()
    per_rank = (
        d.group_by("rank", maintain_order=True)
        .agg(
            pl.col("source").unique(maintain_order=True).str.join(",").alias("source"),
            n.alias("steps"),
            dur.sum().alias("total_ns"),
            dur.mean().round().alias("mean_ns"),
            dur.median().round().alias("median_ns"),
            # nearest rank: the ceil(0.9 n)-th shortest, never an interpolation between two steps
            dur.sort().get((n * 9 + 9) // 10 - 1).alias("p90_ns"),
            dur.min().alias("min_ns"),
            dur.max().alias("max_ns"),
            pl.col("step").get(dur.arg_max()).alias("slowest_step"),
            pl.when(dur.mean() > 0).then(dur.std(ddof=0) / dur.mean()).alias("cv"),
            (pl.col("slowdown") > SLOW_SLOWDOWN).sum().alias("slow_steps"),
        )
        .with_columns(
            # (m - fastest) / fastest, not m / fastest - 1: exactly 0 for the fastest rank, never below
            pl.when(pl.col("median_ns").min() > 0)
            .then((pl.col("median_ns") - pl.col("median_ns").min()) / pl.col("median_ns").min())
            .alias("vs_fastest")
        )
    )
    return per_rank.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]).sort("rank")
