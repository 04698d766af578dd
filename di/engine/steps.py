"""Training steps (iterations): where they are and which events belong to each.

Steps come, in this order of preference, per rank, from:

1. ``marker``: step events (cat ``step``, e.g. Kineto ``ProfilerStep#N``); the
   step id is N, else the marker's position on its rank. A rank whose CPU
   timelines have none takes a text log's step events (``marker`` timelines,
   aligned to the job's clock by :mod:`di.convert.logs.combine`).
2. ``annotation``: user annotations named like ``step 12`` / ``iteration#3``.
3. ``detected``, from the repeating pattern: on the rank's busiest CPU
   timeline, the depth-0 (else depth-1) region name that occurs at least
   twice and covers at least :data:`DETECT_COVERAGE` of the timeline's span
   (largest total duration first; a call such as ``MPI_Waitall`` is never a
   step, however long a rank waits in it), else the rank's collectives: each
   call with the communicator, operation and size that recurs most often
   (the gradient allreduce of a training loop; every rank of a communicator
   makes the same calls, so the ranks agree). Each occurrence starts a step,
   which lasts until the next one (the last one to the end of that activity).

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
CALL_CATS = ("mpi_p2p", "mpi_coll", "io", "sync", "cuda_api", "nccl")
"""Categories of calls: never a step region, however long a rank spends in them."""
DETECT_COVERAGE = 0.5
"""Share of the busiest CPU timeline's span a repeating region must cover to mark steps
(a training-step function does; a frequent small operator does not)."""
STEP_ANNOTATION = r"(?i)^\s*(?:train[_ ]?)?(?:step|iteration|iter)\s*[#:_ -]?\s*(\d+)\s*$"
_STEP_SCHEMA = {
    "rank": pl.Int32,
    "step": pl.Int64,
    "label": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "source": pl.String,
}


def find_steps(trace: Trace) -> pl.DataFrame:
    """One row per (rank, step): rank, step (id), label, start_ns, end_ns (int64 ns), source."""
    ev = trace.events
    if not ev.height:
        return pl.DataFrame(schema=_STEP_SCHEMA)
    locs = trace.locations
    n_loc = max(int(locs.get_column("loc").max() or 0), int(ev.get_column("loc").max() or 0)) + 1
    rank_of = np.zeros(n_loc, np.int64)
    cpu_of = np.zeros(n_loc, bool)
    li = locs.get_column("loc").to_numpy().astype(np.int64)
    rank_of[li] = locs.get_column("rank").to_numpy()
    cpu_of[li] = (locs.get_column("kind") == "cpu_thread").to_numpy()
    log_of = np.zeros(n_loc, bool)
    log_of[li] = (locs.get_column("kind") == "marker").to_numpy()
    loc = ev.get_column("loc").to_numpy()
    on_cpu = cpu_of[loc] & ~ev.get_column("instant").to_numpy()
    on_log = log_of[loc] & ~ev.get_column("instant").to_numpy()
    cats = ev.schema["cat"].categories.to_list()  # type: ignore[attr-defined]
    cat = ev.get_column("cat").to_physical().to_numpy()
    ranks = np.unique(rank_of[li])
    rank_ev = rank_of[loc]
    step_cat, user_cat = cats.index("step"), cats.index("user")
    found, have = [], np.empty(0, np.int64)
    # every rank's marks of a kind at once, for the ranks that have none of a kind preferred to it: step events,
    # then a text log's steps (its ``marker`` timelines), then user annotations named like steps
    for candidates, source in (
        (on_cpu & (cat == step_cat), "marker"),
        (on_log & (cat == step_cat), "marker"),
        (on_cpu & (cat == user_cat), "annotation"),
    ):
        marks = _rows(ev, np.flatnonzero(candidates & ~np.isin(rank_ev, have)), rank_of)
        if source == "annotation":
            marks = marks.filter(pl.col("name").cast(pl.String).str.contains(STEP_ANNOTATION))
        if marks.height:
            found.append(_from_marks(marks, source))
            have = np.union1d(have, marks.get_column("rank").unique().to_numpy())
    rest = np.setdiff1d(ranks, have)
    if rest.size:  # the ranks without marks or annotations: steps from the repeating pattern, rank by rank
        coll = _collective_starts(trace)
        cpu = _by_rank(on_cpu, rank_ev, rest)
        depth = ev.get_column("depth").to_numpy()
        for k, rank in enumerate(rest):
            mine = cpu[k]
            main = int(np.argmax(np.bincount(loc[mine], minlength=n_loc))) if mine.size else -1
            top = mine[(loc[mine] == main) & (depth[mine] <= 1)]
            found.append(_detected(_rows(ev, top, rank_of), int(rank), coll))
    found = [f for f in found if f.height]
    if not found:
        return pl.DataFrame(schema=_STEP_SCHEMA)
    return pl.concat([f.cast(_STEP_SCHEMA) for f in found]).sort("rank", "start_ns")  # type: ignore[arg-type]


def _by_rank(mask: np.ndarray, rank_ev: np.ndarray, ranks: np.ndarray) -> list[np.ndarray]:
    """The rows where ``mask`` holds, split by their rank (``rank_ev``, per event) into one ascending array per
    rank of ``ranks`` (sorted)."""
    rows = np.flatnonzero(mask)
    rows = rows[np.argsort(rank_ev[rows], kind="stable")]
    of = rank_ev[rows]
    return [rows[a:b] for a, b in zip(np.searchsorted(of, ranks, "left"), np.searchsorted(of, ranks, "right"))]


def _rows(ev: pl.DataFrame, idx: np.ndarray, rank_of: np.ndarray) -> pl.DataFrame:
    """The columns of the events at rows ``idx`` that steps are read from, with each one's rank."""
    part = ev.select("loc", "start_ns", "end_ns", "name", "depth", "cat")[idx]
    return part.with_columns(pl.Series("rank", rank_of[part.get_column("loc").to_numpy()]))


