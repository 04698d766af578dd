"""Showing analysis results: the terminal summary, JSON (schemas/analysis/v1) and CSV files.

Reads an :class:`di.engine.Analysis` (and nothing of the engine's internals).
The JSON holds one record per rank carrying its ``rank``, plus the job-wide
imbalance and critical path; it validates against
``schemas/analysis/v1/analysis.schema.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.breakdown import STATE_LABELS, STATE_NAMES as STATES
from di.engine.imbalance import WORK
from di.errors import SchemaError

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
    records = []
    for r in ranks:
        records.append(
            {
                "rank": r,
                "breakdown": _rows(result.breakdown, r, drop=("rank",)),
                "overlap": _rows(result.overlap, r, drop=("rank",)),
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
        "gpu_clocks": result.gpu_clocks.to_dicts() if result.gpu_clocks is not None else [],
        "gpu_step_clocks": result.gpu_step_clocks.to_dicts() if result.gpu_step_clocks is not None else [],
        "seconds": result.seconds,
    }
    return doc


def validate(doc: dict[str, Any]) -> None:
    """Check a result document against the schema.

    Raises:
        SchemaError: naming where it fails.
    """
    import jsonschema

    try:
        jsonschema.validate(doc, json_schema())
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(top)"
        raise SchemaError(f"analysis JSON at {where}: {exc.message}") from None


def write_json(result: Analysis, target: str, *, inputs: list[str], seconds: dict[str, Any] | None = None) -> None:
    """Write the result document (validated) to ``target``, swapped in atomically; ``-`` prints it.
    ``seconds`` adds to the document's timings (a parallel run's process count)."""
    import json

    from di.output import atomic_write

    doc = to_json(result, inputs=inputs)
    if seconds:
        doc["seconds"] = {**doc["seconds"], **seconds}
    validate(doc)
    text = json.dumps(doc, indent=1)
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
    """One CSV per table (steps, breakdown, overlap, imbalance, wait_states, gpu_clocks and gpu_step_clocks where
    the trace has GPU clock series, critical_path_*, then ``extra`` by name), the folder written whole and swapped in (:func:`di.output.atomic_dir`).

    Returns:
        The files written, under ``folder``.
    """
    from di.output import atomic_dir

    tables = {
        "steps": result.steps,
        "breakdown": result.breakdown,
        "overlap": result.overlap,
        "imbalance": result.imbalance,
        "wait_states": result.wait_states,
        "gpu_clocks": result.gpu_clocks if result.gpu_clocks is not None and result.gpu_clocks.height else None,
        "gpu_step_clocks": result.gpu_step_clocks
        if result.gpu_step_clocks is not None and result.gpu_step_clocks.height
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
    for df in (result.breakdown, result.overlap):
        if df is not None:
            found |= set(df.get_column("rank").to_list())
    return found


def _rows(df: pl.DataFrame | None, rank: int, drop: tuple[str, ...]) -> list[dict[str, Any]]:
    if df is None:
        return []
    return df.filter(pl.col("rank") == rank).drop(list(drop)).to_dicts()


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


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _ms(ns: float | int | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.2f}"


def render(result: Analysis, console: Any, *, title: str = "") -> None:
    """A readable summary on a rich console."""
    from rich.table import Table

    console.print(
        f"[bold]di analyze[/bold] {title}  window: {result.window}  steps: {result.steps.height and result.steps.get_column('step').n_unique()}"
    )
    if result.breakdown is not None:
        t = Table(title="Temporal breakdown (% of each scope's span; states exclusive, never summed overlaps)")
        for c in ("rank", "scope", "step", "span ms", *(STATE_LABELS.get(s, s) for s in STATES)):
            t.add_column(c, justify="right")
        wide = result.breakdown.pivot(on="state", index=["rank", "scope", "step", "span_ns"], values="share").sort(
            "rank", "scope", "step", nulls_last=False
        )
        for r in wide.iter_rows(named=True):
            t.add_row(
                str(r["rank"]),
                r["scope"],
                "" if r["step"] is None else str(r["step"]),
                _ms(r["span_ns"]),
                *(_pct(r.get(s)) for s in STATES),
            )
        console.print(t)
    if result.overlap is not None:
        t = Table(title="Overlap (% of the first activity hidden behind the second; — = undefined)")
        pairs = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")
        for c in ("rank", "step", *pairs):
            t.add_column(c, justify="right")
        wide = result.overlap.pivot(on="pair", index=["rank", "step"], values="ratio").sort(
            "rank", "step", nulls_last=False
        )
        for r in wide.iter_rows(named=True):
            t.add_row(str(r["rank"]), "" if r["step"] is None else str(r["step"]), *(_pct(r.get(p)) for p in pairs))
        console.print(t)
    _render_imbalance(result, console)
    _render_waits(result, console)
    _render_path(result, console)
    _render_clocks(result, console)
    _render_step_clocks(result, console)


def _render_clocks(result: Analysis, console: Any, top: int = 10) -> None:
    """The longest kernels' GPU clock, power and temperature (where the trace has such series)."""
    from rich.table import Table

    clocks = result.gpu_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return
    t = Table(title="GPU clocks during the longest kernels (mean over their time; * = under 95 % of the GPU's highest)")
    for c in ("rank", "gpu", "kernel", "total ms", "SM MHz", "max MHz", "under ms", "W", "C"):
        t.add_column(c, justify="left" if c == "kernel" else "right")
    for r in clocks.drop_nulls("sm_clock_mhz").head(top).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            r["name"][:60],
            _ms(r["total_ns"]),
            *_clock_cells(r),
        )
    console.print(t)


