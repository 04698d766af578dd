"""Top kernels, operators and collectives by total time (sortable tables).

Aggregated with polars over the events of the report's window (as the
analyses select them; a time window clips durations): per name, count and
total/mean/max duration in ns. Totals are sums of durations, so nested
operators count inside their parents too.
"""

from __future__ import annotations

from html import escape

import polars as pl

from di.viewers.report.page import Section, ms, num, pct, table

TOP = 25
GROUPS = (
    ("kernels", "GPU kernels", ("kernel",)),
    ("ops", "Operators (CPU)", ("compute",)),
    ("collectives", "Collectives and messages", ("nccl", "mpi_coll", "mpi_p2p")),
    ("memory", "Memory copies and sets", ("memcpy", "memset")),
)


def top_names(events: pl.DataFrame, cats: tuple[str, ...], n: int = TOP) -> pl.DataFrame:
    """name, count, total_ns, mean_ns, max_ns, share (of the group's total) for the ``n`` longest names."""
    return top_of(name_sums(events, cats), n)


def name_sums(events: pl.DataFrame, cats: tuple[str, ...]) -> pl.DataFrame:
    """name, count, total_ns, max_ns of the events of categories ``cats`` (instants left out), per name."""
    sel = events.filter(pl.col("cat").cast(pl.String).is_in(list(cats)) & ~pl.col("instant"))
    return sel.group_by(pl.col("name").cast(pl.String)).agg(
        pl.len().alias("count"),
        (pl.col("end_ns") - pl.col("start_ns")).sum().alias("total_ns"),
        (pl.col("end_ns") - pl.col("start_ns")).max().alias("max_ns"),
    )


def merge_name_sums(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """:func:`name_sums` of the union of events from its results over disjoint sets of events."""
    parts = [p for p in parts if p.height]
    if not parts:
        return pl.DataFrame()
    return (
        pl.concat(parts)
        .group_by("name")
        .agg(pl.col("count").sum(), pl.col("total_ns").sum(), pl.col("max_ns").max())
        .cast(parts[0].schema)  # type: ignore[arg-type]
    )


def top_of(agg: pl.DataFrame, n: int = TOP) -> pl.DataFrame:
    """:func:`top_names` from the per-name sums (:func:`name_sums`)."""
    if not agg.height:
        return pl.DataFrame()
    total = agg.get_column("total_ns").sum()
    return (
        agg.with_columns(
            (pl.col("total_ns") / pl.col("count")).alias("mean_ns"),
            (pl.col("total_ns") / total if total else pl.lit(None, pl.Float64)).alias("share"),
        )
        .sort("total_ns", "name", descending=[True, False])
        .head(n)
    )


def panel(ctx) -> Section | None:  # noqa: ANN001
    agg = ctx.aggregates
    ev = None if agg else ctx.window_events.select("name", "cat", "start_ns", "end_ns", "instant")
    body, hints = "", []
    for key, title, cats in GROUPS:
        top = agg.top_names.get(key, pl.DataFrame()) if agg else top_names(ev, cats)
        if not top.height:
            continue
        rows = [
            (r["name"], num(r["count"]), ms(r["total_ns"]), ms(r["mean_ns"]), ms(r["max_ns"]), pct(r["share"]))
            for r in top.iter_rows(named=True)
        ]
        body += f"<h3>{title}</h3>" + table(
            f"top_{key}", ["name", "count", "total_ns", "mean_ns", "max_ns", "share"], rows
        )
        first = top.row(0, named=True)
        if key == "kernels" and (first["share"] or 0) > 0.4:
            hints.append(
                f"Kernel {first['name'][:60]} takes {100 * first['share']:.0f} % of GPU kernel time: it is the first one to optimise "
                "(fusion, a better algorithm, mixed precision)."
            )
        if key == "kernels" and first["count"] and top.get_column("mean_ns").median() < 10_000:
            hints.append(
                "Most top kernels last under 10 µs: launch overhead dominates; try CUDA graphs, torch.compile or larger batches."
            )
    if not body:
        return None
    transport = agg.transport_hint if agg else slowest_collective_transport(ctx.trace)
    if transport:
        hints.append(transport)
    return Section(
        "top",
        "Top kernels, operators and collectives",
        body + f'<p class="note">{_scope(ctx.result.window)}; nested operators count in their parents too.</p>',
        hints,
    )


def slowest_collective_transport(trace) -> str | None:  # noqa: ANN001
    """A hint naming the transport and hosts of the longest traced collective, where an NCCL log of the job gave
    them (``collectives.transports``, ``comm_hosts``: :mod:`di.convert.logs.combine`); None otherwise."""
    coll = trace.collectives
    if "transports" not in coll.columns or not coll.get_column("transports").drop_nulls().len():
        return None
    ev = trace.events.with_row_index("event").select(
        pl.col("event").cast(pl.Int64),
        pl.col("name").cast(pl.String),
        (pl.col("end_ns") - pl.col("start_ns")).alias("d"),
    )
    return transport_hint(coll.drop_nulls("transports").join(ev, on="event"))


def transport_hint(rows: pl.DataFrame) -> str | None:
    """:func:`slowest_collective_transport` from collective rows with transports and their event's ``name``,
    duration ``d`` and global row ``event`` (the longest first; ties: the first event)."""
    top = rows.sort("d", "event", descending=[True, False]).head(1)
    if not top.height:
        return None
    r = top.row(0, named=True)
    return (
        f"The longest traced collective, {r['name'][:60]} on rank {r['rank']} ({r['d'] / 1e6:,.2f} ms), "
        f"ran over {r['transports']} between hosts {r['comm_hosts'] or '?'} (NCCL log)."
    )


def _scope(window: str) -> str:
    return "Whole trace" if window == "all" else f"Window {escape(window)} (durations clipped to a time window)"
