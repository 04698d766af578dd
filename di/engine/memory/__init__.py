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

One module per concern: :mod:`~di.engine.memory.events` (the allocator's events and their fields),
:mod:`~di.engine.memory.attribution` (an event's op, module and phase), :mod:`~di.engine.memory.peaks` (the table of
peaks and growth), :mod:`~di.engine.memory.holders` (held at the peak), :mod:`~di.engine.memory.timeline` (over time);
:func:`memory_tables` runs them as :func:`di.analyze` does.
"""

from __future__ import annotations

import polars as pl

from di.engine.memory.attribution import PHASES
from di.engine.memory.events import DEVICE_TYPES, MEMORY_EVENT, allocator_events
from di.engine.memory.events import _fields as _fields  # the tests read the args parser from here
from di.engine.memory.holders import HOLDER_KINDS, HOLDERS_SHOWN, holders_in_order, memory_holders
from di.engine.memory.peaks import GROWTH_MIN_STEPS, memory, rank_peaks
from di.engine.memory.timeline import TIMELINE_POINTS as TIMELINE_POINTS
from di.engine.memory.timeline import memory_timeline
from di.engine.window import EventFrame

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


def in_order(
    table: pl.DataFrame, holders: pl.DataFrame, timeline: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A :func:`memory` table, its :func:`memory_holders` and :func:`memory_timeline` (or their parts, concatenated)
    in their order."""
    return (
        table.sort("rank", "device", "step", nulls_last=False),
        holders_in_order(holders),
        timeline.sort("rank", "device", "ts_ns"),
    )
