"""Wait states (Scalasca): who waited, and which rank made them wait.

From :mod:`di.engine.waitstates`: each row is one wait of ``rank`` caused by
``cause_rank`` (late sender, late receiver, wait at NxN/barrier ...). The table
holds per rank and kind the time waited and the time caused to others, as
``di analyze --json`` reports them under ``ranks[].wait_states``.
"""

from __future__ import annotations

import polars as pl

from di.viewers.report.page import Section, ms, new_figure, svg_plot, table

ADVICE = {
    "wait_nxn": "check its input pipeline, data shard or extra work before the collective",
    "wait_barrier": "check what it does before the barrier",
    "late_sender": "it sends late: move the send earlier or balance its work",
    "late_receiver": "it posts its receive late: post receives earlier (non-blocking)",
}


def wait_totals(w: pl.DataFrame) -> pl.DataFrame:
    """rank, kind, waited_ns (time the rank waited), caused_ns (time it made others wait)."""
    waited = w.group_by("rank", "kind").agg(pl.col("wait_ns").sum().alias("waited_ns"))
    caused = w.group_by(pl.col("cause_rank").alias("rank"), "kind").agg(pl.col("wait_ns").sum().alias("caused_ns"))
    return waited.join(caused, on=["rank", "kind"], how="full", coalesce=True).fill_null(0).sort("rank", "kind")


def panel(ctx) -> Section | None:  # noqa: ANN001
    w = ctx.result.wait_states
    if w is None:
        return None
    if not w.height:
        return Section("waits", "Wait states", '<p class="note">No waits at messages or collectives in the window.</p>')
    totals = wait_totals(w)
    rows = [(r["rank"], r["kind"], ms(r["waited_ns"]), ms(r["caused_ns"])) for r in totals.iter_rows(named=True)]
    matrix = w.group_by("rank", "cause_rank").agg(pl.col("wait_ns").sum())
    ranks = sorted(
        set(matrix.get_column("rank").to_list()) | set(matrix.get_column("cause_rank").drop_nulls().to_list())
    )
    grid = {(a, b): v for a, b, v in matrix.iter_rows()}
    fig = new_figure(min(8, 2.5 + 0.4 * len(ranks)), min(7, 1.5 + 0.35 * len(ranks)))
    ax = fig.add_subplot()
    im = ax.imshow([[grid.get((a, b), 0) / 1e6 for b in ranks] for a in ranks], cmap="Oranges", aspect="auto")
    ax.set_yticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_xticks(range(len(ranks)), [str(r) for r in ranks])
    ax.set_ylabel("waiting rank")
    ax.set_xlabel("rank that caused the wait")
    fig.colorbar(im, ax=ax, label="ms waited")
    body = svg_plot(fig, "wait states: waiting rank vs causing rank") + table(
        "wait_states", ["rank", "kind", "waited_ns", "caused_ns"], rows
    )
    return Section("waits", "Wait states", body, _hints(w, ctx.trace.collectives))


def _hints(w: pl.DataFrame, collectives: pl.DataFrame) -> list[str]:
    caused = w.filter(pl.col("cause_rank").is_not_null() & (pl.col("cause_rank") != pl.col("rank")))
    if not caused.height:
        return []
    top = (
        caused.group_by("cause_rank", "kind")
        .agg(pl.col("wait_ns").sum().alias("total"))
        .sort(["total", "cause_rank", "kind"], descending=[True, False, False])
        .row(0, named=True)
    )
    mine = caused.filter((pl.col("cause_rank") == top["cause_rank"]) & (pl.col("kind") == top["kind"]))
    late = mine.group_by("instance", "event", "step").agg(pl.col("wait_ns").max())
    steps_all = w.get_column("step").drop_nulls().n_unique()
    steps_mine = mine.get_column("step").drop_nulls().n_unique()
    where = f" in {100 * steps_mine / steps_all:.0f} % of steps" if steps_all else ""
    ops = (
        collectives.filter(pl.col("instance").is_in(mine.get_column("instance").drop_nulls().unique().implode()))
        .get_column("op")
        .drop_nulls()
    )
    verbs = {"late_sender": "sends", "late_receiver": "posts its receives"}
    what = (
        f"enters {ops.mode().sort()[0]}"
        if ops.len()
        else f"{verbs.get(top['kind'], 'arrives')} ({top['kind'].replace('_', ' ')})"
    )
    return [
        f"Rank {top['cause_rank']} {what} {late.get_column('wait_ns').mean() / 1e6:,.1f} ms late{where}, "
        f"{top['total'] / 1e6:,.1f} ms of waiting in total for the others: {ADVICE.get(top['kind'], 'check what it does before')}."
    ]
