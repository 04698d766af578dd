"""The engine's results as tracks of the trace itself, for Perfetto, Chrome JSON and Vampir (``di convert``, ``di view``).

:func:`with_analysis` returns a copy of a trace with

- a **critical path** timeline (process "di analysis", rank of the path's first
  segment): one slice per segment of the path (name and category of the event
  it crosses; waits and launches named by their kind), args ``rank``, ``event``
  and ``contrib_ns``; the slices' durations sum to the path length;
- **flows** (kind ``user``, ``src_cat`` "critical_path") from a path event on one
  rank to the next path event on another rank;
- a **wait states** timeline: the :data:`WAITS` longest wait states (Scalasca's
  late sender, wait at N x N ...), one slice each from the waiting rank's entry
  for ``wait_ns``, named ``KIND: rank R waits for rank C``, ``src_cat``
  "wait_state", args ``rank``, ``cause_rank``, ``kind``, ``wait_ns``, ``event``;
- **GPU idle** timelines, one per GPU (of the rank the GPU belongs to): the longest GPU idle gaps of the job
  (:data:`di.engine.gpu_idle.GAPS_SHOWN`), one slice each,
  named ``GPU idle: CAUSE`` (:data:`di.engine.gpu_idle.CAUSE_LABELS`), ``src_cat`` "gpu_idle", args ``rank``,
  ``device``, ``cause``, ``next`` (the work that ended the gap), ``launch``, ``operator``;
- per rank two **counter series** sampled at each step start: ``rank N wait``
  (ms waited in the step, wait states) and ``rank N imbalance`` (work in the step
  relative to the step mean, %), and where the trace has matrix operators with
  shapes a third, ``rank N matrix TFLOP/s`` (their work in the step over the step's
  time, summed over the rank's GPUs: :mod:`di.engine.flops`);
- per rank a **memory** counter timeline where the trace has allocator events (:mod:`di.engine.memory`): per device,
  ``rank N cuda:0 allocated`` and ``... reserved`` (bytes) after each allocation and free (a series that is 0
  throughout, as a CPU allocator's reserved memory, is left out);
- on every event of the path, ``critical_path_ns`` (its exclusive time on the
  path) added to its ``args``.

The original rows keep their positions, so row references stay valid. Every
added part carries the mark :mod:`di.analysis_parts` describes, so a reader
tells it from the program's activity; a trace that already carries an
analysis has it replaced, never stacked.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.analysis_parts import META_KEY, PROCESS, SOURCE_FORMAT, SRC_CAT, WAIT_SRC_CAT, path_args, without_analysis
from di.trace import CATS, Trace, conform

TRACK = "critical path"
WAIT_TRACK = "wait states"
GPU_IDLE_TRACK = "GPU idle (longest gaps)"
"""Name of a GPU idle timeline, followed by its GPU (``gpu0``)."""
GPU_IDLE_SRC_CAT = "gpu_idle"
MEMORY_TRACK = "memory"
"""Name of a rank's counter timeline of its devices' allocator memory."""
WAITS = 50
"""The longest wait states shown on the wait-states timeline (the per-rank wait counters hold them all)."""
NEEDS = ("breakdown", "gpu_idle", "wait_states", "critical_path", "flops")
"""The analyses the tracks show (:func:`di.analyze` ``analyses=``): the per-step breakdown gives the imbalance
counters' work, gpu_idle the GPU idle track, wait states the wait track and counters, flops the matrix
TFLOP/s counters. Running only these keeps ``di convert`` from
computing (and, on a first run, compiling) overlap and the rest that no track shows."""
VIEWER_FORMATS = ("perfetto", "chrome", "otf2")
"""Connectors whose output ``di convert`` gives the analysis tracks unless ``--no-analysis``;
a ``.di`` store (and plugin formats) stays raw unless ``--analysis``."""


def with_analysis(trace: Trace, result: Any) -> Trace:
    """A copy of ``trace`` with the analysis tracks (see the module docstring).

    Args:
        trace: the trace (an analysis it already carries is dropped first).
        result: :func:`di.analyze` of ``without_analysis(trace)``, with ``per_step=True`` for the counters
            and at least the analyses in :data:`NEEDS`.
    """
    trace = without_analysis(trace)
    cp = result.critical_path or {}
    tables = dict(trace.tables())
    meta = dict(trace.meta)
    source = len(meta.get("sources", []))
    loc_next = int(trace.locations.get_column("loc").max()) + 1 if trace.locations.height else 0
    new_locs: list[dict[str, Any]] = []
    new_events = None
    path = _path_track(trace, cp.get("segments"), loc_next, source)
    if path is not None:
        loc, new_events, flows = path
        new_locs.append(loc)
        tables["events"] = _with_path_args(trace.events, cp["events"])
        tables["events"] = pl.concat([tables["events"], _as_events(new_events)], how="diagonal_relaxed")
        if flows.height:
            tables["flows"] = pl.concat([trace.flows, flows], how="diagonal_relaxed")
    waits = _wait_track(result, loc_next + len(new_locs), source)
    if waits is not None:
        new_locs.append(waits[0])
        tables["events"] = pl.concat([tables["events"], _as_events(waits[1])], how="diagonal_relaxed")
    idle = _gpu_idle_tracks(result, loc_next + len(new_locs), source)
    if idle is not None:
        new_locs += idle[0]
        tables["events"] = pl.concat([tables["events"], _as_events(idle[1])], how="diagonal_relaxed")
    counters = _step_counters(result, loc_next + len(new_locs), _next_series(trace.series), source)
    _add_counters(tables, new_locs, counters)
    memory = _memory_counters(trace, loc_next + len(new_locs), _next_series(tables["series"]), source)
    _add_counters(tables, new_locs, memory)
    if new_locs:
        tables["locations"] = pl.concat([trace.locations, pl.DataFrame(new_locs)], how="diagonal_relaxed")
        _add_source(meta, new_locs, new_events, result, cp)
    return Trace.build(meta=meta, **tables)


def _as_events(new: pl.DataFrame) -> pl.DataFrame:
    """New events in the events table's dtypes (Categorical names, the ``cat`` Enum), so that appending them casts
    only their rows: appended as Strings, the whole table's names became Strings and were cast back by
    :meth:`Trace.build` (0.11 CPU-s for the 2.7 M events of a 1.2 M-event trace with its analysis tracks)."""
    return conform("events", new)


def _path_track(
    trace: Trace, seg: pl.DataFrame | None, loc: int, source: int
) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame] | None:
    """The critical-path timeline (location row, its slices, the flows between ranks), or None without segments."""
    if seg is None or not seg.height:
        return None
    seg = seg.filter(pl.col("end_ns") > pl.col("start_ns")).sort("start_ns")
    rank0 = int(seg.get_column("rank").drop_nulls().first() or 0)
    row = {"loc": loc, "rank": rank0, "kind": "cpu_thread", "name": TRACK, "process": PROCESS, "source": source}
    name = (
        pl.when(pl.col("kind") == "local")
        .then(pl.col("name"))
        .otherwise(pl.format("{} ({})", pl.col("category"), pl.col("name")))
    )
    events = seg.select(
        pl.lit(loc, pl.UInt32).alias("loc"),
        "start_ns",
        "end_ns",
        name.fill_null(pl.col("category")).alias("name"),
        pl.when((pl.col("kind") == "local") & pl.col("cat").is_in(list(CATS)))
        .then(pl.col("cat"))
        .otherwise(pl.lit("other"))
        .alias("cat"),
        pl.lit(SRC_CAT).alias("src_cat"),
        pl.lit(0, pl.Int32).alias("depth"),
        pl.lit(False).alias("instant"),
        pl.struct(pl.col("rank"), pl.col("event"), pl.col("kind"), pl.col("contrib_ns"))
        .struct.json_encode()
        .alias("args"),
    )
    return row, events, _path_flows(seg, trace.events.height)


def _path_flows(seg: pl.DataFrame, n: int) -> pl.DataFrame:
    """A flow from each path event to the next one where the path changes rank (both among the ``n`` event rows)."""
    hops = seg.select(
        pl.col("event").alias("src"),
        pl.col("rank").alias("a"),
        pl.col("event").shift(-1).alias("dst"),
        pl.col("rank").shift(-1).alias("b"),
    ).filter(
        (pl.col("a") != pl.col("b"))
        & pl.col("src").is_not_null()
        & pl.col("dst").is_not_null()
        & (pl.col("src") < n)
        & (pl.col("dst") < n)
    )
    return hops.select("src", "dst", pl.lit("user").alias("kind"), pl.lit(SRC_CAT).alias("src_cat"))


def _add_counters(
    tables: dict[str, Any],
    new_locs: list[dict[str, Any]],
    counters: tuple[list[dict[str, Any]], pl.DataFrame, pl.DataFrame] | None,
) -> None:
    """Counter timelines (location rows, series, samples) added to the new locations and the tables."""
    if counters is None:
        return
    locs, series, samples = counters
    new_locs += locs
    tables["series"] = pl.concat([tables["series"], series], how="diagonal_relaxed")
    tables["samples"] = pl.concat([tables["samples"], samples], how="diagonal_relaxed")


def _add_source(
    meta: dict[str, Any],
    new_locs: list[dict[str, Any]],
    new_events: pl.DataFrame | None,
    result: Any,
    cp: dict[str, Any],
) -> None:
    """The analysis as one more source of the trace and its mark (:data:`di.analysis_parts.META_KEY`) in ``meta``."""
    meta["sources"] = [
        *meta.get("sources", []),
        {
            "path": "(di analyze)",
            "format": SOURCE_FORMAT,
            "rank": new_locs[0]["rank"],
            "rank_source": "single",
            "events": 0 if new_events is None else new_events.height,
            "dropped": {},
        },
    ]
    meta[META_KEY] = {
        "window": result.window,
        "critical_path_ns": int((cp.get("summary") or {}).get("length_ns") or 0),
        "timelines": len(new_locs),
    }


def _with_path_args(events: pl.DataFrame, path_events: pl.DataFrame) -> pl.DataFrame:
    """``critical_path_ns`` added into the args JSON of the events on the path (``path_events``: the critical
    path's ``events`` table, one row per event; an event's rows are summed where it has several).

    Only the path's rows are rewritten (gathered, edited, scattered back): joining the whole events table to the
    contributions and sorting it back took 0.49-0.56 CPU-s for 1.2 M events (0.9 M on the path), this 0.16."""
    if path_events.get_column("event").n_unique() < path_events.height:
        path_events = path_events.group_by("event").agg(pl.col("contrib_ns").sum())
    on = path_events.filter(pl.col("event").is_between(0, events.height - 1))
    rows = on.get_column("event").to_numpy()
    args = events.get_column("args")
    edited = pl.DataFrame({"a": args.gather(rows), "c": on.get_column("contrib_ns")}).select(
        path_args(pl.col("a"), pl.col("c"))
    )
    return events.with_columns(args.scatter(rows, edited.to_series()))


def _wait_track(result: Any, loc: int, source: int) -> tuple[dict[str, Any], pl.DataFrame] | None:
    """The wait-states timeline (location row, events), or None without wait states."""
    w = result.wait_states
    if w is None or not w.height:
        return None
    top = (
        w.filter(pl.col("wait_ns") > 0).sort("wait_ns", "rank", "start_ns", descending=[True, False, False]).head(WAITS)
    )
    if not top.height:
        return None
    worst_rank = int(top.get_column("rank")[0])
    name = pl.format("{}: rank {} waits for rank {}", "kind", "rank", "cause_rank").fill_null(
        pl.format("{}: rank {} waits", "kind", "rank")
    )
    events = top.sort("start_ns", "rank").select(
        pl.lit(loc, pl.UInt32).alias("loc"),
        "start_ns",
        (pl.col("start_ns") + pl.col("wait_ns")).alias("end_ns"),
        name.alias("name"),
        pl.lit("sync").alias("cat"),
        pl.lit(WAIT_SRC_CAT).alias("src_cat"),
        pl.lit(0, pl.Int32).alias("depth"),
        pl.lit(False).alias("instant"),
        pl.struct("rank", "cause_rank", "kind", "wait_ns", "event").struct.json_encode().alias("args"),
    )
    return {
        "loc": loc,
        "rank": worst_rank,
        "kind": "cpu_thread",
        "name": WAIT_TRACK,
        "process": PROCESS,
        "source": source,
    }, events


def _gpu_idle_tracks(result: Any, loc0: int, source: int) -> tuple[list[dict[str, Any]], pl.DataFrame] | None:
    """The GPU idle timelines, one per GPU with a gap among the longest (location rows, events), or None."""
    from di.engine.gpu_idle import CAUSE_LABELS

    gaps = getattr(result, "gpu_idle_gaps", None)
    if gaps is None or not gaps.height:
        return None
    gpus = gaps.select("rank", "device").unique().sort("rank", "device").with_row_index("_i")
    label = pl.col("cause").replace_strict(CAUSE_LABELS, default=pl.col("cause"))
    events = (
        gaps.join(gpus, on=["rank", "device"])
        .sort("_i", "start_ns")
        .select(
            (pl.col("_i") + loc0).cast(pl.UInt32).alias("loc"),
            "start_ns",
            (pl.col("start_ns") + pl.col("dur_ns")).alias("end_ns"),
            pl.format("GPU idle: {}", label).alias("name"),
            pl.lit("other").alias("cat"),
            pl.lit(GPU_IDLE_SRC_CAT).alias("src_cat"),
            pl.lit(0, pl.Int32).alias("depth"),
            pl.lit(False).alias("instant"),
            pl.struct("rank", "device", "cause", "next", "launch", "operator").struct.json_encode().alias("args"),
        )
    )
    locs = [
        {
            "loc": loc0 + i,
            "rank": rank,
            "kind": "cpu_thread",
            "name": f"{GPU_IDLE_TRACK} gpu{device}",
            "process": PROCESS,
            "source": source,
        }
        for i, rank, device in gpus.iter_rows()
    ]
    return locs, events


def _next_series(series: pl.DataFrame) -> int:
    return int(series.get_column("series").max()) + 1 if series.height else 0  # type: ignore[arg-type]


def _memory_counters(
    trace: Trace, loc0: int, series0: int, source: int
) -> tuple[list[dict[str, Any]], pl.DataFrame, pl.DataFrame] | None:
    """Per rank one counter timeline "memory" with, per device, the allocator's allocated and reserved bytes after
    each of its events (:func:`di.engine.memory.allocator_events`)."""
    from di.engine.memory import allocator_events

    ev = allocator_events(trace).filter(pl.col("allocated").is_not_null())
    if not ev.height:
        return None
    ranks = sorted(set(ev.get_column("rank").to_list()))
    locs = [
        {"loc": loc0 + i, "rank": r, "kind": "counter", "name": MEMORY_TRACK, "process": PROCESS, "source": source}
        for i, r in enumerate(ranks)
    ]
    long = (
        ev.unpivot(["allocated", "reserved"], index=["rank", "device", "ts_ns", "pos"], variable_name="col")
        .filter(pl.col("value").is_not_null())
        .filter((pl.col("value") != 0).any().over("rank", "device", "col"))  # a CPU allocator reserves nothing
        .sort("rank", "device", "col", "pos")
    )
    keys = long.select("rank", "device", "col").unique(maintain_order=True).with_row_index("series", offset=series0)
    long = long.join(keys, on=["rank", "device", "col"], maintain_order="left")
    loc_of = pl.DataFrame(
        {"rank": ranks, "loc": [loc0 + i for i in range(len(ranks))]}, schema_overrides={"rank": pl.Int32}
    )
    series = keys.join(loc_of, on="rank").select(
        "series",
        "loc",
        pl.format("rank {} {} {}", "rank", "device", "col").alias("name"),
        pl.lit("bytes").alias("unit"),
    )
    samples = long.select(pl.col("series").cast(pl.UInt32), "ts_ns", pl.col("value").cast(pl.Float64))
    return locs, series.sort("series"), samples


def _step_counters(
    result: Any, loc0: int, series0: int, source: int
) -> tuple[list[dict[str, Any]], pl.DataFrame, pl.DataFrame] | None:
    from di.viewers.report.imbalance import work_per_step

    steps = result.steps
    if not steps.height:
        return None
    w = result.wait_states
    waited = (
        w.filter(pl.col("step").is_not_null()).group_by("rank", "step").agg(pl.col("wait_ns").sum())
        if w is not None and w.height
        else pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int64, "wait_ns": pl.Int64})
    )
    _, work = work_per_step(result)
    if work.height:
        work = work.with_columns((100 * (pl.col("work_ns") / pl.col("work_ns").mean().over("step") - 1)).alias("imb"))
    else:
        work = pl.DataFrame(schema={"rank": pl.Int32, "step": pl.Int64, "imb": pl.Float64})
    base = steps.select("rank", "step", pl.col("start_ns").alias("ts_ns"))
    base = base.join(waited, on=["rank", "step"], how="left").join(
        work.select("rank", "step", "imb"), on=["rank", "step"], how="left"
    )
    counters = [("wait", pl.col("wait_ns").fill_null(0) / 1e6, "ms"), ("imbalance", pl.col("imb").fill_null(0.0), "%")]
    f = result.flops
    if f is not None and f.filter(pl.col("step").is_not_null()).height:
        rate = f.filter(pl.col("step").is_not_null()).group_by("rank", "step").agg(pl.col("flop_rate_tflops").sum())
        base = base.join(rate, on=["rank", "step"], how="left")
        counters.append(("matrix TFLOP/s", pl.col("flop_rate_tflops").fill_null(0.0), "TFLOP/s"))
    index = base.select(pl.col("rank").unique().sort()).with_row_index("i")  # the ranks in order, numbered
    ranks = index.get_column("rank").to_list()
    locs = [
        {"loc": loc0 + i, "rank": r, "kind": "counter", "name": "analysis", "process": PROCESS, "source": source}
        for i, r in enumerate(ranks)
    ]
    series = [
        {"series": series0 + len(counters) * i + j, "loc": loc0 + i, "name": f"rank {r} {label}", "unit": unit}
        for i, r in enumerate(ranks)
        for j, (label, _, unit) in enumerate(counters)
    ]
    # every rank's samples at once (one frame per counter), in the order of their series: rank, counter, time
    rows = base.join(index, on="rank")
    samples = (
        pl.concat(
            [
                rows.select("i", pl.lit(j, pl.Int64).alias("j"), "ts_ns", col.cast(pl.Float64).alias("value"))
                for j, (_, col, _) in enumerate(counters)
            ]
        )
        .sort("i", "j", "ts_ns", maintain_order=True)
        .select(
            (series0 + len(counters) * pl.col("i").cast(pl.Int64) + pl.col("j")).cast(pl.UInt32).alias("series"),
            "ts_ns",
            "value",
        )
    )
    return locs, pl.DataFrame(series), samples
