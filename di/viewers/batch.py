"""One table for many traces: one row per trace and rank (``di analyze runs/*.di --csv out/``).

Columns, all over the analysis window (times int64 ns, shares as fractions):

- ``trace``: the input as given; ``rank``; ``window``; ``steps`` (distinct steps of the rank);
- ``span_ns`` and ``<state>_ns`` for the GPU side (summed over the rank's GPUs) and
  ``host_span_ns``, ``host_<state>_ns`` for its CPU threads (:mod:`di.engine.breakdown`);
- ``phase_<phase>_ns``, ``phase_<phase>_gpu_idle_ns``: the host time of each training phase and the part of it with
  the rank's GPUs idle (:mod:`di.engine.phases`; null for a rank without phase markers, or without GPU work);
- ``gpu_idle_<cause>_ns``: the GPU idle time by cause, summed over the rank's GPUs (:mod:`di.engine.gpu_idle`);
- ``memory_peak_bytes``, ``memory_growth_bytes_per_step``: the framework allocator's largest peak among the rank's
  accelerators (not ``cpu``) and that device's growth per step (:mod:`di.engine.memory`; null without allocator
  events);
- ``flop``, ``flop_utilization``: the matrix operators' floating-point work on the rank's GPUs and the mean over
  them of its rate against each GPU's peak (:mod:`di.engine.flops`; null without recorded shapes or a known peak);
- ``<pair>`` overlap ratios (:mod:`di.engine.overlap`; null when undefined);
- ``waited_ns`` / ``caused_ns``: wait states of the rank and those it caused;
- ``cp_contrib_ns``, ``cp_share``: its part of the critical path; ``cp_length_ns``: the path (job-wide).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from di.engine.breakdown import STATE_NAMES as STATES
from di.engine.gpu_idle import CAUSES
from di.engine.phases import PHASES

PAIRS = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")
FILE = "per_trace_rank.csv"


_Rows = dict[int, dict[str, Any]]
"""The rows being filled: per rank, its values by column."""


def rank_rows(label: str, result: Any) -> pl.DataFrame:
    """The rows of one analysed trace (see the module docstring)."""
    rows = _rows(label, result)
    for add in (
        _add_breakdown,
        _add_phases,
        _add_gpu_idle,
        _add_memory,
        _add_flops,
        _add_overlap,
        _add_waits,
        _add_critical_path,
    ):
        add(rows, result)
    return _table(rows)


def _rows(label: str, result: Any) -> _Rows:
    """One row per rank with steps or a breakdown: trace, rank, window and its number of steps."""
    ranks = sorted(
        set(result.steps.get_column("rank").to_list())
        | (set(result.breakdown.get_column("rank").to_list()) if result.breakdown is not None else set())
    )
    rows: _Rows = {r: {"trace": label, "rank": r, "window": result.window} for r in ranks}
    steps = result.steps.group_by("rank").agg(pl.col("step").n_unique()) if result.steps.height else None
    for r in rows.values():
        r["steps"] = 0
    if steps is not None:
        for rank, n in steps.iter_rows():
            rows[rank]["steps"] = n
    return rows


def _add_breakdown(rows: _Rows, result: Any) -> None:
    """span_ns and ``<state>_ns`` of the GPU side, ``host_`` ones of the CPU threads."""
    if result.breakdown is None:
        return
    b = result.breakdown.filter(pl.col("step").is_null())
    for host, prefix in ((False, ""), (True, "host_")):
        side = b.filter((pl.col("scope") == "host") == host)
        spans = side.select("rank", "scope", "span_ns").unique().group_by("rank").agg(pl.col("span_ns").sum())
        for rank, span in spans.iter_rows():
            rows[rank][f"{prefix}span_ns"] = span
        for rank, state, t in side.group_by("rank", "state").agg(pl.col("time_ns").sum()).iter_rows():
            rows[rank][f"{prefix}{state}_ns"] = t


def _add_phases(rows: _Rows, result: Any) -> None:
    """``phase_<phase>_ns`` and ``phase_<phase>_gpu_idle_ns`` (0 for a phase a rank with markers lacks)."""
    if result.phases is None or not result.phases.height:
        return
    whole = result.phases.filter(pl.col("step").is_null())
    gpu = whole.group_by("rank").agg(pl.col("gpu_ns").is_not_null().any())
    for rank, has_gpu in gpu.iter_rows():
        if rank in rows:
            for phase in PHASES:
                rows[rank][f"phase_{phase}_ns"] = 0
                rows[rank][f"phase_{phase}_gpu_idle_ns"] = 0 if has_gpu else None
    for rank, phase, host, idle in whole.select("rank", "phase", "host_ns", "gpu_idle_ns").iter_rows():
        if rank in rows:
            rows[rank][f"phase_{phase}_ns"] = host
            rows[rank][f"phase_{phase}_gpu_idle_ns"] = idle


def _add_gpu_idle(rows: _Rows, result: Any) -> None:
    """``gpu_idle_<cause>_ns`` summed over the rank's GPUs."""
    if result.gpu_idle is None:
        return
    whole = result.gpu_idle.filter(pl.col("step").is_null())
    for rank, cause, t in whole.group_by("rank", "cause").agg(pl.col("time_ns").sum()).iter_rows():
        rows[rank][f"gpu_idle_{cause}_ns"] = t


