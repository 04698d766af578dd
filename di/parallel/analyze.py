"""``di analyze`` over P processes: each computes its ranks' results with the engine, process 0 gathers them.

Per rank and local (the engine's functions on the process's part, rows of its
ranks kept): steps, breakdown, overlap, wait states (a wait is computed where
the waiting event lives: a late sender on the receiver's process, a late
receiver on the sender's, a collective wait on the member's). Across ranks:
the step ids of a ``steps=`` window (gathered), imbalance (the engine's, over
the gathered per-rank breakdown: the reduction of each rank's time per state),
the critical path (:mod:`di.parallel.critical_path`). The result on process 0
equals :func:`di.engine.analyze` of the whole job (timings aside); the other
processes get None.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import polars as pl

from di.engine import ANALYSES, Analysis, requested_window
from di.engine.window import EventFrame, Window
from di.parallel.exchange import Exchange
from di.parallel.ownership import Part, load_part


def prepare_part(part: Part, window: Window, ex: Exchange) -> EventFrame:
    """:func:`di.engine.window.prepare` of the part, its steps those of the owned ranks; a ``steps=``
    window slices the job's step ids (gathered from every process), as one process does."""
    from di.engine.classify import activities, call_only_locations, location_arrays
    from di.engine.steps import NO_STEP, event_steps, find_steps
    from di.engine.window import _select

    trace = part.trace
    rank, on_gpu, device = location_arrays(trace)
    steps = find_steps(trace).filter(pl.col("rank").is_in(pl.Series(part.ranks, dtype=pl.Int32).implode()))
    step = event_steps(trace, steps, rank, on_gpu)
    if window.steps is not None:
        every = ex.allgather(steps.get_column("step").unique().to_list(), "step ids")
        ids = sorted({s for ids in every for s in ids})[window.steps]
        selected = np.isin(step, np.asarray(ids, np.int64)) & (step != NO_STEP)
        start = trace.events.get_column("start_ns").to_numpy()
        end = trace.events.get_column("end_ns").to_numpy()
        steps = steps.filter(pl.col("step").is_in(ids))
    else:
        selected, start, end, steps = _select(trace, window, steps, step)
    call_only = call_only_locations(trace)[trace.events.get_column("loc").to_numpy().astype(np.int64)]
    return EventFrame(
        trace, rank, device, on_gpu, activities(trace), step, selected, start, end, steps, window, call_only
    )


def analyze(
    path: Any,
    ex: Exchange,
    *,
    window: Window | str | None = None,
    per_step: bool = False,
    analyses: tuple[str, ...] = ANALYSES,
    load_whole: Any = None,
    wait_rows: bool = True,
) -> Analysis | None:
    """:func:`analyze_with` without a per-process extra: the :class:`di.engine.Analysis` on process 0."""
    return analyze_with(
        path, ex, window=window, per_step=per_step, analyses=analyses, load_whole=load_whole, wait_rows=wait_rows
    )[0]


