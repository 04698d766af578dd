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
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di import schema

from di.capture import clock, shard
from di.capture.cupti_records import (
    COPY_KINDS,
    GPU_RECORD,
    K_DRIVER,
    K_KERNEL,
    K_MARKER,
    K_MEMCPY,
    K_MEMSET,
    K_RUNTIME,
    K_SYNC,
    MARKER_END,
    MARKER_INSTANT,
    MARKER_START,
    SYNC_TYPES,
)
from di.trace import CATS, Trace

HEADER = re.compile(r"^cupti-(.+)-(\d+)\.json$")
KINETO_DIR = "kineto"
CAT_OF = {
    K_KERNEL: "kernel",
    K_MEMCPY: "memcpy",
    K_MEMSET: "memset",
    K_SYNC: "sync",
    K_RUNTIME: "cuda_api",
    K_DRIVER: "cuda_api",
    K_MARKER: "user",
}
SRC_CAT = {
    K_KERNEL: "cupti_kernel",
    K_MEMCPY: "cupti_memcpy",
    K_MEMSET: "cupti_memset",
    K_SYNC: "cupti_sync",
    K_RUNTIME: "cupti_runtime",
    K_DRIVER: "cupti_driver",
    K_MARKER: "nvtx",
}


def read_process(raw: Path, header_path: Path) -> tuple[dict[str, Any], np.ndarray, dict[int, str]]:
    """One process's header, records and strings (a cut-short last record is ignored)."""
    header = json.loads(header_path.read_text())
    stem = header_path.with_suffix("")
    binp = stem.with_suffix(".bin")
    recs = (
        np.fromfile(binp, GPU_RECORD, count=binp.stat().st_size // GPU_RECORD.itemsize)
        if binp.is_file()
        else np.empty(0, GPU_RECORD)
    )
    return header, recs, shard.read_strings(stem.with_suffix(".str"))


def _pair_markers(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """NVTX markers -> (records as events: start indices, end times, instant flags), dropped count.

    A range's start and end records share ``aux`` (the marker id); the name is on the start.
    """
    m = np.flatnonzero(recs["kind"] == K_MARKER)
    flags = recs["sub"][m].astype(np.int64)
    inst = m[(flags & MARKER_INSTANT) != 0]
    starts = m[(flags & MARKER_START) != 0]
    ends = m[(flags & MARKER_END) != 0]
    order = np.argsort(recs["aux"][ends], kind="stable")
    ends_sorted = ends[order]
    k = np.searchsorted(recs["aux"][ends_sorted], recs["aux"][starts])
    found = (
        (k < ends_sorted.size)
        & (recs["aux"][ends_sorted[np.minimum(k, max(ends_sorted.size - 1, 0))]] == recs["aux"][starts])
        if ends_sorted.size
        else np.zeros(starts.size, bool)
    )
    paired = starts[found]
    end_t = recs["t0"][ends_sorted[k[found]]]
    idx = np.concatenate([paired, inst])
    t1 = np.concatenate([end_t, recs["t0"][inst]])
    instant = np.concatenate([np.zeros(paired.size, bool), np.ones(inst.size, bool)])
    return idx, t1, instant, np.ones(idx.size, bool), int(starts.size - paired.size)


def devices_from_contexts(recs: np.ndarray) -> np.ndarray:
    """Each record's device, where a record without one (synchronization: device -1) takes the device
    of the kernels/copies of its context in the same process (0 when its context ran none)."""
    device = recs["device"].copy()
    unknown = device < 0
    if unknown.any():
        known = ~unknown & np.isin(recs["kind"], [K_KERNEL, K_MEMCPY, K_MEMSET])
        ctx, first = np.unique(recs["context"][known], return_index=True)
        dev = device[known][first]
        k = np.searchsorted(ctx, recs["context"][unknown])
        hit = (
            (k < ctx.size) & (ctx[np.minimum(k, max(ctx.size - 1, 0))] == recs["context"][unknown])
            if ctx.size
            else k < 0
        )
        device[unknown] = np.where(hit, dev[np.minimum(k, max(ctx.size - 1, 0))] if ctx.size else 0, 0)
    return device


def process_events(recs: np.ndarray, strings: dict[int, str], to_job: Any) -> tuple[pl.DataFrame, int]:
    """One process's records -> an events-like frame (with ``tl``: the timeline key) and the
    number of NVTX range starts without an end (dropped)."""
    recs = recs.copy()
    recs["device"] = devices_from_contexts(recs)
    kind = recs["kind"]
    act = np.flatnonzero(np.isin(kind, [K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC, K_RUNTIME, K_DRIVER]))
    midx, mend, minst, _, unpaired = _pair_markers(recs)
    idx = np.concatenate([act, midx])
    t1 = np.concatenate([recs["t1"][act], mend])
    instant = np.concatenate([np.zeros(act.size, bool), minst])
    r = recs[idx]
    k = r["kind"].astype(np.int64)
    on_gpu = np.isin(k, [K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC])
    top = max(strings, default=0)
    names = pl.Series("name", [None, *[strings.get(i) for i in range(1, top + 1)], None], dtype=pl.String)
    name = names.gather(np.where((r["name"] > 0) & (r["name"] <= top), r["name"], top + 1).astype(np.int64))
    kind_text = (
        pl.Series([""] * 8).scatter([K_MEMCPY], ["memcpy"]).scatter([K_MEMSET], ["memset"]).scatter([K_SYNC], ["sync"])
    )
    copy = pl.Series("copy", [COPY_KINDS.get(i, "unknown") for i in range(256)]).gather(r["sub"].astype(np.int64))
    sync = pl.Series("sync", [SYNC_TYPES.get(i, "unknown") for i in range(256)]).gather(r["sub"].astype(np.int64))
    df = pl.DataFrame(
        {
            "kind": k,
            "gpu": on_gpu,
            "device": r["device"],
            "stream": r["stream"],
            "context": r["context"],
            "tid": r["tid"],
            "start_ns": to_job(r["t0"]),
            "end_ns": to_job(t1),
            "corr": r["corr"],
            "bytes": r["bytes"],
            "instant": instant,
            "name": name,
            "copy": copy,
            "sync": sync,
            "kind_text": kind_text.gather(k),
            "gx": r["grid"][:, 0],
            "gy": r["grid"][:, 1],
            "gz": r["grid"][:, 2],
            "bx": r["block"][:, 0],
            "by": r["block"][:, 1],
            "bz": r["block"][:, 2],
        }
    )
    c = pl.col
    gpu_args = pl.concat_str(
        pl.lit('{"device":'),
        c("device").cast(pl.String),
        pl.lit(',"context":'),
        c("context").cast(pl.String),
        pl.lit(',"stream":'),
        c("stream").cast(pl.String),
        pl.lit(',"correlation":'),
        c("corr").cast(pl.String),
    )
    extra = (
        pl.when(c("kind") == K_KERNEL)
        .then(
            pl.concat_str(
                pl.lit(',"grid":['),
                c("gx").cast(pl.String),
                pl.lit(","),
                c("gy").cast(pl.String),
                pl.lit(","),
                c("gz").cast(pl.String),
                pl.lit('],"block":['),
                c("bx").cast(pl.String),
                pl.lit(","),
                c("by").cast(pl.String),
                pl.lit(","),
                c("bz").cast(pl.String),
                pl.lit("]}"),
            )
        )
        .when(c("kind") == K_MEMCPY)
        .then(pl.concat_str(pl.lit(',"copy_kind":"'), c("copy"), pl.lit('"}')))
        .when(c("kind") == K_SYNC)
        .then(pl.concat_str(pl.lit(',"sync_type":"'), c("sync"), pl.lit('"}')))
        .otherwise(pl.lit("}"))
    )
    api_args = pl.concat_str(pl.lit('{"correlation":'), c("corr").cast(pl.String), pl.lit("}"))
    df = df.with_columns(
        name=pl.when(c("kind") == K_MEMCPY)
        .then(pl.concat_str(pl.lit("Memcpy "), c("copy")))
        .when(c("kind") == K_MEMSET)
        .then(pl.lit("Memset"))
        .when(c("kind") == K_SYNC)
        .then(c("sync"))
        .otherwise(c("name").fill_null("?")),
        args=pl.when(c("gpu"))
        .then(pl.concat_str(gpu_args, extra))
        .when(c("kind") == K_MARKER)
        .then(None)
        .otherwise(api_args),
        corr=pl.when(c("corr") > 0).then(c("corr")),
        bytes=pl.when(c("kind").is_in([K_MEMCPY, K_MEMSET])).then(c("bytes")),
        cat=pl.Series([CAT_OF.get(i, "other") for i in range(8)]).gather(k),
        src_cat=pl.Series([SRC_CAT.get(i, "cupti") for i in range(8)]).gather(k),
    )
    return df.drop("copy", "sync", "kind_text", "gx", "gy", "gz", "bx", "by", "bz"), unpaired


def _timelines(
    df: pl.DataFrame, rank: int, host: str, pid: int, loc0: int, source: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Give each event its loc (per GPU stream, per API thread); the new locations rows."""
    keys = (
        df.select("gpu", "device", "stream", "tid")
        .with_columns(
            device=pl.when(pl.col("gpu")).then(pl.col("device")).otherwise(-1),
            stream=pl.when(pl.col("gpu")).then(pl.col("stream")).otherwise(-1),
            tid=pl.when(pl.col("gpu")).then(0).otherwise(pl.col("tid")),
        )
        .unique()
        .sort("gpu", "device", "stream", "tid", descending=[True, False, False, False])
        .with_row_index("loc", offset=loc0)
    )
    df = df.with_columns(
        device=pl.when(pl.col("gpu")).then(pl.col("device")).otherwise(-1),
        stream=pl.when(pl.col("gpu")).then(pl.col("stream")).otherwise(-1),
        tl_tid=pl.when(pl.col("gpu")).then(0).otherwise(pl.col("tid")),
    )
    df = df.join(keys.rename({"tid": "tl_tid"}), on=["gpu", "device", "stream", "tl_tid"], how="left").drop("tl_tid")
    locs = keys.select(
        "loc",
        rank=pl.lit(rank, pl.Int32),
        host=pl.lit(host),
        pid=pl.lit(pid, pl.Int64),
        tid=pl.when(pl.col("gpu")).then(None).otherwise(pl.col("tid")),
        kind=pl.when(pl.col("gpu")).then(pl.lit("gpu_stream")).otherwise(pl.lit("cpu_thread")),
        device=pl.when(pl.col("gpu")).then(pl.col("device")),
        stream=pl.when(pl.col("gpu") & (pl.col("stream") >= 0)).then(pl.col("stream")),
        name=pl.when(pl.col("gpu") & (pl.col("stream") < 0))
        .then(pl.format("GPU {} device-wide sync", "device"))
        .when(pl.col("gpu"))
        .then(pl.format("GPU {} stream {}", "device", "stream"))
        .otherwise(pl.format("CUDA API thread {}", "tid")),
        process=pl.lit(f"rank {rank}"),
        source=pl.lit(source, pl.Int32),
    )
    return df, locs


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
    from di.nesting import nest

    df = df.sort(["loc", "start_ns", pl.col("end_ns")], descending=[False, False, True], maintain_order=True)
    depth, parent = nest(
        df.get_column("loc").to_numpy(), df.get_column("start_ns").to_numpy(), df.get_column("end_ns").to_numpy()
    )
    return df.with_columns(depth=pl.Series(depth), parent=pl.Series(parent)).with_columns(
        parent=pl.when(pl.col("parent") >= 0).then(pl.col("parent"))
    )


def launch_flows(events: pl.DataFrame) -> pl.DataFrame:
    """API call -> GPU work (kernel, copy, memset) with the same correlation id in the same process (rows
    local). A synchronization record shares its API call's id too, but that call waits, it launches nothing.
    Where a runtime call and the driver call inside it share an id, the outer one (least depth) launches."""
    rows = (
        events.select("pid", "corr", "gpu", "cat", "depth").with_row_index("row").filter(pl.col("corr").is_not_null())
    )
    api = rows.filter(~pl.col("gpu")).sort("depth", "row").unique(["pid", "corr"], keep="first", maintain_order=True)
    act = rows.filter(pl.col("gpu") & (pl.col("cat") != "sync"))
    pairs = api.join(act, on=["pid", "corr"], suffix="_gpu")
    return pairs.select(
        src=pl.col("row").cast(pl.Int64),
        dst=pl.col("row_gpu").cast(pl.Int64),
        kind=pl.lit("launch"),
        id=pl.col("corr"),
        src_cat=pl.lit(None, pl.String),
    )


def add_gpu(trace: Trace, raw: Path, ranks: dict[tuple[str, int], int], maps: dict[int, clock.ClockMap]) -> Trace:
    """``trace`` with every process's CUPTI activity and torch.profiler traces under ``raw`` added."""
    headers = sorted(p for p in raw.glob("cupti-*.json") if HEADER.match(p.name))
    if not headers and not (raw / KINETO_DIR).is_dir():
        return trace
    notes: dict[str, int] = {}
    parts, sources, infos = [], [], []
    loc0, src0 = trace.locations.height, len(trace.meta.get("sources", []))
    next_rank = max(trace.ranks, default=-1) + 1
    epoch = next(iter(maps.values())).epoch_ns if maps else 0  # every rank's map shares the job clock's epoch
    for path in headers:
        header, recs, strings = read_process(raw, path)
        for note in header.get("notes", []):
            notes[note] = notes.get(note, 0) + 1
        host, pid = header["host"], int(header["pid"])
        rank = ranks.get((host, pid), header.get("env_rank", -1))
        if rank is None or rank < 0:
            rank, next_rank = next_rank, next_rank + 1
        cmap = maps.get(rank) or clock.ClockMap(
            0, 0, 0.0, epoch, 0, 0
        )  # a rank no shim recorded: the job's epoch, no sync
        c = header["clock"]
        skew = int(c["realtime_ns"]) - int(c["monotonic_ns"])  # for Kineto's Unix-epoch times too
        infos.append((header, rank, skew, cmap))
        cupti_skew = int(c["cupti_ns"]) - int(c["cupti_monotonic_ns"]) if "cupti_ns" in c else skew
        if not recs.size:
            continue
        df, unpaired = process_events(
            recs, strings, lambda t, s=cupti_skew, m=cmap: m.apply(np.asarray(t, np.int64) - s)
        )
        df, locs = _timelines(df, rank, host, pid, loc0, src0 + len(sources))
        loc0 += locs.height
        parts.append((df.with_columns(pid=pl.lit(pid, pl.Int64)), locs))
        sources.append(
            {
                "path": f"raw/{path.name}",
                "format": "di-capture-cupti",
                "rank": rank,
                "rank_source": "metadata",
                "events": df.height,
                "dropped": {"NVTX range starts without an end": unpaired} if unpaired else {},
                "info": {"pid": pid, "host": host, "state": header.get("state")},
            }
        )
    warnings = [f"{note}" + (f" ({n} processes)" if n > 1 else "") for note, n in notes.items()]
    if parts:
        events = sorted_with_nesting(pl.concat([p[0] for p in parts], how="vertical_relaxed"))
        flows = launch_flows(events)
        events = events.select(list(schema.polars_schema("events"))).with_columns(
            pl.col("cat").cast(pl.Enum(list(CATS)))
        )
        trace = append_part(
            trace,
            pl.concat([p[1] for p in parts], how="diagonal_relaxed"),
            events,
            flows,
            sources=sources,
            warnings=warnings,
        )
    elif warnings:
        trace = trace.with_meta({**trace.meta, "warnings": [*trace.meta.get("warnings", []), *warnings]})
    from di.capture.kineto_merge import merge_kineto

    return merge_kineto(trace, raw, infos)
