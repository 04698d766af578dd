"""Counters over the window: each counter series' samples, minimum, mean, maximum and last value.

What a trace's ``series``/``samples`` hold (GPU power and clocks from NVML or nvidia-smi, InfiniBand and network
port counters, host CPU and memory, and a text log's step time, loss, throughput or nccl-tests bandwidths), one row
per series with samples in the window, so that ``di analyze`` of a log or of a job with counters says what they
read without a plot.

Definitions:

- **Cumulative counters are rates** (:func:`as_rates`): a series whose unit is one of :data:`CUMULATIVE_UNITS`,
  whose name names no memory level (``mem``, ``rss``), whose samples never decrease (port bytes, packets, a
  rank's read bytes) and which no text log gave (:func:`text_log_locations`) is read as the difference between consecutive samples over the time between them, per
  second, its unit ``UNIT/s``; each rate is placed at the later sample's time (the first sample has none).
- **The window's samples**: all for the whole trace; for ``time=T0:T1`` those with ``ts_ns`` in ``[lo, hi)``
  (:func:`di.engine.window.time_bounds`); for ``steps=`` those from the first selected step's start to the last
  one's end (``span``), none without steps. Rates come from all samples, then the window picks.
- Per series: ``samples`` (count), ``nonfinite`` (those that are NaN or infinite: a log's ``loss: nan``, an
  overflowed ``grad norm: inf``), ``min``, ``mean`` (of the samples, not weighted by time), ``max`` and ``last``
  (the latest one's value), all four of the finite samples (null where none is), ``first_ns``/``last_ns`` (its
  first and latest sample's time); ``rank`` and ``location`` (the name) of its timeline.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from di.engine.window import EventFrame
    from di.trace import Trace

__all__ = [
    "COLUMNS",
    "CUMULATIVE_UNITS",
    "as_rates",
    "counter_stats",
    "counters",
    "sample_span",
    "text_log_locations",
    "trace_rates",
]

CUMULATIVE_UNITS = ("bytes", "B", "packets", "count")
"""Units of counters that may only grow (port and file byte counts, packets, events): such a series whose samples
never decrease is shown as a rate."""

COLUMNS = {
    "series": pl.Int64,
    "rank": pl.Int64,
    "location": pl.String,
    "name": pl.String,
    "unit": pl.String,
    "samples": pl.Int64,
    "nonfinite": pl.Int64,
    "min": pl.Float64,
    "mean": pl.Float64,
    "max": pl.Float64,
    "last": pl.Float64,
    "first_ns": pl.Int64,
    "last_ns": pl.Int64,
}
"""The columns of :func:`counters`: one row per series with samples in the window, by series."""


def as_rates(
    series: pl.DataFrame, samples: pl.DataFrame, logged: Collection[int] = ()
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(series with unit "UNIT/s" for cumulative counters, samples with their values as rates): see the module
    docstring. ``logged``: timelines (``loc``) of text logs (:func:`text_log_locations`), whose series are never
    cumulative."""
    s = samples.sort("series", "ts_ns").with_columns(
        pl.col("value").diff().over("series").alias("dv"), pl.col("ts_ns").diff().over("series").alias("dt")
    )
    mono = s.group_by("series").agg(
        (pl.col("dv").drop_nulls() >= 0).all().alias("mono"), (pl.len() > 1).alias("several")
    )
    low = pl.col("name").str.to_lowercase()
    cumulative = (
        series.join(mono, on="series")
        .filter(
            pl.col("mono")
            & pl.col("several")
            & pl.col("unit").is_in(CUMULATIVE_UNITS)
            & ~low.str.contains("mem|rss")
            & ~pl.col("loc").is_in(pl.Series(list(logged), dtype=pl.Int64).implode())
        )
        .get_column("series")
    )
    is_cum = pl.col("series").is_in(cumulative.implode())
    rates = (
        s.filter(~is_cum | (pl.col("dt") > 0))
        .with_columns(pl.when(is_cum).then(pl.col("dv") * 1e9 / pl.col("dt")).otherwise(pl.col("value")).alias("value"))
        .select(samples.columns)
    )
    units = series.with_columns(
        pl.when(is_cum).then(pl.format("{}/s", pl.col("unit"))).otherwise(pl.col("unit")).alias("unit")
    )
    return units, rates


def trace_rates(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`as_rates` of the trace's series and samples, its text logs' series never rates: the counters as every
    reader of them (the analysis, the report) takes them."""
    return as_rates(trace.series, trace.samples, text_log_locations(trace))


def text_log_locations(trace: Trace) -> list[int]:
    """The timelines (``loc``) of the trace's text-log sources (``sources[].format`` ``log:...``): a log's values
    are readings per line (a message size, a step's count of skipped iterations), never running totals, however
    they grow."""
    logs = [i for i, src in enumerate(trace.meta.get("sources") or []) if str(src.get("format", "")).startswith("log")]
    if not logs or "source" not in trace.locations.columns:
        return []
    return trace.locations.filter(pl.col("source").is_in(logs)).get_column("loc").cast(pl.Int64).to_list()


def sample_span(frame: EventFrame) -> tuple[int, int] | None:
    """[lo, hi) in ns of the samples the window keeps (module docstring); None: all of them. A ``steps=``
    window's span is that of ``frame.steps`` (under mpiexec, the caller combines the processes' spans)."""
    from di.engine.window import time_bounds

    win = frame.window
    if win.steps is not None:
        if not frame.steps.height:
            return (0, 0)
        return int(frame.steps.get_column("start_ns").min()), int(frame.steps.get_column("end_ns").max())
    if win.t0_ns is not None or win.t1_ns is not None:
        return time_bounds(frame.trace, win)
    return None


def counters(frame: EventFrame) -> pl.DataFrame:
    """Per series with samples in the frame's window, its statistics (module docstring): :func:`counter_stats` of
    :func:`sample_span`."""
    return counter_stats(frame.trace, sample_span(frame))


def counter_stats(trace: Trace, span: tuple[int, int] | None) -> pl.DataFrame:
    """Per series of ``trace`` with samples in ``span`` ([lo, hi) ns; None: every sample), its statistics (module
    docstring), by series; empty (:data:`COLUMNS`) without."""
    if not trace.samples.height:
        return pl.DataFrame(schema=COLUMNS)
    series, samples = trace_rates(trace)
    if span is not None:
        samples = samples.filter((pl.col("ts_ns") >= span[0]) & (pl.col("ts_ns") < span[1]))
    finite = pl.col("value").filter(pl.col("value").is_finite())
    stats = samples.group_by("series").agg(
        pl.len().alias("samples"),
        (~pl.col("value").is_finite()).sum().alias("nonfinite"),
        finite.min().alias("min"),
        finite.mean().alias("mean"),
        finite.max().alias("max"),
        finite.last().alias("last"),  # the samples are in time order (as_rates sorts them)
        pl.col("ts_ns").min().alias("first_ns"),
        pl.col("ts_ns").max().alias("last_ns"),
    )
    where = trace.locations.select(
        "loc", pl.col("rank").cast(pl.Int64), pl.col("name").cast(pl.String).alias("location")
    )
    out = series.join(stats, on="series").join(where, on="loc", how="left")
    return out.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]).sort("series")
