"""Training phases: how much of each step a rank spends loading data, in the forward pass, in the backward pass
and in the optimizer, on its host and on its GPUs, and how long its GPUs sit idle in each.

The input is the regions frameworks name each phase by (:data:`MARKERS`): PyTorch's profiler writes
``enumerate(DataLoader)#...__next__`` around each batch, ``autograd::engine::evaluate_function: ...`` around each
autograd node of the backward pass and ``Optimizer.step#AdamW.step``/``Optimizer.zero_grad#...`` around the
optimizer; PyTorch Lightning's profiler and users' own ranges (NVTX, ``record_function``, di's Python regions) name
them ``forward``, ``backward``, ``optimizer_step``, ``training_step`` and the like.

Definitions (times int64 ns), per rank (and step with ``per_step``):

- **phase of a host event**: that of the innermost marker among the event and its ancestors (a recomputed forward
  inside a backward is ``forward``; an optimizer hook inside the backward is ``optimizer``). An event with no marker
  above it is ``forward`` where it lies in a step, is no *container* (the step's own region, or a region holding a
  marker: a ``train_step`` Python frame), its rank names no forward of its own, and it starts before the step's last
  backward marker (PyTorch marks everything but the forward; the loss counts with it, and the micro-batches of
  gradient accumulation or a pipeline's schedule alternate forwards with backwards); every other event is ``other``
  (the gradients' all-reduce and synchronization after the last backward, logging, time outside the steps).
- **phase of GPU work** (kernels, copies, memsets): that of the host call that launched it
  (:mod:`di.engine.launches`); ``other`` for work with no known launch.
- **host_ns**: the union over the rank's host timelines of the phase's time: each marker's interval less those of
  the markers directly inside it (Lightning's ``optimizer_step`` runs the closure's forward and backward inside it),
  and the intervals of the phase's other host work (operators, calls; containers and annotations left out), so
  nesting and threads never count twice. On a timeline of calls only (di's PMPI capture) the markers' intervals hold
  the computation between the calls. **gpu_ns**: the union over the rank's GPUs of the phase's GPU work.
  **gpu_idle_ns**: the part of host_ns during which none of the rank's GPUs ran anything (of the step's GPU work,
  with ``per_step``): a data loader the GPU waits for, an optimizer or forward that does not launch work fast
  enough. **kernels**: the phase's kernels (GPU work other than copies and memsets).
- **time_ns**: the rank's steps summed where it has steps (and only events inside them counted), else the span of
  its counted events in the window; per step, the step's duration. **host_share** = host_ns / time_ns,
  **gpu_share** = gpu_ns / time_ns. The phases' host_ns need not add up to time_ns (the gaps between events are
  nobody's) and may exceed it together when threads run phases at once (a backward thread beside the main one).

A rank without GPU work has null gpu_ns and gpu_idle_ns. Rows are those phases a rank has time in.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import polars as pl

from di.engine import intervals as iv
from di.engine.classify import COMM, COMPUTE, MEMORY, NONE, name_codes
from di.engine.groups import make_groups
from di.engine.launches import launch_calls
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame
from di.nesting import enclosing_all, parent_rows

__all__ = [
    "BACKWARD_PREFIX",
    "MARKERS",
    "MODULE_PREFIX",
    "OPTIMIZER_PREFIX",
    "PHASES",
    "event_phases",
    "in_order",
    "phase_order",
    "phases",
]

PHASES = ("data", "forward", "backward", "optimizer", "other")
"""The phases, in the order of a step."""
DATA, FORWARD, BACKWARD, OPTIMIZER, OTHER = range(len(PHASES))
MODULE_PREFIX = "nn.Module: "
"""How PyTorch names the Python region of an ``nn.Module``'s forward (``with_stack=True``)."""
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
"""How PyTorch names the evaluation of an autograd node in the backward pass (``... AddmmBackward0``)."""
OPTIMIZER_PREFIX = "Optimizer."
"""How PyTorch names an optimizer's ``step`` and ``zero_grad`` regions (``Optimizer.step#AdamW.step``)."""
MARKERS = {
    "data": r"^enumerate\(DataLoader\)#|^(?i:data|data[ _-]?load(er|ing)?|load[ _-]batch|get[ _-]batch|next[ _-]batch)$"
    r"|(?i:dataloader_next)$",
    "forward": f"^{re.escape(MODULE_PREFIX)}"
    r"|^(?i:forward|fwd|forward[ _-](pass|compute|step)|model[ _.-]forward)$|(?i:\.training_step)$",
    "backward": f"^{re.escape(BACKWARD_PREFIX)}"
    r"|^(?i:backward|bwd|backward[ _-](pass|compute|step)|loss[ _.-]backward)$|^\[\w+\][\w.]*\.backward$",
    "optimizer": f"^{re.escape(OPTIMIZER_PREFIX)}"
    r"|^(?i:optimizer|optim|optimizer[ _.-](step|zero_grad)|opt[ _-]step|step[ _-]optimizer|zero[ _-]grad)$"
    r"|\.optimizer_(step|zero_grad)$",
}
"""Per phase, the pattern of the names of the regions that mark it (searched in each distinct event name): PyTorch's
profiler's own (``enumerate(DataLoader)#``, ``nn.Module: `` around each module's forward with ``with_stack=True``,
``autograd::engine::evaluate_function: ``, ``Optimizer.``), PyTorch
Lightning's profiler's (``[Strategy]DDPStrategy.training_step``, ``[LightningModule]Model.optimizer_step``,
``[_TrainingEpochLoop].train_dataloader_next``) and the plain names users give their ranges."""

