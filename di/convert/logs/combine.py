"""Combining text logs with the traces of the same job: one clock, then joins.

:func:`combine` replaces :func:`di.merge.merge` when the files of a job hold text
logs beside traces (``di.load([trace, nccl.log, train.log])``). It

1. aligns each log to the job's clock (the traces' one), and says how in the log's
   ``sources[].info.alignment``: ``method``, ``offset_ns`` (added to every log time),
   ``matched`` (pairs the offset rests on) and ``residual_ns`` (median absolute
   difference of the matched pairs after the shift; null when nothing matched).
   Methods, in order of preference:

   - ``timestamps``: both clocks are Unix epoch and the log's absolute times agree
     with the trace's steps or collectives (or there is nothing to check them by);
   - ``steps``: the log's step events matched to the trace's step markers by step
     number (trying the numbering shifted by -1, 0, 1: a log counts from 1, a profiler
     from 0), offset the median of the end-time differences. This also corrects an
     epoch log whose zone-less local times are off by the zone (the timestamps are
     then only kept when the steps say they are right within :data:`TIMESTAMP_TOLERANCE_NS`);
   - ``collectives``: the NCCL log's collectives matched to the traced ones per
     (rank, op, bytes) in call order, offset the median start difference;
   - ``none``: nothing to align by; the log keeps its own times (a warning says so).

   Where the log's steps matched the trace's, ``steps_joined`` says how many and
   ``step_number_shift`` how their numbers relate (trace step = log step + shift).

2. joins, after the merge, every traced collective to the NCCL communicator the
   log describes (same rank, same group size; the comm id where both name it):
   columns ``log_comm`` (the ``comms.comm`` key), ``comm_hosts`` (JSON list of the
   members' hosts by communicator rank), ``transports`` (the comm's transport
   classes, comma-separated, from ``comm_links``) and ``group_ranks`` where the trace
   had none. A rank in several communicators of one size is left unjoined (counted).

The log's step events keep their ``step`` category on the log's ``marker`` timelines,
which the engine's step finder uses for ranks whose trace has no step markers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import polars as pl

from di.merge import merge
from di.trace import Trace

__all__ = ["TIMESTAMP_TOLERANCE_NS", "align_log", "combine", "is_log", "join_collectives"]

TIMESTAMP_TOLERANCE_NS = 1_000_000_000
"""An epoch log whose matched steps or collectives sit further than this from the trace's is re-aligned by them."""
STEP_NUMBER_RE = r"(\d+)\s*$"


def is_log(trace: Trace) -> bool:
    """True when every source of ``trace`` is a text log (format ``log:...``)."""
    srcs = trace.meta.get("sources") or []
    return bool(srcs) and all(str(s.get("format", "")).startswith("log:") for s in srcs)


def _steps(trace: Trace, *, logs: bool) -> pl.DataFrame:
    """(rank, step number, start_ns, end_ns) of step events: the trace's step markers, or a log's step events."""
    ev = trace.events.filter(pl.col("cat") == "step").join(
        trace.locations.select("loc", "rank", "kind"), on="loc", how="left"
    )
    ev = ev.filter((pl.col("kind") == "marker") if logs else (pl.col("kind") != "marker"))
    return (
        ev.select(
            pl.col("rank").cast(pl.Int64),
            pl.col("name").cast(pl.String).str.extract(STEP_NUMBER_RE).cast(pl.Int64).alias("step"),
            "start_ns",
            "end_ns",
        )
        .drop_nulls("step")
        .unique(["rank", "step"], keep="first")
    )


def _collectives(trace: Trace) -> pl.DataFrame:
    """(rank, op, bytes, k, start_ns) of collectives: k counts calls per (rank, op, bytes) in time order."""
    c = trace.collectives.join(
        trace.events.with_row_index("event").select(pl.col("event").cast(pl.Int64), "start_ns"), on="event"
    )
    return (
        c.sort("start_ns")
        .select(pl.col("rank").cast(pl.Int64), "op", "bytes", "start_ns")
        .with_columns(pl.int_range(pl.len()).over("rank", "op", "bytes").alias("k"))
    )


def _fit(pairs: pl.DataFrame) -> tuple[int, int, int, int] | None:
    """Of ``pairs`` (columns ``job_ns``, ``log_ns``): (median offset, median absolute residual after it, median
    absolute difference without it, count); None when empty."""
    if not pairs.height:
        return None
    d = pairs.select((pl.col("job_ns") - pl.col("log_ns")).alias("d")).get_column("d")
    off = int(d.median())  # type: ignore[arg-type]
    return off, int((d - off).abs().median()), int(d.abs().median()), d.len()  # type: ignore[arg-type]


