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


TARGETS = (*COLUMNS, *(f"{h}/{b}" for h in ("read_sizes", "write_sizes") for b in SIZE_BINS))
"""Where a counter adds to: a statistic, or a histogram's bin (``read_sizes/1K-10K``); a counter's ``slot`` indexes this."""


def _kinds(names: pl.Series) -> pl.DataFrame:
    """Each distinct counter name -> ``slot`` (its place in :data:`TARGETS`) and ``scale`` (1e9 for Darshan's
    seconds, else 1); names that add to nothing left out."""
    what = pl.col("counter").str.replace(r"^[A-Z0-9]+?_", "")
    size = what.str.extract_groups(r"^SIZE_(?P<op>READ|WRITE)_(?:AGG_)?(?P<b>\w+)$")
    target = pl.coalesce(
        what.replace_strict(_COLUMN_OF, default=None),
        pl.format(
            "{}_sizes/{}",
            size.struct.field("op").str.to_lowercase(),
            size.struct.field("b").replace_strict(_BIN_OF, default=None),
        ),
    )
    slots = pl.DataFrame(
        {"target": TARGETS, "slot": range(len(TARGETS))}, schema={"target": pl.String, "slot": pl.Int32}
    )
    return (
        pl.DataFrame({"counter": names.unique()})
        .with_columns(target.alias("target"))
        .join(slots, on="target", how="inner")
        .select(
            "counter",
            "slot",
            pl.when(pl.col("target").str.ends_with("_time_ns")).then(1e9).otherwise(1.0).alias("scale"),
        )
    )


COUNTER_LIMIT = 2.0**62
"""Counter values at or beyond this (in magnitude, before scaling), not finite or not numbers are not numbers to
the statistics: a garbled log's ``1e999`` or ``inf``, which would overflow the int64 sums."""


def counter_number(value: pl.Expr) -> pl.Expr:
    """A counter's value as a Float64 (its text or number), null where it is not a number within :data:`COUNTER_LIMIT`."""
    v = value.cast(pl.Float64, strict=False)
    return pl.when(v.abs() < COUNTER_LIMIT).then(v)


def file_stats(counters: pl.DataFrame) -> pl.DataFrame:
    """Per (module, rank, file) statistics from ``counters`` (columns module, rank, file, counter, value).

    ``counter`` keeps its module prefix (``POSIX_READS``, ``MPIIO_COLL_WRITES``); ``value`` is a number or its text.
    Each distinct counter name is looked at once (:func:`_kinds`); the rows are joined to that, summed in one
    group-by per (record, slot) and the few sums pivoted, so the cost per row is a hash lookup, not a regex.
    """
    if not counters.height:
        return pl.DataFrame(schema={"module": pl.String, "rank": pl.Int32, "file": pl.String})
    c = counters.select(
        pl.col("module").cast(pl.String),
        pl.col("rank").cast(pl.Int32),
        pl.col("file").cast(pl.String),
        pl.col("counter").cast(pl.String),
        "value",
    )
    c = c.join(_kinds(c.get_column("counter")), on="counter", how="left")  # left: a record of no such counter stays
    value = (counter_number(pl.col("value")) * pl.col("scale")).round().cast(pl.Int64, strict=False)
    sums = (
        c.select(*KEY, "slot", pl.when(value >= 0).then(value).alias("value"))  # -1: not collected
        .group_by(*KEY, "slot")
        .agg(pl.col("value").sum())
    )
    wide = sums.with_columns(pl.col("slot").fill_null(-1)).pivot(on="slot", index=KEY, values="value")
    col = lambda k: (pl.col(str(k)) if str(k) in wide.columns else pl.lit(None, pl.Int64)).fill_null(0).cast(pl.Int64)  # noqa: E731
    at = {t: k for k, t in enumerate(TARGETS)}
    hists = [
        pl.struct([col(at[f"{h}/{b}"]).alias(b) for b in SIZE_BINS]).alias(h) for h in ("read_sizes", "write_sizes")
    ]
    return wide.select(*KEY, *[col(at[k]).alias(k) for k in COLUMNS], *hists).sort("module", "rank", "file")
