"""Temporal breakdown: where each rank's GPU(s) and host spend the time.

Definitions (all times int64 ns):

- Scopes: each GPU device of a rank (its streams together) and the rank's
  host (its CPU threads together).
- Span of a scope: from the first start to the last end of its busy events
  (activity other than ``none``, see :mod:`di.engine.classify`) in the window
  (per step: of the step's events; GPU work counts in the step that launched it).
- ``union_ns`` of an activity: the measure of the union of its intervals in
  the scope, never a sum of overlapping durations.
- ``time_ns`` of a state: exclusive time, each instant of the span given to
  the first active state in priority order; GPU: compute, comm, memory, sync;
  host: sync, comm, io, cpu (a thread blocked in a sync or MPI call inside an
  operator is waiting, not computing). ``untraced``: on a timeline that records
  only calls (:func:`di.engine.classify.call_only_locations`), the time from
  its first event to its last that no event covers: the program's own work
  between its calls, lowest in priority (a rank waiting in MPI on one thread
  while another computes untraced is waiting). ``idle`` = span - |union of all|.
  The states' ``time_ns`` sum to the span; ``share`` = time_ns / span_ns
  (null with a reason when the span is empty).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.engine import intervals as iv
from di.engine.classify import ACTIVITIES, COMM, COMPUTE, CPU, IO, MEMORY, NONE, SYNC, UNTRACED
from di.engine.groups import HOST, make_groups, span
from di.engine.window import EventFrame
from di.nesting import readonly_int64

GPU_PRIORITY = (COMPUTE, COMM, MEMORY, SYNC, CPU, IO, UNTRACED)
HOST_PRIORITY = (SYNC, COMM, IO, CPU, MEMORY, COMPUTE, UNTRACED)
STATE_NAMES = tuple(ACTIVITIES[1:]) + ("idle",)
"""The breakdown's states, in this order everywhere (tables, JSON, CSV, report)."""
STATE_LABELS = {"untraced": "outside traced calls"}
"""How viewers name a state whose name alone would mislead."""


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _sweep(by_start, by_end, group_of, start, end, activity, host_group, host_prio, gpu_prio, excl, union, count):
    """One pass over interval boundaries in (group, time) order.

    ``by_start`` holds the event rows in (group, start) order, ``by_end`` the same rows in (group, end)
    order; the pass merges the two (the order among boundaries of one group and time does not change the
    sums). Adds the exclusive ns per group x activity to ``excl`` and the union ns to ``union`` (zeroed by
    the caller, as ``count``: one open-event counter per activity).
    """
    n = by_start.size
    i = j = 0
    prev_g = -1
    prev_t = 0
    while j < n:
        is_start = False
        if i < n:
            gs = group_of[by_start[i]]
            ge = group_of[by_end[j]]
            is_start = gs < ge or (gs == ge and start[by_start[i]] <= end[by_end[j]])
        if is_start:
            r = by_start[i]
            t = start[r]
            i += 1
        else:
            r = by_end[j]
            t = end[r]
            j += 1
        g = group_of[r]
        if g != prev_g:
            for a in range(count.size):
                count[a] = 0
        elif t > prev_t:
            dt = t - prev_t
            prio = host_prio if host_group[g] else gpu_prio
            top = -1
            for p in range(prio.size):
                a = prio[p]
                if count[a] > 0:
                    union[g, a] += dt
                    if top < 0:
                        top = a
            if top >= 0:
                excl[g, top] += dt
        count[activity[r]] += 1 if is_start else -1
        prev_g = g
        prev_t = t


