"""NCCL records at ingest: what each call was and, from the profiler plugin, when it really ran.

The plugin (:file:`shim/nccl_profiler.c`) writes an op's CALL record when NCCL has
*enqueued* it (that event stays on the calling thread, as the LD_PRELOAD shim's does)
and one NCCL_WORK record per kernel channel or proxy op of it, which NCCL reports
while the GPU works. Per op with work records this adds:

* an event on the rank's ``NCCL kernels`` timeline (kind ``gpu_stream``) from the
  first work record's start to the last one's stop: the op's completion; same name
  and bytes as the enqueue, cat ``nccl``, src_cat ``nccl_kernel``, args ``algo``,
  ``proto``, ``channels``, ``gpu_ns`` (the longest kernel channel by the GPU timer)
  and ``enqueue_to_completion_ns`` (enqueue start to completion);
* a ``flows`` row of kind ``launch`` from the enqueue event to it;
* its ``collectives`` row (and a p2p op's ``messages`` row) points at it: ranks wait
  for each other inside the kernel, so wait states and the critical path read entry
  and exit there.

Every NCCL enqueue event (shim and plugin) gets ``count`` and ``datatype`` args (the
record's tag field holds the count: NCCL has no tags, so NCCL messages have none),
the plugin's also ``algo``/``proto``/``channels``; collectives rows get their ``dtype``. The trace meta says which NCCL path recorded
the job (``capture.nccl``). Columnar throughout: Python loops run over processes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.capture import shard
from di.capture.matching import Communicators, nccl_members
from di.trace import CATS, Trace

DATATYPES = [
    "ncclInt8",
    "ncclUint8",
    "ncclInt32",
    "ncclUint32",
    "ncclInt64",
    "ncclUint64",
    "ncclFloat16",
    "ncclFloat32",
    "ncclFloat64",
    "ncclBfloat16",
    "ncclFloat8e4m3",
    "ncclFloat8e5m2",
]
"""ncclDataType_t values, by value."""
WORK_KERNEL, WORK_PROXY = 0, 1  # NCCL_WORK record tag


def _strings_by_source(trace: Trace, procs: list[shard.ProcessShard]) -> list[dict[int, str]]:
    """Each source's per-process string table (sources made by ingest from shard processes)."""
    by_key = {(f"di-capture-{p.lib}", p.host, p.pid): p.strings for p in procs}
    return [
        by_key.get((s.get("format"), s.get("info", {}).get("host"), s.get("info", {}).get("pid")), {})
        for s in trace.meta.get("sources", [])
    ]


def _texts(source: np.ndarray, sid: np.ndarray, tables: list[dict[int, str]]) -> pl.Series:
    """String ids (< 2**32) of each row's source -> texts (null for 0 or unknown); a loop over distinct pairs only."""
    keys, inverse = np.unique((source.astype(np.int64) << 32) | sid.astype(np.int64), return_inverse=True)
    texts = [tables[k >> 32].get(k & 0xFFFFFFFF) if 0 <= k >> 32 < len(tables) else None for k in keys.tolist()]
    return pl.Series(texts, dtype=pl.String).gather(inverse.reshape(-1).astype(np.int64))


def nccl_meta(procs: list[shard.ProcessShard]) -> dict[str, Any] | None:
    """Which path recorded NCCL calls: per path, the processes that wrote records through it."""
    paths: dict[str, int] = {}
    apis = set()
    for p in procs:
        if p.lib in ("nccl", "nccl_plugin") and p.threads:
            path = "profiler_plugin" if p.lib == "nccl_plugin" else "preload_shim"
            paths[path] = paths.get(path, 0) + 1
            if p.header.get("profiler_api"):
                apis.add(int(p.header["profiler_api"]))
    if not paths:
        return None
    return {
        "path": next(iter(paths)) if len(paths) == 1 else "mixed",
        "processes": paths,
        "profiler_api": sorted(apis) or None,
    }


