"""Device memory from the framework's allocator: each device's peak, what ran at the peak, what held the memory then,
and how the memory grew over the steps.

The input is the allocator's events: instants named :data:`MEMORY_EVENT` (PyTorch's profiler with
``profile_memory=True`` writes one per allocation and free, on the thread that asked) whose ``args`` carry
``Total Allocated`` and ``Total Reserved`` (bytes the caching allocator has handed out, and holds from the driver,
after the event), ``Bytes`` (the allocation's size, negative for a free), ``Addr`` (its address), ``Device Type``
and ``Device Id`` (PyTorch's device: :data:`DEVICE_TYPES`). A connector that knows an allocator writes the same.

Definitions (times int64 ns, sizes int64 bytes), per rank and device (``cuda:0``, ``cpu``):

- **peak_bytes**: the largest ``Total Allocated`` after an event in the window; ``peak_ns``/``peak_step``: the
  first event that reached it. ``reserved_at_peak_bytes``: ``Total Reserved`` then; ``reserved_at_peak_bytes -
  peak_bytes`` is the allocator's cache, free but held (fragmentation). ``peak_reserved_bytes``: the largest
  ``Total Reserved`` in the window.
- **start_bytes**: allocated before the window's first event (its ``Total Allocated`` less its ``Bytes``);
  **end_bytes**: after its last one.
- **op** and **module** of an event: the outermost CPU operator (cat ``compute``) enclosing it, the framework call
  that asked for the memory (``aten::linear``, ``autograd::engine::evaluate_function: AddmmBackward0``), and the
  innermost ``nn.Module: NAME`` Python region enclosing it (a trace recorded ``with_stack``); null where none.
- **phase** of an event (:data:`PHASES`): ``optimizer`` inside an ``Optimizer.*`` region (``Optimizer.step#AdamW.step``,
  ``zero_grad``: its state), else ``backward`` inside an autograd node's evaluation (:data:`BACKWARD_PREFIX`: gradients
  and the backward's temporaries), else ``forward`` inside a step (activations, the loss), else ``other``.
- **Held at the peak** (:func:`memory_holders`): the allocations made before the peak event (it included) whose free
  does not come before it, summed by the op, module and phase that allocated them; what the trace cannot explain (memory
  allocated before the trace began: weights, optimizer state) is one row of kind ``before_trace``. The rows of a
  device sum to its ``peak_bytes``; the :data:`HOLDERS_SHOWN` largest (kind ``allocated``) are kept, the rest
  summed in one row of kind ``rest`` per phase.
- **Per step** (``per_step``): the same over each step's events; **growth_bytes_per_step** (whole-window row): the
  least-squares slope of ``end_bytes`` over the rank's steps in order after its first (which creates, once, the
  optimizer's state, workspaces and caches), null under :data:`GROWTH_MIN_STEPS` such steps. Memory that grows by a
  steady amount each step is kept alive across steps (losses kept with their graph, a cache): a leak on the way to
  running out.
- **earlier_bytes** of a holder: its allocations alive at the peak that were made in a step before the peak's, other
  than the rank's first in the window (which makes the optimizer's state and caches once): memory a steady step
  should have freed. A growing device's leak is the holder with the most.
- **Over time** (:func:`memory_timeline`): each device's allocated and reserved bytes in the window, at most
  :data:`TIMELINE_POINTS` points: a device with more events gets its largest values per time bucket (the bucket's
  largest allocated and the time it was reached; its largest reserved).
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from di.engine.classify import name_codes
from di.engine.phases import BACKWARD_PREFIX, MODULE_PREFIX, OPTIMIZER_PREFIX
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame, location_arrays
from di.nesting import enclosing, names_at, parent_rows
from di.trace import Trace

__all__ = [
    "DEVICE_TYPES",
    "GROWTH_MIN_STEPS",
    "HOLDERS_SHOWN",
    "HOLDER_KINDS",
    "MEMORY_EVENT",
    "PHASES",
    "allocator_events",
    "in_order",
    "memory",
    "memory_holders",
    "memory_tables",
    "memory_timeline",
    "rank_peaks",
]

MEMORY_EVENT = "[memory]"
"""Name of an allocator event (PyTorch's profiler)."""
DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia", 20: "privateuse1"}
"""PyTorch's ``c10::DeviceType`` codes of the devices it profiles (ROCm's GPUs report ``cuda``)."""
HOLDERS_SHOWN = 10
"""Rows of :func:`memory_holders` kept per device, the largest."""
HOLDER_KINDS = ("allocated", "rest", "before_trace")
"""Kinds of a :func:`memory_holders` row: an operator's and module's allocations, the rest of them summed, memory
allocated before the trace."""
GROWTH_MIN_STEPS = 3
"""Steps after its first a rank needs before its memory growth per step is given."""
TIMELINE_POINTS = 1000
"""The most points of a device's :func:`memory_timeline`."""
PHASES = ("forward", "backward", "optimizer", "other")
"""The phases of a training step an allocation is given to (see the module docstring)."""

_FIELDS = {
    "allocated": "Total Allocated",
    "reserved": "Total Reserved",
    "bytes": "Bytes",
    "addr": "Addr",
    "device_type": "Device Type",
    "device_id": "Device Id",
}
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


def allocator_events(trace: Trace, frame: EventFrame | None = None) -> pl.DataFrame:
    """The trace's allocator events with their fields (see the module docstring), sorted by rank, device, time;
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
    kind = pl.col("device_type").replace_strict(DEVICE_TYPES, default=None, return_dtype=pl.String)
    kind = pl.coalesce(kind, pl.format("type{}", pl.col("device_type")), pl.lit("device"))
    label = pl.when(pl.col("device_id") >= 0).then(pl.format("{}:{}", kind, pl.col("device_id"))).otherwise(kind)
    devices = (  # labelled once per device, sorted by an integer code instead of by the label of every event
        fields.select("device_type", "device_id")
        .unique()
        .with_columns(label.alias("device"))
        .sort("device")
        .with_row_index("_d")
    )
    return (
        fields.with_columns(
            pl.Series("row", rows, pl.Int64),
            pl.Series("rank", rank[rows], pl.Int32),
            pl.Series("ts_ns", ev.get_column("start_ns").gather(rows)),
            pl.lit(NO_STEP, pl.Int64).alias("step") if frame is None else pl.Series("step", frame.step[rows]),
            pl.lit(True).alias("selected") if frame is None else pl.Series("selected", frame.selected[rows]),
        )
        .join(devices, on=["device_type", "device_id"], how="left", nulls_equal=True)
        .sort("rank", "_d", "ts_ns", "row")
        .select([c for c in _EVENTS if c != "pos"])
        .with_row_index("pos")
        .select(*(pl.col(c).cast(t) for c, t in _EVENTS.items()))
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


def memory(frame: EventFrame, *, per_step: bool = False, events: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each rank's and device's allocator memory in the window (and per step with ``per_step``); see the module
    docstring.

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
    x = pl.col("step").rank("dense").over("rank", "device").cast(pl.Float64)
    growth = (
        by_step.sort("rank", "device", "step")
        .filter(pl.col("step") != pl.col("step").first().over("rank", "device"))
        .group_by("rank", "device")
        .agg(
            pl.when(pl.len() >= GROWTH_MIN_STEPS)
            .then(pl.cov(x, pl.col("end_bytes")) / x.var())
            .alias("growth_bytes_per_step")
        )
        if by_step.height
        else pl.DataFrame(schema={"rank": pl.Int32, "device": pl.String, "growth_bytes_per_step": pl.Float64})
    )
    whole = whole.join(growth, on=["rank", "device"], how="left")
    table = pl.concat([whole, by_step], how="diagonal_relaxed") if per_step else whole
    op, module, phase = _attribution(
        frame, table.get_column("peak_row").to_numpy(), table.get_column("peak_step").to_numpy()
    )
    table = table.with_columns(op, module, phase, pl.col("peak_step").replace(NO_STEP, None))
    return table.sort("rank", "device", "step", nulls_last=False).select(
        *(pl.col(c).cast(t) for c, t in _TABLE.items())
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


def memory_holders(frame: EventFrame, table: pl.DataFrame, *, events: pl.DataFrame | None = None) -> pl.DataFrame:
    """What held each device's memory at its window peak (the whole-window rows of ``table``, a :func:`memory`
    result): the allocations alive then, by the op and module that made them, largest first; see the module
    docstring.

    Returns:
        rank, device, op, module, phase (null for the before-trace row), kind (``allocated``, ``rest``: one per
        phase, ``before_trace``), bytes, earlier_bytes (made in a step after the rank's first and before the peak's;
        null for the before-trace row), allocations (count; null for the before-trace row), share (of the peak).
    """
    peaks = table.filter(pl.col("step").is_null()).select("rank", "device", "peak_bytes", "peak_ns")
    ev = allocator_events(frame.trace, frame) if events is None else events
    if not peaks.height or not ev.height:
        return pl.DataFrame(schema=_HOLDERS)
    # the peak event's position: the first event of the device at peak_ns reaching peak_bytes
    peak_pos = (
        ev.join(peaks, on=["rank", "device"])
        .filter((pl.col("ts_ns") == pl.col("peak_ns")) & (pl.col("allocated") == pl.col("peak_bytes")))
        .group_by("rank", "device")
        .agg(
            pl.col("pos").min().alias("peak_pos"),
            pl.col("peak_bytes").first(),
            pl.col("step").get(pl.col("pos").arg_min()).alias("peak_step"),
        )
    )
    upto = (
        ev.join(peak_pos, on=["rank", "device"])
        .filter(pl.col("pos") <= pl.col("peak_pos"))
        .with_columns(pl.col("addr").fill_null(-1 - pl.col("pos")))  # an event without address matches none
        .sort("rank", "device", "addr", "pos")
    )
    same = [pl.col(c).shift(-1) == pl.col(c) for c in ("rank", "device", "addr")]
    live = upto.filter((pl.col("bytes") > 0) & ~(same[0] & same[1] & same[2]).fill_null(False))
    first = frame.steps.group_by("rank").agg(pl.col("step").min().alias("first_step"))
    live = live.join(first.with_columns(pl.col("rank").cast(pl.Int32)), on="rank", how="left")
    earlier = (pl.col("step") > pl.col("first_step")) & (pl.col("step") < pl.col("peak_step"))
    op, module, phase = _attribution(frame, live.get_column("row").to_numpy(), live.get_column("step").to_numpy())
    held = (
        live.with_columns(op, module, phase)
        .group_by("rank", "device", "op", "module", "phase")
        .agg(
            pl.col("bytes").sum(),
            pl.col("bytes").filter(earlier).sum().alias("earlier_bytes"),
            pl.len().cast(pl.Int64).alias("allocations"),
        )
        .with_columns(pl.lit("allocated").alias("kind"))
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
    traced = held.group_by("rank", "device").agg(pl.col("bytes").sum().alias("traced"))
    before = (
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
    out = pl.concat([shown, rest, before], how="diagonal_relaxed").join(
        peak_pos.select("rank", "device", "peak_bytes"), on=["rank", "device"]
    )
    out = out.with_columns((pl.col("bytes") / pl.col("peak_bytes")).alias("share"))
    return _holders_in_order(out.select(*(pl.col(c).cast(t) for c, t in _HOLDERS.items())))


def memory_timeline(events: pl.DataFrame, points: int = TIMELINE_POINTS) -> pl.DataFrame:
    """Each device's allocated and reserved bytes over the window (``events``: :func:`allocator_events`), at most
    ``points`` per device; see the module docstring.

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