def _from_marks(marks: pl.DataFrame, source: str) -> pl.DataFrame:
    """The steps of each rank of ``marks`` (its step events, any number of ranks): one per distinct start, the
    first of equal starts; the id is the number a rank's names end with where each has a distinct one, else the
    mark's position on its rank."""
    marks = marks.sort("rank", "start_ns", maintain_order=True).unique(
        ["rank", "start_ns"], keep="first", maintain_order=True
    )
    num = pl.col("name").cast(pl.String).str.extract(r"(\d+)\s*$", 1).cast(pl.Int64, strict=False)
    numbered = (num.null_count() == 0) & (num.n_unique() == pl.len())
    return marks.select(
        "rank",
        pl.when(numbered.over("rank")).then(num).otherwise(pl.int_range(pl.len()).over("rank")).alias("step"),
        pl.col("name").cast(pl.String).alias("label"),
        "start_ns",
        "end_ns",
        pl.lit(source).alias("source"),
    )


def _detected(part: pl.DataFrame, rank: int, coll: pl.DataFrame) -> pl.DataFrame:
    if part.height:
        span = int(part.get_column("end_ns").max()) - int(part.get_column("start_ns").min())
        regions = part.filter(~pl.col("cat").cast(pl.String).is_in(CALL_CATS))
        for depth in (0, 1):
            top = regions.filter(pl.col("depth") == depth)
            stats = (
                top.group_by("name")
                .agg(pl.len().alias("n"), (pl.col("end_ns") - pl.col("start_ns")).sum().alias("busy"))
                .filter((pl.col("n") >= 2) & (pl.col("busy") >= DETECT_COVERAGE * span))
                .sort("busy", "n", descending=True)
            )
            if stats.height:
                name = stats.item(0, "name")
                starts = top.filter(pl.col("name") == name).get_column("start_ns").sort().to_numpy()
                return _spans(rank, starts, int(part.get_column("end_ns").max()), str(name))
    mine = coll.filter(pl.col("rank") == rank).sort("start_ns")
    if mine.height >= 2:
        key = ["op", "comm", "bytes"]
        counts = (
            mine.with_row_index("first")
            .group_by(key, maintain_order=True)
            .agg(pl.len().alias("n"), pl.col("first").min())
        )
        top = counts.sort(["n", "first"], descending=[True, False]).head(1)
        same = mine.join(top.select(key), on=key, how="semi", nulls_equal=True)
        if same.height >= 2:
            return _spans(
                rank,
                same.get_column("start_ns").to_numpy(),
                int(mine.get_column("end_ns").max()),
                str(top.item(0, "op")),
            )
    return pl.DataFrame(schema=_STEP_SCHEMA)


