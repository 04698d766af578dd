"""Analysis results as files: JSON (schemas/analysis/v1) and CSV (the terminal summary is :mod:`di.viewers.terminal`).

Reads an :class:`di.engine.Analysis` (and nothing of the engine's internals).
The JSON holds one record per rank carrying its ``rank``, plus the job-wide
imbalance and critical path; it validates against
``schemas/analysis/v1/analysis.schema.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.engine import Analysis

PATH_EVENTS_IN_JSON = 1000
"""Path events listed in the JSON (the longest contributors); all go to the CSV."""


def json_schema() -> dict[str, Any]:
    """The analysis result schema (v1)."""
    from di.schema import document_schema

    return document_schema("analysis")


def to_json(result: Analysis, *, inputs: list[str]) -> dict[str, Any]:
    """The JSON document of a result (see the module docstring)."""
    from di import __version__

    ranks = sorted(set(result.steps.get_column("rank").to_list()) | _ranks(result))
    waits = _wait_totals(result)
    cp = result.critical_path or {}
    cp_rank = {r["rank"]: r for r in cp["by_rank"].iter_rows(named=True)} if cp else {}
    per_rank = {
        name: _rows_by_rank(getattr(result, name))
        for name in ("breakdown", "phases", "gpu_idle", "memory", "flops", "overlap")
    }
    records = []
    for r in ranks:
        records.append(
            {
                "rank": r,
                **{name: rows.get(r, []) for name, rows in per_rank.items()},
                "wait_states": waits.get(r, {"waited_ns": {}, "caused_ns": {}}),
                "critical_path": {
                    "contrib_ns": int(cp_rank.get(r, {}).get("contrib_ns") or 0),
                    "share": float(cp_rank.get(r, {}).get("share") or 0.0),
                },
            }
        )
    doc: dict[str, Any] = {
        "format": "di-analysis",
        "schema_version": 1,
        "di_version": __version__,
        "inputs": inputs,
        "window": result.window,
        "per_step": result.per_step,
        "steps": result.steps.to_dicts(),
        "ranks": records,
        "imbalance": result.imbalance.to_dicts() if result.imbalance is not None else [],
        "critical_path": _cp_json(cp),
        "gpu_idle_gaps": result.gpu_idle_gaps.to_dicts() if result.gpu_idle_gaps is not None else [],
        "memory_holders": result.memory_holders.to_dicts() if result.memory_holders is not None else [],
        "flops_ops": result.flops_ops.to_dicts() if result.flops_ops is not None else [],
        "comm_bandwidth": result.comm_bandwidth.to_dicts() if result.comm_bandwidth is not None else [],
        "gpu_clocks": result.gpu_clocks.to_dicts() if result.gpu_clocks is not None else [],
        "gpu_step_clocks": result.gpu_step_clocks.to_dicts() if result.gpu_step_clocks is not None else [],
        "step_times": result.step_times.to_dicts() if result.step_times is not None else [],
        "slow_steps": result.slow_steps.to_dicts() if result.slow_steps is not None else [],
        "counters": result.counters.to_dicts() if result.counters is not None else [],
        "communicators": result.communicators.to_dicts() if result.communicators is not None else [],
        "seconds": result.seconds,
    }
    return doc


def validate(doc: dict[str, Any]) -> None:
    """Check a result document against the schema (:mod:`di.document_check`).

    Raises:
        SchemaError: naming where it fails.
    """
    from di.document_check import validate_document

    validate_document(doc, "analysis", "analysis JSON")


def write_json(result: Analysis, target: str, *, inputs: list[str], seconds: dict[str, Any] | None = None) -> None:
    """Write the result document (validated) to ``target``, swapped in atomically; ``-`` prints it.
    ``seconds`` adds to the document's timings (a parallel run's process count)."""
    import json

    from di.output import atomic_write

    doc = to_json(result, inputs=inputs)
    if seconds:
        doc["seconds"] = {**doc["seconds"], **seconds}
    validate(doc)
    text = json.dumps(doc, indent=1, allow_nan=False)  # NaN is no JSON: a non-finite number here is a bug
    if target == "-":
        print(text)
        return
    with atomic_write(target) as fh:
        fh.write(text.encode())


JSON_MARK = b'"format": "di-analysis"'
"""How di recognises an analysis JSON file it wrote (the document's first member, as :func:`to_json` and ``json.dumps(indent=1)`` write it)."""


def is_csv_folder(path: Path) -> bool:
    """True when the folder ``path`` holds only CSV files (what ``--csv`` writes), so di may replace it."""
    return path.is_dir() and all(
        p.is_file() and p.name.endswith(".csv") for p in path.iterdir() if not p.name.startswith(".")
    )


def write_csv(result: Analysis, folder: str | Path, *, extra: dict[str, pl.DataFrame] | None = None) -> list[Path]:
    """One CSV per table (steps, step_times, slow_steps where there are some, breakdown, phases where a rank has
    time in a training phase, gpu_idle and gpu_idle_gaps
    where a GPU was idle, memory and memory_holders where the trace has allocator events, flops and flops_ops where
    it has matrix operators with shapes, comm_bandwidth where it has collectives, overlap, imbalance, wait_states, gpu_clocks and gpu_step_clocks where the trace has GPU clock series, counters where it has samples, communicators where it has
    some, critical_path_*, then ``extra`` by name), the folder written whole and swapped in (:func:`di.output.atomic_dir`).

    Returns:
        The files written, under ``folder``.
    """
    from di.output import atomic_dir

    tables = {
        "steps": result.steps,
        "step_times": result.step_times,
        "slow_steps": result.slow_steps if result.slow_steps is not None and result.slow_steps.height else None,
        "breakdown": result.breakdown,
        "phases": result.phases if result.phases is not None and result.phases.height else None,
        "gpu_idle": result.gpu_idle if result.gpu_idle is not None and result.gpu_idle.height else None,
        "gpu_idle_gaps": result.gpu_idle_gaps
        if result.gpu_idle_gaps is not None and result.gpu_idle_gaps.height
        else None,
        "memory": result.memory if result.memory is not None and result.memory.height else None,
        "memory_holders": result.memory_holders
        if result.memory_holders is not None and result.memory_holders.height
        else None,
        "flops": result.flops if result.flops is not None and result.flops.height else None,
        "flops_ops": result.flops_ops if result.flops_ops is not None and result.flops_ops.height else None,
        "comm_bandwidth": result.comm_bandwidth
        if result.comm_bandwidth is not None and result.comm_bandwidth.height
        else None,
        "overlap": result.overlap,
        "imbalance": result.imbalance,
        "wait_states": result.wait_states,
        "gpu_clocks": result.gpu_clocks if result.gpu_clocks is not None and result.gpu_clocks.height else None,
        "gpu_step_clocks": result.gpu_step_clocks
        if result.gpu_step_clocks is not None and result.gpu_step_clocks.height
        else None,
        "counters": result.counters if result.counters is not None and result.counters.height else None,
        "communicators": result.communicators
        if result.communicators is not None and result.communicators.height
        else None,
    }
    for k, v in (result.critical_path or {}).items():
        if isinstance(v, pl.DataFrame):
            tables[f"critical_path_{k}"] = v
    tables.update(extra or {})
    names = []
    with atomic_dir(folder) as staged:
        for name, df in tables.items():
            if df is not None:
                df.write_csv(staged / f"{name}.csv")
                names.append(f"{name}.csv")
    return [Path(folder) / n for n in names]


def _ranks(result: Analysis) -> set[int]:
    found: set[int] = set()
    for df in (result.breakdown, result.overlap, result.memory, result.flops):
        if df is not None:
            found |= set(df.get_column("rank").to_list())
    return found


def _rows_by_rank(df: pl.DataFrame | None) -> dict[int, list[dict[str, Any]]]:
    """A per-rank table's rows, without their rank, by rank (each rank's in the table's order)."""
    if df is None or not df.height:
        return {}
    df = df.sort("rank", maintain_order=True)
    rows = df.drop("rank").to_dicts()
    ranks, first = np.unique(df.get_column("rank").to_numpy(), return_index=True)
    ends = [*first[1:], len(rows)]
    return {int(r): rows[a:b] for r, a, b in zip(ranks, first, ends)}


def _wait_totals(result: Analysis) -> dict[int, dict[str, dict[str, int]]]:
    out: dict[int, dict[str, dict[str, int]]] = {}
    w = result.wait_states
    if w is None:
        return out
    for (rank, kind), v in (
        w.group_by("rank", "kind").agg(pl.col("wait_ns").sum()).rows_by_key(["rank", "kind"]).items()
    ):
        out.setdefault(rank, {"waited_ns": {}, "caused_ns": {}})["waited_ns"][kind] = int(v[0][0])
    for (rank, kind), v in (
        w.group_by("cause_rank", "kind").agg(pl.col("wait_ns").sum()).rows_by_key(["cause_rank", "kind"]).items()
    ):
        out.setdefault(rank, {"waited_ns": {}, "caused_ns": {}})["caused_ns"][kind] = int(v[0][0])
    return out


def _cp_json(cp: dict[str, Any]) -> dict[str, Any]:
    if not cp:
        return {
            "summary": {"length_ns": 0, "window_span_ns": 0, "segments": 0, "events": 0, "dropped_edges": 0},
            "by_category": [],
            "by_name": [],
            "events": [],
            "events_total": 0,
            "waits": [],
        }
    events = cp["events"]
    top = events.sort("contrib_ns", descending=True).head(PATH_EVENTS_IN_JSON).sort("start_ns")
    return {
        "summary": cp["summary"],
        "by_category": cp["by_category"].to_dicts(),
        "by_name": cp["by_name"].head(50).to_dicts(),
        "events": top.to_dicts(),
        "events_total": events.height,
        "waits": cp["waits"].to_dicts(),
    }
