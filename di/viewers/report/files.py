"""I/O per file: operations, bytes read and written, and time in calls, from ``io`` events.

The file comes from the event's ``args.file`` (the I/O shim and other
connectors put it there); events without it count under "(unknown)". Reads and
writes are told apart by the call's name (``read``/``pread``/``fread``...,
``write``/``pwrite``/``fwrite``...). Only the 30 files with the most time are listed.
The calls are those of the report's window (a time window clips their time).
"""

from __future__ import annotations

import polars as pl

from di.viewers.report.page import Section, ms, num, table

TOP = 30


def io_per_file(events: pl.DataFrame) -> pl.DataFrame:
    """file, calls, read_bytes, write_bytes, time_ns (sum of call durations), sorted by time."""
    io = events.filter(pl.col("cat").cast(pl.String) == "io")
    if not io.height:
        return pl.DataFrame()
    name = pl.col("name").cast(pl.String)
    file = (
        pl.col("args").str.json_path_match("$.file").fill_null("(unknown)")
        if io.schema["args"] == pl.String
        else pl.lit("(unknown)")
    )
    io = io.with_columns(
        file.alias("file"),
        name.str.contains("read").alias("is_read"),
        name.str.contains("write").alias("is_write"),
        pl.col("bytes").fill_null(0).clip(lower_bound=0).alias("b"),
    )
    return _by_time(
        io.group_by("file").agg(
            pl.len().alias("calls"),
            pl.col("b").filter(pl.col("is_read")).sum().alias("read_bytes"),
            pl.col("b").filter(pl.col("is_write")).sum().alias("write_bytes"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("time_ns"),
        )
    )


def merge_per_file(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """:func:`io_per_file` of the union of events from its results over disjoint sets of events (sums per file)."""
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame()
    sums = pl.concat(parts).group_by("file").agg(pl.col(c).sum() for c in parts[0].columns if c != "file")
    return _by_time(sums.select(parts[0].columns))


def _by_time(per_file: pl.DataFrame) -> pl.DataFrame:
    return per_file.sort("time_ns", "file", descending=[True, False])


def panel(ctx) -> Section | None:  # noqa: ANN001
    per_file = ctx.aggregates.io_per_file if ctx.aggregates else io_per_file(ctx.window_events)
    if not per_file.height:
        return None
    rows = [
        (r["file"], num(r["calls"]), num(r["read_bytes"]), num(r["write_bytes"]), ms(r["time_ns"]))
        for r in per_file.head(TOP).iter_rows(named=True)
    ]
    body = table("io_files", ["file", "calls", "read_bytes", "write_bytes", "time_ns"], rows)
    total = int(per_file.get_column("time_ns").sum())
    body += (
        f'<p class="note"><span data-key="io.files" data-v="{per_file.height}">{per_file.height:,}</span> files, '
        f'<span data-key="io.time_ns" data-v="{total}">{total / 1e6:,.1f}</span> ms in I/O calls over all ranks.</p>'
    )
    hints = []
    top = per_file.row(0, named=True)
    small = top["calls"] > 1000 and (top["read_bytes"] + top["write_bytes"]) / top["calls"] < 4096
    if small:
        hints.append(
            f"{top['file']} is accessed in {top['calls']:,} small calls: read and write in larger blocks or buffer them."
        )
    return Section("io", "I/O per file", body, hints)