def _add_memory(rows: _Rows, result: Any) -> None:
    """memory_peak_bytes and memory_growth_bytes_per_step of the rank's accelerator with the largest peak."""
    if result.memory is None:
        return
    from di.engine.memory import rank_peaks

    for rank, peak, growth in (
        rank_peaks(result.memory).select("rank", "peak_bytes", "growth_bytes_per_step").iter_rows()
    ):
        if rank in rows:
            rows[rank]["memory_peak_bytes"], rows[rank]["memory_growth_bytes_per_step"] = peak, growth


def _add_flops(rows: _Rows, result: Any) -> None:
    """flop (null without counted work) and flop_utilization (the mean over the rank's GPUs)."""
    if result.flops is None or not result.flops.height:
        return
    per_rank = (
        result.flops.filter(pl.col("step").is_null())
        .group_by("rank")
        .agg(pl.when(pl.col("flop").count() > 0).then(pl.col("flop").sum()), pl.col("utilization").mean())
    )
    for rank, flop, utilization in per_rank.iter_rows():
        if rank in rows:
            rows[rank]["flop"], rows[rank]["flop_utilization"] = flop, utilization


def _add_overlap(rows: _Rows, result: Any) -> None:
    """The overlap ratio of each pair."""
    if result.overlap is None:
        return
    for rank, pair, ratio in (
        result.overlap.filter(pl.col("step").is_null()).select("rank", "pair", "ratio").iter_rows()
    ):
        rows[rank][pair] = ratio


def _add_waits(rows: _Rows, result: Any) -> None:
    """waited_ns and caused_ns of the rank's wait states."""
    if result.wait_states is None or not result.wait_states.height:
        return
    w = result.wait_states
    for rank, t in w.group_by("rank").agg(pl.col("wait_ns").sum()).iter_rows():
        rows[rank]["waited_ns"] = t
    for rank, t in w.group_by("cause_rank").agg(pl.col("wait_ns").sum()).iter_rows():
        if rank in rows:
            rows[rank]["caused_ns"] = t


def _add_critical_path(rows: _Rows, result: Any) -> None:
    """cp_length_ns (0 without a path) and the rank's cp_contrib_ns and cp_share."""
    cp = result.critical_path or {}
    for r in rows.values():
        r["cp_length_ns"] = int(cp["summary"]["length_ns"]) if cp else 0
    if cp:
        for rank, contrib, share in cp["by_rank"].select("rank", "contrib_ns", "share").iter_rows():
            if rank in rows:
                rows[rank]["cp_contrib_ns"], rows[rank]["cp_share"] = contrib, share


def _columns() -> list[str]:
    return [
        "trace",
        "rank",
        "window",
        "steps",
        "span_ns",
        *(f"{s}_ns" for s in STATES),
        "host_span_ns",
        *(f"host_{s}_ns" for s in STATES),
        *(f"phase_{p}_ns" for p in PHASES),
        *(f"phase_{p}_gpu_idle_ns" for p in PHASES),
        *(f"gpu_idle_{c}_ns" for c in CAUSES),
        "memory_peak_bytes",
        "memory_growth_bytes_per_step",
        "flop",
        "flop_utilization",
        *PAIRS,
        "waited_ns",
        "caused_ns",
        "cp_contrib_ns",
        "cp_share",
        "cp_length_ns",
    ]


def _table(rows: _Rows) -> pl.DataFrame:
    """The rows as a frame of :func:`_columns`: a missing time or step count is 0, other missing values null."""
    columns = _columns()
    zero = {c for c in columns if (c.endswith("_ns") and not c.startswith("phase_")) or c == "steps"}
    zero -= {"span_ns", "host_span_ns"}
    data = {c: [r.get(c, 0 if c in zero else None) for r in rows.values()] for c in columns}
    schema = {
        c: (
            pl.String
            if c in ("trace", "window")
            else pl.Float64
            if c in (*PAIRS, "cp_share", "memory_growth_bytes_per_step", "flop_utilization")
            else pl.Int64
        )
        for c in columns
    }
    return pl.DataFrame(data, schema=schema)


def write_table(frames: list[pl.DataFrame], folder: str | Path) -> Path:
    """Concatenate the traces' rows and write ``FOLDER/per_trace_rank.csv`` (the folder written whole and swapped in)."""
    from di.output import atomic_dir

    with atomic_dir(folder) as staged:
        pl.concat(frames).write_csv(staged / FILE)
    return Path(folder) / FILE
