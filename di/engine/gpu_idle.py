"""Why each GPU is idle: the breakdown's GPU ``idle`` time, gap by gap, given to its cause.

Definitions (all times int64 ns):

- A *gap* is a maximal interval of a GPU scope's span (:mod:`di.engine.breakdown`: a rank's device, its streams
  together; per step with ``per_step``) in which none of its busy events runs. The gaps of a scope sum to its
  breakdown ``idle`` time exactly: the same events, the same span.
- The gap ``[a, b)`` ends when work starts at ``b``; of the works starting there, the one launched first decides.
  Its *launch* is the host call that enqueued it (:func:`di.engine.launches.launch_calls`): the source of its
  ``launch`` flow (Kineto's ``ac2g``, CUPTI's correlation; for a GPU wait record, its ``sync`` flow), else the launch
  :mod:`di.engine.inferred_edges` matches to it (Score-P), else for a copy the rank's host copy call running when the
  copy starts (Score-P's RMA copies). ``l`` is the launch's start.
- Causes, per gap (:data:`CAUSES`):

  - ``host``: ``l > a``: the host had not asked for the work when the GPU ran dry; ``[a, min(l, b))``. The CPU
    was busy elsewhere (Python, the data loader, other operators): HolisticTraceAnalysis's *host wait*.
  - ``host_sync``: the same, but the launching thread was inside a call that waits for the device (a
    ``cudaStreamSynchronize``, a blocking ``cudaMemcpy``, a ``sync`` event; :func:`~di.engine.inferred_edges.sync_calls`)
    at ``a``, within :data:`SYNC_SLACK_NS`: the host drained the GPU's queue by waiting for it, then launched.
  - ``launch``: ``[min(l, b), b)`` of such a gap: from the late launch call's start to the work's start.
  - ``kernel_wait``: the work was launched by ``a`` (or has no launch) and the gap is at most
    :data:`KERNEL_WAIT_NS`: the device's own overhead between queued kernels (HTA's *kernel wait*, with its
    default of 30 us).
  - ``queued``: the work was launched by ``a`` and the gap is longer: the GPU held the work and did not run it,
    waiting for an event on another stream, another device or a peer (HTA's *other*).
  - ``unknown``: longer gap, the work has no launch in the trace.

  HolisticTraceAnalysis gives each CUDA stream its own gaps, so a stream idle while another stream of the device
  computes is idle there; here a gap is time the whole device ran nothing, and on a device with one stream
  ``host + host_sync + launch``, ``kernel_wait`` and ``queued + unknown`` are HTA's host wait, kernel wait and other.

Result (:func:`gpu_idle`), one row per rank, GPU, step (null: the whole window) and cause: ``time_ns``, ``gaps``
(gaps with time in the cause), ``idle_ns`` (the scope's idle time, all causes), ``span_ns`` and ``share`` of the
idle time (null without idle). :func:`longest_gaps` lists the longest gaps with the work that ended each, its
launch and the host operator the launch ran in.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine import intervals as iv
from di.engine.classify import NONE, SYNC
from di.engine.groups import make_groups
from di.engine.inferred_edges import sync_calls
from di.engine.launches import launch_calls
from di.engine.window import EventFrame
from di.nesting import enclosing, names_at, parent_rows

__all__ = [
    "CAUSES",
    "GAPS_SHOWN",
    "KERNEL_WAIT_NS",
    "LONGEST_ORDER",
    "SYNC_SLACK_NS",
    "gpu_idle",
    "gpu_idle_tables",
    "idle_gaps",
    "in_order",
    "longest_gaps",
]

CAUSES = ("host", "host_sync", "launch", "kernel_wait", "queued", "unknown")
"""The causes of a GPU's idle time, in this order everywhere (tables, JSON, CSV, report)."""
CAUSE_LABELS = {
    "host": "host late",
    "host_sync": "after sync",
    "launch": "launch",
    "kernel_wait": "kernel gaps",
    "queued": "queued",
    "unknown": "no launch",
}
"""How viewers name a cause."""
CAUSE_HELP = {
    "host": "the host launched the work after the GPU ran dry",
    "host_sync": "the same, the host having waited for the device",
    "launch": "from the late launch call to the work's start",
    "kernel_wait": "under 30 us before work launched in time",
    "queued": "work launched in time that did not run (waiting on a stream, event or peer)",
    "unknown": "no launch recorded for the work",
}
"""One line per cause, for captions and report legends."""
KERNEL_WAIT_NS = 30_000
"""The longest gap before work launched in time that is the device's own overhead between kernels
(HolisticTraceAnalysis's ``consecutive_kernel_delay``, 30 in its microseconds)."""
SYNC_SLACK_NS = 10_000
"""How long before the GPU ran dry a device wait on the launching thread may appear to end and still be the one
that drained it (the host sees the device finish a few microseconds late, or early across clock conversion)."""
GAPS_SHOWN = 50
"""The longest gaps :func:`longest_gaps` lists."""
LONGEST_ORDER = ("dur_ns", "rank", "device", "start_ns")
"""Order of the longest gaps: longest first, then by rank, device and time (ties broken the same everywhere)."""

