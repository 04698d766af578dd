"""Matrix work in the terminal summary: the headline of the largest utilization change
(:func:`di.viewers.diff.results.flops_headline`) and the table per rank and GPU (utilization in % of the dense
peak, achieved TFLOP/s)."""

from __future__ import annotations

from typing import Any

from di.viewers.diff import Diff
from di.viewers.diff.terminal.cells import TOP, new_table, pair, pct
from di.viewers.terminal import print_table, tflops_text


def flops_line(d: Diff) -> str | None:
    """The headline of the largest change of matrix work's utilization (of the GPU's dense peak, %) with the
    achieved TFLOP/s, when it is at least :data:`di.viewers.diff.results.FLOPS_HEADLINE_POINTS`; else None."""
    from di.viewers.diff.results import flops_headline

    r = flops_headline(d.flops)
    if r is None:
        return None
    return (
        f"Matrix work (rank {r['rank']}, GPU {r['device']}): utilization {pct(r['a_utilization'])}% → "
        f"{pct(r['b_utilization'])}% of the {pair(r['a_peak_dtype'], r['b_peak_dtype'])} peak, achieved "
        f"{tflops_text(r['a_achieved_tflops'])} → {tflops_text(r['b_achieved_tflops'])} TFLOP/s"
    )


def print_flops(console: Any, d: Diff) -> None:
    f = d.flops
    if not f.height:
        return
    t = new_table("Matrix work per GPU", "rank", "GPU", "util A %", "util B %", "Δ points", "TFLOP/s A", "TFLOP/s B")
    for r in f.head(TOP).iter_rows(named=True):
        delta = r["delta_utilization"]
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            pct(r["a_utilization"]),
            pct(r["b_utilization"]),
            "—" if delta is None else f"{100 * delta:+.1f}",
            tflops_text(r["a_achieved_tflops"]),
            tflops_text(r["b_achieved_tflops"]),
        )
    print_table(console, t)
    console.print("[dim]util %: rate over the window / dense peak; TFLOP/s: achieved while kernels ran[/dim]")
    if f.height > TOP:
        console.print(f"[dim]{f.height - TOP} more rank/GPU rows in the JSON and the HTML page[/dim]")
