"""GPU clocks, power and temperature over each step, so that slow steps can be told apart from throttled ones.

Same series, same GPU matching and same sample-and-hold reading as :mod:`di.engine.gpu_clocks` (its docstring
has the definitions). Per step and GPU:

- **A step's GPUs**: the devices of its rank's GPU timelines (a rank driving two GPUs has a row for each).
- **Span**: the step's ``[start_ns, end_ns)`` from :func:`di.engine.steps.find_steps`, whole (a time window
  keeps the steps it touches, unclipped); ``duration_ns`` is its length.
- ``sm_clock_mhz``, ``power_w``, ``temperature_c``: means weighted by time over the span's time that the
  series covers (``covered_ns``; null where none is); ``max_sm_clock_mhz``: the highest SM clock the GPU's
  series shows over the whole trace; ``below_ns``: covered span time with the SM clock under
  :data:`~di.engine.gpu_clocks.THROTTLE_SHARE` of it; ``throttled``: the mean SM clock is under that share.
- ``slowdown``: ``duration_ns`` over the median duration of the rank's steps in the window, minus 1
  (0.25: 25 % slower than its rank's typical step); null where that median is 0.

Rows: by rank, step, device. Vectorised: one ``searchsorted`` pass per series over every step span.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from di.engine.gpu_clocks import READING_COLUMNS, THROTTLE_SHARE, gpu_series, integrate_series
from di.engine.step_times import step_durations

if TYPE_CHECKING:
    from di.engine.window import EventFrame

__all__ = ["COLUMNS", "gpu_step_clocks"]

COLUMNS = {
    "rank": pl.Int64,
    "step": pl.Int64,
    "label": pl.String,
    "device": pl.Int64,
    "host": pl.String,
    "start_ns": pl.Int64,
    "duration_ns": pl.Int64,
    "slowdown": pl.Float64,
    **READING_COLUMNS,
}
"""The result's columns: one row per (rank, step, GPU device)."""


def _step_gpus(frame: EventFrame) -> pl.DataFrame:
    """Each step of the window once per device of its rank's GPU timelines (with the timeline's host)."""
    gpus = (
        frame.trace.locations.filter((pl.col("kind") == "gpu_stream") & pl.col("device").is_not_null())
        .select(pl.col("rank").cast(pl.Int64), pl.col("device").cast(pl.Int64), "host")
        .unique(["rank", "device"], keep="first", maintain_order=True)
    )
    steps = step_durations(frame.steps).drop("source")
    return steps.join(gpus, on="rank").with_row_index("row")


def gpu_step_clocks(frame: EventFrame, use: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (rank, step, GPU) in the window: the GPU's SM clock, power and temperature over the step (see the
    module docstring); an empty frame of :data:`COLUMNS` without steps, GPU timelines or such series.
    ``use``: the series per GPU (default :func:`di.engine.gpu_clocks.gpu_series` of the frame's trace)."""
    empty = pl.DataFrame(schema=COLUMNS)
    use = gpu_series(frame.trace) if use is None else use
    if not use.height or not frame.steps.height:
        return empty
    spans = _step_gpus(frame)
    if not spans.height:
        return empty
    spans = integrate_series(spans, use, frame.trace.samples)
    if spans is None:
        return empty

    def mean(q: str) -> pl.Expr:
        covered = pl.col(f"{q}_covered")
        return pl.when(covered > 0).then(pl.col(f"{q}_area") / covered)

    out = spans.with_columns(
        pl.col("sm_clock_covered").fill_null(0).round().cast(pl.Int64).alias("covered_ns"),
        mean("sm_clock").alias("sm_clock_mhz"),
        pl.col("below").round().cast(pl.Int64).alias("below_ns"),
        mean("power").alias("power_w"),
        mean("temperature").alias("temperature_c"),
    ).with_columns((pl.col("sm_clock_mhz") < THROTTLE_SHARE * pl.col("max_sm_clock_mhz")).alias("throttled"))
    return out.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]).sort("rank", "step", "device")
