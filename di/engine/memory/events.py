"""The allocator's events of a trace with their fields, one row each (:func:`allocator_events`).

An allocator event is an instant named :data:`MEMORY_EVENT` whose ``args`` carry ``Total Allocated``, ``Total
Reserved``, ``Bytes``, ``Addr``, ``Device Type`` and ``Device Id`` (see :mod:`di.engine.memory`); a field an event
lacks, or holds as anything but a whole int64, is null.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.steps import NO_STEP
from di.engine.window import EventFrame, location_arrays
from di.trace import Trace

MEMORY_EVENT = "[memory]"
"""Name of an allocator event (PyTorch's profiler)."""
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia", 20: "privateuse1"}
"""PyTorch's ``c10::DeviceType`` codes of the devices it profiles (ROCm's GPUs report ``cuda``)."""

_FIELDS = {
    "allocated": "Total Allocated",
    "reserved": "Total Reserved",
    "bytes": "Bytes",
    "addr": "Addr",
    "device_type": "Device Type",
    "device_id": "Device Id",
}


def allocator_events(trace: Trace, frame: EventFrame | None = None) -> pl.DataFrame:
    """The trace's allocator events with their fields (see :mod:`di.engine.memory`), sorted by rank, device, time;
    their steps and window from ``frame`` (:func:`di.engine.window.prepare` of ``trace``; without it, no steps
    and all selected).

    Returns:
        row (event row), rank, device (``cuda:0``, ``cpu``), ts_ns, step, selected (in the window), allocated,
        reserved, bytes, addr (nulls where an event lacks the field), pos (0.. in this order).
    """
    ev = trace.events
    hit = (ev.get_column("name") == MEMORY_EVENT).to_numpy() & ev.get_column("instant").to_numpy()
    rows = np.flatnonzero(hit)
    if not rows.size:
        return pl.DataFrame(schema=_EVENTS)
    rank = location_arrays(trace)[0] if frame is None else frame.rank
    args = ev.get_column("args").gather(rows)
    fields = _fields(args)
    return (
        fields.with_columns(
            pl.Series("row", rows, pl.Int64),
            pl.Series("rank", rank[rows], pl.Int32),
            pl.Series("ts_ns", ev.get_column("start_ns").gather(rows)),
            pl.lit(NO_STEP, pl.Int64).alias("step") if frame is None else pl.Series("step", frame.step[rows]),
            pl.lit(True).alias("selected") if frame is None else pl.Series("selected", frame.selected[rows]),
        )
        .join(_devices(fields), on=["device_type", "device_id"], how="left", nulls_equal=True)
        .sort("rank", "_d", "ts_ns", "row")
        .select([c for c in _EVENTS if c != "pos"])
        .with_row_index("pos")
        .select(*(pl.col(c).cast(t) for c, t in _EVENTS.items()))
    )


def _devices(fields: pl.DataFrame) -> pl.DataFrame:
    """The devices of the events' fields: device_type, device_id, device (``cuda:0``, ``cpu``, ``type7``, ``device``
    without a type) and ``_d``, the device's code in the order of its label. Labelled once per device, sorted by an
    integer code instead of by the label of every event."""
    kind = pl.col("device_type").replace_strict(DEVICE_TYPES, default=None, return_dtype=pl.String)
    kind = pl.coalesce(kind, pl.format("type{}", pl.col("device_type")), pl.lit("device"))
    label = pl.when(pl.col("device_id") >= 0).then(pl.format("{}:{}", kind, pl.col("device_id"))).otherwise(kind)
    return (
        fields.select("device_type", "device_id")
        .unique()
        .with_columns(label.alias("device"))
        .sort("device")
        .with_row_index("_d")
    )


def _fields(args: pl.Series) -> pl.DataFrame:
    """The allocator fields of the events' args texts: one JSON parse of the column (3x faster than a regex per
    field); where a text is not JSON or a value is no int64, a regex per field that takes whole integers only (a
    float or a quoted number is null, never its leading digits)."""
    try:
        decoded = args.str.json_decode(pl.Struct({key: pl.Int64 for key in _FIELDS.values()}))
        return decoded.struct.unnest().rename({key: col for col, key in _FIELDS.items()}).select(list(_FIELDS))
    except pl.exceptions.PolarsError:
        return pl.DataFrame({"args": args}).select(
            pl.col("args").str.extract(rf'"{key}"\s*:\s*(-?\d+)\s*(?:[,}}]|$)').cast(pl.Int64, strict=False).alias(col)
            for col, key in _FIELDS.items()
        )


_EVENTS = {
    "row": pl.Int64,
    "rank": pl.Int32,
    "device": pl.String,
    "ts_ns": pl.Int64,
    "step": pl.Int64,
    "selected": pl.Boolean,
    "allocated": pl.Int64,
    "reserved": pl.Int64,
    "bytes": pl.Int64,
    "addr": pl.Int64,
    "pos": pl.Int64,
}
