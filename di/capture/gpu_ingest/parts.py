"""Adding timelines of one's own to a trace (CUPTI, Kineto and NCCL parts of a recording).

A part's events are sorted by (loc, start, longest first) and nested within themselves
(:func:`sorted_with_nesting`); :func:`append_part` appends its locations, events, flows and
collectives after the trace's, shifting the part's row references (``parent``, flows'
``src``/``dst``, collectives' ``event``) by the trace's event count, and adds its sources
and warnings to the meta.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.trace import Trace


def append_part(
    trace: Trace,
    locations: pl.DataFrame,
    events: pl.DataFrame,
    flows: pl.DataFrame | None = None,
    collectives: pl.DataFrame | None = None,
    sources: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> Trace:
    """``trace`` plus timelines of its own (``loc`` >= trace's, events sorted within, row refs local)."""
    shift = trace.events.height
    tables = trace.tables()
    tables["locations"] = pl.concat([trace.locations, locations], how="diagonal_relaxed")
    ev = events.with_columns(parent=pl.col("parent") + shift) if "parent" in events.columns else events
    tables["events"] = pl.concat([trace.events, ev], how="diagonal_relaxed")
    if flows is not None and flows.height:
        tables["flows"] = pl.concat(
            [trace.flows, flows.with_columns(pl.col("src") + shift, pl.col("dst") + shift)], how="diagonal_relaxed"
        )
    if collectives is not None and collectives.height:
        tables["collectives"] = pl.concat(
            [trace.collectives, collectives.with_columns(pl.col("event") + shift)], how="diagonal_relaxed"
        )
    meta = dict(trace.meta)
    meta["sources"] = [*meta.get("sources", []), *(sources or [])]
    meta["warnings"] = [*meta.get("warnings", []), *(warnings or [])]
    return Trace.build(meta=meta, **tables)


def sorted_with_nesting(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` sorted by (loc, start, longest first) with ``depth`` and ``parent`` (null for none)."""
    from di.nesting import nest

    df = df.sort(["loc", "start_ns", pl.col("end_ns")], descending=[False, False, True], maintain_order=True)
    depth, parent = nest(
        df.get_column("loc").to_numpy(), df.get_column("start_ns").to_numpy(), df.get_column("end_ns").to_numpy()
    )
    return df.with_columns(depth=pl.Series(depth), parent=pl.Series(parent)).with_columns(
        parent=pl.when(pl.col("parent") >= 0).then(pl.col("parent"))
    )