def _ops(cols: dict[str, np.ndarray], row_of: np.ndarray, tables: list[dict[int, str]]) -> pl.DataFrame:
    """Every NCCL call (shim and plugin: CALL records of nccl ops); the plugin's (``req`` > 0, the
    op's id) with algorithm, protocol, channels and their work aggregated (null without work)."""
    nccl_op = np.array([n.startswith("nccl") for n in shard.op_names()])
    kind, op = cols["kind"], cols["op"]
    c = np.flatnonzero((kind == shard.KIND_CALL) & nccl_op[op])
    aux2 = cols["aux2"][c].astype(np.uint64)
    plugin = cols["req"][c] > 0
    comms = Communicators(nccl_members(cols))
    ops = pl.DataFrame(
        {
            "peer": comms.world_peer(cols["comm"][c], cols["peer"][c]),
            "comm": comms.names(cols["comm"][c]),
            "source": cols["source"][c],
            "req": cols["req"][c].astype(np.int64),
            "row": row_of[c],
            "rank": cols["rank"][c],
            "t0": cols["t0"][c],
            "dtype_id": cols["aux"][c],
            "count": cols["tag"][c].astype(np.int64),
            "plugin": plugin,
            "algo": _texts(cols["source"][c], (aux2 >> np.uint64(16)) & np.uint64(0xFFFF), tables),
            "proto": _texts(cols["source"][c], (aux2 >> np.uint64(32)) & np.uint64(0xFFFF), tables),
            "channels": pl.Series(((aux2 >> np.uint64(48)) & np.uint64(0xFF)).astype(np.int64)),
        }
    ).with_columns(channels=pl.when("plugin").then("channels"))
    w = np.flatnonzero(kind == shard.KIND_NCCL_WORK)
    work = pl.DataFrame(
        {
            "source": cols["source"][w],
            "req": cols["req"][w].astype(np.int64),
            "w0": cols["t0"][w],
            "w1": cols["t1"][w],
            "gpu_ns": cols["bytes"][w],
            "is_kernel": cols["tag"][w] == WORK_KERNEL,
        }
    )
    done = work.group_by("source", "req").agg(
        start_ns=pl.col("w0").min(),
        end_ns=pl.col("w1").max(),
        work=pl.len(),
        gpu_ns=pl.col("gpu_ns").filter(pl.col("is_kernel") & (pl.col("gpu_ns") >= 0)).max(),
    )
    return ops.join(done, on=["source", "req"], how="left")


