"""The top of the page: step time of A and B (statistics, the critical path's length, a chart of each step) with
the headlines of memory, matrix work and training phases, and the biggest changes over kernels, operators and
collectives (:func:`di.viewers.diff.terminal.biggest_changes`)."""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import pair
from di.viewers.diff.results import flops_headline, memory_headline
from di.viewers.diff.terminal import biggest_changes
from di.viewers.report.page import Cell, Section, ms, new_figure, num, pct, svg_plot, table

MIB = 2**20
"""Bytes in a MiB."""


_STEP_STATS = {
    "count": "steps",
    "mean_ns": "mean step (ms)",
    "p50_ns": "p50 step (ms)",
    "p90_ns": "p90 step (ms)",
    "min_ns": "shortest step (ms)",
    "max_ns": "longest step (ms)",
}
"""The step statistics of the table, by their name in :meth:`di.viewers.diff.Diff.step_stat`, with their labels."""


def summary_section(d: Diff, names: tuple[str, str]) -> Section:
    body = f"<p class=\"note\">A = {html.escape(names[0])}; B = {html.escape(names[1])}. A step's time: from the first rank's start to the last rank's end.</p>"
    body += table("steps", ["stat", "A", "B", "delta", "change %"], _step_rows(d), sortable=False)
    body += _step_chart(d)
    return Section("summary", "Step time", body, _hints(d))


def _step_rows(d: Diff) -> list[tuple[Any, ...]]:
    """The step statistics of A and B, their difference and change, and the critical path's length."""
    rows: list[tuple[Any, ...]] = [
        (
            label,
            _cell(s, d.step_stat("a", s)),
            _cell(s, d.step_stat("b", s)),
            _cell(s, d.step_stat("delta", s)),
            pct(_ratio(d, s)),
        )
        for s, label in _STEP_STATS.items()
    ]
    cp = d.critical_path
    rows.append(
        (
            "critical path (ms)",
            ms(cp["a_length_ns"]),
            ms(cp["b_length_ns"]),
            ms(cp["delta_ns"]),
            pct(
                None
                if not cp["a_length_ns"] or cp["b_length_ns"] is None
                else cp["b_length_ns"] / cp["a_length_ns"] - 1
            ),
        )
    )
    return rows


def _step_chart(d: Diff) -> str:
    """Each step's time in A and B, in window order; empty without steps."""
    times = d.step_times
    if not times.height:
        return ""
    fig = new_figure(9, 2.6)
    ax = fig.add_subplot()
    for run, color in (("a", "#8d99ae"), ("b", "#5c6bc0")):
        t = times.filter(pl.col("run") == run)
        ax.plot(
            range(t.height),
            [v / 1e6 for v in t.get_column("time_ns").to_list()],
            marker="o",
            color=color,
            label=run.upper(),
        )
    ax.set_xlabel("step (in window order)")
    ax.set_ylabel("ms")
    ax.legend()
    return svg_plot(fig, "step time of A and B")


def _hints(d: Diff) -> list[str]:
    """The diff's notes after the change of the mean step, then the headlines of memory, matrix work and phases."""
    hints = list(d.notes)
    a, b = d.step_stat("a", "mean_ns"), d.step_stat("b", "mean_ns")
    if a and b is not None:
        hints.insert(0, f"Mean step time {a / 1e6:,.3f} → {b / 1e6:,.3f} ms ({100 * (b - a) / a:+.1f} %).")
    peak = memory_headline(d.memory)
    if peak is not None:
        hints.append(
            f"Peak memory of rank {peak['rank']} {peak['device']}: {peak['a_peak_bytes'] / MIB:,.1f} → "
            f"{peak['b_peak_bytes'] / MIB:,.1f} MiB ({peak['delta_peak_bytes'] / MIB:+,.1f} MiB, "
            f"{100 * peak['rel_peak']:+.1f} %)."
        )
    hints += [h for h in (_flops_hint(d), _phases_hint(d)) if h is not None]
    return hints


def _flops_hint(d: Diff) -> str | None:
    """The headline of :func:`di.viewers.diff.results.flops_headline` as a sentence; None without one."""
    from di.viewers.terminal import tflops_text

    r = flops_headline(d.flops)
    if r is None:
        return None
    return (
        f"Matrix work of rank {r['rank']} GPU {r['device']}: utilization {100 * r['a_utilization']:.1f} → "
        f"{100 * r['b_utilization']:.1f} % of the {pair(r['a_peak_dtype'], r['b_peak_dtype'])} peak "
        f"({100 * r['delta_utilization']:+.1f} points), achieved "
        f"{tflops_text(r['a_achieved_tflops'])} → {tflops_text(r['b_achieved_tflops'])} TFLOP/s."
    )


def _phases_hint(d: Diff) -> str | None:
    """The headline of :func:`di.viewers.diff.results.phases_headline` (the terminal's sentence,
    :func:`di.viewers.diff.terminal.phases_line`); None without one."""
    from di.viewers.diff.terminal import phases_line

    line = phases_line(d)
    return None if line is None else f"{line}."


def changes_section(d: Diff) -> Section | None:
    big = biggest_changes(d, n=25)
    if not big.height:
        return None
    rows = [
        (r["kind"], r["name"], r["status"], ms(r["a_total_ns"]), ms(r["b_total_ns"]), ms(r["delta_ns"]), r["note"])
        for r in big.iter_rows(named=True)
    ]
    return Section(
        "changes",
        "Biggest changes",
        table("changes", ["kind", "name", "status", "a_total_ns", "b_total_ns", "delta_ns", "note"], rows)
        + '<p class="note">Total time over all ranks of kernels, operators and collectives, largest |Δ| first.</p>',
    )


def _cell(stat: str, v: Any) -> Cell:
    return num(v) if stat == "count" else ms(v)


def _ratio(d: Diff, stat: str) -> float | None:
    r = d.step_stat("ratio", stat)
    return None if r is None else r - 1
