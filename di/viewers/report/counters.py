"""Counters over time (GPU power/utilisation, InfiniBand and network bytes/s, host CPU/memory ...).

Each series is reduced to at most ``BINS`` time bins (mean per bin) before
plotting, so the page stays small whatever the sampling rate. One plot per
unit; series whose names mention GPUs, power, utilisation or InfiniBand come
first. Cumulative counters (bytes, packets or counts that never decrease, such
as InfiniBand and network port counters or a rank's read bytes) are shown as
rates per second (difference between samples / time between them, :func:`di.engine.counters.as_rates`). A table
lists every series as plotted with its sample count, min, mean and max.
With a ``--window``, only the samples inside the window's time span count.
"""

from __future__ import annotations

import polars as pl

from di.engine.counters import trace_rates
from di.trace import Trace
from di.viewers.report.page import Section, new_figure, num, svg_plot, table

BINS = 400
PER_PLOT = 8
PLOTS = 6
PRIORITY = ("gpu", "power", "util", "ib", "port", "rcv", "xmit", "net", "cpu busy", "mem")


def binned(samples: pl.DataFrame, t0: int, t1: int, bins: int = BINS) -> pl.DataFrame:
    """series, bin, t_s (bin centre, s from t0), value (mean in the bin)."""
    width = max(1, (t1 - t0) // bins + 1)
    return (
        samples.with_columns(((pl.col("ts_ns") - t0) // width).alias("bin"))
        .group_by("series", "bin")
        .agg(pl.col("value").mean())
        .with_columns(((pl.col("bin") * width + width // 2) / 1e9).alias("t_s"))
        .sort("series", "bin")
    )


def _rank(name: str) -> int:
    low = name.lower()
    return next((i for i, p in enumerate(PRIORITY) if p in low), len(PRIORITY))


def window_samples(trace: Trace, window: str, span: tuple[int, int] | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`~di.engine.counters.trace_rates`, then (``window`` not "all") the samples inside the window's time
    ``span`` (rates from all samples)."""
    series, samples = trace_rates(trace)
    if window != "all":
        samples = samples.filter(pl.col("ts_ns").is_between(*span)) if span else samples.clear()
    return series, samples


def counter_tables(series: pl.DataFrame, samples: pl.DataFrame, t0: int, t1: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(info: each series with its samples, min, mean, max; bins: :func:`binned` from ``t0`` to ``t1``) of the
    samples of :func:`window_samples`."""
    stats = samples.group_by("series").agg(
        pl.len().alias("samples"),
        pl.col("value").min().alias("min"),
        pl.col("value").mean().alias("mean"),
        pl.col("value").max().alias("max"),
    )
    return series.join(stats, on="series").sort("series"), binned(samples, t0, t1)


def _tables(ctx) -> tuple[pl.DataFrame, pl.DataFrame] | None:  # noqa: ANN001
    if not ctx.trace.samples.height:
        return None
    span = ctx.window_span if ctx.result.window != "all" else None
    series, samples = window_samples(ctx.trace, ctx.result.window, span)
    if not samples.height:  # none in the window, or none left as rates (a counter's samples at one time)
        return None
    ev = ctx.window_events
    t0 = int(
        min(
            samples.get_column("ts_ns").min(),
            ev.get_column("start_ns").min() if ev.height else samples.get_column("ts_ns").min(),
        )
    )
    return counter_tables(series, samples, t0, int(samples.get_column("ts_ns").max()))


def panel(ctx) -> Section | None:  # noqa: ANN001
    tables = ctx.aggregates.counters if ctx.aggregates else _tables(ctx)
    if tables is None:
        return None
    info, bins = tables
    body = ""
    moving = info.filter((pl.col("max") != pl.col("min")) | (pl.col("max") != 0))  # all-zero series only in the table
    units = moving.with_columns(pl.col("unit").fill_null("")).group_by("unit").agg(pl.col("series"), pl.col("name"))
    plots = sorted(units.iter_rows(named=True), key=lambda u: min(_rank(n) for n in u["name"]))[:PLOTS]
    for u in plots:
        chosen = sorted(zip(u["name"], u["series"]), key=lambda p: (_rank(p[0]), p[0]))[:PER_PLOT]
        fig = new_figure(9, 2.4)
        ax = fig.add_subplot()
        for name, sid in chosen:
            pts = bins.filter(pl.col("series") == sid)
            ax.plot(pts.get_column("t_s").to_list(), pts.get_column("value").to_list(), label=name, linewidth=1)
        ax.set_xlabel("s from the trace start" if ctx.result.window == "all" else "s from the window start")
        ax.set_ylabel(u["unit"] or "value")
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        body += svg_plot(fig, f"counters in {u['unit'] or 'no unit'}")
    rows = [
        (
            r["name"],
            r["unit"] or "",
            num(r["samples"]),
            num(r["min"], "{:,.3g}"),
            num(r["mean"], "{:,.3g}"),
            num(r["max"], "{:,.3g}"),
        )
        for r in info.iter_rows(named=True)
    ]
    body += table("counters", ["series", "unit", "samples", "min", "mean", "max"], rows)
    hints = []
    util = info.filter(
        pl.col("name").str.to_lowercase().str.contains("gpu")
        & pl.col("name").str.to_lowercase().str.contains("util")
        & (pl.col("unit") == "%")
    )
    if util.height and util.get_column("mean").min() < 50:
        hints.append(
            f"GPU utilisation averages {util.get_column('mean').min():.0f} % on the least busy GPU: the GPUs are starved; see the breakdown for why."
        )
    return Section("counters", "Counters over time", body, hints)
