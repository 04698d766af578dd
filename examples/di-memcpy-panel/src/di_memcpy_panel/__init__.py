"""A di report panel: memory-copy bandwidth per direction (host to device, device to host, ...).

Direction comes from the copy's name (Kineto: ``Memcpy HtoD (Pinned -> Device)``;
``HtoD``, ``DtoH``, ``DtoD``, ``HtoH``, ``PtoP``), "other" when none is named.
Bandwidth = bytes copied / time spent copying (sum of durations), in GB/s (1e9 B/s).
"""

from __future__ import annotations

import re

import polars as pl

from di.viewers.report import ReportContext, Section, ms, new_figure, num, svg_plot, table

DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")


def bandwidth(events: pl.DataFrame) -> pl.DataFrame:
    """direction, copies, bytes, time_ns, gb_per_s, sorted by bytes (largest first)."""
    copies = events.filter(pl.col("cat").cast(pl.String) == "memcpy")
    if not copies.height:
        return pl.DataFrame()
    direction = pl.col("name").cast(pl.String).str.extract(DIRECTION.pattern, 1).fill_null("other")
    per = copies.group_by(direction.alias("direction")).agg(
        pl.len().alias("copies"),
        pl.col("bytes").fill_null(0).sum().alias("bytes"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("time_ns"),
    )
    return per.with_columns(
        pl.when(pl.col("time_ns") > 0)
        .then(pl.col("bytes") / pl.col("time_ns"))
        .otherwise(None)
        .alias("gb_per_s")  # B/ns == GB/s
    ).sort("bytes", "direction", descending=[True, False])


def panel(ctx: ReportContext) -> Section | None:
    """The panel: None when the trace has no memory copies."""
    bw = bandwidth(ctx.trace.events)
    if not bw.height:
        return None
    fig = new_figure(6, 2.2)
    ax = fig.add_subplot()
    ax.barh(bw.get_column("direction").to_list(), bw.get_column("gb_per_s").fill_null(0).to_list(), color="#00897b")
    ax.invert_yaxis()
    ax.set_xlabel("GB/s (bytes / time copying)")
    rows = [
        (r["direction"], num(r["copies"]), num(r["bytes"]), ms(r["time_ns"]), num(r["gb_per_s"], "{:,.2f}"))
        for r in bw.iter_rows(named=True)
    ]
    hints = []
    slow = bw.filter(
        (pl.col("direction").is_in(["HtoD", "DtoH"])) & (pl.col("gb_per_s") < 5) & (pl.col("bytes") > 1 << 20)
    )
    for r in slow.iter_rows(named=True):
        hints.append(
            f"{r['direction']} copies reach only {r['gb_per_s']:.1f} GB/s: pin the host memory (pin_memory=True) and copy asynchronously."
        )
    body = svg_plot(fig, "memcpy bandwidth per direction") + table(
        "memcpy_bandwidth", ["direction", "copies", "bytes", "time_ns", "gb_per_s"], rows
    )
    return Section("memcpy_bandwidth", "Memcpy bandwidth per direction (plugin)", body, hints)