_EMPTY = {
    "rank": pl.Int32,
    "scope": pl.String,
    "device": pl.Int32,
    "step": pl.Int64,
    "cause": pl.String,
    "time_ns": pl.Int64,
    "gaps": pl.Int64,
    "idle_ns": pl.Int64,
    "span_ns": pl.Int64,
    "share": pl.Float64,
}


def idle_gaps(frame: EventFrame, *, per_step: bool = False, kernel_wait_ns: int = KERNEL_WAIT_NS) -> pl.DataFrame:
    """Every gap of every GPU scope with its causes' times.

    Returns:
        One row per gap: rank, device, step (null unless ``per_step``), start_ns, end_ns, next_row (event row of
        the work that ended it), launch_row (event row of its launch, null when none), and one Int64 column per cause
        of :data:`CAUSES` (they sum to ``end_ns - start_ns``); plus span_ns, the scope's span.
    """
    busy = (frame.activity != NONE) & frame.on_gpu
    groups = make_groups(frame, by_scope=True, by_step=per_step, include=busy)
    rows = np.flatnonzero(busy & (groups.of_event >= 0) & (frame.end_ns > frame.start_ns))
    u = iv.union_rows(rows, groups.of_event, frame.start_ns, frame.end_ns, groups.n)
    lo, hi = iv.group_extent(u.group, u.start_ns, u.end_ns, groups.n)
    inside = np.flatnonzero(u.group[1:] == u.group[:-1])
    g, b = u.group[1:][inside], u.start_ns[1:][inside]
    launch_of = launch_calls(frame)
    nxt = _next_work(g, b, rows, groups.of_event, frame.start_ns, launch_of)
    launch = launch_of[nxt]
    first = pl.DataFrame(
        {
            "g": g,
            "a": u.end_ns[:-1][inside],
            "b": b,
            "next_row": nxt,
            "launch_row": launch,
            "l": frame.start_ns[np.maximum(launch, 0)],
        },
        schema={
            "g": pl.Int64,
            "a": pl.Int64,
            "b": pl.Int64,
            "next_row": pl.Int64,
            "launch_row": pl.Int64,
            "l": pl.Int64,
        },
    ).with_columns(pl.when(pl.Series(launch >= 0)).then(pl.col("launch_row", "l")))
    in_sync = _launcher_in_sync(frame, first)
    a, b, launched = pl.col("a"), pl.col("b"), pl.col("l").is_not_null()
    late = launched & (pl.col("l") > a)
    cut = pl.min_horizontal(pl.max_horizontal(pl.col("l"), a), b)
    short = (b - a) <= kernel_wait_ns
    zero = pl.lit(0, pl.Int64)
    out = first.with_columns(in_sync.alias("_sync")).with_columns(
        pl.when(late & ~pl.col("_sync")).then(cut - a).otherwise(zero).alias("host"),
        pl.when(late & pl.col("_sync")).then(cut - a).otherwise(zero).alias("host_sync"),
        pl.when(late).then(b - cut).otherwise(zero).alias("launch"),
        pl.when(~late & short).then(b - a).otherwise(zero).alias("kernel_wait"),
        pl.when(launched & ~late & ~short).then(b - a).otherwise(zero).alias("queued"),
        pl.when(~launched & ~short).then(b - a).otherwise(zero).alias("unknown"),
    )
    keys = groups.keys.with_row_index("g").with_columns(
        pl.col("g").cast(pl.Int64), pl.Series("span_ns", hi - lo, dtype=pl.Int64)
    )
    return (
        out.join(keys, on="g", how="left")
        .select(
            "rank",
            pl.col("scope").alias("device"),
            "step",
            pl.col("a").alias("start_ns"),
            pl.col("b").alias("end_ns"),
            "next_row",
            "launch_row",
            *CAUSES,
            "span_ns",
        )
        .sort("rank", "device", "step", "start_ns", nulls_last=False)
    )


