"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> canonical Trace.

Pipeline: open read-only and check it is an export (:mod:`.report`) -> one
frame per known table, integer columns read by a numba loop over the SQLite C
API (:mod:`.scan`), strings resolved through ``StringIds`` (:mod:`.activity`)
-> timelines (CPU threads from ``globalTid``, GPU streams from device and
stream ids, named from ``ThreadNames``, ``PROCESSES``, ``TARGET_INFO_GPU``: :mod:`.locations`)
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

from di.convert.nsys import activity, mpi, ranks
from di.convert.nsys.locations import _locations
from di.convert.nsys.report import Report, one_line, open_report
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
    version = _version(report, warnings)
    _say_missing(report, warnings)
    offset = _session_start(report, warnings)
    frames, read = activity.frames(report, dropped, warnings)
    mpi_frames, mpi_read = mpi.frames(report, dropped, warnings)
    frames, read = frames + mpi_frames, read + mpi_read
    env = ranks.environment(report)
    mpi_ranks = ranks.mpi_ranks(report)
    rank, rank_source, info = _rank(path, env, mpi_ranks, rank, rank_source, warnings)
    if rank_source == "option":
        mpi_ranks = {}
    host = ranks.host_of(report, env)
    ev = _rows(frames, offset, dropped)
    locations, loc = _locations(report, ev, rank, host, source, mpi_ranks)
    events, flows = _events(ev, loc)
    info.update(_export_info(report, version, read))
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


def _version(report: Report, warnings: list[str]) -> dict[str, str]:
    """The export's metadata (EXPORT_SCHEMA_VERSION, EXPORT_PRODUCT_VERSION, ...); a schema never seen is said."""
    version = dict(
        report.pairs("META_DATA_EXPORT", "name", "value") or report.pairs("EXPORT_META_DATA", "name", "value")
    )
    major = version.get("EXPORT_SCHEMA_VERSION_MAJOR") or version.get("EXPORT_SCHEMA_VERSION", "").split(".")[0]
    if not major.isdigit() or int(major) not in KNOWN_SCHEMA_MAJORS:
        warnings.append(
            f"{report.path}: export schema version {version.get('EXPORT_SCHEMA_VERSION') or 'unknown'} was never "
            "seen by di; loaded what could be read"
        )
    return version


def _say_missing(report: Report, warnings: list[str]) -> None:
    """One warning naming the :data:`EXPECTED` tables the report lacks."""
    missing = [t for t in EXPECTED if t not in report.tables]
    if missing:
        warnings.append(
            f"{report.path}: no {', '.join(missing)} table{'s' if len(missing) > 1 else ''} in this report (not "
            "traced, or another nsys version): skipped"
        )


def _session_start(report: Report, warnings: list[str]) -> int:
    """The session's start, ns since the Unix epoch (0, said, when the report does not give it)."""
    start = (
        report.scalar("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
        if "utcEpochNs" in report.columns("TARGET_INFO_SESSION_START_TIME")
        else None
    )
    offset = int(start) if isinstance(start, int) else 0
    if not offset:
        warnings.append(f"{report.path}: no TARGET_INFO_SESSION_START_TIME: times stay relative to the session start")
    return offset


def _rows(frames: list[pl.DataFrame], offset: int, dropped: Counter[str]) -> pl.DataFrame:
    """The tables' rows in one frame on the epoch clock; negative byte counts nulled, rows ending before they
    start dropped (both counted)."""
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
    return ev


def _export_info(report: Report, version: dict[str, str], read: list[str]) -> dict[str, Any]:
    """What the source's ``info`` says of the export: versions, tables read and not, MPI communicators."""
    info: dict[str, Any] = {
        "nsys_version": version.get("EXPORT_PRODUCT_VERSION"),
        "export_schema": version.get("EXPORT_SCHEMA_VERSION"),
        "tables_read": read,
        "tables_not_read": [t for t in NOT_READ if t in report.tables],
    }
    comms = mpi.communicators(report)
    if comms:
        info["mpi_communicators"] = comms
    return info


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


def _events(ev: pl.DataFrame, loc: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Events sorted by (loc, start_ns, -end_ns) and nested; and the launch/sync flows between them (:func:`_flows`)."""
    start, end = ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
    order = nesting_order(loc, start, end, np.arange(loc.size))
    keep = ("kind", "pid", "start_ns", "end_ns", "name", "cat", "src_cat", "corr", "bytes", "instant", "args")
    ev = ev.select(keep)[order]
    loc = loc[order]
    depth, parent = nest(loc, ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy())
    flows = _flows(ev)
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


def _flows(ev: pl.DataFrame) -> pl.DataFrame:
    """Launch/sync flows between the sorted events ``ev``: each API call (cuda_api or sync, on a CPU thread) ->
    every GPU record of the same process with its correlation id."""
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
    return edges.select(
        pl.col("row").cast(pl.Int64).alias("src"),
        pl.col("dst").cast(pl.Int64),
        pl.when(pl.col("cat") == "sync").then(pl.lit("sync")).otherwise(pl.lit("launch")).alias("kind"),
        pl.col("corr").alias("id"),
        pl.lit(None, pl.String).alias("src_cat"),
    )
