"""Per-file I/O statistics (the trace's ``io_files`` table), from ``di record`` or a Darshan log alike.

One row per (module, rank, file) as the table holds it: opens, reads, writes,
bytes read and written, and time in read, write and metadata calls (ns). Module
is Darshan's (POSIX, MPI-IO, STDIO; a file read through MPI-IO is counted by both), which
``di record`` splits alike (POSIX, STDIO), or "di record" for a recording made before that split
(null module); rank -1 is Darshan's shared-file
record. The 30 rows with the most time in calls are listed. These are whole-run
totals: a time or step window does not cut them.
"""

from __future__ import annotations

import polars as pl

from di.viewers.report.page import Section, ms, num, table

TOP = 30
COLUMNS = ["module", "rank", "file", "opens", "reads", "writes", "bytes_read", "bytes_written"]
TIMES = ["read_time_ns", "write_time_ns", "meta_time_ns"]
SMALL_ACCESS_B = 4096
"""Mean bytes per read or write under which many accesses are called small."""


def top_files(files: pl.DataFrame, n: int = TOP) -> pl.DataFrame:
    """The ``n`` rows with the most time in calls (column ``time_ns``: read + write + meta), most first."""
    return (
        files.with_columns(pl.sum_horizontal(TIMES).alias("time_ns"))
        .sort("time_ns", "module", "rank", "file", descending=[True, False, False, False], nulls_last=True)
        .head(n)
    )


def panel(ctx) -> Section | None:  # noqa: ANN001
    files = ctx.trace.io_files
    if not files.height:
        return None
    top = top_files(files)
    rows = [
        (
            r["module"] or "di record",
            r["rank"],
            r["file"],
            *(num(r[c]) for c in COLUMNS[3:]),
            *(ms(r[c]) for c in TIMES),
        )
        for r in top.iter_rows(named=True)
    ]
    body = table("io_stats", [*COLUMNS, *TIMES], rows)
    body += (
        f'<p class="note"><span data-key="io_stats.rows" data-v="{files.height}">{files.height:,}</span> rows '
        "(module, rank, file); whole-run totals of the per-file I/O statistics, not cut by the window; "
        "rank -1: Darshan's record of a file shared by all ranks.</p>"
    )
    hints = []
    first = top.row(0, named=True)
    ops = first["reads"] + first["writes"]
    if ops > 1000 and (first["bytes_read"] + first["bytes_written"]) / ops < SMALL_ACCESS_B:
        hints.append(
            f"{first['file']} is accessed in {ops:,} reads and writes of under {SMALL_ACCESS_B} B on average: "
            "read and write in larger blocks or buffer them."
        )
    if first["meta_time_ns"] > first["read_time_ns"] + first["write_time_ns"] > 0:
        hints.append(
            f"{first['file']} spends more time in metadata calls (open, close, seek, sync) than in reads and "
            f"writes ({first['meta_time_ns'] / 1e6:,.1f} ms): open it once, and seek and sync less often."
        )
    return Section("io_stats", "I/O statistics per file", body, hints)
