"""Wait states (Scalasca): who waited, and which rank made them wait.

From :mod:`di.engine.waitstates`: each row is one wait of ``rank`` caused by
``cause_rank`` (late sender, late receiver, wait at NxN/barrier ...). The table
holds per rank and kind the time waited and the time caused to others, as
``di analyze --json`` reports them under ``ranks[].wait_states``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.viewers.report.page import Section, cells, label_ticks, ms, new_figure, svg_plot, table

ADVICE = {
    "wait_nxn": "check its input pipeline, data shard or extra work before the collective",
    "wait_barrier": "check what it does before the barrier",
    "late_sender": "it sends late: move the send earlier or balance its work",
    "late_receiver": "it posts its receive late: post receives earlier (non-blocking)",
}


def wait_totals(w: pl.DataFrame) -> pl.DataFrame:
    """rank, kind, waited_ns (time the rank waited), caused_ns (time it made others wait)."""
    return join_totals(*wait_sums(w))


def wait_sums(w: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rank, kind, waited_ns; rank, kind, caused_ns): sums over the rows of ``w``, which sums of them over
    disjoint sets of rows add up to."""
    waited = w.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited_ns"))
    caused = w.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused_ns"))
    return waited, caused


def join_totals(waited: pl.DataFrame, caused: pl.DataFrame) -> pl.DataFrame:
    """:func:`wait_totals` from :func:`wait_sums`."""
    return waited.join(caused, on=["rank", "kind"], how="full", coalesce=True).fill_null(0).sort("rank", "kind")


def wait_matrix(w: pl.DataFrame) -> pl.DataFrame:
    """rank, cause_rank, wait_ns: time waited per waiting rank and causing rank."""
    return w.group_by("rank", "cause_rank").agg(pl.col("wait_ns").sum())


def panel(ctx) -> Section | None:  # noqa: ANN001
    if ctx.aggregates:
        if ctx.aggregates.waits is None:
            return None
        n, totals, matrix, hints = ctx.aggregates.waits
    else:
        w = ctx.result.wait_states
        if w is None:
            return None
        n, totals, matrix = w.height, wait_totals(w), wait_matrix(w)
        hints = _hints(w, ctx.trace.collectives) if n else []
    if not n:
        return Section("waits", "Wait states", '<p class="note">No waits at messages or collectives in the window.</p>')
    rows = [(r["rank"], r["kind"], ms(r["waited_ns"]), ms(r["caused_ns"])) for r in totals.iter_rows(named=True)]
    ranks, grid = _wait_grid(matrix)
    fig = new_figure(min(8, 2.5 + 0.4 * len(ranks)), min(7, 1.5 + 0.35 * len(ranks)))
    ax = fig.add_subplot()
    im = ax.imshow(grid / 1e6, cmap="Oranges", aspect="auto")
    label_ticks(ax.yaxis, range(len(ranks)), [str(r) for r in ranks])
    label_ticks(ax.xaxis, range(len(ranks)), [str(r) for r in ranks])
    ax.set_ylabel("waiting rank")
    ax.set_xlabel("rank that caused the wait")
    fig.colorbar(im, ax=ax, label="ms waited")
    body = svg_plot(fig, "wait states: waiting rank vs causing rank") + table(
        "wait_states", ["rank", "kind", "waited_ns", "caused_ns"], rows
    )
    return Section("waits", "Wait states", body, hints)


def _wait_grid(matrix: pl.DataFrame) -> tuple[list[int], np.ndarray]:
    """(ranks, grid): every rank that waited or caused a wait, sorted, and the ns waited per waiting rank (row) and
    causing rank (column) from :func:`wait_matrix`'s rows (those with no causing rank left out)."""
    caused = matrix.filter(pl.col("cause_rank").is_not_null())
    ranks = (
        pl.concat([matrix.get_column("rank").cast(pl.Int64), caused.get_column("cause_rank").cast(pl.Int64)])
        .unique()
        .sort()
        .to_numpy()
    )
    grid = cells(ranks, ranks, caused.get_column("rank"), caused.get_column("cause_rank"), caused.get_column("wait_ns"))
    return ranks.tolist(), grid


def caused_by_others(w: pl.DataFrame) -> pl.DataFrame:
    """The waits that another rank caused."""
    return w.filter(pl.col("cause_rank").is_not_null() & (pl.col("cause_rank") != pl.col("rank")))


def top_cause(sums: pl.DataFrame) -> dict[str, Any]:
    """The (cause_rank, kind, total) that caused the most waiting, from sums per cause_rank and kind."""
    return sums.sort(["total", "cause_rank", "kind"], descending=[True, False, False]).row(0, named=True)


def late_waits(caused: pl.DataFrame, top: dict[str, Any]) -> pl.DataFrame:
    """The waits of ``top``'s kind that its rank caused, the longest per (instance, event, step)."""
    mine = caused.filter((pl.col("cause_rank") == top["cause_rank"]) & (pl.col("kind") == top["kind"]))
    return mine.group_by("instance", "event", "step").agg(pl.col("wait_ns").max())


def _hints(w: pl.DataFrame, collectives: pl.DataFrame) -> list[str]:
    caused = caused_by_others(w)
    if not caused.height:
        return []
    top = top_cause(caused.group_by("cause_rank", "kind").agg(pl.col("wait_ns").sum().alias("total")))
    late = late_waits(caused, top)
    ops = (
        collectives.filter(pl.col("instance").is_in(late.get_column("instance").drop_nulls().unique().implode()))
        .get_column("op")
        .drop_nulls()
    )
    return [
        hint_text(
            top,
            late.get_column("wait_ns").mean(),
            late.get_column("step").drop_nulls().n_unique(),
            w.get_column("step").drop_nulls().n_unique(),
            ops.mode().sort()[0] if ops.len() else None,
        )
    ]


def hint_text(top: dict[str, Any], late_ns: float, steps_late: int, steps: int, op: str | None) -> str:
    """The hint naming the rank that caused the most waiting (``top``: :func:`top_cause`): its mean lateness
    ``late_ns``, the steps it was late in out of the steps with waits, the collective it enters late most
    often (``op``; None: not a collective)."""
    where = f" in {100 * steps_late / steps:.0f} % of steps" if steps else ""
    verbs = {"late_sender": "sends", "late_receiver": "posts its receives"}
    what = (
        f"enters {op}" if op is not None else f"{verbs.get(top['kind'], 'arrives')} ({top['kind'].replace('_', ' ')})"
    )
    return (
        f"Rank {top['cause_rank']} {what} {late_ns / 1e6:,.1f} ms late{where}, "
        f"{top['total'] / 1e6:,.1f} ms of waiting in total for the others: {ADVICE.get(top['kind'], 'check what it does before')}."
    )
