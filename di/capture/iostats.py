"""Per-file I/O statistics computed at ingest, in the manner of Darshan's POSIX and STDIO counters.

One row per (module, rank, file) over the I/O events the I/O shim recorded, the module as Darshan splits
them: ``STDIO`` for the stdio calls (:data:`STDIO_CALLS`: fopen, fread, fwrite, fflush, fclose), ``POSIX``
for the others (a file read with fread and written with write has a row in each):
``opens`` (open, open64, openat, creat, fopen), ``reads`` / ``writes``
(read, pread, readv, fread / write, pwrite, writev, fwrite), ``seeks``,
``syncs`` (fsync, fdatasync), ``mmaps``, ``bytes_read`` / ``bytes_written``
(bytes the calls returned), ``read_time_ns`` / ``write_time_ns`` /
``meta_time_ns`` (summed call durations; meta = open, close, seek, sync, flush),
and access-size histograms ``read_sizes`` / ``write_sizes``: counts per
Darshan bin (:data:`SIZE_BINS`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

SIZE_BINS = ("0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+")
SIZE_EDGES = np.array([100, 1024, 10 * 1024, 100 * 1024, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30])
"""Upper edges of Darshan's access-size bins, bytes (1K = 1024)."""
READS = ["read", "pread", "readv", "fread"]
WRITES = ["write", "pwrite", "writev", "fwrite"]
OPENS = ["open", "creat", "fopen"]
META = ["open", "creat", "fopen", "close", "fclose", "lseek", "fsync", "fdatasync", "fflush"]
STDIO_CALLS = ["fopen", "fread", "fwrite", "fflush", "fclose"]
"""The shim's stdio calls (Darshan's STDIO module); every other call is POSIX's."""


FILE = "io_files.parquet"
"""The table's file in a recording's trace directory, beside the store's tables."""


def file_stats(io: pl.DataFrame, locations: pl.DataFrame) -> pl.DataFrame:
    """Counters per (module, rank, file), sorted by module, rank, file; histograms as struct columns.

    Args:
        io: I/O events with columns loc, name, start_ns, end_ns, bytes, file.
        locations: the trace's locations (loc -> rank).
    """
    if not io.height:
        return pl.DataFrame(schema={"module": pl.String, "rank": pl.Int32, "file": pl.String})
    name = pl.col("name").cast(pl.String)
    df = io.join(locations.select("loc", "rank"), on="loc").with_columns(
        dur=pl.col("end_ns") - pl.col("start_ns"),
        name=name,
        module=pl.when(name.is_in(STDIO_CALLS)).then(pl.lit("STDIO")).otherwise(pl.lit("POSIX")),
        size_bin=pl.Series(np.searchsorted(SIZE_EDGES, io.get_column("bytes").fill_null(0).to_numpy(), side="right")),
    )
    is_read, is_write = pl.col("name").is_in(READS), pl.col("name").is_in(WRITES)
    hist = [
        pl.col("size_bin").filter(sel).value_counts(sort=False).alias(alias)
        for sel, alias in ((is_read, "rh"), (is_write, "wh"))
    ]
    stats = (
        df.filter(pl.col("file").is_not_null())
        .group_by("module", "rank", "file")
        .agg(
            opens=pl.col("name").is_in(OPENS).sum(),
            reads=is_read.sum(),
            writes=is_write.sum(),
            seeks=(pl.col("name") == "lseek").sum(),
            syncs=pl.col("name").is_in(["fsync", "fdatasync"]).sum(),
            mmaps=(pl.col("name") == "mmap").sum(),
            bytes_read=pl.col("bytes").filter(is_read).sum(),
            bytes_written=pl.col("bytes").filter(is_write).sum(),
            read_time_ns=pl.col("dur").filter(is_read).sum(),
            write_time_ns=pl.col("dur").filter(is_write).sum(),
            meta_time_ns=pl.col("dur").filter(pl.col("name").is_in(META)).sum(),
            *hist,
        )
        .sort("module", "rank", "file")
    )
    for h, name in (("rh", "read_sizes"), ("wh", "write_sizes")):
        counts = np.zeros((stats.height, len(SIZE_BINS)), np.int64)
        for i, items in enumerate(stats.get_column(h).to_list()):  # one per file, not per event
            for item in items:
                counts[i, item["size_bin"]] = item["count"]
        stats = stats.drop(h).with_columns(
            pl.struct([pl.Series(b, counts[:, k]) for k, b in enumerate(SIZE_BINS)]).alias(name)
        )
    return stats


def read_file_stats(run: str | Path) -> pl.DataFrame:
    """The per-file table a recording's ingest wrote (``RUN.di/io_files.parquet``)."""
    return pl.read_parquet(Path(run) / FILE)