def _by_steps(log: Trace, job_steps: pl.DataFrame) -> tuple[tuple[int, int, int, int], int] | None:
    """(the fit of :func:`_fit` on step ends, the step-number shift: trace step = log step + shift) of the best shift."""
    mine = _steps(log, logs=True)
    if not mine.height or not job_steps.height:
        return None
    # a log's rank-less steps stand for the job's first rank (rank 0 logs)
    best = None
    for shift in (0, -1, 1):
        pairs = mine.with_columns(pl.col("step") + shift).join(job_steps, on=["rank", "step"], suffix="_job")
        if not pairs.height:
            pairs = mine.with_columns(pl.col("step") + shift).join(
                job_steps.sort("rank").unique("step", keep="first"), on="step", suffix="_job"
            )
        fit = _fit(pairs.select(pl.col("end_ns_job").alias("job_ns"), pl.col("end_ns").alias("log_ns")))
        if fit is not None and (best is None or (fit[1], -fit[3]) < (best[0][1], -best[0][3])):
            best = (fit, shift)
    return best


def _by_collectives(log: Trace, job_coll: pl.DataFrame) -> tuple[int, int, int, int] | None:
    mine = _collectives(log)
    if not mine.height or not job_coll.height:
        return None
    pairs = mine.join(job_coll, on=["rank", "op", "bytes", "k"], suffix="_job")
    return _fit(pairs.select(pl.col("start_ns_job").alias("job_ns"), pl.col("start_ns").alias("log_ns")))


def _shifted(log: Trace, offset: int) -> Trace:
    if not offset:
        return log
    return replace(
        log,
        events=log.events.with_columns(pl.col("start_ns") + offset, pl.col("end_ns") + offset),
        samples=log.samples.with_columns(pl.col("ts_ns") + offset),
    )


def align_log(log: Trace, job: Trace) -> Trace:
    """``log`` on ``job``'s clock, with ``info.alignment`` in its sources (see the module docstring)."""
    job_epoch = job.meta.get("clock", {}).get("domain") == "unix_epoch"
    log_epoch = log.meta.get("clock", {}).get("domain") == "unix_epoch"
    by_steps = _by_steps(log, _steps(job, logs=False))
    steps, shift = by_steps if by_steps is not None else (None, None)
    coll = _by_collectives(log, _collectives(job))
    found = [(m, f) for m, f in (("steps", steps), ("collectives", coll)) if f is not None]
    method, offset, residual, matched = "none", 0, None, 0
    if job_epoch and log_epoch:
        method = "timestamps"
        if found:
            name, (off, res, res0, n) = found[0]
            if abs(off) > TIMESTAMP_TOLERANCE_NS and res < res0:  # zone-less local times, or a wrong clock
                method, offset, residual, matched = name, off, res, n
            else:
                residual, matched = res0, n
    elif found:
        method, (offset, residual, _, matched) = found[0][0], found[0][1]
    meta = dict(log.meta)
    meta["clock"] = dict(job.meta.get("clock") or {"unit": "ns", "domain": "relative", "sync": None})
    alignment: dict[str, Any] = {"method": method, "offset_ns": offset, "matched": matched, "residual_ns": residual}
    if steps is not None:  # the log's steps joined to the trace's: how many, and how their numbers relate
        alignment["steps_joined"] = steps[3]
        alignment["step_number_shift"] = shift
    meta["sources"] = [
        {**s, "info": {**(s.get("info") or {}), "alignment": alignment}} for s in meta.get("sources") or []
    ]
    if method == "none":
        meta["warnings"] = list(meta.get("warnings") or []) + [
            f"{s.get('path')}: not aligned to the job's clock (no absolute timestamps, and no steps or collectives "
            "matched the trace's)"
            for s in meta.get("sources") or []
        ]
    return _shifted(log, offset).with_meta(meta)


def join_collectives(trace: Trace) -> Trace:
    """The traced collectives of ``trace`` joined to the logs' communicators (see the module docstring)."""
    comms, coll = trace.comms, trace.collectives
    if not comms.height or not coll.height:
        return trace
    traced = _traced(trace)
    out = _with_comm_columns(_log_comms(coll, traced, _members(trace), _one_per_size(comms)))
    joined = int(out.get_column("log_comm").is_not_null().sum())
    n_traced = int(traced.sum())
    out = out.select(*coll.columns, "log_comm", "comm_hosts", "transports")
    return replace(trace, collectives=out).with_meta(_joined_meta(trace.meta, joined, n_traced))


def _traced(trace: Trace) -> pl.Series:
    """Per collective of ``trace``: whether its event is a traced one (not on a timeline of a log source)."""
    formats = [str(s.get("format", "")) for s in trace.meta.get("sources") or []]
    log_sources = [i for i, f in enumerate(formats) if f.startswith("log:")]
    log_locs = trace.locations.filter(pl.col("source").is_in(log_sources)).get_column("loc")
    ev_loc = trace.events.get_column("loc")
    return ~pl.Series(ev_loc.gather(trace.collectives.get_column("event"))).is_in(log_locs.implode())


