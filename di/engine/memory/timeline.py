"""Each device's allocated and reserved bytes over the window, at most :data:`TIMELINE_POINTS` points a device
(:func:`memory_timeline`; definition in :mod:`di.engine.memory`)."""

from __future__ import annotations

import polars as pl

TIMELINE_POINTS = 1000
"""The most points of a device's :func:`memory_timeline`."""


def memory_timeline(events: pl.DataFrame, points: int = TIMELINE_POINTS) -> pl.DataFrame:
    """Each device's allocated and reserved bytes over the window (``events``:
    :func:`di.engine.memory.allocator_events`), at most ``points`` per device; see :mod:`di.engine.memory`.

    Returns:
        rank, device, ts_ns, allocated, reserved; by rank, device and time.
    """
    ev = events.filter(pl.col("selected") & pl.col("allocated").is_not_null())
    keys = ["rank", "device"]
    lo, hi = pl.col("ts_ns").min().over(keys), pl.col("ts_ns").max().over(keys)
    bucket = (pl.col("ts_ns") - lo) * points // (hi - lo + 1)
    key = pl.when(pl.len().over(keys) > points).then(bucket).otherwise(pl.col("pos"))
    return (
        ev.with_columns(key.alias("_b"))
        .group_by(*keys, "_b")
        .agg(pl.col("ts_ns").get(pl.col("allocated").arg_max()), pl.col("allocated").max(), pl.col("reserved").max())
        .sort(*keys, "ts_ns")
        .select(*keys, "ts_ns", "allocated", "reserved")
    )
