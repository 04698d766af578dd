"""Slow steps and what the trace says happened in them: the breakdown's states that grew, the marks that are rare in
the rank's steps, and the timed phases that grew.

A step is slow when its ``slowdown`` (:func:`di.engine.step_times.step_durations`: its duration over the median of
its rank's steps in the window, minus 1) is over :data:`~di.engine.step_times.SLOW_SLOWDOWN`. Per slow step:

- ``states``: the states of the per-step temporal breakdown (:mod:`di.engine.breakdown`: each scope's exclusive
  time in ``cpu``, ``comm``, ``sync``, ``compute``, ``idle``...; the host and each GPU of the rank) whose time in the
  step exceeds their median over the rank's steps by at least :data:`STATE_SHARE` of the step's own excess over its
  median duration, largest excess first, at most :data:`STATES_SHOWN`: ``host comm 101.0 ms (median 1.0)``. A step
  slow by its own work grows ``cpu`` or ``compute``; one that waited for another rank grows ``comm`` or ``sync``
  (the wait states name whom it waited for). Null where the breakdown per step was not computed (it is with
  ``imbalance``, which ``di analyze`` runs by default).

- ``marks``: the instants on the rank's timelines at ``start_ns <= t < end_ns`` whose name occurs in at most half of
  the rank's steps (an evaluation, a checkpoint save, an fp16 overflow skip, an error, an ``ncclCommInit``; not a
  marker every step has), as ``name`` or ``name ×count``, in the order of their first time, joined by ``, ``. An
  instant at a step's boundary belongs to the step that begins there: a log prints what happened after the line
  that ended the step before.
- ``grew``: the series in units of time (``ns``, ``us``, ``ms``, ``s``; not ``step_time``, which restates the
  step's own duration) on the rank's timelines whose reading in the step (the mean of its samples at
  ``start_ns < t <= end_ns``: a log's line for step k closes step k) is at least :data:`GREW_RATIO` times its median
  reading over the rank's steps, by how much it grew, largest first, at most :data:`GREW_SHOWN`: ``optimizer-time
  309.28 ms (median 14.03)``. Megatron's timers (:mod:`di.convert.logs.training_phases`) are such series.

Rows: by rank and start; each of the three is null where nothing qualifies. Vectorised: every step of the window (the
medians need them all) is matched to the rank's instants and time series by one sorted as-of join each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from di.engine.step_times import SLOW_SLOWDOWN, step_durations

if TYPE_CHECKING:
    from di.engine.window import EventFrame
    from di.trace import Trace

__all__ = ["COLUMNS", "GREW_RATIO", "GREW_SHOWN", "NOTES", "STATE_SHARE", "STATES_SHOWN", "slow_steps"]

STATE_SHARE = 0.25
"""A breakdown state grew in a slow step when its excess over its median is at least this share of the step's excess
over the rank's median step."""
STATES_SHOWN = 2
"""The most grown breakdown states named per slow step."""
GREW_RATIO = 1.5
"""A timed phase grew in a step when its reading there is at least this many times its median over the rank's steps."""
GREW_SHOWN = 3
"""The most grown phases named per slow step."""
TIME_UNITS = ("ns", "us", "ms", "s")
RESTATED = ("step_time",)
"""Series that restate a step's own duration (a training log's ``elapsed time per iteration``)."""

COLUMNS = {
    "rank": pl.Int64,
    "step": pl.Int64,
    "label": pl.String,
    "start_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "slowdown": pl.Float64,
    "states": pl.String,
    "marks": pl.String,
    "grew": pl.String,
}
"""The columns of :func:`slow_steps`: one row per slow step."""
NOTES = ("states", "marks", "grew")
"""The columns that say what happened in a slow step, in the order viewers show them."""


def slow_steps(frame: EventFrame, by_step: pl.DataFrame | None = None) -> pl.DataFrame:
    """The window's slow steps with their ``states``, ``marks`` and ``grew`` (module docstring); empty
    (:data:`COLUMNS`) without slow steps. ``by_step``: the window's breakdown per step
    (:func:`di.engine.breakdown.breakdown` with ``per_step=True``), None where it was not computed."""
    every = step_durations(frame.steps)
    slow = every.filter(pl.col("slowdown") > SLOW_SLOWDOWN)
    if not slow.height:
        return pl.DataFrame(schema=COLUMNS)
    trace = frame.trace
    ranks = trace.locations.select("loc", pl.col("rank").cast(pl.Int64))
    steps = every.select("rank", "step", "start_ns", "end_ns")  # (rank, step) is unique: di.engine.steps
    out = slow.join(_states(every, by_step), on=["rank", "step"], how="left") if by_step is not None else slow
    out = out.join(_marks(steps, trace.events, ranks), on=["rank", "step"], how="left")
    out = out.join(_grew(steps, trace, ranks), on=["rank", "step"], how="left")
    out = out.select([(pl.col(c) if c in out.columns else pl.lit(None)).cast(t).alias(c) for c, t in COLUMNS.items()])
    return out.sort("rank", "start_ns", "step")


