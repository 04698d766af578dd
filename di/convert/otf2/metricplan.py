"""The OTF2 writer's metrics: one metric member per series, and the arrays :func:`emit.emit_metrics` writes.

Each series' samples are written on the output location that holds them (the
``metric`` locations of :func:`outlocations.plan_locations`), sorted by that
location, time and series; ``metric_bounds`` gives each location's run of
samples. Times are shifted as the events' (``shift`` ns).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.trace import Trace

__all__ = ["plan_metrics"]


def plan_metrics(trace: Trace, shift: int, out: pl.DataFrame) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """(metric members = one per series, metric arrays: writer refs, bounds, samples)."""
    series = trace.series.sort("series")
    metric_locs = out.filter(pl.col("metric"))
    empty = np.zeros(0, np.int64)
    if not series.height:
        return [], {
            "metric_writers": empty,
            "metric_bounds": np.zeros(1, np.int64),
            "metric_ts": empty,
            "metric_ref": empty,
            "metric_values": np.zeros(0),
        }
    members = [{"name": n, "unit": u} for n, u in series.select("name", "unit").iter_rows()]
    position = {loc: i for i, loc in enumerate(metric_locs["loc"].to_list())}
    ser_pos = {s: i for i, s in enumerate(series["series"].to_list())}
    ser_out = {s: position[loc] for s, loc in series.select("series", "loc").iter_rows()}
    smp = trace.samples.with_columns(
        pl.col("series").replace_strict(ser_out, return_dtype=pl.Int64).alias("out"),
        pl.col("series").replace_strict(ser_pos, return_dtype=pl.Int64).alias("metric"),
    ).sort("out", "ts_ns", "series")
    counts = np.bincount(smp["out"].to_numpy(), minlength=metric_locs.height)
    bounds = np.zeros(metric_locs.height + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    arrays = {
        "metric_writers": metric_locs["ref"].to_numpy().astype(np.int64),
        "metric_counts": counts,
        "metric_bounds": bounds,
        "metric_ts": smp["ts_ns"].to_numpy() + shift,
        "metric_ref": smp["metric"].to_numpy(),
        "metric_values": smp["value"].to_numpy().astype(np.float64),
    }
    return members, arrays