def analyze_with(
    path: Any,
    ex: Exchange,
    *,
    window: Window | str | None = None,
    per_step: bool = False,
    analyses: tuple[str, ...] = ANALYSES,
    load_whole: Any = None,
    wait_rows: bool = True,
    extra: Callable[[Part, EventFrame, pl.DataFrame | None], Any] | None = None,
    keep_columns: tuple[str, ...] = (),
) -> tuple[Analysis | None, list[Any] | None]:
    """The analyses of the job in store ``path`` (or of ``load_whole()``, read by every process), computed by
    the processes of ``ex`` together.

    Args:
        wait_rows: gather every wait to process 0 (for a CSV of them); False: only each rank's total per
            kind and causing rank (all the JSON and the summary show), so that process 0 holds
            O(ranks x causes), not O(messages).
        extra: called by every process on its part, the prepared frame and its ranks' waits (global event
            rows; None without the wait_states analysis) before the part is dropped; what it returns is
            gathered to process 0. It may make collective calls through ``ex`` (every process calls it).
        keep_columns: event columns to load although no analysis reads them (:data:`UNREAD_EVENT_COLUMNS`).

    Returns:
        On process 0 (the :class:`di.engine.Analysis` that :func:`di.engine.analyze` gives for the whole job,
        with ``wait_rows=False`` its ``wait_states`` summed per rank, kind and cause_rank; what ``extra``
        returned on each process, in process order, or None without ``extra``); (None, None) on the others.

    Raises:
        FormatError and kin: a process could not read its part (every process raises).
        ValueError: an unknown analysis or a malformed window.
    """
    win = requested_window(window, analyses)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    part = load_part(path, ex, win, load_whole=load_whole, keep_columns=keep_columns)
    frame = prepare_part(part, win, ex)
    seconds["prepare"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    local = _local_results(part, frame, ex, analyses, per_step)
    seconds["local"] = time.perf_counter() - t0
    cp = None
    if "critical_path" in analyses:
        from di.parallel.critical_path import critical_path

        t0 = time.perf_counter()
        cp = critical_path(ex, part, frame)
        seconds["critical_path"] = time.perf_counter() - t0
    if extra is not None:
        local["extra"] = extra(part, frame, local.get("waits"))
    if not wait_rows and "waits" in local:
        local["waits"] = _wait_totals(local["waits"])
    ranks = sorted(int(r) for r in part.owner_of_rank[0])
    del part, frame  # the part's trace: what process 0 gathers and assembles next reuses its memory
    gathered = ex.gather(local, "results")
    if gathered is None:
        return None, None
    extras = [g.pop("extra") for g in gathered] if extra is not None else None
    return _assemble(gathered, ranks, win, per_step, analyses, cp, seconds, wait_rows), extras


def _local_results(
    part: Part, frame: EventFrame, ex: Exchange, analyses: tuple[str, ...], per_step: bool
) -> dict[str, Any]:
    """This process's results, rows of its ranks only (process 0 adds the job's communicators), by key."""
    from di.engine.overlap import overlap
    from di.engine.slow_steps import slow_steps

    mine = pl.Series(part.ranks, dtype=pl.Int32).implode()
    local: dict[str, Any] = {"steps": frame.steps}
    local |= _breakdown_tables(frame, ex, analyses, per_step, mine)
    local |= _rank_tables(part, frame, analyses, per_step, mine)
    if "overlap" in analyses:
        local["overlap"] = overlap(frame).filter(pl.col("rank").is_in(mine))
        if per_step:
            local["overlap_steps"] = overlap(frame, per_step=True).filter(pl.col("rank").is_in(mine))
    if "wait_states" in analyses:
        local["waits"] = _rank_waits(part, frame, mine)
    if "gpu_clocks" in analyses:
        kernels, steps = _gpu_clocks(part, frame, ex)
        local["gpu_clocks"] = kernels.filter(pl.col("rank").cast(pl.Int32).is_in(mine))
        local["gpu_step_clocks"] = steps.filter(pl.col("rank").cast(pl.Int32).is_in(mine))
    if "counters" in analyses:
        local["counters"] = _counters(part, frame, ex)
    # a rank's steps, instants and series lie with its part: its slow steps are told there
    local["slow_steps"] = slow_steps(frame, local.get("by_step")).filter(pl.col("rank").cast(pl.Int32).is_in(mine))
    if ex.rank == 0:  # every part holds the whole comms and comm_links
        from di.engine.communicators import communicators

        local["communicators"] = communicators(part.trace)
    return local


def _breakdown_tables(
    frame: EventFrame, ex: Exchange, analyses: tuple[str, ...], per_step: bool, mine: pl.Series
) -> dict[str, pl.DataFrame]:
    """The part's breakdown (``whole``) and, where breakdown per step or imbalance needs it, per step
    (``by_step``), rows of its ranks (``mine``)."""
    from di.engine.breakdown import breakdown

    out = {}
    if {"breakdown", "imbalance"} & set(analyses):
        out["whole"] = breakdown(frame, per_step=False).filter(pl.col("rank").is_in(mine))
        if (per_step and "breakdown" in analyses) or ("imbalance" in analyses and ex_any_steps(ex, frame)):
            out["by_step"] = breakdown(frame, per_step=True).filter(pl.col("rank").is_in(mine))
    return out


def _rank_tables(
    part: Part, frame: EventFrame, analyses: tuple[str, ...], per_step: bool, mine: pl.Series
) -> dict[str, pl.DataFrame]:
    """The tables of the analyses whose inputs all lie with a rank's part: phases, GPU idle time, memory,
    FLOPs and the collective rows of comm_bandwidth, rows of the part's ranks (``mine``)."""
    out = {}
    if "phases" in analyses:  # a rank's markers, the work inside them and the GPU work it launched lie with its part
        from di.engine.phases import phases

        out["phases"] = phases(frame, per_step).filter(pl.col("rank").is_in(mine))
    if "gpu_idle" in analyses:  # a rank's GPU work and the host calls that launched it lie with its part
        from di.engine.gpu_idle import gpu_idle_tables

        out["gpu_idle"], out["gpu_idle_gaps"] = gpu_idle_tables(frame, per_step, ranks=list(part.ranks))
    if "memory" in analyses:  # a rank's allocator events and the operators around them lie with its part
        from di.engine.memory import memory_tables

        out["memory"], out["memory_holders"], out["memory_timeline"] = memory_tables(
            frame, per_step, ranks=list(part.ranks)
        )
    if "flops" in analyses:  # a rank's operators and the kernels they launched lie with its part
        from di.engine.flops import flops_tables

        out["flops"], out["flops_ops"] = (t.filter(pl.col("rank").is_in(mine)) for t in flops_tables(frame, per_step))
    if "comm_bandwidth" in analyses:  # its ranks' parts; process 0 puts the instances together
        from di.engine.comm_bandwidth import collective_rows

        out["collective_rows"] = collective_rows(frame, ranks=list(part.ranks))
    return out


def _rank_waits(part: Part, frame: EventFrame, mine: pl.Series) -> pl.DataFrame:
    """The wait states of the part's ranks (``mine``), their events as rows of the whole job's ``events``."""
    from di.engine.waitstates import wait_states

    w = wait_states(frame).filter(pl.col("rank").is_in(mine))
    rows = pl.Series(part.global_row)
    return w.with_columns(
        rows.gather(w.get_column("event")).alias("event"),
        rows.gather(w.get_column("cause_event")).alias("cause_event"),
    )


def _wait_totals(waits: pl.DataFrame) -> pl.DataFrame:
    """wait_ns summed per rank, kind and cause_rank."""
    return waits.group_by("rank", "kind", "cause_rank").agg(pl.col("wait_ns").sum()).sort("rank", "kind", "cause_rank")


def _gpu_clocks(part: Part, frame: EventFrame, ex: Exchange) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`di.engine.gpu_clocks.gpu_clocks` and :func:`di.engine.gpu_step_clocks.gpu_step_clocks` of the part. A GPU series' timeline and samples lie with the rank
    that logged them (a log's own rank), so every process's series, samples (a few per second and GPU) and
    GPU hosts go to every process first, and each chooses the same series per GPU."""
    from dataclasses import replace

    from di.engine.gpu_clocks import candidates, choose, gpu_clocks, gpu_hosts
    from di.engine.gpu_step_clocks import gpu_step_clocks

    found = candidates(part.trace)
    samples = part.trace.samples.filter(pl.col("series").is_in(found.get_column("series").cast(pl.UInt32).implode()))
    counts = samples.group_by("series").len().with_columns(pl.col("series").cast(pl.Int64))
    every = ex.allgather((found.join(counts, on="series"), samples, gpu_hosts(part.trace)), "gpu clock series")
    use = choose(pl.concat([f for f, _, _ in every]), pl.concat([h for _, _, h in every]).unique())
    trace = replace(part.trace, samples=pl.concat([s for _, s, _ in every]).sort("series", "ts_ns"))
    joined = replace(frame, trace=trace)
    return gpu_clocks(joined, use), gpu_step_clocks(joined, use)


def _counters(part: Part, frame: EventFrame, ex: Exchange) -> pl.DataFrame:
    """:func:`di.engine.counters.counters` of the part's series (a series' samples lie with its timeline's rank,
    the series table is whole); a ``steps=`` window's span is the job's, from every process's steps."""
    from di.engine.counters import counter_stats, sample_span

    span = sample_span(frame)
    if frame.window.steps is not None:
        spans = [s for s in ex.allgather(span if frame.steps.height else None, "counter span") if s is not None]
        span = (min(lo for lo, _ in spans), max(hi for _, hi in spans)) if spans else (0, 0)
    return counter_stats(part.trace, span)


def ex_any_steps(ex: Exchange, frame: EventFrame) -> bool:
    """Whether any process found steps in the window (every process must make the same calls)."""
    return any(ex.allgather(bool(frame.steps.height), "steps found"))


def _assemble(
    gathered: list[dict[str, Any]],
    ranks: list[int],
    win: Window,
    per_step: bool,
    analyses: tuple[str, ...],
    cp: dict[str, Any] | None,
    seconds: dict[str, float],
    wait_rows: bool,
) -> Analysis:
    """The :class:`di.engine.Analysis` of the job from every process's results (``gathered``, in process order)."""
    from di.engine.step_times import step_times

    steps = _concat(gathered, "steps")
    assert steps is not None
    out: dict[str, Any] = {}
    whole, by_step = _concat(gathered, "whole"), _concat(gathered, "by_step")
    if "breakdown" in analyses:
        out["breakdown"] = pl.concat([whole, by_step]) if per_step and by_step is not None else whole
    out |= _rank_outputs(gathered, analyses)
    if "overlap" in analyses:
        ov = _concat(gathered, "overlap")
        out["overlap"] = pl.concat([ov, _concat(gathered, "overlap_steps")]) if per_step else ov
    if "imbalance" in analyses:
        from di.engine.imbalance import imbalance

        job = SimpleNamespace(steps=steps, ranks=ranks)
        out["imbalance"] = imbalance(job, whole=whole, by_step=by_step if steps.height else None)  # type: ignore[arg-type]
    if "wait_states" in analyses:
        w = _concat(gathered, "waits")
        out["wait_states"] = None if w is None else w.sort("start_ns", "rank") if wait_rows else w.sort(w.columns)
    if "critical_path" in analyses:
        out["critical_path"] = cp
    out |= _series_outputs(gathered, analyses)
    out["step_times"] = step_times(steps)
    out["slow_steps"] = _concat(gathered, "slow_steps").sort("rank", "start_ns", "step")
    out["communicators"] = _concat(gathered, "communicators")
    order = {name: seconds.get(name, 0.0) for name in ("prepare", "local", "critical_path")}
    return Analysis(steps=steps, per_step=per_step, window=win.text, seconds=order, **out)


def _concat(gathered: list[dict[str, Any]], key: str) -> pl.DataFrame | None:
    """Every process's table ``key`` in process order; None when no process has one."""
    parts = [g[key] for g in gathered if key in g]
    return pl.concat(parts) if parts else None


def _rank_outputs(gathered: list[dict[str, Any]], analyses: tuple[str, ...]) -> dict[str, Any]:
    """The job's tables of phases, GPU idle time, memory, FLOPs and comm_bandwidth from every process's, in the
    engine's order (comm_bandwidth from the collective rows of every process)."""
    out: dict[str, Any] = {}
    if "phases" in analyses:
        from di.engine.phases import in_order as phases_order

        out["phases"] = phases_order(_concat(gathered, "phases"))
    if "gpu_idle" in analyses:
        from di.engine.gpu_idle import GAPS_SHOWN, LONGEST_ORDER, in_order

        out["gpu_idle"] = in_order(_concat(gathered, "gpu_idle"))
        out["gpu_idle_gaps"] = (
            _concat(gathered, "gpu_idle_gaps")
            .sort(*LONGEST_ORDER, descending=[True, False, False, False])
            .head(GAPS_SHOWN)
        )
    if "memory" in analyses:
        from di.engine.memory import in_order as memory_order

        out["memory"], out["memory_holders"], out["memory_timeline"] = memory_order(
            *(_concat(gathered, key) for key in ("memory", "memory_holders", "memory_timeline"))
        )
    if "flops" in analyses:
        from di.engine.flops import in_order as flops_order

        out["flops"], out["flops_ops"] = flops_order(_concat(gathered, "flops"), _concat(gathered, "flops_ops"))
    if "comm_bandwidth" in analyses:
        from di.engine.comm_bandwidth import collective_rows_schema, comm_bandwidth

        parts = _concat(gathered, "collective_rows")
        out["comm_bandwidth"] = comm_bandwidth(
            parts if parts is not None else pl.DataFrame(schema=collective_rows_schema())
        )
    return out


def _series_outputs(gathered: list[dict[str, Any]], analyses: tuple[str, ...]) -> dict[str, Any]:
    """The job's GPU clock and counter tables from every process's, in the engine's order."""
    out: dict[str, Any] = {}
    if "gpu_clocks" in analyses:
        from di.engine.gpu_clocks import in_order

        out["gpu_clocks"] = in_order(_concat(gathered, "gpu_clocks"))
        out["gpu_step_clocks"] = _concat(gathered, "gpu_step_clocks").sort("rank", "step", "device")
    if "counters" in analyses:
        out["counters"] = _concat(gathered, "counters").sort("series")
    return out
