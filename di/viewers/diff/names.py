"""Kernels and operators of one run by name, and the CPU call stack that launched each kernel.

- **Kernels**: GPU activities (``cat`` kernel, memcpy, memset, and NCCL kernels
  on a GPU stream) on ``gpu_stream`` timelines.
- **Operators**: CPU events on the other timelines, but step markers and
  ``other`` (what di cannot place: a profiler's own span, metadata).
- **Launch stack** of a kernel: its launch flow (``flows.kind == "launch"``,
  from the runtime call to the kernel) gives the call; the names of the call's
  enclosing events (``events.parent`` chain; step markers, CUDA API calls and
  Python frames left out), outermost first and joined by :data:`STACK_SEP`, are the stack.
  Its innermost name is the launching ``op`` (``aten::addmm``). A kernel
  with no launch flow has the stack :data:`NO_LAUNCH`.

Aggregates are over the events of the window (times clipped by a time
window), summed over ranks: ``count``, ``total_ns`` (sum of durations, int64
ns; nested operators count inside their parents too) and ``mean_ns``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.nesting import enclosing_all
from di.trace import Trace

KERNEL_CATS = ("kernel", "memcpy", "memset", "nccl")
"""Categories that are GPU work when on a GPU stream (``sync`` and annotations are not)."""
OP_SKIP_CATS = ("step", "other")
"""CPU categories left out of the operators (step markers: their names change every step; other: Kineto's
"PyTorch Profiler" span over the whole trace and the like)."""
STACK_SKIP_CATS = ("step", "cuda_api", "python")
"""Ancestors left out of a launch stack (python: Python frames name their file and line, which any edit of
the program moves, so that the same op would not pair up across two versions of a program)."""
STACK_SEP = " > "
NO_LAUNCH = "(no launch recorded)"
NO_OP = "(launched outside any op)"
"""Stack of a kernel whose launch call has no enclosing event (other than step markers)."""


def kernel_events(trace: Trace, events: pl.DataFrame) -> pl.DataFrame:
    """The kernels among ``events`` (window events with ``row``): row, name, cat, rank, dur_ns, stack, op."""
    gpu = trace.locations.filter(pl.col("kind").cast(pl.String) == "gpu_stream").select("loc", "rank")
    ker = (
        events.filter(pl.col("cat").cast(pl.String).is_in(KERNEL_CATS) & ~pl.col("instant"))
        .join(gpu, on="loc", how="inner")
        .select(
            "row",
            pl.col("name").cast(pl.String),
            pl.col("cat").cast(pl.String),
            "rank",
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        )
    )
    stacks = launch_stacks(trace, ker.get_column("row").to_numpy())
    return ker.with_columns(stacks.get_column("stack"), stacks.get_column("op"))


def op_events(trace: Trace, events: pl.DataFrame) -> pl.DataFrame:
    """The CPU operators among ``events``: row, name, cat, rank, dur_ns."""
    cpu = trace.locations.filter(pl.col("kind").cast(pl.String) != "gpu_stream").select("loc", "rank")
    return (
        events.filter(~pl.col("cat").cast(pl.String).is_in(OP_SKIP_CATS) & ~pl.col("instant"))
        .join(cpu, on="loc", how="inner")
        .select(
            "row",
            pl.col("name").cast(pl.String),
            pl.col("cat").cast(pl.String),
            "rank",
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
        )
    )


def launch_stacks(trace: Trace, rows: np.ndarray) -> pl.DataFrame:
    """For kernel rows of ``trace.events``: ``stack`` and ``op`` (see the module doc), in the order of ``rows``.

    The chain of the ancestors a stack keeps is walked one level per iteration for all kernels at once, never one
    kernel at a time: each event's nearest kept ancestor comes from one pass over the parent column
    (:func:`di.nesting.enclosing_all`), so the iterations are as many as the deepest stack, not the deepest nesting.
    On a real-shaped profile, a chain of 752 nested Python frames above each launch made the raw walk 752 levels
    for a stack of one: ``di diff`` of it took 68 s and 8 GB in this function.
    """
    ev = trace.events
    launch = (
        trace.flows.filter(pl.col("kind").cast(pl.String) == "launch").select("src", "dst").unique("dst", keep="first")
    )
    src = (
        pl.DataFrame({"dst": rows.astype(np.int64)})
        .join(launch, on="dst", how="left", maintain_order="left")
        .get_column("src")
        .fill_null(-1)
        .to_numpy()
    )
    parent = ev.get_column("parent").fill_null(-1).to_numpy()
    cat = ev.get_column("cat")
    keep = ~cat.is_in(pl.Series(STACK_SKIP_CATS, dtype=cat.dtype).implode()).to_numpy()
    up = enclosing_all(parent, keep, outermost=False)  # per row its nearest kept ancestor; up[ev.height] = -1
    names = ev.get_column("name")  # categorical: cast to text only what is gathered
    levels: list[np.ndarray] = []  # innermost first: row of the kept ancestor at this level, or -1
    cur = up[np.where(src >= 0, src, ev.height)]
    while (cur >= 0).any() and len(levels) < ev.height:
        levels.append(cur)
        cur = up[np.where(cur >= 0, cur, ev.height)]
    if not levels:
        return pl.DataFrame(
            {"stack": np.where(src < 0, NO_LAUNCH, NO_OP).tolist(), "op": [None] * rows.size},
            schema={"stack": pl.String, "op": pl.String},
        )
    frame = pl.DataFrame(
        {f"l{i}": names.gather(np.maximum(lv, 0)) for i, lv in enumerate(levels)}
        | {f"k{i}": lv >= 0 for i, lv in enumerate(levels)}
    )
    frame = frame.select(
        pl.when(pl.col(f"k{i}")).then(pl.col(f"l{i}").cast(pl.String)).alias(f"l{i}") for i in range(len(levels))
    )
    outer_first = [f"l{i}" for i in reversed(range(len(levels)))]
    return frame.select(
        pl.concat_list(outer_first).list.drop_nulls().list.join(STACK_SEP).alias("stack"),
        pl.coalesce([f"l{i}" for i in range(len(levels))]).alias("op"),
    ).with_columns(
        pl.when(pl.Series(src < 0))
        .then(pl.lit(NO_LAUNCH))
        .when(pl.col("stack") == "")
        .then(pl.lit(NO_OP))
        .otherwise(pl.col("stack"))
        .alias("stack")
    )


def by_name(events: pl.DataFrame) -> pl.DataFrame:
    """name, cat (the most frequent), count, total_ns, mean_ns (int64, rounded) of :func:`kernel_events` or :func:`op_events`."""
    return (
        events.group_by("name")
        .agg(
            pl.col("cat").mode().first().alias("cat"),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("dur_ns").sum().alias("total_ns"),
        )
        .with_columns(_mean())
    )


def by_stack(kernels: pl.DataFrame) -> pl.DataFrame:
    """stack, op, count, total_ns, mean_ns, names (the kernel names launched from it, sorted) of :func:`kernel_events`."""
    return (
        kernels.group_by("stack")
        .agg(
            pl.col("op").first(),
            pl.len().cast(pl.Int64).alias("count"),
            pl.col("dur_ns").sum().alias("total_ns"),
            pl.col("name").unique().sort().alias("names"),
        )
        .with_columns(_mean())
    )


def name_stacks(kernels: pl.DataFrame) -> pl.DataFrame:
    """name, stack, total_ns: where each kernel name was launched from (with a known launch)."""
    return (
        kernels.filter(pl.col("stack") != NO_LAUNCH)
        .group_by("name", "stack")
        .agg(pl.col("dur_ns").sum().alias("total_ns"))
    )


def _mean() -> pl.Expr:
    return (pl.col("total_ns") / pl.col("count")).round().cast(pl.Int64).alias("mean_ns")
