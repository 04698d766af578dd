"""Load imbalance across ranks, per step and over the window.

For each state of the temporal breakdown (:mod:`di.engine.breakdown`;
GPU states summed over a rank's devices, host states from its CPU threads)
and for ``work`` (compute + memory + cpu + io + untraced exclusive time: what
a rank does that others may wait for, its work between traced calls included), over the ranks of the job, with x_r the
rank's time in ns:

- ``imbalance`` = max/mean - 1 (0 = balanced; null when the mean is 0),
- ``percent_imbalance`` = (max - mean)/max (the share of the slowest rank's
  time that balancing would save; null when max is 0),
- ``max_rank``: the rank holding the max; for ``work`` that is the
  *straggler* of the step.

Ranks with no activity in a step count as 0 there.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.breakdown import breakdown
from di.engine.groups import runs
from di.engine.window import EventFrame

WORK = ("compute", "memory", "cpu", "io", "untraced")
"""The breakdown states that are a rank's own work."""


def imbalance(
    frame: EventFrame, *, whole: pl.DataFrame | None = None, by_step: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Long frame: step (null = whole window), side (gpu/host), state, min_ns,
    mean_ns, max_ns, max_rank, imbalance, percent_imbalance.

    ``whole`` / ``by_step``: the window's and the per-step breakdown when already computed.
    """
    parts = [whole if whole is not None else breakdown(frame, per_step=False)]
    if frame.steps.height:
        parts.append(by_step if by_step is not None else breakdown(frame, per_step=True))
    b = pl.concat(parts).filter(pl.col("rank").is_in(list(frame.ranks)))
    stats = _stats(b, sorted(int(r) for r in frame.ranks))
    return stats.with_columns(
        pl.when(pl.col("mean_ns") > 0)
        .then(pl.col("max_ns") / pl.col("mean_ns") - 1)
        .otherwise(None)
        .alias("imbalance"),
        pl.when(pl.col("max_ns") > 0)
        .then((pl.col("max_ns") - pl.col("mean_ns")) / pl.col("max_ns"))
        .otherwise(None)
        .alias("percent_imbalance"),
    )


def _stats(b: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """Per (step, side, state) of the breakdown rows ``b``, over ``ranks`` (a rank absent counts as 0): min_ns,
    mean_ns, max_ns and max_rank (the lowest rank of the max), rows in (step, side, state) order (null step first,
    texts in text order). Each rank's time in a (step, side, state) is the sum of its rows (a side: its scopes);
    ``work`` sums the :data:`WORK` states. On integer keys in numpy: polars' group_bys and sorts over the text
    columns took 3.1 CPU-s for a trace of 300,000 steps (2.7 M (step, side, rank, state) rows), one thread."""
    names = sorted({*b.get_column("state").unique().to_list(), "work"})
    n_states, n_ranks = np.int64(len(names)), np.int64(len(ranks))
    steps = b.get_column("step")
    known = steps.is_not_null().to_numpy()
    step = steps.fill_null(0).to_numpy()
    distinct_steps = np.unique(step[known])
    step_code = np.where(known, np.searchsorted(distinct_steps, step) + 1, 0)  # null first
    side = (b.get_column("scope") == "host").to_numpy().astype(np.int64)  # "gpu" < "host"
    state = b.get_column("state").replace_strict(names, list(range(len(names))), return_dtype=pl.Int64).to_numpy()
    rank = np.searchsorted(np.array(ranks, np.int64), b.get_column("rank").to_numpy())
    # key: (step, side, state) then rank; work's rows are those of the WORK states under work's code
    key = ((step_code * 2 + side) * n_states + state) * n_ranks + rank
    work = np.isin(state, [names.index(w) for w in WORK if w in names])
    key = np.concatenate([key, key[work] + (names.index("work") - state[work]) * n_ranks])
    time_ns = b.get_column("time_ns").to_numpy()
    time_ns = np.concatenate([time_ns, time_ns[work]])
    # each rank's time in each (step, side, state): its rows summed, in key order
    order, first = runs(key)
    key = key[order][first]
    time_ns = np.add.reduceat(time_ns[order], first)
    cell, rank = key // n_ranks, key % n_ranks
    # then over the ranks of each (step, side, state): its runs of cells, already in order
    _, start = runs(cell)
    present = np.diff(np.r_[start, cell.size])
    max_ns = np.maximum.reduceat(time_ns, start)
    at_max = np.minimum.reduceat(
        np.where(time_ns == np.repeat(max_ns, present), np.arange(cell.size), cell.size), start
    )
    lowest = min(ranks, default=0)  # every rank at 0: the lowest rank, as one row per rank sorted would give
    max_rank = np.where(max_ns == 0, lowest, np.array(ranks, np.int64)[rank[at_max]] if cell.size else lowest)
    cell = cell[start]
    step_of = (cell // n_states) // 2
    return pl.DataFrame(
        {
            "step": pl.Series(np.r_[0, distinct_steps][step_of], dtype=pl.Int64).set(pl.Series(step_of == 0), None),
            "side": pl.Series(["gpu", "host"], dtype=pl.String).gather((cell // n_states) % 2),
            "state": pl.Series(names, dtype=pl.String).gather(cell % n_states),
            "min_ns": np.where(present < n_ranks, 0, np.minimum.reduceat(time_ns, start)),
            "mean_ns": np.add.reduceat(time_ns, start) / n_ranks,
            "max_ns": max_ns,
            "max_rank": pl.Series(max_rank, dtype=pl.Int32),
        },
        schema_overrides={"min_ns": pl.Int64, "max_ns": pl.Int64, "mean_ns": pl.Float64},
    )


def stragglers(table: pl.DataFrame) -> pl.DataFrame:
    """The straggler per step (and for the window, step null): rank with the most work."""
    return (
        table.filter(pl.col("state") == "work")
        .sort("side")
        .unique(["step"], keep="first")
        .select("step", pl.col("max_rank").alias("straggler"), "max_ns", "mean_ns", "percent_imbalance")
        .sort("step", nulls_last=False)
    )