def _sweep_arrays(
    frame: EventFrame, of_event: np.ndarray, rows: np.ndarray, n_groups: int, is_host: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    group, start, end, activity = _with_untraced(frame, of_event, rows)
    if group.size > of_event.size:
        rows = np.concatenate([rows, np.arange(of_event.size, group.size, dtype=rows.dtype)])
    start, end = readonly_int64(start), readonly_int64(end)
    group = readonly_int64(group)
    by_start = iv.rows_order(rows, group, start, n_groups)
    by_end = iv.rows_order(rows, group, end, n_groups)
    del rows
    n_act = len(HOST_PRIORITY) + 1
    excl, union = np.zeros((n_groups, n_act), np.int64), np.zeros((n_groups, n_act), np.int64)
    _sweep(
        by_start,
        by_end,
        group,
        start,
        end,
        activity,
        is_host,
        np.asarray(HOST_PRIORITY, np.int64),
        np.asarray(GPU_PRIORITY, np.int64),
        excl,
        union,
        np.zeros(n_act, np.int64),
    )
    return excl, union


def _with_untraced(frame: EventFrame, of_event: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """(group, start_ns, end_ns, activity) of the events, followed by one ``untraced`` interval per
    call-only timeline and group: from its first event in the group to its last."""
    mine = rows[frame.call_only[rows]]
    if not mine.size:
        return of_event, frame.start_ns, frame.end_ns, frame.activity
    loc = frame.trace.events.get_column("loc").to_numpy()[mine]
    extent = (
        pl.DataFrame({"g": of_event[mine], "loc": loc, "s": frame.start_ns[mine], "e": frame.end_ns[mine]})
        .group_by("g", "loc")
        .agg(pl.col("s").min(), pl.col("e").max())
    )
    n = extent.height
    return (
        np.concatenate([of_event, extent.get_column("g").to_numpy()]),
        np.concatenate([frame.start_ns, extent.get_column("s").to_numpy()]),
        np.concatenate([frame.end_ns, extent.get_column("e").to_numpy()]),
        np.concatenate([frame.activity, np.full(n, UNTRACED, frame.activity.dtype)]),
    )


def breakdown(frame: EventFrame, *, per_step: bool = False) -> pl.DataFrame:
    """Temporal breakdown per rank and scope (and step).

    Returns:
        Long frame: rank, scope ("gpu<N>" or "host"), device, step, state
        (compute, comm, memory, sync, cpu, io, idle), time_ns, union_ns,
        span_ns, share (0..1 or null), reason (why share is null).
    """
    busy = frame.activity != NONE
    groups = make_groups(frame, by_scope=True, by_step=per_step, include=busy)
    lo, hi = span(frame, groups, busy)
    span_ns = hi - lo
    is_host = groups.keys.get_column("scope").to_numpy() == HOST
    rows = np.flatnonzero(busy & (groups.of_event >= 0) & (frame.end_ns > frame.start_ns))
    excl, union = _sweep_arrays(frame, groups.of_event, rows, groups.n, is_host)
    busy_ns = excl.sum(axis=1)
    # rows in (rank, scope name, step, state) order, made so rather than sorted: the groups (few per step) are
    # sorted, each then repeated once per state in the states' text order (a sort of the 2.4 M rows of a trace of
    # 300,000 steps took 0.8 CPU-s)
    keys = groups.keys.with_columns(
        pl.when(pl.col("scope") == HOST)
        .then(pl.lit("host"))
        .otherwise(pl.format("gpu{}", pl.col("scope")))
        .alias("name")
    )
    by_key = keys.with_row_index("group").sort("rank", "name", "step", nulls_last=False).get_column("group").to_numpy()
    time_ns = np.column_stack([excl[:, 1:], span_ns - busy_ns])  # one column per state of STATE_NAMES
    union_ns = np.column_stack([union[:, 1:], np.zeros(groups.n, np.int64)])  # idle's is null (below)
    in_text_order = np.argsort(np.array(STATE_NAMES), kind="stable")
    group = np.repeat(by_key, in_text_order.size)  # of each output row
    state = np.tile(in_text_order, by_key.size)
    spans = span_ns[group]
    times = time_ns[group, state]
    # numpy's division: polars divided one part's columns as a product with the reciprocal (1 ulp apart)
    share = np.divide(times, spans, out=np.full(times.size, np.nan), where=spans > 0)
    names = pl.Series("state", STATE_NAMES, dtype=pl.String).gather(state)
    return keys[group].select(
        "rank",
        pl.col("name").alias("scope"),
        pl.when(pl.col("scope") == HOST).then(None).otherwise(pl.col("scope")).alias("device"),
        "step",
        names,
        pl.Series("time_ns", times, dtype=pl.Int64),
        pl.Series("union_ns", union_ns[group, state], dtype=pl.Int64).set(names == "idle", None),
        pl.Series("span_ns", spans, dtype=pl.Int64),
        pl.Series("share", share).fill_nan(None),
        pl.when(pl.Series(spans) > 0).then(None).otherwise(pl.lit("no busy events in this scope")).alias("reason"),
    )
