"""Each device's peak, its start and end, and its growth per step (:func:`memory`), and each rank's largest
accelerator peak (:func:`rank_peaks`).

Definitions (peak_bytes, start_bytes, end_bytes, growth_bytes_per_step ...) in :mod:`di.engine.memory`.
"""

from __future__ import annotations

import polars as pl

from di.engine.memory.attribution import attribution
from di.engine.memory.events import allocator_events
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame

GROWTH_MIN_STEPS = 3
"""Steps after its first a rank needs before its memory growth per step is given."""

_TABLE = {
    "rank": pl.Int32,
    "device": pl.String,
    "step": pl.Int64,
    "events": pl.Int64,
    "allocs": pl.Int64,
    "frees": pl.Int64,
    "alloc_bytes": pl.Int64,
    "peak_bytes": pl.Int64,
    "peak_ns": pl.Int64,
    "peak_step": pl.Int64,
    "reserved_at_peak_bytes": pl.Int64,
    "peak_reserved_bytes": pl.Int64,
    "start_bytes": pl.Int64,
    "end_bytes": pl.Int64,
    "growth_bytes_per_step": pl.Float64,
    "op": pl.String,
    "module": pl.String,
    "phase": pl.String,
}


def memory(frame: EventFrame, *, per_step: bool = False, events: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each rank's and device's allocator memory in the window (and per step with ``per_step``); see
    :mod:`di.engine.memory`.

    Returns:
        rank, device, step (null: the whole window), events, allocs, frees, alloc_bytes (bytes allocated), peak_bytes,
        peak_ns, peak_step, reserved_at_peak_bytes, peak_reserved_bytes, start_bytes, end_bytes,
        growth_bytes_per_step (whole-window rows), op, module and phase of the peak event. No rows without allocator
        events.
    """
    ev = allocator_events(frame.trace, frame) if events is None else events
    ev = ev.filter(pl.col("selected") & pl.col("allocated").is_not_null())
    if not ev.height:
        return pl.DataFrame(schema=_TABLE)
    whole = _summary(ev, ["rank", "device"]).with_columns(pl.lit(None, pl.Int64).alias("step"))
    by_step = _summary(ev.filter(pl.col("step") != NO_STEP), ["rank", "device", "step"])
    whole = whole.join(_growth(by_step), on=["rank", "device"], how="left")
    table = pl.concat([whole, by_step], how="diagonal_relaxed") if per_step else whole
    op, module, phase = attribution(
        frame, table.get_column("peak_row").to_numpy(), table.get_column("peak_step").to_numpy()
    )
    table = table.with_columns(op, module, phase, pl.col("peak_step").replace(NO_STEP, None))
    return table.sort("rank", "device", "step", nulls_last=False).select(
        *(pl.col(c).cast(t) for c, t in _TABLE.items())
    )


def _growth(by_step: pl.DataFrame) -> pl.DataFrame:
    """rank, device, growth_bytes_per_step: the least-squares slope of the per-step rows' ``end_bytes`` over the
    steps after each device's first (null under :data:`GROWTH_MIN_STEPS` of them)."""
    if not by_step.height:
        return pl.DataFrame(schema={"rank": pl.Int32, "device": pl.String, "growth_bytes_per_step": pl.Float64})
    x = pl.col("step").rank("dense").over("rank", "device").cast(pl.Float64)
    return (
        by_step.sort("rank", "device", "step")
        .filter(pl.col("step") != pl.col("step").first().over("rank", "device"))
        .group_by("rank", "device")
        .agg(
            pl.when(pl.len() >= GROWTH_MIN_STEPS)
            .then(pl.cov(x, pl.col("end_bytes")) / x.var())
            .alias("growth_bytes_per_step")
        )
    )


def _summary(ev: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    at_peak = pl.col("allocated").arg_max()
    return ev.group_by(keys, maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("events"),
        (pl.col("bytes") > 0).sum().cast(pl.Int64).alias("allocs"),
        (pl.col("bytes") < 0).sum().cast(pl.Int64).alias("frees"),
        pl.col("bytes").clip(lower_bound=0).sum().alias("alloc_bytes"),
        pl.col("allocated").max().alias("peak_bytes"),
        pl.col("ts_ns").get(at_peak).alias("peak_ns"),
        pl.col("step").get(at_peak).alias("peak_step"),
        pl.col("row").get(at_peak).alias("peak_row"),
        pl.col("reserved").get(at_peak).alias("reserved_at_peak_bytes"),
        pl.col("reserved").max().alias("peak_reserved_bytes"),
        (pl.col("allocated") - pl.col("bytes").fill_null(0)).first().alias("start_bytes"),
        pl.col("allocated").last().alias("end_bytes"),
    )


def rank_peaks(table: pl.DataFrame) -> pl.DataFrame:
    """Per rank, its accelerator (not ``cpu``) with the largest window peak in a :func:`memory` table: rank, device,
    peak_bytes, growth_bytes_per_step; no row for a rank without one."""
    return (
        table.filter(pl.col("step").is_null() & (pl.col("device") != "cpu"))
        .sort("peak_bytes", "device", descending=[True, False])
        .unique("rank", keep="first")
        .sort("rank")
        .select("rank", "device", "peak_bytes", "growth_bytes_per_step")
    )
