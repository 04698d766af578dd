"""Training steps (iterations): where they are and which events belong to each.

Steps come, in this order of preference, per rank, from:

1. ``marker``: step events (cat ``step``, e.g. Kineto ``ProfilerStep#N``); the
   step id is N, else the marker's position on its rank.
2. ``annotation``: user annotations named like ``step 12`` / ``iteration#3``.
3. ``detected``: the repeating pattern of top-level regions: on the rank's
   busiest CPU timeline, the depth-0 (else depth-1) region name that occurs
   at least twice with the largest total duration marks the start of each
   step; step k spans from its k-th occurrence to the next one (the last to
   the end of the rank's activity).

Steps are matched across ranks by their id. An event belongs to the step
whose CPU time range holds its start; a GPU event belongs to the step of the
CPU call that launched it (``launch`` flows), else to the step holding its
start. Events outside every step have step :data:`NO_STEP`.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.trace import Trace

NO_STEP = -1
STEP_ANNOTATION = r"(?i)^\s*(?:train[_ ]?)?(?:step|iteration|iter)\s*[#:_ -]?\s*(\d+)\s*$"
_STEP_SCHEMA = {"rank": pl.Int32, "step": pl.Int64, "label": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64, "source": pl.String}


def find_steps(trace: Trace) -> pl.DataFrame:
    """One row per (rank, step): rank, step (id), label, start_ns, end_ns (int64 ns), source."""
    ev = trace.events.with_row_index("row").join(
        trace.locations.select(pl.col("loc").cast(pl.UInt32), "rank", pl.col("kind").cast(pl.String)), on="loc", how="left"
    ).filter((pl.col("kind") == "cpu_thread") & ~pl.col("instant"))
    found = []
    for rank, part in ev.partition_by("rank", as_dict=True).items():
        rank = rank[0]
        marks = part.filter(pl.col("cat") == "step")
        source = "marker"
        if not marks.height:
            marks = part.filter((pl.col("cat") == "user") & pl.col("name").cast(pl.String).str.contains(STEP_ANNOTATION))
            source = "annotation"
        if marks.height:
            found.append(_from_marks(marks, rank, source))
        else:
            found.append(_detected(part, rank))
    if not found:
        return pl.DataFrame(schema=_STEP_SCHEMA)
    return pl.concat([f.cast(_STEP_SCHEMA) for f in found]).sort("rank", "start_ns")  # type: ignore[arg-type]


def _from_marks(marks: pl.DataFrame, rank: int, source: str) -> pl.DataFrame:
    marks = marks.sort("start_ns").unique("start_ns", keep="first", maintain_order=True)
    num = marks.get_column("name").cast(pl.String).str.extract(r"(\d+)\s*$", 1).cast(pl.Int64, strict=False)
    ids = num if num.null_count() == 0 and num.n_unique() == num.len() else pl.Series(np.arange(marks.height, dtype=np.int64))
    return pl.DataFrame({
        "rank": [rank] * marks.height, "step": ids, "label": marks.get_column("name").cast(pl.String),
        "start_ns": marks.get_column("start_ns"), "end_ns": marks.get_column("end_ns"), "source": [source] * marks.height,
    })


def _detected(part: pl.DataFrame, rank: int) -> pl.DataFrame:
    empty = pl.DataFrame(schema=_STEP_SCHEMA)
    if not part.height:
        return empty
    main = part.group_by("loc").len().sort("len", "loc", descending=[True, False]).item(0, "loc")
    line = part.filter(pl.col("loc") == main)
    for depth in (0, 1):
        top = line.filter(pl.col("depth") == depth)
        stats = (
            top.group_by("name").agg(pl.len().alias("n"), (pl.col("end_ns") - pl.col("start_ns")).sum().alias("busy"))
            .filter(pl.col("n") >= 2).sort("busy", "n", descending=True)
        )
        if stats.height:
            name = stats.item(0, "name")
            starts = top.filter(pl.col("name") == name).get_column("start_ns").sort().to_numpy()
            ends = np.append(starts[1:], max(int(part.get_column("end_ns").max()), int(starts[-1]) + 1))
            return pl.DataFrame({
                "rank": [rank] * starts.size, "step": np.arange(starts.size, dtype=np.int64),
                "label": [f"{name} #{k}" for k in range(starts.size)], "start_ns": starts, "end_ns": ends,
                "source": ["detected"] * starts.size,
            })
    return empty


def event_steps(trace: Trace, steps: pl.DataFrame, rank: np.ndarray, on_gpu: np.ndarray) -> np.ndarray:
    """Step id of every event row (int64, NO_STEP outside every step); see the module docstring."""
    n = trace.events.height
    if not steps.height or not n:
        return np.full(n, NO_STEP, np.int64)
    ev = pl.DataFrame({"row": np.arange(n, dtype=np.int64), "rank": rank.astype(np.int32), "start_ns": trace.events.get_column("start_ns")})
    hit = ev.sort("start_ns").join_asof(
        steps.select("rank", pl.col("start_ns").alias("s0"), "end_ns", "step").sort("s0"),
        left_on="start_ns", right_on="s0", by="rank", strategy="backward", check_sortedness=False,
    ).with_columns(pl.when(pl.col("start_ns") < pl.col("end_ns")).then(pl.col("step")).otherwise(NO_STEP).alias("step"))
    out = np.full(n, NO_STEP, np.int64)
    out[hit.get_column("row").to_numpy()] = hit.get_column("step").fill_null(NO_STEP).to_numpy()
    launch = trace.flows.filter(pl.col("kind") == "launch")
    if launch.height:
        src = launch.get_column("src").to_numpy()
        dst = launch.get_column("dst").to_numpy()
        gpu_dst = on_gpu[dst]
        out[dst[gpu_dst]] = out[src[gpu_dst]]
    return out