def _next_work(
    g: np.ndarray, b: np.ndarray, rows: np.ndarray, group: np.ndarray, start_ns: np.ndarray, launch: np.ndarray
) -> np.ndarray:
    """Per gap of group ``g[i]`` that ends at ``b[i]``, the event row of the work that ended it: of the ``rows`` of
    that group that start at ``b[i]`` (one at least: a gap ends where work starts), the one launched first (by its
    launch's start, ``launch``: each event's launch row, -1 for none), the launched ones before the others, then the
    lowest row. numpy searches over the rows sorted by (group, start), not a join of every gap with every row."""
    if not g.size:
        return np.zeros(0, np.int64)
    srt = iv.rows_order(rows, group, start_ns, int(group.max()) + 1)  # stable: equal starts in row order
    sg, sb = group[srt], start_ns[srt]
    first = iv.pair_positions(sg, sb, g, b)
    run_end = np.r_[np.flatnonzero((sg[1:] != sg[:-1]) | (sb[1:] != sb[:-1])) + 1, srt.size]
    count = run_end[np.searchsorted(run_end, first, side="right")] - first
    best = first.copy()
    tied = np.flatnonzero(count > 1)
    if tied.size:  # several works start at the gap's end: order each run by (unlaunched, launch start, row)
        n = count[tied]
        at = np.repeat(first[tied], n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        by = launch[srt[at]]
        order = np.lexsort(
            (srt[at], np.where(by >= 0, start_ns[np.maximum(by, 0)], 0), by < 0, np.repeat(np.arange(tied.size), n))
        )
        best[tied] = at[order[np.cumsum(n) - n]]
    return srt[best]


def gpu_idle_tables(
    frame: EventFrame, per_step: bool = False, ranks: list[int] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(:func:`gpu_idle` of the window, with its per-step rows after the whole window's when ``per_step``;
    :func:`longest_gaps` of the window), as :func:`di.analyze` reports them; only of ``ranks`` when given."""

    def mine(df: pl.DataFrame) -> pl.DataFrame:
        return df if ranks is None else df.filter(pl.col("rank").is_in(ranks))

    gaps = mine(idle_gaps(frame))
    whole = _per_cause(gaps)
    table = pl.concat([whole, _per_cause(mine(idle_gaps(frame, per_step=True)))]) if per_step else whole
    return table, longest_gaps(frame, gaps)


def gpu_idle(frame: EventFrame, *, per_step: bool = False, kernel_wait_ns: int = KERNEL_WAIT_NS) -> pl.DataFrame:
    """GPU idle time per rank, GPU (and step) and cause; see the module docstring.

    Returns:
        Long frame: rank, scope (``gpu<N>``), device, step, cause, time_ns, gaps, idle_ns, span_ns, share (of the
        idle time; null when the scope has none). Scopes without a gap have no rows.
    """
    return _per_cause(idle_gaps(frame, per_step=per_step, kernel_wait_ns=kernel_wait_ns))


def _per_cause(gaps: pl.DataFrame) -> pl.DataFrame:
    if not gaps.height:
        return pl.DataFrame(schema=_EMPTY)
    keys = ["rank", "device", "step"]
    per_cause = gaps.group_by(keys).agg(
        pl.col("span_ns").first(),
        *(pl.col(c).sum().alias(c) for c in CAUSES),
        *((pl.col(c) > 0).sum().cast(pl.Int64).alias(f"n_{c}") for c in CAUSES),
    )
    long = pl.concat(
        [
            per_cause.select(
                *keys,
                "span_ns",
                pl.lit(c).alias("cause"),
                pl.col(c).alias("time_ns"),
                pl.col(f"n_{c}").alias("gaps"),
            )
            for c in CAUSES
        ]
    )
    return in_order(
        long.with_columns(pl.col("time_ns").sum().over(keys).alias("idle_ns")).select(
            pl.col("rank").cast(pl.Int32),
            pl.format("gpu{}", pl.col("device")).alias("scope"),
            pl.col("device").cast(pl.Int32),
            "step",
            "cause",
            "time_ns",
            "gaps",
            "idle_ns",
            "span_ns",
            pl.when(pl.col("idle_ns") > 0).then(pl.col("time_ns") / pl.col("idle_ns")).alias("share"),
        )
    )


def in_order(table: pl.DataFrame) -> pl.DataFrame:
    """A :func:`gpu_idle` table (or the parts of one) in its order: by rank, device, step (the window's row first),
    then :data:`CAUSES`."""
    order = pl.DataFrame({"cause": CAUSES, "_o": range(len(CAUSES))})
    return (
        table.join(order, on="cause", how="left", maintain_order="left")
        .sort("rank", "device", "step", "_o", nulls_last=False)
        .drop("_o")
    )


def longest_gaps(frame: EventFrame, gaps: pl.DataFrame | None = None, *, shown: int = GAPS_SHOWN) -> pl.DataFrame:
    """The ``shown`` longest gaps of the whole window (from :func:`idle_gaps` when not given), longest first.

    Returns:
        rank, device, start_ns, dur_ns, cause (the cause with most of the gap's time), next (name of the work that
        ended it), launch (name of its launch call, null when none), operator (the outermost CPU operator, cat
        ``compute``, enclosing the launch call: the framework operator that launched the work; null when none).
    """
    gaps = idle_gaps(frame) if gaps is None else gaps
    top = (
        gaps.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
        .top_k(shown, by=["dur_ns", "rank", "device", "start_ns"], reverse=[False, True, True, True])
        .sort(*LONGEST_ORDER, descending=[True, False, False, False])
    )
    ev = frame.trace.events
    names = ev.get_column("name")
    parent = parent_rows(ev)
    is_op = (ev.get_column("cat") == "compute").to_numpy() & ~frame.on_gpu
    launch = top.get_column("launch_row").fill_null(-1).to_numpy()
    operator = enclosing(parent, launch, is_op, outermost=True)
    times = top.select(CAUSES).to_numpy().reshape(top.height, len(CAUSES))
    return top.select(
        pl.col("rank").cast(pl.Int32),
        pl.col("device").cast(pl.Int32),
        "start_ns",
        "dur_ns",
        pl.Series("cause", [CAUSES[i] for i in times.argmax(axis=1)], dtype=pl.String),
        names_at(names, top.get_column("next_row").fill_null(-1).to_numpy()).alias("next"),
        names_at(names, launch).alias("launch"),
        names_at(names, operator).alias("operator"),
    )


def _launcher_in_sync(frame: EventFrame, first: pl.DataFrame) -> pl.Series:
    """Per gap of ``first`` (columns a, l, launch_row): whether its work was launched late (``l > a``) by a thread
    that was in a device wait at ``a``."""
    n = first.height
    late = np.flatnonzero((first.get_column("l") > first.get_column("a")).fill_null(False).to_numpy())
    out = np.zeros(n, bool)
    if not late.size:
        return pl.Series(out)
    loc = frame.trace.events.get_column("loc").to_numpy().astype(np.int64)
    launcher = loc[first.get_column("launch_row").gather(late).to_numpy().astype(np.int64)]
    threads = np.zeros(int(loc.max()) + 1, bool)
    threads[launcher] = True
    keep = frame.selected & threads[loc]
    calls, _, _ = sync_calls(frame, keep)
    waits = np.union1d(calls, np.flatnonzero(keep & ~frame.on_gpu & (frame.activity == SYNC)))
    if not waits.size:
        return pl.Series(out)
    spans = iv.union(loc[waits], frame.start_ns[waits], frame.end_ns[waits])
    table = pl.DataFrame({"loc": spans.group, "s": spans.start_ns, "e": spans.end_ns}).sort("loc", "s")
    query = pl.DataFrame({"i": late, "loc": launcher, "s": first.get_column("a").to_numpy()[late]}).sort("loc", "s")
    hit = query.join_asof(table, on="s", by="loc", strategy="backward", check_sortedness=False).filter(
        pl.col("e") >= pl.col("s") - SYNC_SLACK_NS
    )
    out[hit.get_column("i").to_numpy()] = True
    return pl.Series(out)