_TABLE = {
    "rank": pl.Int32,
    "step": pl.Int64,
    "phase": pl.String,
    "host_ns": pl.Int64,
    "gpu_ns": pl.Int64,
    "gpu_idle_ns": pl.Int64,
    "kernels": pl.Int64,
    "time_ns": pl.Int64,
    "host_share": pl.Float64,
    "gpu_share": pl.Float64,
}


class Phased(NamedTuple):
    """The phase of each event and the times :func:`phases` measures (arrays over the event rows)."""

    phase: np.ndarray
    """int8 :data:`PHASES` index of each event (GPU work by its launch; see the module docstring)."""
    counted: np.ndarray
    """Whether the event's own interval goes into its phase's union: GPU work, and host work that is no marker, no
    container, not instant and not inside counted work of its phase and step (which holds it already)."""
    markers: iv.IntervalSet
    """The host time of the markers: each marker's interval less those of the markers directly inside it (group: the
    marker's event row), so that a region holding another phase's marker (Lightning's ``optimizer_step`` around the
    closure's forward and backward) keeps only the rest."""
    start_ns: np.ndarray
    end_ns: np.ndarray
    """The events' times, a host event of a step cut to the step (int64 ns)."""
    marked_ranks: np.ndarray
    """The ranks with at least one marker on their host timelines: the others' phases are unknown."""


