"""The JSON document of a :class:`di.viewers.diff.Diff` (``schemas/diff/v1/diff.schema.json``).

Rows of the named tables are sorted by ``|delta_ns|`` (largest change first);
``in_a``/``in_b`` are left out (``status`` says the same).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.collectives import ALGBW_FORMULA, BUSBW_FACTORS, BUSBW_FORMULA
from di.viewers.diff.results import STEP_STATS

JSON_MARK = b'"format": "di-diff"'
"""How di recognises a diff JSON file it wrote (the document's first member, as ``json.dumps(indent=1)`` writes it)."""
CP_NAMES_IN_JSON = 50
"""Critical-path names listed (largest |delta| first)."""


def json_schema() -> dict[str, Any]:
    """The diff result schema (v1)."""
    from di.schema import document_schema

    return document_schema("diff")


def to_json(d: Diff, *, inputs: tuple[str, str]) -> dict[str, Any]:
    """The JSON document of ``d``; ``inputs``: how A and B were named."""
    from di import __version__

    steps: dict[str, Any] = {}
    for side in "ab":
        stats = {k: d.step_stat(side, k) for k in STEP_STATS}
        stats["times_ns"] = d.step_times.filter(pl.col("run") == side).select("step", "label", "time_ns").to_dicts()
        steps[side] = stats
    steps["delta"] = {k: d.step_stat("delta", k) for k in ("mean_ns", "p50_ns", "p90_ns")}
    steps["delta"]["ratio"] = d.step_stat("ratio", "mean_ns")
    return {
        "format": "di-diff",
        "schema_version": 1,
        "di_version": __version__,
        "inputs": {"a": inputs[0], "b": inputs[1]},
        "window": d.window,
        "steps": steps,
        "breakdown": _rows(d.breakdown),
        "phases": _rows(d.phases),
        "gpu_idle": _rows(d.gpu_idle),
        "memory": _rows(d.memory),
        "flops": _rows(d.flops),
        "overlap": _rows(d.overlap),
        "critical_path": {
            **d.critical_path,
            "by_category": _rows(d.cp_by_category),
            "by_name": _rows(d.cp_by_name.head(CP_NAMES_IN_JSON)),
        },
        "kernels": _rows(d.kernels),
        "kernel_stacks": _rows(d.kernel_stacks),
        "ops": _rows(d.ops),
        "collectives": _rows(d.collectives),
        "counters": _rows(d.counters),
        "communicators": _rows(d.communicators),
        "bandwidth": {"algbw": ALGBW_FORMULA, "busbw": BUSBW_FORMULA, "factors": dict(BUSBW_FACTORS)},
        "notes": list(d.notes),
    }


def validate(doc: dict[str, Any]) -> None:
    """Check a diff document against the schema (:mod:`di.document_check`).

    Raises:
        SchemaError: naming where it fails.
    """
    from di.document_check import validate_document

    validate_document(doc, "diff", "diff JSON")


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    drop = [c for c in ("in_a", "in_b") if c in df.columns]
    out = df.drop(drop)
    enums = [c for c, t in out.schema.items() if isinstance(t, (pl.Enum, pl.Categorical))]
    return out.with_columns(pl.col(enums).cast(pl.String)).to_dicts() if enums else out.to_dicts()