def _clock_cells(r: dict) -> tuple[str, ...]:
    """SM MHz (``*``: throttled), max MHz, ms under 95 % of it, W and °C of a kernels' or a step's row."""
    return (
        f"{r['sm_clock_mhz']:,.0f}{'*' if r['throttled'] else ''}",
        f"{r['max_sm_clock_mhz']:,.0f}",
        _ms(r["below_ns"]),
        "" if r["power_w"] is None else f"{r['power_w']:,.0f}",
        "" if r["temperature_c"] is None else f"{r['temperature_c']:,.0f}",
    )


def _render_step_clocks(result: Analysis, console: Any, top: int = 12) -> None:
    """The slowest steps' GPU clock, power and temperature (where the trace has steps and such series)."""
    from rich.table import Table

    clocks = result.gpu_step_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return
    t = Table(title="GPU clocks during the slowest steps (mean over the step; * = under 95 % of the GPU's highest)")
    for c in ("rank", "step", "gpu", "step ms", "vs median %", "SM MHz", "max MHz", "under ms", "W", "C"):
        t.add_column(c, justify="right")
    rows = clocks.drop_nulls("sm_clock_mhz").sort(
        "duration_ns", "rank", "step", "device", descending=[True, False, False, False]
    )
    for r in rows.head(top).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            str(r["step"]),
            str(r["device"]),
            _ms(r["duration_ns"]),
            _pct(r["slowdown"]),
            *_clock_cells(r),
        )
    console.print(t)


def _render_imbalance(result: Analysis, console: Any) -> None:
    from rich.table import Table

    imb = result.imbalance
    if imb is None or not imb.height:
        return
    t = Table(
        title=f"Imbalance across ranks (work = {' + '.join(STATE_LABELS.get(w, w) for w in WORK)}; max rank of work = straggler)"
    )
    for c in ("step", "side", "state", "max ms", "mean ms", "max/mean-1 %", "(max-mean)/max %", "max rank"):
        t.add_column(c, justify="right")
    rows = imb.filter(pl.col("max_ns") > 0).sort("step", "side", "state", nulls_last=False)
    for r in rows.head(40).iter_rows(named=True):
        t.add_row(
            "all" if r["step"] is None else str(r["step"]),
            r["side"],
            r["state"],
            _ms(r["max_ns"]),
            _ms(r["mean_ns"]),
            _pct(r["imbalance"]),
            _pct(r["percent_imbalance"]),
            str(r["max_rank"]),
        )
    console.print(t)


def _render_waits(result: Analysis, console: Any) -> None:
    from rich.table import Table

    w = result.wait_states
    if w is None:
        return
    if not w.height:
        console.print("Wait states: none (no messages or collectives with waits in the window)")
        return
    t = Table(title="Wait states (Scalasca): time waited, and time caused to others")
    for c in ("rank", "kind", "waited ms", "caused ms"):
        t.add_column(c, justify="right")
    waited = w.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited"))
    caused = w.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused"))
    both = waited.join(caused, on=["rank", "kind"], how="full", coalesce=True).fill_null(0).sort("rank", "kind")
    for r in both.iter_rows(named=True):
        t.add_row(str(r["rank"]), r["kind"], _ms(r["waited"]), _ms(r["caused"]))
    console.print(t)


def _render_path(result: Analysis, console: Any) -> None:
    from rich.table import Table

    cp = result.critical_path
    if not cp:
        return
    s = cp["summary"]
    console.print(
        f"[bold]Critical path[/bold]: {_ms(s['length_ns'])} ms of a {_ms(s['window_span_ns'])} ms window, "
        f"{s['events']:,} events on it"
        + (f", {s['dropped_edges']:,} edges dropped (pointing back in time)" if s["dropped_edges"] else "")
    )
    for key, label in (("by_category", "category"), ("by_rank", "rank"), ("by_name", "name")):
        t = Table(title=f"Critical path by {label}")
        t.add_column(label)
        t.add_column("ms", justify="right")
        t.add_column("%", justify="right")
        for r in cp[key].head(8).iter_rows(named=True):
            t.add_row(
                str(r[key.removeprefix("by_")] if key != "by_category" else r["category"]),
                _ms(r["contrib_ns"]),
                _pct(r["share"]),
            )
        console.print(t)