def _kernel_events(ops: pl.DataFrame, trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Events on one ``NCCL kernels`` timeline per (rank, process), and those timelines."""
    from di.capture.gpu_ingest import sorted_with_nesting

    cpu = trace.events.select("name", "bytes", "loc").with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    ran = (
        ops.filter(pl.col("work").is_not_null())
        .join(cpu, on="row")
        .join(trace.locations.select("loc", "host", "pid"), on="loc")
    )
    keys = (
        ran.select("rank", "host", "pid", "source")
        .unique()
        .sort("rank", "pid")
        .with_row_index("new_loc", offset=trace.locations.height)
    )
    ran = ran.join(keys, on=["rank", "host", "pid", "source"])
    c = pl.col
    args = _json(
        [
            ("algo", c("algo"), True),
            ("proto", c("proto"), True),
            ("channels", c("channels"), False),
            ("gpu_ns", c("gpu_ns"), False),
            ("enqueue_to_completion_ns", c("end_ns") - c("t0"), False),
        ]
    )
    events = sorted_with_nesting(
        ran.select(
            loc=c("new_loc"),
            start_ns="start_ns",
            end_ns="end_ns",
            name="name",
            cat=pl.lit("nccl").cast(pl.Enum(list(CATS))),
            src_cat=pl.lit("nccl_kernel"),
            bytes="bytes",
            instant=pl.lit(False),
            args=args,
            cpu_row="row",
        )
    )
    locs = keys.select(
        loc="new_loc",
        rank="rank",
        host="host",
        pid="pid",
        kind=pl.lit("gpu_stream"),
        name=pl.lit("NCCL kernels"),
        process=pl.format("rank {}", "rank"),
        source="source",
    )
    return events, locs


def add_nccl_work(
    trace: Trace, cols: dict[str, np.ndarray], row_of: np.ndarray, procs: list[shard.ProcessShard]
) -> Trace:
    """``trace`` with its NCCL calls described and, from the profiler plugin, completed (see the module docstring)."""
    from di.capture.gpu_ingest import append_part

    meta = nccl_meta(procs)
    if meta is None:
        return trace
    trace = trace.with_meta({**trace.meta, "capture": {**trace.meta.get("capture", {}), "nccl": meta}})
    tables = _strings_by_source(trace, procs)
    ops = _ops(cols, row_of, tables) if cols else pl.DataFrame()
    if not ops.height:
        return trace
    warnings = []
    unfinished = ops.filter(pl.col("plugin") & pl.col("work").is_null()).height
    if unfinished:
        warnings.append(
            f"nccl: {unfinished} of {ops.filter('plugin').height} NCCL ops have no kernel-channel or proxy "
            "events (completion unknown): their collectives rows point at the enqueue"
        )
    events, locs = _kernel_events(ops, trace)
    moved = events.with_row_index("gpu_row", offset=trace.events.height).select(
        pl.col("cpu_row").alias("event"), pl.col("gpu_row").cast(pl.Int64)
    )
    trace = append_part(trace, locs, events.drop("cpu_row"), warnings=warnings)
    t = trace.tables()
    t["flows"] = pl.concat(
        [trace.flows, moved.select(src="event", dst="gpu_row", kind=pl.lit("launch"))], how="diagonal_relaxed"
    )
    info = _info(ops)
    coll = (
        trace.collectives.join(info.select("event", "datatype"), on="event", how="left")
        .with_columns(dtype=pl.coalesce("dtype", "datatype"))
        .drop("datatype")
    )
    t["collectives"] = _moved(coll, "event", moved)
    nccl_msg = pl.col("comm").str.starts_with("nccl:")
    t["messages"] = _moved(
        _moved(trace.messages.with_columns(tag=pl.when(~nccl_msg).then("tag")), "send", moved), "recv", moved
    )
    t["events"] = _enqueue_args(trace.events, info)
    return Trace.build(meta=trace.meta, **t)


def _moved(df: pl.DataFrame, column: str, moved: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its event references in ``column`` moved from enqueue events to their kernel events."""
    return (
        df.join(moved.rename({"event": column}), on=column, how="left", maintain_order="left")
        .with_columns(pl.coalesce("gpu_row", column).alias(column))
        .drop("gpu_row")
    )


def _enqueue_args(events: pl.DataFrame, info: pl.DataFrame) -> pl.DataFrame:
    """NCCL enqueue events' args, made afresh: comm, peer (world rank), ``count`` (the record's tag
    field: NCCL has no tags), the datatype, and for the plugin's, algorithm, protocol and channels."""
    c = pl.col
    args = info.select(
        _json(
            [
                ("comm", c("comm"), True),
                ("peer", pl.when(c("peer") >= 0).then("peer"), False),
                ("count", c("count"), False),
                ("datatype", c("datatype"), True),
                ("algo", c("algo"), True),
                ("proto", c("proto"), True),
                ("channels", c("channels"), False),
            ]
        )
    ).to_series()
    return events.with_columns(events.get_column("args").scatter(info.get_column("event"), args))


def _json(fields: list[tuple[str, pl.Expr, bool]]) -> pl.Expr:
    """A JSON object of (name, value, quoted) members, a null value's member left out; values are
    names and numbers that need no escaping."""
    parts = []
    for name, value, quoted in fields:
        text = (
            pl.concat_str(pl.lit(f'"{name}":"'), value, pl.lit('"'))
            if quoted
            else pl.concat_str(pl.lit(f'"{name}":'), value.cast(pl.String))
        )
        parts.append(pl.when(value.is_not_null()).then(text))
    return pl.concat_str(pl.lit("{"), pl.concat_str(parts, separator=",", ignore_nulls=True), pl.lit("}"))


def _info(ops: pl.DataFrame) -> pl.DataFrame:
    """Per enqueue event row: count, algorithm, protocol, channels and the datatype's name."""
    ids = ops.get_column("dtype_id").to_numpy()
    names = np.array([*DATATYPES, None], dtype=object)[
        np.where((ids >= 0) & (ids < len(DATATYPES)), ids, len(DATATYPES))
    ]
    return ops.select(pl.col("row").alias("event"), "peer", "comm", "count", "algo", "proto", "channels").with_columns(
        datatype=pl.Series(names.tolist(), dtype=pl.String)
    )