def _members(trace: Trace) -> pl.DataFrame:
    """Per communicator of the logs (``comm``): its members' hosts (``_hosts``) and ranks (``_ranks``) by
    communicator rank, its ``comm_id``, and its transport classes (``_transports``, comma-separated)."""
    links = trace.comm_links.drop_nulls("transport")
    return (
        trace.comms.sort("comm_rank")
        .group_by("comm", maintain_order=True)
        .agg(
            pl.col("host").alias("_hosts"),
            pl.col("rank").alias("_ranks"),
            pl.col("comm_id").first(),
        )
        .join(
            links.group_by("comm").agg(pl.col("transport").unique().sort().str.join(",").alias("_transports")),
            on="comm",
            how="left",
        )
    )


def _one_per_size(comms: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, nranks): a communicator of that size the rank joined, and how many there are (``_n``)."""
    per_rank = comms.select(pl.col("rank").cast(pl.Int64), pl.col("nranks").cast(pl.Int64), "comm").unique()
    return per_rank.group_by("rank", "nranks").agg(pl.col("comm").first(), pl.len().alias("_n"))


def _log_comms(coll: pl.DataFrame, traced: pl.Series, members: pl.DataFrame, one: pl.DataFrame) -> pl.DataFrame:
    """``coll`` (in its order) with each traced collective's communicator of the logs (``log_comm``) and that
    communicator's :func:`_members` columns."""
    rows = coll.with_row_index("_row").with_columns(
        traced.alias("_traced"),
        pl.col("rank").cast(pl.Int64).alias("_rank"),
        pl.col("group_size").cast(pl.Int64).alias("_gs"),
    )
    # the comm id where the trace names it, else the only communicator of that size the rank joined
    by_id = rows.join(
        members.select(pl.col("comm_id").alias("comm"), pl.col("comm").alias("_by_id")).drop_nulls("comm"),
        on="comm",
        how="left",
    )
    by_size = by_id.join(
        one.rename({"rank": "_rank", "nranks": "_gs", "comm": "_by_size"}),
        on=["_rank", "_gs"],
        how="left",
    )
    key = pl.when(pl.col("_traced")).then(pl.coalesce("_by_id", pl.when(pl.col("_n") == 1).then(pl.col("_by_size"))))
    out = by_size.with_columns(key.alias("log_comm")).join(
        members.rename({"comm": "log_comm"}).drop("comm_id"), on="log_comm", how="left"
    )
    return out.sort("_row").with_columns(
        pl.col("_hosts").cast(pl.List(pl.String)).list.eval(pl.element().fill_null("")).alias("_hosts"),
    )


def _with_comm_columns(out: pl.DataFrame) -> pl.DataFrame:
    """:func:`_log_comms`' rows with ``comm_hosts`` (JSON list), ``transports``, and ``group_ranks`` where the trace
    had none and every member's rank is known."""
    return out.with_columns(
        pl.when(pl.col("log_comm").is_not_null())
        .then(pl.format("[{}]", pl.col("_hosts").list.eval(pl.format('"{}"', pl.element())).list.join(", ")))
        .alias("comm_hosts"),
        pl.col("_transports").alias("transports"),
        pl.coalesce(
            "group_ranks",
            pl.when(pl.col("_ranks").list.drop_nulls().list.len() == pl.col("_ranks").list.len()).then(
                pl.format("[{}]", pl.col("_ranks").cast(pl.List(pl.String)).list.join(", "))
            ),
        ).alias("group_ranks"),
    )


def _joined_meta(meta: dict[str, Any], joined: int, n_traced: int) -> dict[str, Any]:
    """``meta`` with the counts of traced and joined collectives, and a warning where some were not joined."""
    meta = dict(meta)
    note = f"combine: {joined} of {n_traced} traced collectives joined to an NCCL communicator of the logs"
    if n_traced and joined < n_traced:
        meta["warnings"] = list(meta.get("warnings") or []) + [
            note + " (the others: no communicator of their rank and group size, or several)"
        ]
    meta["combine"] = {"collectives_traced": n_traced, "collectives_joined": joined}  # meta.json admits more keys
    return meta


def combine(traces: Sequence[Trace]) -> Trace:
    """One job trace from traces and text logs of one job: logs aligned, merged, collectives joined."""
    logs = [t for t in traces if is_log(t)]
    job_parts = [t for t in traces if not is_log(t)]
    if not logs or not job_parts:
        return merge(traces)
    job = merge(job_parts) if len(job_parts) > 1 else job_parts[0]
    aligned = [align_log(t, job) if is_log(t) else t for t in traces]
    merged = merge(aligned)
    info: dict[str, Any] = dict(merged.meta)
    info["clock"] = dict(job.meta.get("clock") or {})
    return join_collectives(merged.with_meta(info))