def _spans(rank: int, starts: np.ndarray, last_end: int, name: str) -> pl.DataFrame:
    """Step k from the k-th start to the next one; the last to ``last_end``."""
    ends = np.append(starts[1:], max(last_end, int(starts[-1]) + 1))
    step = pl.Series("step", np.arange(starts.size, dtype=np.int64))
    return pl.DataFrame({"step": step, "start_ns": starts, "end_ns": ends}).select(
        pl.lit(rank, pl.Int64).alias("rank"),
        "step",
        pl.concat_str(pl.lit(f"{name} #"), pl.col("step").cast(pl.String)).alias("label"),
        "start_ns",
        "end_ns",
        pl.lit("detected").alias("source"),
    )


def _collective_starts(trace: Trace) -> pl.DataFrame:
    """rank, comm, op, bytes, start_ns, end_ns of every collective call."""
    c = trace.collectives
    ev = c.get_column("event")
    return c.select("rank", "comm", "op", "bytes").with_columns(
        trace.events.get_column("start_ns").gather(ev).alias("start_ns"),
        trace.events.get_column("end_ns").gather(ev).alias("end_ns"),
    )


def event_steps(trace: Trace, steps: pl.DataFrame, rank: np.ndarray, on_gpu: np.ndarray) -> np.ndarray:
    """Step id of every event row (int64, NO_STEP outside every step); see the module docstring."""
    n = trace.events.height
    if not steps.height or not n:
        return np.full(n, NO_STEP, np.int64)
    start = trace.events.get_column("start_ns").to_numpy()
    out = _containing_step(rank.astype(np.int64), start, steps)
    launch = trace.flows.filter(pl.col("kind") == "launch")
    if launch.height:
        src = launch.get_column("src").to_numpy()
        dst = launch.get_column("dst").to_numpy()
        gpu_dst = on_gpu[dst]
        out[dst[gpu_dst]] = out[src[gpu_dst]]
    return out


def _containing_step(rank: np.ndarray, start: np.ndarray, steps: pl.DataFrame) -> np.ndarray:
    """Step id whose [start_ns, end_ns) on the same rank holds each start (NO_STEP if none):
    one searchsorted over (rank, start) packed into int64 when it fits, else a join."""
    st = steps.sort("rank", "start_ns")
    s_rank = st.get_column("rank").to_numpy().astype(np.int64)
    s0, s1, sid = (st.get_column(c).to_numpy() for c in ("start_ns", "end_ns", "step"))
    lo = min(int(start.min()), int(s0.min()))
    bits = max(int(max(start.max(), s0.max())) - lo, 1).bit_length()
    if int(max(rank.max(), s_rank.max())).bit_length() + bits > 62:
        ev = pl.DataFrame({"row": np.arange(start.size), "rank": rank, "start_ns": start})
        hit = ev.sort("start_ns").join_asof(
            st.select("rank", pl.col("start_ns").alias("s0"), "end_ns", "step").sort("s0").cast({"rank": pl.Int64}),
            left_on="start_ns",
            right_on="s0",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
        out = np.full(start.size, NO_STEP, np.int64)
        ok = (hit.get_column("start_ns") < hit.get_column("end_ns")).fill_null(False).to_numpy()
        out[hit.get_column("row").to_numpy()[ok]] = hit.get_column("step").to_numpy()[ok]
        return out
    key = (s_rank << bits) | (s0 - lo)
    k = np.searchsorted(key, (rank << bits) | (start - lo), side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (s_rank[kk] == rank) & (start < s1[kk])
    return np.where(inside, sid[kk], NO_STEP).astype(np.int64)