def memory_tables(
    frame: EventFrame, per_step: bool = False, ranks: list[int] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(:func:`memory` of the window, with per-step rows when ``per_step``; :func:`memory_holders` at each device's
    peak; :func:`memory_timeline`), as :func:`di.analyze` reports them; only of ``ranks`` when given."""
    ev = allocator_events(frame.trace, frame)
    if ranks is not None:
        ev = ev.filter(pl.col("rank").is_in(ranks))
    table = memory(frame, per_step=per_step, events=ev)
    return table, memory_holders(frame, table, events=ev), memory_timeline(ev)


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


def in_order(
    table: pl.DataFrame, holders: pl.DataFrame, timeline: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A :func:`memory` table, its :func:`memory_holders` and :func:`memory_timeline` (or their parts, concatenated)
    in their order."""
    return (
        table.sort("rank", "device", "step", nulls_last=False),
        _holders_in_order(holders),
        timeline.sort("rank", "device", "ts_ns"),
    )


def _holders_in_order(holders: pl.DataFrame) -> pl.DataFrame:
    return holders.sort(
        ["rank", "device", "bytes", "op", "module"], descending=[False, False, True, False, False], nulls_last=True
    )


def _attribution(frame: EventFrame, rows: np.ndarray, steps: np.ndarray) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(op, module, phase) of each event row (-1 or NaN: none; ``steps``: each one's step), see the module
    docstring."""
    ev = frame.trace.events
    rows = np.asarray(rows, dtype=np.float64)
    at = np.where(np.isnan(rows), -1, rows).astype(np.int64)
    names = ev.get_column("name")
    parent = parent_rows(ev)
    is_op = (ev.get_column("cat") == "compute").to_numpy() & ~frame.on_gpu
    op = enclosing(parent, at, is_op, outermost=True)
    module, backward, optimizer = (
        enclosing(parent, at, name_codes(names, ["^" + re.escape(prefix)]) == 0, outermost=False)
        for prefix in (MODULE_PREFIX, BACKWARD_PREFIX, OPTIMIZER_PREFIX)
    )
    in_step = np.nan_to_num(np.asarray(steps, dtype=np.float64), nan=NO_STEP) != NO_STEP
    phase = np.where(optimizer >= 0, 2, np.where(backward >= 0, 1, np.where(in_step, 0, 3)))
    phases = pl.Series("phase", PHASES, pl.String).gather(phase).alias("phase")
    return names_at(names, op).alias("op"), names_at(names, module).alias("module"), phases
