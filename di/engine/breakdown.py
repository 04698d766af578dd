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
  operator is waiting, not computing). ``idle`` = span - |union of all|.
  The states' ``time_ns`` sum to the span; ``share`` = time_ns / span_ns
  (null with a reason when the span is empty).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine import intervals as iv
from di.engine.classify import ACTIVITIES, COMM, COMPUTE, CPU, IO, MEMORY, NONE, SYNC
from di.engine.groups import HOST, make_groups, span
from di.engine.window import EventFrame

GPU_PRIORITY = (COMPUTE, COMM, MEMORY, SYNC, CPU, IO)
HOST_PRIORITY = (SYNC, COMM, IO, CPU, MEMORY, COMPUTE)


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
    rows: list[pl.DataFrame] = []
    covered = iv.empty()
    for a_host, a_gpu in zip(HOST_PRIORITY, GPU_PRIORITY):
        for a, on_host in ((a_host, True), (a_gpu, False)):
            u = groups.sets(frame, frame.activity == a)
            u = _keep(u, is_host if on_host else ~is_host)
            exclusive = iv.subtract(u, covered)
            covered = iv.union_sets(covered, u)
            rows.append(_rows(groups.keys, ACTIVITIES[a], iv.measure(exclusive, groups.n), iv.measure(u, groups.n), span_ns, on_host, is_host))
    idle = span_ns - iv.measure(covered, groups.n)
    rows.append(_rows(groups.keys, "idle", idle, None, span_ns, None, is_host))
    out = pl.concat(rows)
    scope = pl.when(pl.col("scope") == HOST).then(pl.lit("host")).otherwise(pl.format("gpu{}", pl.col("scope")))
    return out.with_columns(
        scope.alias("scope_name"),
        pl.when(pl.col("span_ns") > 0).then(pl.col("time_ns") / pl.col("span_ns")).otherwise(None).alias("share"),
        pl.when(pl.col("span_ns") > 0).then(None).otherwise(pl.lit("no busy events in this scope")).alias("reason"),
    ).select(
        "rank", pl.col("scope_name").alias("scope"),
        pl.when(pl.col("scope") == HOST).then(None).otherwise(pl.col("scope")).alias("device"),
        "step", "state", "time_ns", "union_ns", "span_ns", "share", "reason",
    ).sort("rank", "scope", "step", "state", nulls_last=False)


def _keep(s: iv.IntervalSet, group_mask: np.ndarray) -> iv.IntervalSet:
    k = group_mask[s.group]
    return iv.IntervalSet(s.group[k], s.start_ns[k], s.end_ns[k])


def _rows(keys: pl.DataFrame, state: str, time_ns: np.ndarray, union_ns: np.ndarray | None,
          span_ns: np.ndarray, on_host: bool | None, is_host: np.ndarray) -> pl.DataFrame:
    sel = np.ones(keys.height, bool) if on_host is None else (is_host == on_host)
    df = keys.filter(pl.Series(sel)).with_columns(
        pl.lit(state).alias("state"),
        pl.Series("time_ns", time_ns[sel], dtype=pl.Int64),
        pl.Series("union_ns", union_ns[sel] if union_ns is not None else [None] * int(sel.sum()), dtype=pl.Int64),
        pl.Series("span_ns", span_ns[sel], dtype=pl.Int64),
    )
    return df


def shares(table: pl.DataFrame) -> pl.DataFrame:
    """Wide view: one row per rank/scope/step, one share column per state (for summaries)."""
    return table.pivot(on="state", index=["rank", "scope", "step", "span_ns"], values="share").sort("rank", "scope", "step")