def event_phases(frame: EventFrame) -> Phased:
    """Each event's phase and the times the phases are measured from (see :class:`Phased`)."""
    ev = frame.trace.events
    n = ev.height
    code = _marker_codes(ev.get_column("name"))
    host = ~frame.on_gpu
    marked = (code >= 0) & host
    if not marked.any():  # no rank's phases are known: nothing to measure
        none = np.zeros(n, bool)
        return Phased(np.full(n, OTHER, np.int8), none, iv.empty(), frame.start_ns, frame.end_ns, np.zeros(0, np.int64))
    step_of = _step_rows(frame)
    start, end, covers = _in_steps(frame, step_of)
    parent = parent_rows(ev)
    inner = enclosing_all(parent, marked, outermost=False)[:n]
    own = np.where(marked, np.arange(n), inner)
    phase = np.where(own >= 0, code[np.maximum(own, 0)], -1).astype(np.int8)
    container = (_ancestors(parent, np.flatnonzero(marked)) | covers) & ~marked
    loose = np.flatnonzero(host & (phase < 0) & ~container & (step_of >= 0))
    if loose.size:
        forward_ranks = np.unique(frame.rank[marked & (code == FORWARD)])
        before = frame.start_ns[loose] < _last_backward(frame, step_of, marked & (code == BACKWARD), loose)
        phase[loose[before & ~_of_ranks(frame.rank[loose], forward_ranks)]] = FORWARD
    phase[host & (phase < 0)] = OTHER
    gpu = np.flatnonzero(frame.on_gpu)
    if gpu.size:
        launch = launch_calls(frame)[gpu]
        phase[gpu] = np.where(launch >= 0, phase[np.maximum(launch, 0)], OTHER)
        phase[gpu[phase[gpu] < 0]] = OTHER  # a sync flow from GPU work (its phase not set yet)
    gpu_work = (frame.activity == COMPUTE) | (frame.activity == COMM) | (frame.activity == MEMORY)
    work = np.where(frame.on_gpu, gpu_work, frame.activity != NONE)
    counted = work & ~container & ~marked & (end > start)
    # host work inside counted work of its phase and step adds nothing to the union: left out of it (half the rows)
    up = np.maximum(parent, 0)
    inside = host & (parent >= 0) & counted[up] & (phase[up] == phase) & (frame.step[up] == frame.step)
    counted &= ~inside
    markers = _marker_time(np.flatnonzero(marked), inner, start, end)
    return Phased(phase, counted, markers, start, end, np.unique(frame.rank[marked]))


def _marker_time(markers: np.ndarray, inner: np.ndarray, start: np.ndarray, end: np.ndarray) -> iv.IntervalSet:
    """Each host marker's interval (group: its row) less the intervals of the markers whose innermost enclosing
    marker it is (on one thread they nest, so the rest is the time only it accounts for)."""
    markers = markers[end[markers] > start[markers]]
    whole = iv.IntervalSet(markers, start[markers], end[markers])
    within = markers[inner[markers] >= 0]
    holes = iv.union(inner[within], start[within], end[within])
    return iv.subtract(whole, holes)


def _marker_codes(names: pl.Series) -> np.ndarray:
    """Per event, the :data:`PHASES` index its name marks (-1: none)."""
    index = np.array([*(PHASES.index(p) for p in MARKERS), -1], np.int8)  # pattern number -> phase; -1 -> -1
    return index[name_codes(names, list(MARKERS.values()))]


