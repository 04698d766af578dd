"""Darshan's per-file counters as the per-file I/O statistics that ``di record`` writes.

Both Darshan readers (binary logs through PyDarshan, :mod:`.darshan`; ``darshan-parser``
text, :mod:`.darshan_text`) hand over one long frame of counters (module, rank, file,
counter, value); :func:`file_stats` turns it into one row per (module, rank, file)
with the columns and units of :func:`di.capture.iostats.file_stats`: the trace's
``io_files`` table (``schemas/trace/v1/io_files.schema.json``), as a recording has it:
``opens``, ``reads``, ``writes``, ``seeks``, ``syncs``, ``mmaps``, ``bytes_read``,
``bytes_written``, ``read_time_ns``, ``write_time_ns``, ``meta_time_ns`` and the
access-size histograms ``read_sizes``/``write_sizes`` over the same bins, plus ``module``
(:data:`COUNTER_MODULES`). Rank -1 is Darshan's shared-file record (the file's counters
summed over all ranks).
"""

from __future__ import annotations

import polars as pl

__all__ = ["COLUMNS", "COUNTER_MODULES", "KEY", "SIZE_BINS", "file_stats"]

COUNTER_MODULES = ("POSIX", "MPI-IO", "STDIO")
"""The modules whose counters are per-file I/O statistics (HDF5, PnetCDF and Lustre records are not read)."""

SIZE_BINS = ("0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+")
"""Darshan's access-size bins, as :data:`di.capture.iostats.SIZE_BINS` names them."""
_BIN_OF = dict(
    zip(
        ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS"),
        SIZE_BINS,
    )
)
COLUMNS: dict[str, tuple[str, ...]] = {
    "opens": ("OPENS", "FDOPENS", "INDEP_OPENS", "COLL_OPENS"),
    "reads": ("READS", "INDEP_READS", "COLL_READS", "SPLIT_READS", "NB_READS"),
    "writes": ("WRITES", "INDEP_WRITES", "COLL_WRITES", "SPLIT_WRITES", "NB_WRITES"),
    "seeks": ("SEEKS",),
    "syncs": ("FSYNCS", "FDSYNCS", "SYNCS"),
    "mmaps": ("MMAPS",),
    "bytes_read": ("BYTES_READ",),
    "bytes_written": ("BYTES_WRITTEN",),
    "read_time_ns": ("F_READ_TIME",),
    "write_time_ns": ("F_WRITE_TIME",),
    "meta_time_ns": ("F_META_TIME",),
}
"""Statistic -> the counters (module prefix off) summed into it; ``*_time_ns`` from Darshan's seconds."""
_COLUMN_OF = {counter: col for col, counters in COLUMNS.items() for counter in counters}
KEY = ["module", "rank", "file"]


def file_stats(counters: pl.DataFrame) -> pl.DataFrame:
    """Per (module, rank, file) statistics from ``counters`` (columns module, rank, file, counter, value).

    ``counter`` keeps its module prefix (``POSIX_READS``, ``MPIIO_COLL_WRITES``); ``value`` is a number or its text.
    """
    if not counters.height:
        return pl.DataFrame(schema={"module": pl.String, "rank": pl.Int32, "file": pl.String})
    c = counters.select(
        pl.col("module").cast(pl.String),
        pl.col("rank").cast(pl.Int32),
        pl.col("file").cast(pl.String),
        pl.col("counter").cast(pl.String).str.replace(r"^[A-Z0-9]+?_", "").alias("what"),
        pl.col("value").cast(pl.Float64, strict=False).alias("value"),
    ).filter(pl.col("value").is_not_null() & (pl.col("value") >= 0))  # -1: not collected
    scalar = c.filter(pl.col("what").is_in(list(_COLUMN_OF))).with_columns(
        pl.col("what").replace_strict(_COLUMN_OF).alias("col")
    )
    scalar = scalar.with_columns(
        pl.when(pl.col("col").str.ends_with("_time_ns"))
        .then((pl.col("value") * 1e9).round())
        .otherwise(pl.col("value"))
        .cast(pl.Int64)
    )
    keys = c.select(KEY).unique(maintain_order=True)
    out = keys.join(
        scalar.group_by(*KEY, "col").agg(pl.col("value").sum()).pivot(on="col", index=KEY, values="value")
        if scalar.height
        else keys,
        on=KEY,
        how="left",
        nulls_equal=True,
    )
    out = out.with_columns(
        [pl.col(k).fill_null(0) if k in out.columns else pl.lit(0, pl.Int64).alias(k) for k in COLUMNS]
    )
    sizes = c.with_columns(
        pl.col("what").str.extract(r"^SIZE_(READ|WRITE)_(?:AGG_)?(\w+)$", 1).alias("op"),
        pl.col("what")
        .str.extract(r"^SIZE_(?:READ|WRITE)_(?:AGG_)?(\w+)$", 1)
        .replace_strict(_BIN_OF, default=None)
        .alias("bin"),
    ).drop_nulls(["op", "bin"])
    for op, name in (("READ", "read_sizes"), ("WRITE", "write_sizes")):
        part = sizes.filter(pl.col("op") == op).group_by(*KEY, "bin").agg(pl.col("value").sum().cast(pl.Int64))
        wide = keys.join(
            part.pivot(on="bin", index=KEY, values="value") if part.height else keys,
            on=KEY,
            how="left",
            nulls_equal=True,
        )
        hist = pl.struct(
            [(pl.col(b) if b in wide.columns else pl.lit(None, pl.Int64)).fill_null(0).alias(b) for b in SIZE_BINS]
        )
        out = out.join(wide.select(*KEY, hist.alias(name)), on=KEY, how="left", nulls_equal=True)
    return out.select(*KEY, *COLUMNS, "read_sizes", "write_sizes").sort("module", "rank", "file")
