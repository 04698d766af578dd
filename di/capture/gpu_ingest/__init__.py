"""Ingest of GPU capture: CUPTI activity files and torch.profiler traces -> the job trace.

Per process that ran under ``di record --gpu`` (:mod:`di.capture.cupti`):

* kernels, memcpy, memset and synchronization records become events on one
  ``gpu_stream`` timeline per (device, stream), cat ``kernel``/``memcpy``/
  ``memset``/``sync``, with ``bytes``, ``corr`` and args (grid, block, copy kind,
  device, context, stream);
* runtime and driver API calls become ``cuda_api`` events on one timeline per
  calling thread ("CUDA API"), NVTX ranges (start/end markers paired by id)
  ``user`` events and NVTX marks instants on the same thread timeline;
* an API call and the GPU activity with its correlation id (same process)
  become a ``flows`` row of kind ``launch``.

CUPTI times are CLOCK_REALTIME-based ns: ``t - (cupti - monotonic)`` with the
process header's CUPTI clock pair (else its CLOCK_REALTIME pair) gives CLOCK_MONOTONIC ns, which the rank's clock map
(:mod:`di.capture.clock`) takes to the job clock like the shims' records.

Kineto traces that the program exported (header ``kineto_traces``) or wrote
into ``raw/kineto/`` load through :func:`di.load`; their rank becomes the
process's recorded rank and, when their clock is Unix-epoch ns, they are
shifted like CUPTI times (see :func:`kineto_parts`).

The package: :mod:`~di.capture.gpu_ingest.records` (a process's raw files, NVTX marker
pairs, devices of synchronizations), :mod:`~di.capture.gpu_ingest.events` (a process's
events), :mod:`~di.capture.gpu_ingest.timelines` (their locations, launch flows) and
:mod:`~di.capture.gpu_ingest.parts` (appending timelines of one's own to a trace).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di import schema
from di.capture import clock
from di.capture.gpu_ingest.events import CAT_OF, SRC_CAT, process_events
from di.capture.gpu_ingest.parts import append_part, sorted_with_nesting
from di.capture.gpu_ingest.records import HEADER, KINETO_DIR, devices_from_contexts, read_process
from di.capture.gpu_ingest.timelines import launch_flows, timelines
from di.trace import CATS, Trace

__all__ = [
    "CAT_OF",
    "HEADER",
    "KINETO_DIR",
    "SRC_CAT",
    "add_gpu",
    "append_part",
    "devices_from_contexts",
    "launch_flows",
    "process_events",
    "read_process",
    "sorted_with_nesting",
]

Part = tuple[pl.DataFrame, pl.DataFrame]
"""One process's events (with ``pid``) and its locations rows."""


def _rank(header: dict[str, Any], ranks: dict[tuple[str, int], int], next_rank: int) -> tuple[int, int]:
    """The process's rank (its shims', else its launcher's, else a new one) and the next new rank."""
    rank = ranks.get((header["host"], int(header["pid"])), header.get("env_rank", -1))
    if rank is None or rank < 0:
        rank, next_rank = next_rank, next_rank + 1
    return rank, next_rank


def _skews(c: dict[str, Any]) -> tuple[int, int]:
    """CLOCK_REALTIME - CLOCK_MONOTONIC of the process, and CUPTI's clock - CLOCK_MONOTONIC."""
    skew = int(c["realtime_ns"]) - int(c["monotonic_ns"])  # for Kineto's Unix-epoch times too
    cupti_skew = int(c["cupti_ns"]) - int(c["cupti_monotonic_ns"]) if "cupti_ns" in c else skew
    return skew, cupti_skew


def _to_job(cmap: clock.ClockMap, cupti_skew: int) -> Callable[[Any], np.ndarray]:
    """CUPTI ns -> job-clock ns of one process."""
    return lambda t, s=cupti_skew, m=cmap: m.apply(np.asarray(t, np.int64) - s)


def _cupti_part(
    path: Path, header: dict[str, Any], events: tuple[pl.DataFrame, int], rank: int, loc0: int, source: int
) -> tuple[Part, dict[str, Any]]:
    """One process's events on their timelines (locs from ``loc0``) and its meta ``sources`` entry."""
    host, pid = header["host"], int(header["pid"])
    df, unpaired = events
    df, locs = timelines(df, rank, host, pid, loc0, source)
    entry = {
        "path": f"raw/{path.name}",
        "format": "di-capture-cupti",
        "rank": rank,
        "rank_source": "metadata",
        "events": df.height,
        "dropped": {"NVTX range starts without an end": unpaired} if unpaired else {},
        "info": {"pid": pid, "host": host, "state": header.get("state")},
    }
    return (df.with_columns(pid=pl.lit(pid, pl.Int64)), locs), entry


def _with_parts(trace: Trace, parts: list[Part], sources: list[dict[str, Any]], warnings: list[str]) -> Trace:
    """``trace`` with the processes' timelines, their launch flows, sources and warnings."""
    if parts:
        events = sorted_with_nesting(pl.concat([p[0] for p in parts], how="vertical_relaxed"))
        flows = launch_flows(events)
        events = events.select(list(schema.polars_schema("events"))).with_columns(
            pl.col("cat").cast(pl.Enum(list(CATS)))
        )
        return append_part(
            trace,
            pl.concat([p[1] for p in parts], how="diagonal_relaxed"),
            events,
            flows,
            sources=sources,
            warnings=warnings,
        )
    if warnings:
        return trace.with_meta({**trace.meta, "warnings": [*trace.meta.get("warnings", []), *warnings]})
    return trace


def add_gpu(trace: Trace, raw: Path, ranks: dict[tuple[str, int], int], maps: dict[int, clock.ClockMap]) -> Trace:
    """``trace`` with every process's CUPTI activity and torch.profiler traces under ``raw`` added."""
    headers = sorted(p for p in raw.glob("cupti-*.json") if HEADER.match(p.name))
    if not headers and not (raw / KINETO_DIR).is_dir():
        return trace
    notes: dict[str, int] = {}
    parts: list[Part] = []
    sources: list[dict[str, Any]] = []
    infos: list[tuple[dict[str, Any], int, int, clock.ClockMap]] = []
    loc0, src0 = trace.locations.height, len(trace.meta.get("sources", []))
    next_rank = max(trace.ranks, default=-1) + 1
    epoch = next(iter(maps.values())).epoch_ns if maps else 0  # every rank's map shares the job clock's epoch
    for path in headers:
        header, recs, strings = read_process(raw, path)
        for note in header.get("notes", []):
            notes[note] = notes.get(note, 0) + 1
        rank, next_rank = _rank(header, ranks, next_rank)
        # a rank no shim recorded: the job's epoch, no sync
        cmap = maps.get(rank) or clock.ClockMap(0, 0, 0.0, epoch, 0, 0)
        skew, cupti_skew = _skews(header["clock"])
        infos.append((header, rank, skew, cmap))
        if not recs.size:
            continue
        events = process_events(recs, strings, _to_job(cmap, cupti_skew))
        part, entry = _cupti_part(path, header, events, rank, loc0, src0 + len(sources))
        loc0 += part[1].height
        parts.append(part)
        sources.append(entry)
    warnings = [f"{note}" + (f" ({n} processes)" if n > 1 else "") for note, n in notes.items()]
    trace = _with_parts(trace, parts, sources, warnings)
    from di.capture.kineto_merge import merge_kineto

    return merge_kineto(trace, raw, infos)