def _ancestors(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Whether each event is a strict ancestor of one of ``rows``: one gather per level of nesting, each over the
    ancestors not yet seen."""
    out = np.zeros(parent.size, bool)
    up = parent[rows]
    up = np.unique(up[up >= 0])
    while up.size:
        up = up[~out[up]]
        out[up] = True
        up = parent[up]
        up = np.unique(up[up >= 0])
    return out


def _in_steps(frame: EventFrame, step_of: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, covers): the events' times with a host event of a step cut to the step's time (one that ends after
    it; the frame's own arrays when none does), and whether a host event covers the whole of its step (the step's own
    region and those around it). ``step_of``: each host event's row of ``frame.steps`` (-1: none,
    :func:`_step_rows`)."""
    start, end = frame.start_ns, frame.end_ns
    covers = np.zeros(start.size, bool)
    rows = np.flatnonzero(step_of >= 0)
    if rows.size:
        at = step_of[rows]
        lo = frame.steps.get_column("start_ns").to_numpy()[at]
        hi = frame.steps.get_column("end_ns").to_numpy()[at]
        s, e = start[rows], end[rows]
        covers[rows] = (s <= lo) & (e >= hi)
        out = (s < lo) | (e > hi)
        if out.any():
            cut = rows[out]
            start, end = start.copy(), end.copy()
            start[cut] = np.maximum(s[out], lo[out])
            end[cut] = np.maximum(np.minimum(e[out], hi[out]), start[cut])
    return start, end, covers


_STEP_BITS = 40
"""Bits of a step id in the (rank, step) key of :func:`_step_rows` (ids up to 2**40, ranks up to 2**23)."""


def _step_rows(frame: EventFrame) -> np.ndarray:
    """Per host event, the row of its step in ``frame.steps`` (-1: none, a step outside the window, or GPU work), by
    a binary search of the (rank, step) keys: no join over the events."""
    out = np.full(frame.rank.size, -1, np.int64)
    rows = np.flatnonzero((frame.step != NO_STEP) & ~frame.on_gpu)
    if not rows.size or not frame.steps.height:
        return out
    keys = (frame.steps.get_column("rank").to_numpy().astype(np.int64) << _STEP_BITS) + frame.steps.get_column(
        "step"
    ).to_numpy().astype(np.int64)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    want = (frame.rank[rows].astype(np.int64) << _STEP_BITS) + frame.step[rows]
    at = np.minimum(np.searchsorted(sorted_keys, want), sorted_keys.size - 1)
    found = sorted_keys[at] == want
    out[rows[found]] = order[at[found]]
    return out


def _of_ranks(rank: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Whether each of ``rank`` is one of ``ranks`` (a table indexed by rank: numpy's isin sorts the events)."""
    table = np.zeros(int(max(rank.max(initial=0), np.max(ranks, initial=0))) + 1, bool)
    table[np.asarray(ranks, dtype=np.int64)] = True
    return table[rank]


def _last_backward(frame: EventFrame, step_of: np.ndarray, backward: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each of ``rows``, the start of the last backward marker of its step (the int64 maximum where none)."""
    big = np.iinfo(np.int64).max
    last = np.full(frame.steps.height + 1, np.iinfo(np.int64).min, np.int64)  # the last entry: no step
    marks = np.flatnonzero(backward)
    np.maximum.at(last, step_of[marks], frame.start_ns[marks])
    last[-1] = np.iinfo(np.int64).min
    found = last[step_of[rows]]
    return np.where(found == np.iinfo(np.int64).min, big, found)


def phases(frame: EventFrame, per_step: bool = False) -> pl.DataFrame:
    """Per rank (and step with ``per_step``, step null for the window) and phase: host_ns, gpu_ns, gpu_idle_ns,
    kernels, time_ns, host_share, gpu_share (see the module docstring)."""
    ph = event_phases(frame)
    if not ph.marked_ranks.size:
        return pl.DataFrame(schema=_TABLE)
    stepped = _of_ranks(frame.rank, frame.steps.get_column("rank").to_numpy())
    mine = _of_ranks(frame.rank, ph.marked_ranks)
    in_time = mine & (~stepped | (frame.step != NO_STEP))
    timed = np.zeros(frame.rank.size, bool)
    timed[ph.markers.group] = True
    out = [_measured(frame, ph, ph.counted & in_time, timed & in_time, by_step=False)]
    if per_step:
        in_step = mine & (frame.step != NO_STEP)
        out.append(_measured(frame, ph, ph.counted & in_step, timed & in_step, by_step=True))
    # each grouping in the table's columns first: an empty one (no steps in the window) has them in another order
    table = pl.concat([part.select(*(pl.col(c).cast(t) for c, t in _TABLE.items())) for part in out])
    return in_order(table)


def _measured(frame: EventFrame, ph: Phased, counted: np.ndarray, timed: np.ndarray, *, by_step: bool) -> pl.DataFrame:
    """The rows of one grouping: per rank (or per rank and step) and phase, from the ``counted`` events and the
    time of the ``timed`` markers."""
    groups = make_groups(frame, by_scope=False, by_step=by_step, include=counted | timed)
    if not groups.n:
        return pl.DataFrame(schema=_TABLE)
    p = len(PHASES)
    n = groups.n * p
    of = groups.of_event
    gid = np.where(of >= 0, of * p + ph.phase, -1)
    markers, start, end = ph.markers, ph.start_ns, ph.end_ns
    rows = np.flatnonzero(counted & (gid >= 0))
    host = rows[~frame.on_gpu[rows]]
    gpu = rows[frame.on_gpu[rows]]
    pieces = gid[markers.group]
    mine = pieces >= 0
    host_set = iv.union(
        np.concatenate([gid[host], pieces[mine]]),
        np.concatenate([start[host], markers.start_ns[mine]]),
        np.concatenate([end[host], markers.end_ns[mine]]),
    )
    busy = iv.union_rows(gpu, of, start, end, groups.n)  # all the GPU work, by group
    host_ns = iv.measure(host_set, n)
    gpu_ns = iv.measure(iv.union_rows(gpu, gid, start, end, n), n)
    idle_ns = host_ns.copy()  # less, phase by phase, the part of the host time the GPUs were busy in
    for k in range(p):
        of_k = host_set.group % p == k  # still sorted by group: the phase's set is normal
        part = iv.IntervalSet(host_set.group[of_k] // p, host_set.start_ns[of_k], host_set.end_ns[of_k])
        idle_ns[k::p] -= iv.measure(iv.intersect(part, busy), groups.n)
    kernel = gpu[frame.activity[gpu] != MEMORY]
    kernels = np.bincount(gid[kernel], minlength=n).astype(np.int64)
    no_gpu = np.flatnonzero(np.repeat(iv.measure(busy, groups.n) == 0, p))
    table = pl.DataFrame(
        {
            "g": np.repeat(np.arange(groups.n), p),
            "phase": np.tile(np.asarray(PHASES), groups.n),
            "host_ns": host_ns,
            "gpu_ns": pl.Series(gpu_ns).scatter(no_gpu, None),
            "gpu_idle_ns": pl.Series(idle_ns).scatter(no_gpu, None),
            "kernels": kernels,
        }
    ).filter((pl.col("host_ns") > 0) | (pl.col("gpu_ns") > 0))
    keys = groups.keys.select("rank", "step").with_row_index("g").cast({"g": pl.Int64})
    table = table.join(keys, on="g", how="left").drop("g")
    times = _times(frame, counted | timed, by_step)
    table = table.join(times, on=["rank", "step"], how="left", nulls_equal=True)
    return table.with_columns(_share(table, "host_ns").alias("host_share"), _share(table, "gpu_ns").alias("gpu_share"))


def _share(table: pl.DataFrame, column: str) -> pl.Series:
    """``column`` / time_ns, null where either is null or the time 0 (numpy's division, correctly rounded whatever
    the table's shape: polars may divide by a one-row column as a multiplication by its reciprocal)."""
    part = table.get_column(column).cast(pl.Float64).to_numpy()
    whole = table.get_column("time_ns").cast(pl.Float64).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(whole > 0, part / whole, np.nan)
    return pl.Series(share).fill_nan(None)


def _times(frame: EventFrame, include: np.ndarray, by_step: bool) -> pl.DataFrame:
    """rank, step, time_ns: each step's duration (``by_step``), else per rank its steps summed or, for a rank
    without steps, the span of its included events (step null)."""
    steps = frame.steps.select(
        pl.col("rank").cast(pl.Int32), "step", (pl.col("end_ns") - pl.col("start_ns")).alias("time_ns")
    )
    if by_step:
        return steps
    summed = steps.group_by("rank").agg(pl.col("time_ns").sum())
    rows = np.flatnonzero(include & ~_of_ranks(frame.rank, summed.get_column("rank").to_numpy()))
    ranks, at = np.unique(frame.rank[rows], return_inverse=True)
    lo, hi = iv.group_extent(at.astype(np.int64), frame.start_ns[rows], frame.end_ns[rows], ranks.size)
    spans = pl.DataFrame({"rank": ranks.astype(np.int32), "time_ns": hi - lo})
    return pl.concat([summed, spans], how="vertical_relaxed").select(
        "rank", pl.lit(None, pl.Int64).alias("step"), "time_ns"
    )


def in_order(table: pl.DataFrame) -> pl.DataFrame:
    """A :func:`phases` table (or its parts, concatenated) in its order: rank, step (the window first), phase in
    :data:`PHASES` order."""
    return table.sort(["rank", "step", phase_order()], nulls_last=False)


def phase_order() -> pl.Expr:
    """The ``phase`` column as its position in :data:`PHASES` (a step's order: sort by it)."""
    return pl.col("phase").replace_strict(list(PHASES), list(range(len(PHASES))), default=len(PHASES))
