"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> canonical Trace.

Pipeline: open read-only and check it is an export (:mod:`.report`) -> one
frame per known table, integer columns read by a numba loop over the SQLite C
API (:mod:`.scan`), strings resolved through ``StringIds`` (:mod:`.activity`)
-> timelines (CPU threads from ``globalTid``, GPU streams from device and
stream ids, named from ``ThreadNames``, ``PROCESSES``, ``TARGET_INFO_GPU``)
-> events sorted and nested -> launch/sync flows from correlation ids, as for
Kineto. Times are made absolute (ns since the Unix epoch) by adding
``TARGET_INFO_SESSION_START_TIME``, so the reports of one job merge on one clock.

Schema drift: tables and columns are found by name; a missing table is
skipped, and the reader says once which of the tables it reads were absent;
a table lacking a column it needs is skipped with a warning; an export
schema version di has not seen loads what it can and warns. Not read (listed
in the source's ``info``): MPI RMA and I/O tables, scheduling and sampling.
MPI calls (``nsys profile --trace=mpi``, :mod:`.mpi`) become events, matched
into ``messages`` and ``collectives`` here for the ranks of this report and
again over the merged reports of a job (:func:`.mpi.link`, which the
registry runs after merging). ``MPI_RANKS`` gives each process its MPI rank,
so a report of a whole ``mpirun`` holds every rank.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.convert.columns import dense_row_ids
from di.convert.nsys import activity, mpi, ranks
from di.convert.nsys.report import Report, one_line, open_report, pid_of, tid_of
from di.convert.provenance import END_BEFORE_START, reader_meta
from di.errors import FormatError
from di.inputsize import check_size
from di.nesting import nest, nesting_order
from di.trace import CATS, Trace

__all__ = ["KNOWN_SCHEMA_MAJORS", "read_nsys"]

KNOWN_SCHEMA_MAJORS = (2, 3)
"""EXPORT_SCHEMA_VERSION_MAJOR values di was written against (nsys 2021.x .. 2025.x)."""
EXPECTED = (
    activity.KERNEL,
    activity.MEMCPY,
    activity.RUNTIME,
    activity.SYNC,
    activity.NVTX,
    activity.OSRT,
    activity.MEMSET,
)
"""Tables a CUDA report usually has; the absent ones are said once (the driver table is optional everywhere)."""
NOT_READ = (
    "MPI_RMA_EVENTS",
    "MPI_IO_EVENTS",
    "SCHED_EVENTS",
    "COMPOSITE_EVENTS",
    "CUDA_GPU_MEMORY_USAGE_EVENTS",
    "GPU_METRICS",
)


def read_nsys(
    path: str | Path,
    *,
    rank: int | None = None,
    rank_source: str = "single",
    source: int = 0,
    max_input_bytes: int | None = None,
    native: bool = True,
) -> Trace:
    """Read one Nsight Systems SQLite export.

    Args:
        path: the ``.sqlite`` file.
        rank: rank of the report; kept when ``rank_source`` is ``option`` or ``file_name``,
            else the file name ``report.N`` or the recorded environment (``OMPI_COMM_WORLD_RANK``,
            ``PMI_RANK``, ``SLURM_PROCID``, ...) decide, then ``rank``.
        rank_source: where ``rank`` came from (meta sources).
        source: index of this file in the job's sources (locations.source).
        max_input_bytes: refuse a file larger than this (None: no limit).
        native: read integer columns through the SQLite C library (False: Python's fetchall).

    Raises:
        FormatError: not an SQLite file, corrupt, or no nsys export.
        InputTooLargeError: the file is larger than ``max_input_bytes``.
    """
    path = Path(path)
    try:
        check_size(path, os.path.getsize(path), max_input_bytes)
    except OSError as exc:
        raise FormatError(path, f"cannot read: {exc}") from None
    report = open_report(path, native=native)
    try:
        return _read(report, rank, rank_source, source)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise FormatError(path, f"corrupt or truncated SQLite database ({one_line(exc)})") from None
    finally:
        report.con.close()


def _read(report: Report, rank: int | None, rank_source: str, source: int) -> Trace:
    path = report.path
    dropped: Counter[str] = Counter()
    warnings: list[str] = []
    version = dict(
        report.pairs("META_DATA_EXPORT", "name", "value") or report.pairs("EXPORT_META_DATA", "name", "value")
    )
    major = version.get("EXPORT_SCHEMA_VERSION_MAJOR") or version.get("EXPORT_SCHEMA_VERSION", "").split(".")[0]
    if not major.isdigit() or int(major) not in KNOWN_SCHEMA_MAJORS:
        warnings.append(
            f"{path}: export schema version {version.get('EXPORT_SCHEMA_VERSION') or 'unknown'} was never seen by di; "
            "loaded what could be read"
        )
    missing = [t for t in EXPECTED if t not in report.tables]
    if missing:
        warnings.append(
            f"{path}: no {', '.join(missing)} table{'s' if len(missing) > 1 else ''} in this report (not traced, or "
            "another nsys version): skipped"
        )
    start = (
        report.scalar("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        if "utcEpochNs" in report.columns("TARGET_INFO_SESSION_START_TIME")
        else None
    )
    offset = int(start) if isinstance(start, int) else 0
    if not offset:
        warnings.append(f"{path}: no TARGET_INFO_SESSION_START_TIME: times stay relative to the session start")
    frames, read = activity.frames(report, dropped, warnings)
    mpi_frames, mpi_read = mpi.frames(report, dropped, warnings)
    frames, read = frames + mpi_frames, read + mpi_read
    env = ranks.environment(report)
    mpi_ranks = ranks.mpi_ranks(report)
    rank, rank_source, info = _rank(path, env, mpi_ranks, rank, rank_source, warnings)
    if rank_source == "option":
        mpi_ranks = {}
    host = ranks.host_of(report, env)
    ev = pl.concat(frames, how="vertical_relaxed") if frames else activity.frame(0, {})
    ev = ev.with_columns(pl.col("start_ns") + offset, pl.col("end_ns") + offset)
    negative = ev.get_column("bytes") < 0
    if negative.any():
        dropped["negative byte counts (set to null)"] += int(negative.sum())
        ev = ev.with_columns(pl.when(~negative).then(pl.col("bytes")).alias("bytes"))
    bad = ev.get_column("end_ns") < ev.get_column("start_ns")
    if bad.any():
        dropped[END_BEFORE_START] += int(bad.sum())
        ev = ev.filter(~bad)
    locations, loc = _locations(report, ev, rank, host, source, mpi_ranks)
    events, flows = _events(ev, loc)
    info.update(
        {
            "nsys_version": version.get("EXPORT_PRODUCT_VERSION"),
            "export_schema": version.get("EXPORT_SCHEMA_VERSION"),
            "tables_read": read,
            "tables_not_read": [t for t in NOT_READ if t in report.tables],
        }
    )
    comms = mpi.communicators(report)
    if comms:
        info["mpi_communicators"] = comms
    meta = reader_meta(
        path,
        "nsys",
        epoch=bool(offset),
        rank=rank,
        rank_source=rank_source,
        events=events.height,
        dropped=dropped,
        info=info,
        warnings=warnings,
        world_size=info.get("world_size"),
        command=_command(report),
    )
    return mpi.link(Trace.build(meta=meta, locations=locations, events=events, flows=flows))


def _rank(
    path: Path, env: dict[str, str], mpi_ranks: dict[int, int], rank: int | None, rank_source: str, warnings: list[str]
) -> tuple[int, str, dict[str, Any]]:
    """The rank: option > MPI_RANKS > file name (``rank-N``, ``report.N``) > recorded environment > position."""
    env_rank, var, size = ranks.rank_of_env(env)
    info: dict[str, Any] = {"world_size": size} if size else {}
    if var:
        info["rank_variable"] = var
    if mpi_ranks and rank_source != "option":
        info["rank_variable"] = "MPI_RANKS"
        if len(set(mpi_ranks.values())) > 1:
            info["ranks_by_pid"] = {str(p): r for p, r in sorted(mpi_ranks.items())}
        return min(mpi_ranks.values()), "metadata", info
    if rank_source not in ("option", "file_name"):
        named = ranks.rank_of_name(path)
        if named is not None:
            rank, rank_source = named, "file_name"
        elif env_rank is not None:
            rank, rank_source = env_rank, "metadata"
    if env_rank is not None and rank is not None and rank_source != "metadata" and env_rank != rank:
        warnings.append(
            f"{path}: rank {rank} ({rank_source}) differs from {var}={env_rank} in the recorded environment"
        )
    return (rank if rank is not None else 0), rank_source, info


def _command(report: Report) -> str | None:
    pairs = report.pairs("META_DATA_CAPTURE", "name", "value")
    cmd = [v for k, v in pairs if k == "PROCESS_0:COMMAND"]
    args = [v for k, v in pairs if k.startswith("PROCESS_0:ARGUMENT_")]
    return " ".join(cmd + args) if cmd else None


def _names(report: Report) -> tuple[pl.DataFrame, pl.DataFrame, dict[int, str]]:
    """Thread names (pid, tid, name), process names (pid, process), GPU names by device id."""
    t = report.ints("ThreadNames", {"name": "nameId", "gtid": "globalTid"}) if "ThreadNames" in report.tables else None
    threads = (
        pl.DataFrame(
            {"pid": pid_of(t["gtid"]), "tid": tid_of(t["gtid"]), "tname": report.text(t["name"], t["name_null"])}
        ).unique(["pid", "tid"], keep="last")
        if t is not None
        else pl.DataFrame(schema={"pid": pl.Int64, "tid": pl.Int64, "tname": pl.String})
    )
    procs = report.pairs("PROCESSES", "pid", "name")
    processes = pl.DataFrame(
        {
            "pid": [int(p) for p, _ in procs if p.lstrip("-").isdigit()],
            "process": [n for p, n in procs if p.lstrip("-").isdigit()],
        },
        schema={"pid": pl.Int64, "process": pl.String},
    ).unique("pid", keep="last")
    gpus = {
        int(i): str(n)
        for i, n in report.pairs("TARGET_INFO_GPU", "id", "name")
        if i.lstrip("-").isdigit() and -(2**31) <= int(i) < 2**31  # device ids are Int32
    }
    return threads, processes, gpus


STREAM_KINDS = {3: "null stream", 2: "non-blocking"}
"""TARGET_INFO_CUDA_STREAM.flag (ENUM_CUPTI_STREAM_TYPE) said in a stream's name; 1 (default) and 0 (unknown) are not."""


def _streams(report: Report) -> pl.DataFrame:
    """(pid, stream) -> what the stream's name adds: the NVTX name given to it (TARGET_INFO_NVTX_CUDA_STREAM), or
    its kind and priority (TARGET_INFO_CUDA_STREAM: `` (null stream)``, `` (non-blocking, priority -5)``)."""
    schema = {"pid": pl.Int64, "stream": pl.Int64, "stream_kind": pl.String, "nvtx_name": pl.String}
    parts = []
    if {"processId", "streamId"} <= set(report.columns("TARGET_INFO_CUDA_STREAM")):
        have = report.columns("TARGET_INFO_CUDA_STREAM")
        c = report.ints(
            "TARGET_INFO_CUDA_STREAM",
            {"pid": "processId", "stream": "streamId", "priority": "priority", "flag": "flag"},
        )
        priority = np.where(c["priority"] >= 2**31, c["priority"] - 2**32, c["priority"])  # an int32 stored unsigned
        words = pl.DataFrame(
            {
                "kind": pl.Series(c["flag"]).replace_strict(STREAM_KINDS, default=None, return_dtype=pl.String),
                "prio": pl.Series(priority).cast(pl.String).set(pl.Series(c["priority_null"] | (priority == 0)), None)
                if "priority" in have
                else pl.Series([], dtype=pl.String).extend_constant(None, c["pid"].size),
            }
        ).select(
            pl.concat_list("kind", pl.concat_str(pl.lit("priority "), "prio"))
            .list.drop_nulls()
            .list.join(", ")
            .alias("words")
        )
        parts.append(
            pl.DataFrame({"pid": c["pid"], "stream": c["stream"]}).with_columns(
                pl.when(words.get_column("words") != "")
                .then(pl.concat_str(pl.lit(" ("), pl.lit(words.get_column("words")), pl.lit(")")))
                .alias("stream_kind"),
                pl.lit(None, pl.String).alias("nvtx_name"),
            )
        )
    if {"processId", "streamId", "name"} <= set(report.columns("TARGET_INFO_NVTX_CUDA_STREAM")):
        rows = report.con.execute("SELECT processId, streamId, name FROM TARGET_INFO_NVTX_CUDA_STREAM").fetchall()
        ok = [(p, s_, str(n)) for p, s_, n in rows if isinstance(p, int) and isinstance(s_, int) and n is not None]
        parts.append(
            pl.DataFrame(ok, schema={"pid": pl.Int64, "stream": pl.Int64, "nvtx_name": pl.String}, orient="row")
            .with_columns(pl.lit(None, pl.String).alias("stream_kind"))
            .select(list(schema))
        )
    if not parts:
        return pl.DataFrame(schema=schema)
    return (
        pl.concat([p.cast(schema) for p in parts])  # type: ignore[arg-type]
        .group_by("pid", "stream", maintain_order=True)
        .agg(pl.col("stream_kind").drop_nulls().first(), pl.col("nvtx_name").drop_nulls().first())
    )


def _locations(
    report: Report, ev: pl.DataFrame, rank: int, host: str | None, source: int, mpi_ranks: dict[int, int]
) -> tuple[pl.DataFrame, np.ndarray]:
    """One location per (kind, pid, tid, device, stream, NVTX domain of start/end ranges), numbered in that
    order; and the location of each row of ``ev``."""
    dom = ev.select(
        pl.when(pl.col("kind") == "async")
        .then(pl.col("domain").fill_null(""))
        .otherwise(pl.lit(""))
        .cast(pl.Categorical)
        .to_physical()
    ).to_series()
    keys = np.stack(
        [ev.get_column("kind").to_physical().to_numpy().astype(np.int64)]
        + [
            ev.get_column(c).fill_null(fill).to_numpy().astype(np.int64)
            for c, fill in (("pid", -1), ("tid", -1), ("device", -1), ("stream", -2))
        ]
        + [dom.to_numpy().astype(np.int64)]
    )
    ids, first = dense_row_ids(keys)
    locs = ev[first].select(
        "kind", "pid", "tid", "device", "stream", pl.when(pl.col("kind") == "async").then("domain").alias("domain")
    )
    locs = locs.with_row_index("_id").sort("kind", "pid", "tid", "device", "stream", "domain", nulls_last=True)
    loc_of = np.empty(len(first), np.int64)
    loc_of[locs.get_column("_id").to_numpy()] = np.arange(len(first))
    threads, processes, gpus = _names(report)
    locs = (
        locs.join(threads, on=["pid", "tid"], how="left", maintain_order="left")
        .join(processes, on="pid", how="left", maintain_order="left")
        .join(_streams(report), on=["pid", "stream"], how="left", maintain_order="left")
    )
    gpu_name = (
        pl.col("device").replace_strict(gpus, default=None, return_dtype=pl.String) if gpus else pl.lit(None, pl.String)
    )
    locs = locs.with_row_index("loc").with_columns(
        pl.col("pid").replace_strict(mpi_ranks, default=rank, return_dtype=pl.Int32).alias("rank")
        if mpi_ranks
        else pl.lit(rank, pl.Int32).alias("rank"),
        pl.lit(host, pl.String).alias("host"),
        pl.when(pl.col("kind") == "gpu_stream")
        .then(
            pl.when(pl.col("stream") < 0)
            .then(pl.format("GPU {} device-wide", "device"))
            .when(pl.col("nvtx_name").is_not_null())
            .then(pl.format("GPU {} {}", "device", "nvtx_name"))
            .otherwise(
                pl.concat_str(pl.format("GPU {} stream {}", "device", "stream"), pl.col("stream_kind").fill_null(""))
            )
        )
        .when(pl.col("kind") == "async")
        .then(
            pl.concat_str(
                pl.lit("NVTX start/end ranges"),
                pl.when(pl.col("domain").fill_null("") != "")
                .then(pl.concat_str(pl.lit(" ("), "domain", pl.lit(")")))
                .otherwise(pl.lit("")),
            )
        )
        .otherwise(pl.coalesce("tname", pl.format("thread {}", "tid")))
        .alias("name"),
        pl.when(pl.col("kind") == "gpu_stream").then(gpu_name).alias("gpu_model"),
        pl.lit(source, pl.Int32).alias("source"),
    )
    out = locs.select(
        "loc",
        "rank",
        "host",
        "pid",
        pl.when(pl.col("kind") == "cpu_thread").then("tid").alias("tid"),
        pl.col("kind").cast(pl.String),
        "device",
        "stream",
        "name",
        "process",
        pl.lit(None, pl.Int32).alias("sort_index"),
        "source",
        "gpu_model",
    )
    return out, loc_of[ids]


def _events(ev: pl.DataFrame, loc: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Events sorted by (loc, start_ns, -end_ns) and nested; and the launch/sync flows between them: each API call
    (cuda_api or sync, on a CPU thread) -> every GPU record of the same process with its correlation id."""
    start, end = ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
    order = nesting_order(loc, start, end, np.arange(loc.size))
    keep = ("kind", "pid", "start_ns", "end_ns", "name", "cat", "src_cat", "corr", "bytes", "instant", "args")
    ev = ev.select(keep)[order]
    loc = loc[order]
    depth, parent = nest(loc, ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy())
    rows = ev.select("kind", "pid", "corr", "cat").with_row_index("row").filter(pl.col("corr").is_not_null())
    calls = rows.filter((pl.col("kind") == "cpu_thread") & pl.col("cat").is_in(["cuda_api", "sync"]))
    gpu = rows.filter(pl.col("kind") == "gpu_stream")
    gpu = gpu.select(pl.col("row").alias("dst"), "pid", "corr", "cat")
    edges = calls.select("row", "pid", "corr").join(gpu.drop_nulls("pid"), on=["pid", "corr"], how="inner")
    if gpu.get_column("pid").null_count():  # an export without globalPid on GPU records: by correlation id alone
        edges = pl.concat(
            [
                edges,
                calls.select("row", "pid", "corr").join(
                    gpu.filter(pl.col("pid").is_null()).drop("pid"), on="corr", how="inner"
                ),
            ],
            how="vertical_relaxed",
        )
    edges = edges.sort("row", "dst")
    flows = edges.select(
        pl.col("row").cast(pl.Int64).alias("src"),
        pl.col("dst").cast(pl.Int64),
        pl.when(pl.col("cat") == "sync").then(pl.lit("sync")).otherwise(pl.lit("launch")).alias("kind"),
        pl.col("corr").alias("id"),
        pl.lit(None, pl.String).alias("src_cat"),
    )
    events = ev.select(
        pl.Series("loc", loc).cast(pl.UInt32),
        "start_ns",
        "end_ns",
        pl.col("name").cast(pl.Categorical),
        pl.col("cat").cast(pl.Enum(list(CATS))),
        pl.col("src_cat").cast(pl.Categorical),
        pl.Series("depth", depth).cast(pl.Int32),
        pl.Series("parent", parent).replace(-1, None).cast(pl.Int64),
        "corr",
        "bytes",
        "instant",
        "args",
    )
    return events, flows
