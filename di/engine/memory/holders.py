"""What held each device's memory at its window peak (:func:`memory_holders`).

Definitions (held at the peak, the ``before_trace`` and ``rest`` rows, earlier_bytes) in :mod:`di.engine.memory`.
"""

from __future__ import annotations

import polars as pl

from di.engine.memory.attribution import attribution
from di.engine.memory.events import allocator_events
from di.engine.window import EventFrame

HOLDERS_SHOWN = 10
"""Rows of :func:`memory_holders` kept per device, the largest."""
HOLDER_KINDS = ("allocated", "rest", "before_trace")
"""Kinds of a :func:`memory_holders` row: an operator's and module's allocations, the rest of them summed, memory
allocated before the trace."""

_HOLDERS = {
    "rank": pl.Int32,
    "device": pl.String,
    "op": pl.String,
    "module": pl.String,
    "phase": pl.String,
    "kind": pl.String,
    "bytes": pl.Int64,
    "earlier_bytes": pl.Int64,
    "allocations": pl.Int64,
    "share": pl.Float64,
}


def memory_holders(frame: EventFrame, table: pl.DataFrame, *, events: pl.DataFrame | None = None) -> pl.DataFrame:
    """What held each device's memory at its window peak (the whole-window rows of ``table``, a
    :func:`di.engine.memory.memory` result): the allocations alive then, by the op and module that made them, largest
    first; see :mod:`di.engine.memory`.

    Returns:
        rank, device, op, module, phase (null for the before-trace row), kind (``allocated``, ``rest``: one per
        phase, ``before_trace``), bytes, earlier_bytes (made in a step after the rank's first and before the peak's;
        null for the before-trace row), allocations (count; null for the before-trace row), share (of the peak).
    """
    peaks = table.filter(pl.col("step").is_null()).select("rank", "device", "peak_bytes", "peak_ns")
    ev = allocator_events(frame.trace, frame) if events is None else events
    if not peaks.height or not ev.height:
        return pl.DataFrame(schema=_HOLDERS)
    peak_pos = _peak_positions(ev, peaks)
    held = _held(frame, _alive_at_peak(frame, ev, peak_pos))
    shown, rest = _shown_and_rest(held)
    out = pl.concat([shown, rest, _before_trace(peak_pos, held)], how="diagonal_relaxed").join(
        peak_pos.select("rank", "device", "peak_bytes"), on=["rank", "device"]
    )
    out = out.with_columns((pl.col("bytes") / pl.col("peak_bytes")).alias("share"))
    return holders_in_order(out.select(*(pl.col(c).cast(t) for c, t in _HOLDERS.items())))


def _peak_positions(ev: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    """rank, device, peak_pos, peak_bytes, peak_step: the peak event's position, the first event of the device at
    peak_ns reaching peak_bytes."""
    return (
        ev.join(peaks, on=["rank", "device"])
        .filter((pl.col("ts_ns") == pl.col("peak_ns")) & (pl.col("allocated") == pl.col("peak_bytes")))
        .group_by("rank", "device")
        .agg(
            pl.col("pos").min().alias("peak_pos"),
            pl.col("peak_bytes").first(),
            pl.col("step").get(pl.col("pos").arg_min()).alias("peak_step"),
        )
    )


def _alive_at_peak(frame: EventFrame, ev: pl.DataFrame, peak_pos: pl.DataFrame) -> pl.DataFrame:
    """The allocations made up to each device's peak event (it included) that no later event up to it frees (the
    last event of their address is theirs), with their rank's first step (``first_step``)."""
    upto = (
        ev.join(peak_pos, on=["rank", "device"])
        .filter(pl.col("pos") <= pl.col("peak_pos"))
        .with_columns(pl.col("addr").fill_null(-1 - pl.col("pos")))  # an event without address matches none
        .sort("rank", "device", "addr", "pos")
    )
    same = [pl.col(c).shift(-1) == pl.col(c) for c in ("rank", "device", "addr")]
    live = upto.filter((pl.col("bytes") > 0) & ~(same[0] & same[1] & same[2]).fill_null(False))
    first = frame.steps.group_by("rank").agg(pl.col("step").min().alias("first_step"))
    return live.join(first.with_columns(pl.col("rank").cast(pl.Int32)), on="rank", how="left")


def _held(frame: EventFrame, live: pl.DataFrame) -> pl.DataFrame:
    """The live allocations summed by rank, device, op, module and phase: bytes, earlier_bytes, allocations, kind
    ``allocated``."""
    earlier = (pl.col("step") > pl.col("first_step")) & (pl.col("step") < pl.col("peak_step"))
    op, module, phase = attribution(frame, live.get_column("row").to_numpy(), live.get_column("step").to_numpy())
    return (
        live.with_columns(op, module, phase)
        .group_by("rank", "device", "op", "module", "phase")
        .agg(
            pl.col("bytes").sum(),
            pl.col("bytes").filter(earlier).sum().alias("earlier_bytes"),
            pl.len().cast(pl.Int64).alias("allocations"),
        )
        .with_columns(pl.lit("allocated").alias("kind"))
    )


def _shown_and_rest(held: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the :data:`HOLDERS_SHOWN` largest rows of each device, the others summed per phase as kind ``rest``); rows
    of equal bytes are taken in (op, module, phase) order, so that which of them are shown is the same on every run
    (the group_by that made them keeps no order)."""
    held = held.sort(
        ["rank", "device", "bytes", "op", "module", "phase"],
        descending=[False, False, True, False, False, False],
        nulls_last=True,
    )
    ranked = held.with_columns(pl.col("bytes").rank("ordinal", descending=True).over("rank", "device").alias("_r"))
    shown = ranked.filter(pl.col("_r") <= HOLDERS_SHOWN).drop("_r")
    rest = (
        ranked.filter(pl.col("_r") > HOLDERS_SHOWN)
        .group_by("rank", "device", "phase")
        .agg(pl.col("bytes").sum(), pl.col("earlier_bytes").sum(), pl.col("allocations").sum())
        .with_columns(pl.lit(None, pl.String).alias("op"), pl.lit(None, pl.String).alias("module"))
        .with_columns(pl.lit("rest").alias("kind"))
    )
    return shown, rest


def _before_trace(peak_pos: pl.DataFrame, held: pl.DataFrame) -> pl.DataFrame:
    """Per device, the part of its peak that no traced allocation explains (kind ``before_trace``), where positive."""
    traced = held.group_by("rank", "device").agg(pl.col("bytes").sum().alias("traced"))
    return (
        peak_pos.join(traced, on=["rank", "device"], how="left")
        .select(
            "rank",
            "device",
            pl.lit(None, pl.String).alias("op"),
            pl.lit(None, pl.String).alias("module"),
            pl.lit(None, pl.String).alias("phase"),
            pl.lit("before_trace").alias("kind"),
            (pl.col("peak_bytes") - pl.col("traced").fill_null(0)).alias("bytes"),
            pl.lit(None, pl.Int64).alias("earlier_bytes"),
            pl.lit(None, pl.Int64).alias("allocations"),
        )
        .filter(pl.col("bytes") > 0)
    )


def holders_in_order(holders: pl.DataFrame) -> pl.DataFrame:
    """:func:`memory_holders` rows in their order: by rank, device, bytes (largest first), op, module."""
    return holders.sort(
        ["rank", "device", "bytes", "op", "module"], descending=[False, False, True, False, False], nulls_last=True
    )
