"""Timelines of an Nsight Systems report: one location per (kind, pid, tid, device, stream, NVTX domain).

:func:`_locations` numbers the distinct timelines of the event rows (CPU
threads, start/end NVTX ranges per process and domain, GPU streams) in that
order and names them: threads from ``ThreadNames`` (else ``thread TID``),
processes from ``PROCESSES``, GPU models from ``TARGET_INFO_GPU``, streams
``GPU D stream S`` plus what ``TARGET_INFO_CUDA_STREAM`` says of their kind and
priority, or the name NVTX gave them (``TARGET_INFO_NVTX_CUDA_STREAM``). A
process's rank is its MPI rank where ``MPI_RANKS`` gives one, else the report's.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.columns import dense_row_ids
from di.convert.nsys.report import Report, pid_of, tid_of

__all__ = ["STREAM_KINDS"]

STREAM_KINDS = {3: "null stream", 2: "non-blocking"}
"""TARGET_INFO_CUDA_STREAM.flag (ENUM_CUPTI_STREAM_TYPE) said in a stream's name; 1 (default) and 0 (unknown) are not."""
STREAM_SCHEMA = {"pid": pl.Int64, "stream": pl.Int64, "stream_kind": pl.String, "nvtx_name": pl.String}


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


def _stream_kinds(report: Report) -> pl.DataFrame:
    """(pid, stream, stream_kind): `` (null stream)``, `` (non-blocking, priority -5)``, null for neither."""
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
    return pl.DataFrame({"pid": c["pid"], "stream": c["stream"]}).with_columns(
        pl.when(words.get_column("words") != "")
        .then(pl.concat_str(pl.lit(" ("), pl.lit(words.get_column("words")), pl.lit(")")))
        .alias("stream_kind"),
        pl.lit(None, pl.String).alias("nvtx_name"),
    )


def _nvtx_stream_names(report: Report) -> pl.DataFrame:
    """(pid, stream, nvtx_name): the names NVTX gave streams."""
    rows = report.con.execute("SELECT processId, streamId, name FROM TARGET_INFO_NVTX_CUDA_STREAM").fetchall()
    ok = [(p, s_, str(n)) for p, s_, n in rows if isinstance(p, int) and isinstance(s_, int) and n is not None]
    return (
        pl.DataFrame(ok, schema={"pid": pl.Int64, "stream": pl.Int64, "nvtx_name": pl.String}, orient="row")
        .with_columns(pl.lit(None, pl.String).alias("stream_kind"))
        .select(list(STREAM_SCHEMA))
    )


def _streams(report: Report) -> pl.DataFrame:
    """(pid, stream) -> what the stream's name adds: the NVTX name given to it (TARGET_INFO_NVTX_CUDA_STREAM), or
    its kind and priority (TARGET_INFO_CUDA_STREAM: `` (null stream)``, `` (non-blocking, priority -5)``)."""
    parts = []
    if {"processId", "streamId"} <= set(report.columns("TARGET_INFO_CUDA_STREAM")):
        parts.append(_stream_kinds(report))
    if {"processId", "streamId", "name"} <= set(report.columns("TARGET_INFO_NVTX_CUDA_STREAM")):
        parts.append(_nvtx_stream_names(report))
    if not parts:
        return pl.DataFrame(schema=STREAM_SCHEMA)
    return (
        pl.concat([p.cast(STREAM_SCHEMA) for p in parts])  # type: ignore[arg-type]
        .group_by("pid", "stream", maintain_order=True)
        .agg(pl.col("stream_kind").drop_nulls().first(), pl.col("nvtx_name").drop_nulls().first())
    )


def _location_ids(ev: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A dense id per distinct (kind, pid, tid, device, stream, domain of start/end ranges) of ``ev``'s rows, and
    the first row of each."""
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
    return dense_row_ids(keys)


def _ordered(ev: pl.DataFrame, first: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    """The locations sorted by their key; and the position in that order of each dense id."""
    locs = ev[first].select(
        "kind", "pid", "tid", "device", "stream", pl.when(pl.col("kind") == "async").then("domain").alias("domain")
    )
    locs = locs.with_row_index("_id").sort("kind", "pid", "tid", "device", "stream", "domain", nulls_last=True)
    loc_of = np.empty(len(first), np.int64)
    loc_of[locs.get_column("_id").to_numpy()] = np.arange(len(first))
    return locs, loc_of


def _location_name() -> pl.Expr:
    """A location's name, from its kind, ids, domain and the names joined to it."""
    return (
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
        .alias("name")
    )


def _locations(
    report: Report, ev: pl.DataFrame, rank: int, host: str | None, source: int, mpi_ranks: dict[int, int]
) -> tuple[pl.DataFrame, np.ndarray]:
    """One location per (kind, pid, tid, device, stream, NVTX domain of start/end ranges), numbered in that
    order; and the location of each row of ``ev``."""
    ids, first = _location_ids(ev)
    locs, loc_of = _ordered(ev, first)
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
        _location_name(),
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
