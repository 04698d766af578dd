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


def check_ranks(parts: Sequence[Trace], names: Sequence[str] | None = None) -> None:
    """Refuse two parts that claim one rank; ``names``: the files the parts were read from (default: each part's
    first source, which for a file di wrote is the file it came from).

    Raises:
        FormatError: naming the second part's file, the rank, and the file that has it already.
    """
    seen: dict[int, str] = {}
    for i, t in enumerate(parts):
        srcs = t.meta.get("sources") or [{"path": "?", "rank_source": "?"}]
        if all(str(s.get("format", "")).startswith("log:") for s in srcs):
            continue  # a text log (NCCL, training, nvidia-smi) describes the ranks that the job's traces hold too
        name = str(names[i]) if names is not None else srcs[0]["path"]
        for r in t.ranks:
            if r in seen:
                raise FormatError(
                    name,
                    f"rank {r} is also in {seen[r]} ({srcs[0].get('rank_source')}); give each file its rank with --ranks",
                )
            seen[r] = name


def assign_instances(collectives: pl.DataFrame) -> pl.DataFrame:
    """``instance`` = one id per (comm, seq) across ranks: the n-th call of every
    member on one communicator is the same collective."""
    if not collectives.height:
        return collectives
    return collectives.with_columns(
        pl.struct(pl.col("comm").fill_null(""), "seq").rank("dense").cast(pl.Int64).sub(1).alias("instance")
    )


def merged_meta(metas: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The meta of a job of parts with these metas. One part keeps its own (clock sync and offsets, command, a
    recording's capture); several: their sources and warnings in order, the largest world size, and their clock
    when they all have one and the same (else one of their domain, or ``relative``, without a sync). What the
    tables give (:func:`di.trace.refresh_meta`) is recomputed by :meth:`Trace.build`."""
    if len(metas) == 1:
        return dict(metas[0])
    clocks = [m.get("clock") for m in metas]
    domains = {(c or {}).get("domain", "relative") for c in clocks}
    same = clocks[0] is not None and all(c == clocks[0] for c in clocks)
    worlds = [m.get("world_size") for m in metas if m.get("world_size")]
    return {
        "clock": clocks[0]
        if same
        else {"unit": "ns", "domain": domains.pop() if len(domains) == 1 else "relative", "sync": None},
        "sources": [s for m in metas for s in m.get("sources", [])],
        "warnings": [w for m in metas for w in m.get("warnings", [])],
        "world_size": max(worlds) if worlds else None,
    }


def stack(frames: Sequence[pl.DataFrame], *, rechunk: bool = True) -> pl.DataFrame:
    """The rows of parts of one table, one after another. The schema is a floor: a part may carry columns of its
    own (Nsight's ``gpu_model`` on locations, a scheduler's columns on jobs), null in the parts without them."""
    same = all(f.columns == frames[0].columns for f in frames)
    return pl.concat(frames, how="vertical_relaxed" if same else "diagonal_relaxed", rechunk=rechunk)


def merge(parts: Sequence[Trace]) -> Trace:
    """One job trace from per-rank (or per-file) traces.

    Raises:
        FormatError: two parts claim the same rank (text logs excepted: they sit beside the traces of their ranks).
    """
    check_ranks(parts)
    tables: dict[str, list[pl.DataFrame]] = {k: [] for k in TABLES}
    n_sources = 0
    ev_off = loc_off = ser_off = 0
    for t in parts:
        tables["locations"].append(
            _shift(t.locations, ["loc"], loc_off).with_columns((pl.col("source") + n_sources).cast(pl.Int32))
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
        n_sources += len(t.meta.get("sources", []))
        ev_off += t.events.height
        loc_off += t.locations.height
        ser_off += t.series.height
    meta = merged_meta([t.meta for t in parts])
    merged = {k: stack(v) for k, v in tables.items()}
    merged["collectives"] = assign_instances(merged["collectives"])
    merged["comms"] = merged["comms"].unique(maintain_order=True)  # two logs of one job may print the same init
    merged["comm_links"] = merged["comm_links"].unique(maintain_order=True)
    return Trace.build(meta=meta, **merged)
