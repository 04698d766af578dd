"""``di report`` under ``mpiexec -n P`` (P > 1) over a rank-partitioned store: the page one process writes.

Each process runs the parallel analysis (:func:`di.parallel.analyze.analyze_with`, per step, waits summed
per rank) and, on the part it owns, what the panels read from events, samples and waits, as partial sums
that add up exactly over disjoint sets of ranks:

- summary: events in the window, their first start and last end;
- top kernels, operators, collectives, copies: count, total and longest duration per name (merged by name,
  then the top 25 of the merged sums: never each process's own top);
- the longest collective with an NCCL transport (each process's longest, the longest of those);
- I/O per file: calls, bytes read and written, time per file (summed by file);
- counters: a series' samples all live with its timeline's rank, so each process computes the rates,
  statistics and time bins of its series (between the job-wide first and last sample);
- wait states: time waited and caused per rank and kind, the waiting-rank x causing-rank matrix, and the
  hint's parts (the rank that caused the most waiting, found from the summed causes first).

Process 0 reduces them into :class:`di.viewers.report.Aggregates` and broadcasts them with the analysis;
every process renders a share of the built-in panels (their per-rank plots cost CPU in proportion to the
ranks: :func:`panel_shares`) over the store's whole tables (locations, series, io_files ...) and meta, and
process 0 writes the page with the single-process writer (atomically). Installed ``di.report_panels`` plugins get the whole job: process 0 then reads it
after the parallel part, so its memory is one process's. Any other input (a single-file store, trace
files) is reported by process 0 alone, as one process does. A process that cannot read its part fails
every process with one error line each (:meth:`di.parallel.exchange.Exchange.check`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import polars as pl

from di.parallel.exchange import Exchange

TIMED_COLUMNS = ("name", "cat", "instant")
"""The event columns the top names read (with the window's start and end)."""
IO_COLUMNS = ("name", "cat", "args", "bytes")
"""The columns of the I/O events that the I/O panel reads (with the window's start and end)."""


def report_command(args: argparse.Namespace, console: Any, comm: Any) -> None:
    """``di report`` over the processes of ``comm`` (see the module docstring)."""
    from di.convert.registry import expand
    from di.engine.window import parse_window
    from di.output import claim
    from di.store import is_store, read_meta
    from di.store_partition import is_partitioned
    from di.viewers.report import is_own_report

    ex = Exchange(comm)
    inputs = expand(args.inputs)
    store, error = None, None
    try:
        window = parse_window(args.window)
        if ex.rank == 0:
            claim(args.output, ours=is_own_report, force=args.force, inputs=inputs, what="an HTML report")
        if len(inputs) == 1 and is_store(inputs[0]) and is_partitioned(read_meta(inputs[0])):
            store = Path(inputs[0])
    except Exception as exc:  # every process must learn of it
        error = exc
    ex.check(error, "checking the inputs and the output")
    if store is None:
        if ex.rank == 0:
            from di.cli import _report_here

            _report_here(args, console)
        return
    done = parallel_report(store, ex, args.output, window=window, inputs=list(args.inputs), plugins=not args.no_plugins)
    if done is None:
        return
    console.print(f"wrote {args.output}")
    from di.cli import _say

    _say(console, done[0])
    _say(console, done[1])


def parallel_report(
    store: Path,
    ex: Exchange,
    output: str | Path,
    *,
    window: Any = None,
    inputs: list[str],
    plugins: bool = True,
    cpu_s: dict[str, float] | None = None,
) -> tuple[list[str], list[str]] | None:
    """Write the report of the partitioned ``store`` to ``output`` with the processes of ``ex`` (every process
    calls it; process 0 writes). ``cpu_s``: filled with this process's CPU seconds in the parallel part
    (analysis and partial aggregates) and, on process 0, in reducing them and in writing the page.

    Returns:
        On process 0 (the panels' and plugins' problems, the trace's warnings); None on the others.
    """
    import time

    from di.parallel.analyze import analyze_with

    cpu = cpu_s if cpu_s is not None else {}
    c0 = time.process_time()
    result, parts = analyze_with(
        store,
        ex,
        window=window,
        per_step=True,
        wait_rows=False,
        extra=lambda part, frame, waits: part_aggregates(part, frame, waits, ex),
        keep_columns=("bytes",),
    )
    cpu["parallel"] = time.process_time() - c0
    c0 = time.process_time()
    trace = _whole_tables(store)
    both, error = None, None
    try:
        both = (result, reduce_aggregates(parts, result, trace)) if parts is not None else None
    except Exception as exc:  # process 0 alone reduces: the others, about to wait for its broadcast, must learn of it
        error = exc
    ex.check(error, "reducing the report's parts")
    result, aggregates = ex.bcast(both, 0, "report results")
    cpu["reduce"] = time.process_time() - c0
    c0 = time.process_time()
    rendered = _render_share(trace, result, aggregates, inputs, ex)
    cpu["panels"] = time.process_time() - c0
    if rendered is None:
        return None
    plugins = plugins and _plugins_installed()
    if plugins:  # a plugin's panel reads the whole job, as in one process
        from di.store import read_store

        trace = read_store(store)
    from di.viewers.report import write_report

    c0 = time.process_time()
    problems = write_report(
        trace, result, output, inputs=inputs, plugins=plugins, aggregates=aggregates, rendered=rendered
    )
    cpu["page"] = time.process_time() - c0
    return problems, list(trace.meta.get("warnings", []))


PANEL_CPU_S = {"breakdown": 5.3, "overlap": 2.3, "wait_states": 1.8, "imbalance": 1.3, "top_events": 0.5}
"""CPU seconds of the built-in panels that cost most, on bench/scale.py's 256-rank job (the others: about 0.1):
their per-rank plots make them grow with the ranks, not the events."""


def panel_shares(names: list[str], processes: int) -> list[list[str]]:
    """The built-in panels each process renders: the costliest first, each to the least loaded process
    (process 0, which also writes the page, starts with one panel's worth)."""
    load = [0.0] * processes
    load[0] = max(PANEL_CPU_S.values()) / 4 if processes > 1 else 0.0
    shares: list[list[str]] = [[] for _ in range(processes)]
    for name in sorted(names, key=lambda n: -PANEL_CPU_S.get(n, 0.1)):
        p = load.index(min(load))
        shares[p].append(name)
        load[p] += PANEL_CPU_S.get(name, 0.1)
    return shares


def _render_share(trace: Any, result: Any, aggregates: Any, inputs: list[str], ex: Exchange) -> dict[str, Any] | None:
    """This process's share of the built-in panels, rendered (:func:`di.viewers.report.render_panel`); all of
    them, by name, on process 0 (None on the others)."""
    from di.analysis_parts import without_analysis
    from di.viewers.report import ReportContext, builtin_panels, render_panel

    panels = builtin_panels()
    mine = set(panel_shares([name for name, _ in panels], ex.size)[ex.rank])
    ctx = ReportContext(trace=without_analysis(trace), result=result, inputs=tuple(inputs), aggregates=aggregates)
    done = {name: render_panel(ctx, name, panel) for name, panel in panels if name in mine}
    every = ex.gather(done, "report panels")
    return None if every is None else {name: section for d in every for name, section in d.items()}


def _plugins_installed() -> bool:
    from di.plugins import load_group

    loaded = load_group("di.report_panels")
    return bool(loaded.ok or loaded.failed)


def _whole_tables(store: Path) -> Any:
    """The store's trace with its whole tables (locations, series, io_files ...) and meta, and its partitioned
    tables (events, messages, collectives, flows, samples) empty."""
    from di.store import _read_checked, read_meta
    from di.store_partition import PARTITIONED, read_whole, whole_tables
    from di.trace import Trace, conform

    tables: dict[str, Any] = {name: conform(name, None) for name in PARTITIONED}
    for name in whole_tables():
        if (df := read_whole(store, name, _read_checked)) is not None:
            tables[name] = conform(name, df)
    return Trace.build(meta=read_meta(store), **tables)


def part_aggregates(part: Any, frame: Any, waits: pl.DataFrame | None, ex: Exchange) -> dict[str, Any]:
    """This process's partial aggregates of its ranks (see the module docstring). Every process calls it:
    it makes collective calls (the job-wide window span, first and last sample, top cause of waiting).

    Returns:
        events (its events in the window), lo and hi (their first start and last end, ns; None without
        events), names (per group key of :data:`~di.viewers.report.top_events.GROUPS`, its
        :func:`~di.viewers.report.top_events.name_sums`), io (:func:`~di.viewers.report.files.io_per_file`),
        transport (:func:`_longest_transports`), counters (:func:`_counter_part`), waits (:func:`_wait_part`;
        None without wait states).
    """
    from di.viewers.report.files import io_per_file
    from di.viewers.report.top_events import GROUPS, name_sums

    ev_all = part.trace.events
    keep = pl.Series(frame.selected & part.own)
    times = (pl.Series("start_ns", frame.start_ns), pl.Series("end_ns", frame.end_ns))
    events = ev_all.select(TIMED_COLUMNS).with_columns(times).filter(keep)
    io = ev_all.select(IO_COLUMNS).with_columns(times).filter(keep & (ev_all.get_column("cat") == "io"))
    lo = int(events.get_column("start_ns").min()) if events.height else None
    hi = int(events.get_column("end_ns").max()) if events.height else None
    steps = frame.steps
    step_span = (
        (int(steps.get_column("start_ns").min()), int(steps.get_column("end_ns").max())) if steps.height else None
    )
    every = ex.allgather((events.height, lo, hi, step_span), "report window")
    out: dict[str, Any] = {
        "events": events.height,
        "lo": lo,
        "hi": hi,
        "names": {key: name_sums(events, cats) for key, _, cats in GROUPS},
        "io": io_per_file(io),
        "transport": _longest_transports(part),
    }
    out["counters"] = _counter_part(part, frame.window, every, events, ex)
    del events, io
    out["waits"] = None if waits is None else _wait_part(part, waits, ex)
    return out


def _job_span(window: Any, every: list[tuple[int, Any, Any, Any]], meta: dict[str, Any]) -> tuple[int, int] | None:
    """:attr:`di.viewers.report.ReportContext.window_span` from every process's (events, lo, hi, step span)."""
    from di.viewers.report import span_of

    if not sum(n for n, *_ in every):
        return None
    lo = min(x for _, x, _, _ in every if x is not None)
    hi = max(x for _, _, x, _ in every if x is not None)
    spans = [s for *_, s in every if s is not None]
    steps = pl.DataFrame(
        {"start_ns": [min(s[0] for s in spans)], "end_ns": [max(s[1] for s in spans)]}
        if spans
        else {"start_ns": [], "end_ns": []},
        schema={"start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    return span_of(lo, hi, SimpleNamespace(window=window.text, steps=steps), SimpleNamespace(meta=meta))  # type: ignore[arg-type]


def _longest_transports(part: Any) -> pl.DataFrame | None:
    """This process's collective rows with an NCCL transport whose event lasts longest (ties kept), with the
    event's global row, name and duration ``d`` (ns, unclipped: as one process's hint); None: the trace has no
    transports."""
    coll = part.trace.collectives
    if "transports" not in coll.columns:
        return None
    event = coll.get_column("event").to_numpy().astype(np.int64)
    ev = part.trace.events.select("name", "start_ns", "end_ns")[event]  # the collectives' events only
    rows = coll.with_columns(
        pl.Series("event", part.global_row[event]),
        ev.get_column("name").cast(pl.String),
        (ev.get_column("end_ns") - ev.get_column("start_ns")).alias("d"),
    ).filter(pl.Series(part.own[event]) & pl.col("transports").is_not_null())
    return rows.filter(pl.col("d") == pl.col("d").max())


def _counter_part(part: Any, window: Any, every: list[Any], events: pl.DataFrame, ex: Exchange) -> Any:
    """(this process's counter info and bins, whether it had samples, job-wide samples after the window)."""
    from di.viewers.report.counters import counter_tables, window_samples

    trace = part.trace
    span = _job_span(window, every, trace.meta) if window.text != "all" else None
    series, samples = window_samples(trace, window.text, span)
    ts = samples.get_column("ts_ns")
    job = ex.allgather((samples.height, ts.min(), ts.max()), "report samples")
    if not sum(j[0] for j in job):  # none in the window, or none left as rates
        return None
    s0 = min(j[1] for j in job if j[1] is not None)
    t1 = max(j[2] for j in job if j[2] is not None)
    ev_lo = [x for _, x, _, _ in every if x is not None]
    t0 = int(min(s0, min(ev_lo) if ev_lo else s0))
    return counter_tables(series, samples, t0, int(t1))


def _wait_part(part: Any, w: pl.DataFrame, ex: Exchange) -> dict[str, Any]:
    """The waits panel's partial sums of this process's waits (rows of its ranks, global event rows)."""
    from di.viewers.report.waits import caused_by_others, late_waits, top_cause, wait_matrix, wait_sums

    waited, caused_sums = wait_sums(w)
    caused = caused_by_others(w)
    by_cause = caused.group_by("cause_rank", "kind").agg(pl.col("wait_ns").sum().alias("total"))
    every = ex.allgather(by_cause, "report wait causes")
    sums = pl.concat(every).group_by("cause_rank", "kind").agg(pl.col("total").sum())
    out: dict[str, Any] = {
        "n": w.height,
        "waited": waited,
        "caused": caused_sums,
        "matrix": wait_matrix(w),
        "steps": set(w.get_column("step").drop_nulls().unique().to_list()),
        "top": None,
    }
    if not sums.height:
        ex.allgather(None, "report late instances")  # every process makes the same calls
        return out
    top = top_cause(sums)
    late = late_waits(caused, top)
    instances = ex.allgather(late.get_column("instance").drop_nulls().unique(), "report late instances")
    union = pl.concat(instances).unique()
    coll = part.trace.collectives
    own = part.own[coll.get_column("event").to_numpy().astype(np.int64)]
    ops = (
        coll.filter(pl.Series(own) & pl.col("instance").is_in(union.implode()))
        .drop_nulls("op")
        .group_by(pl.col("op").cast(pl.String))
        .len()
    )
    out.update(
        top=top,
        late_sum=int(late.get_column("wait_ns").sum()),
        late_n=late.height,
        late_steps=set(late.get_column("step").drop_nulls().unique().to_list()),
        ops=ops,
    )
    return out


def reduce_aggregates(parts: list[dict[str, Any]], result: Any, trace: Any) -> Any:
    """:class:`di.viewers.report.Aggregates` of the whole job from every process's :func:`part_aggregates`."""
    from di.viewers.report import Aggregates, span_of
    from di.viewers.report.files import merge_per_file
    from di.viewers.report.summary import job_facts
    from di.viewers.report.top_events import GROUPS, merge_name_sums, top_of, transport_hint

    n = sum(p["events"] for p in parts)
    facts = job_facts(trace, result, trace.events.clear())
    los = [p["lo"] for p in parts if p["lo"] is not None]
    his = [p["hi"] for p in parts if p["hi"] is not None]
    facts.update(events=n, duration_ns=int(max(his) - min(los)) if n else 0)
    span = span_of(min(los), max(his), result, trace) if n else None
    top = {key: top_of(merge_name_sums([p["names"][key] for p in parts])) for key, _, _ in GROUPS}
    rows = [p["transport"] for p in parts if p["transport"] is not None]
    transport = transport_hint(pl.concat(rows, how="vertical_relaxed")) if rows else None
    counters = [p["counters"] for p in parts if p["counters"] is not None]
    return Aggregates(
        job_facts=facts,
        window_span=span,
        top_names={k: v for k, v in top.items() if v.height},
        transport_hint=transport,
        io_per_file=merge_per_file([p["io"] for p in parts]),
        counters=(
            pl.concat([c[0] for c in counters], how="vertical_relaxed").sort("series"),
            pl.concat([c[1] for c in counters], how="vertical_relaxed").sort("series", "bin"),
        )
        if counters
        else None,
        waits=_reduce_waits([p["waits"] for p in parts]) if parts[0]["waits"] is not None else None,
    )


def _reduce_waits(parts: list[dict[str, Any]]) -> tuple[int, pl.DataFrame, pl.DataFrame, list[str]]:
    from di.viewers.report.waits import hint_text, join_totals

    def summed(key: str, by: list[str], value: str) -> pl.DataFrame:
        return pl.concat([p[key] for p in parts], how="vertical_relaxed").group_by(by).agg(pl.col(value).sum())

    totals = join_totals(
        summed("waited", ["rank", "kind"], "waited_ns"), summed("caused", ["rank", "kind"], "caused_ns")
    )
    matrix = summed("matrix", ["rank", "cause_rank"], "wait_ns")
    hints = []
    top = parts[0]["top"]
    if top is not None:
        ops = pl.concat([p["ops"] for p in parts], how="vertical_relaxed").group_by("op").agg(pl.col("len").sum())
        op = None
        if ops.height:
            most = ops.get_column("len").max()
            op = min(ops.filter(pl.col("len") == most).get_column("op").to_list())
        late_n = sum(p["late_n"] for p in parts)
        hints.append(
            hint_text(
                top,
                sum(p["late_sum"] for p in parts) / late_n,
                len(set().union(*(p["late_steps"] for p in parts))),
                len(set().union(*(p["steps"] for p in parts))),
                op,
            )
        )
    return sum(p["n"] for p in parts), totals, matrix, hints