def _states(every: pl.DataFrame, by_step: pl.DataFrame) -> pl.DataFrame:
    """Per slow step with a grown breakdown state: ``states`` (module docstring)."""
    b = by_step.filter(pl.col("step").is_not_null()).select(
        pl.col("rank").cast(pl.Int64), "scope", "device", pl.col("step").cast(pl.Int64), "state", "time_ns"
    )
    excess = every.select(
        "rank", "step", (pl.col("duration_ns") - pl.col("duration_ns").median().over("rank")).alias("step_excess")
    )
    where = pl.when(pl.col("scope") == "host").then(pl.lit("host")).otherwise(pl.format("GPU {}", "device"))
    grown = (
        b.with_columns(pl.col("time_ns").median().over("rank", "scope", "device", "state").alias("median"))
        .join(excess.filter(pl.col("step_excess") > 0), on=["rank", "step"])
        .with_columns((pl.col("time_ns") - pl.col("median")).alias("excess"))
        .filter((pl.col("excess") > 0) & (pl.col("excess") >= STATE_SHARE * pl.col("step_excess")))
        .sort(
            "rank", "step", "excess", "scope", "device", "state", descending=[False, False, True, False, False, False]
        )
        .group_by("rank", "step", maintain_order=True)
        .head(STATES_SHOWN)
        .with_columns(
            pl.format(
                "{} {} {} ms (median {})",
                where,
                "state",
                (pl.col("time_ns") / 1e6).round_sig_figs(4),
                (pl.col("median") / 1e6).round_sig_figs(4),
            ).alias("grown")
        )
    )
    return grown.group_by("rank", "step", maintain_order=True).agg(pl.col("grown").str.join(", ").alias("states"))


def _none(column: str) -> pl.DataFrame:
    """No step with a ``column`` note."""
    return pl.DataFrame(schema={"rank": pl.Int64, "step": pl.Int64, column: pl.String})


def _marks(steps: pl.DataFrame, events: pl.DataFrame, ranks: pl.DataFrame) -> pl.DataFrame:
    """Per step with marks: ``marks`` (module docstring)."""
    inst = events.filter(pl.col("instant")).select("loc", pl.col("start_ns").alias("t"), pl.col("name").cast(pl.String))
    if not inst.height:
        return _none("marks")
    inst = inst.join(ranks, on="loc").drop("loc").rename({"rank": "r"})
    hits = _in_steps(steps, inst, ends_closed=False)
    n_steps = steps.group_by("rank").len("n")
    rare = (
        hits.group_by("rank", "name")
        .agg(pl.col("step").n_unique().alias("in_steps"))
        .join(n_steps, on="rank")
        .filter(pl.col("in_steps") * 2 <= pl.col("n"))
        .select("rank", "name")
    )
    counted = (
        hits.join(rare, on=["rank", "name"])
        .group_by("rank", "step", "name")
        .agg(pl.len().alias("count"), pl.col("t").min())
        .sort("rank", "step", "t", "name")
        .with_columns(
            pl.when(pl.col("count") > 1).then(pl.format("{} ×{}", "name", "count")).otherwise("name").alias("mark")
        )
    )
    return counted.group_by("rank", "step", maintain_order=True).agg(pl.col("mark").str.join(", ").alias("marks"))


def _grew(steps: pl.DataFrame, trace: Trace, ranks: pl.DataFrame) -> pl.DataFrame:
    """Per step with a grown phase: ``grew`` (module docstring)."""
    series = trace.series.filter(
        pl.col("unit").is_in(TIME_UNITS) & ~pl.col("name").cast(pl.String).is_in(RESTATED)
    ).select("series", "loc", pl.col("name").cast(pl.String), "unit")
    if not series.height:
        return _none("grew")
    samples = (
        trace.samples.join(series, on="series")
        .join(ranks, on="loc")
        .select(pl.col("rank").alias("r"), "series", "name", "unit", pl.col("ts_ns").alias("t"), "value")
        .filter(pl.col("value").is_finite())
    )
    per_step = (
        _in_steps(steps, samples, ends_closed=True)
        .group_by("rank", "step", "series", "name", "unit")
        .agg(pl.col("value").mean())
    )
    if not per_step.height:
        return _none("grew")
    median = pl.col("value").median().over("rank", "series")
    grown = (
        per_step.with_columns(median.alias("median"))
        .filter((pl.col("median") > 0) & (pl.col("value") >= GREW_RATIO * pl.col("median")))
        .with_columns((pl.col("value") - pl.col("median")).alias("excess"))
        .sort("rank", "step", "excess", "name", descending=[False, False, True, False])
        .group_by("rank", "step", maintain_order=True)
        .head(GREW_SHOWN)
        .with_columns(
            pl.format(
                "{} {} {} (median {})",
                "name",
                pl.col("value").round_sig_figs(4),
                "unit",
                pl.col("median").round_sig_figs(4),
            ).alias("phase")
        )
    )
    return grown.group_by("rank", "step", maintain_order=True).agg(pl.col("phase").str.join(", ").alias("grew"))


def _in_steps(steps: pl.DataFrame, points: pl.DataFrame, *, ends_closed: bool) -> pl.DataFrame:
    """Each point (``r`` its rank, ``t`` its time) with the step of its rank it falls in (``rank``, ``step``,
    ``start_ns``, ``end_ns``): ``start_ns <= t < end_ns`` (the last step that starts at or before it), or with
    ``ends_closed`` ``start_ns < t <= end_ns`` (the first step that ends at or after it: a log's line closes the step
    it ends, even where the next step's estimated start lies before it); points in no step are left out. One sorted
    as-of join: a join on the rank with a range filter would pair every point with every step of its rank first."""
    bound, strategy = ("end_ns", "forward") if ends_closed else ("start_ns", "backward")
    keyed = steps.sort(bound).select(pl.col(bound).alias("t"), pl.col("rank").alias("r"), pl.all())
    inside = (pl.col("start_ns") < pl.col("t")) if ends_closed else (pl.col("t") < pl.col("end_ns"))
    return (
        points.sort("t")
        .join_asof(keyed, on="t", by="r", strategy=strategy, check_sortedness=False)
        .filter(pl.col("step").is_not_null() & inside)
    )
