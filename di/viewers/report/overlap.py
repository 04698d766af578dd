"""Overlap per rank: how much of communication, memcpy, I/O and CPU work is hidden behind other work.

The engine's ratios (:mod:`di.engine.overlap`): numerator / denominator ns, the
share of the first activity during which the second also runs; "—" when the
first activity is absent (reason given).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.viewers.report.page import (
    MAX_BARS,
    Section,
    cells,
    drawn_note,
    ms,
    new_figure,
    pct,
    svg_plot,
    table,
)
from di.viewers.rows_shown import unusual_rows

PAIRS = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")


def panel(ctx) -> Section | None:  # noqa: ANN001
    o = ctx.result.overlap
    if o is None or not o.height:
        return None
    o = o.filter(pl.col("step").is_null()).sort("rank", "pair")
    rows = [
        (r["rank"], r["pair"], pct(r["ratio"]), ms(r["numerator_ns"]), ms(r["denominator_ns"]), r["reason"] or "")
        for r in o.iter_rows(named=True)
    ]
    defined = o.filter(pl.col("ratio").is_not_null())
    body = ""
    if defined.height:
        ranks = o.get_column("rank").unique().sort().to_numpy()
        known = defined.filter(pl.col("pair").is_in(PAIRS))
        column = known.get_column("pair").replace_strict(PAIRS, range(len(PAIRS)), return_dtype=pl.Int64)
        hidden = cells(  # % hidden per rank and pair, 0 where undefined
            ranks, np.arange(len(PAIRS)), known.get_column("rank"), column, 100 * known.get_column("ratio")
        )
        drawn = unusual_rows(hidden, MAX_BARS // len(PAIRS))
        ranks, hidden = ranks[drawn], hidden[drawn]
        fig = new_figure(9, 2.6)
        ax = fig.add_subplot()
        width = 0.8 / len(PAIRS)
        for i, pair in enumerate(PAIRS):
            ax.bar([k + i * width for k in range(ranks.size)], hidden[:, i], width, label=pair)
        ax.set_xticks([k + 0.4 - width / 2 for k in range(ranks.size)], [f"rank {r}" for r in ranks])
        ax.set_ylabel("% hidden")
        ax.set_ylim(0, 100)
        ax.legend(ncol=4, fontsize=8, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0))
        body += svg_plot(fig, "overlap per rank") + drawn_note(ranks.size, o.get_column("rank").n_unique(), "ranks")
    body += table("overlap", ["rank", "pair", "ratio", "numerator_ns", "denominator_ns", "reason"], rows)
    hints = []
    b = ctx.result.breakdown
    computing = (
        b.filter(pl.col("step").is_null() & (pl.col("state") == "compute") & (pl.col("time_ns") > 0))
        .get_column("rank")
        .unique()
        if b is not None
        else []
    )
    cc = defined.filter(
        (pl.col("pair") == "comm_compute") & (pl.col("denominator_ns") > 0) & pl.col("rank").is_in(list(computing))
    ).sort("ratio")
    if cc.height and cc.item(0, "ratio") < 0.3:
        r = cc.row(0, named=True)
        hints.append(
            f"Only {100 * r['ratio']:.0f} % of rank {r['rank']}'s communication ({r['denominator_ns'] / 1e6:,.1f} ms) runs alongside compute: "
            "launch collectives earlier (gradient bucketing, async ops) so they hide behind the backward pass."
        )
    return Section("overlap", "Overlap", body, hints)
