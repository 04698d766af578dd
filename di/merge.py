"""Merging per-rank traces into one job trace.

Row references (``parent``, ``send``, ``recv``, ``send_done``, ``recv_post``, ``event``, ``src``, ``dst``)
are shifted by the events that come before each part; ``loc``, ``series`` and
``source`` ids likewise, so timelines of different ranks never collide.
Collective instances are matched across ranks by (communicator, sequence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from di.errors import FormatError
from di.schema import TABLES
from di.trace import Trace


def _shift(df: pl.DataFrame, cols: Sequence[str], by: int) -> pl.DataFrame:
    return df.with_columns([(pl.col(c) + by).cast(df.schema[c]) for c in cols if c in df.columns]) if by else df


def _check_ranks(parts: Sequence[Trace]) -> None:
    seen: dict[int, str] = {}
    for t in parts:
        srcs = t.meta.get("sources") or [{"path": "?", "rank_source": "?"}]
        if all(str(s.get("format", "")).startswith("log:") for s in srcs):
            continue  # a text log (NCCL, training, nvidia-smi) describes the ranks that the job's traces hold too
        for r in t.ranks:
            if r in seen:
                raise FormatError(
                    srcs[0]["path"],
                    f"rank {r} is also in {seen[r]} ({srcs[0].get('rank_source')}); give each file its rank with --ranks",
                )
            seen[r] = srcs[0]["path"]


def assign_instances(collectives: pl.DataFrame) -> pl.DataFrame:
    """``instance`` = one id per (comm, seq) across ranks: the n-th call of every
    member on one communicator is the same collective."""
    if not collectives.height:
        return collectives
    return collectives.with_columns(
        pl.struct(pl.col("comm").fill_null(""), "seq").rank("dense").cast(pl.Int64).sub(1).alias("instance")
    )


def _merged_meta(parts: Sequence[Trace], sources: list[dict[str, Any]], warnings: list[str]) -> dict[str, Any]:
    """The meta of a job of several parts: their sources and warnings in order, the largest world size, and their
    clock when they all have one and the same (else one of their domain, or ``relative``, without a sync)."""
    clocks = [t.meta.get("clock") for t in parts]
    domains = {(c or {}).get("domain", "relative") for c in clocks}
    same = clocks[0] is not None and all(c == clocks[0] for c in clocks)
    worlds = [t.meta.get("world_size") for t in parts if t.meta.get("world_size")]
    return {
        "clock": clocks[0]
        if same
        else {"unit": "ns", "domain": domains.pop() if len(domains) == 1 else "relative", "sync": None},
        "sources": sources,
        "warnings": warnings,
        "world_size": max(worlds) if worlds else None,
    }


def merge(parts: Sequence[Trace]) -> Trace:
    """One job trace from per-rank (or per-file) traces.

    Raises:
        FormatError: two parts claim the same rank (text logs excepted: they sit beside the traces of their ranks).
    """
    _check_ranks(parts)
    tables: dict[str, list[pl.DataFrame]] = {k: [] for k in TABLES}
    sources: list[dict[str, Any]] = []
    warnings: list[str] = []
    ev_off = loc_off = ser_off = 0
    for t in parts:
        tables["locations"].append(
            _shift(t.locations, ["loc"], loc_off).with_columns((pl.col("source") + len(sources)).cast(pl.Int32))
        )
        tables["events"].append(_shift(_shift(t.events, ["loc"], loc_off), ["parent"], ev_off))
        tables["messages"].append(_shift(t.messages, ["send", "recv", "send_done", "recv_post"], ev_off))
        tables["collectives"].append(_shift(t.collectives, ["event"], ev_off))
        tables["flows"].append(_shift(t.flows, ["src", "dst"], ev_off))
        tables["series"].append(_shift(_shift(t.series, ["series"], ser_off), ["loc"], loc_off))
        tables["samples"].append(_shift(t.samples, ["series"], ser_off))
        tables["comms"].append(t.comms)
        tables["comm_links"].append(t.comm_links)
        tables["io_files"].append(t.io_files)
        tables["jobs"].append(t.jobs)
        sources.extend(t.meta.get("sources", []))
        warnings.extend(t.meta.get("warnings", []))
        ev_off += t.events.height
        loc_off += t.locations.height
        ser_off += t.series.height
    meta = dict(parts[0].meta) if len(parts) == 1 else _merged_meta(parts, sources, warnings)
    # jobs: each log's table has the columns of its scheduler output (the schema is a floor)
    merged = {k: pl.concat(v, how="diagonal_relaxed" if k == "jobs" else "vertical_relaxed") for k, v in tables.items()}
    merged["collectives"] = assign_instances(merged["collectives"])
    merged["comms"] = merged["comms"].unique(maintain_order=True)  # two logs of one job may print the same init
    merged["comm_links"] = merged["comm_links"].unique(maintain_order=True)
    return Trace.build(meta=meta, **merged)
