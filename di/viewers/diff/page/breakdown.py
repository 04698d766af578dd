"""Where the time went, on the page: the time per state summed over ranks and per rank, the overlap of
activities, and the GPUs' idle time per cause summed over the GPUs and per GPU
(:func:`di.viewers.diff.results.breakdown_totals`, :func:`di.viewers.diff.results.gpu_idle_totals`)."""

from __future__ import annotations

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.results import breakdown_totals
from di.viewers.report.page import Cell, Section, ms, pct, table


def gpu_idle_section(d: Diff) -> Section | None:
    from di.engine.gpu_idle import CAUSE_LABELS
    from di.viewers.diff.results import gpu_idle_totals

    if not d.gpu_idle.height:
        return None
    tot = gpu_idle_totals(d.gpu_idle)
    body = "<h3>Summed over the GPUs</h3>" + table(
        "gpu_idle_totals",
        ["cause", "a_time_ns", "b_time_ns", "delta_ns"],
        [
            (CAUSE_LABELS.get(r["cause"], r["cause"]), ms(r["a_time_ns"]), ms(r["b_time_ns"]), ms(r["delta_ns"]))
            for r in tot.iter_rows(named=True)
        ],
    )
    per = d.gpu_idle.filter((pl.col("a_time_ns") != 0) | (pl.col("b_time_ns") != 0))
    body += "<h3>Per GPU</h3>" + table(
        "gpu_idle",
        ["rank", "scope", "cause", "a_time_ns", "b_time_ns", "delta_ns", "a_share", "b_share"],
        [
            (
                r["rank"],
                r["scope"],
                CAUSE_LABELS.get(r["cause"], r["cause"]),
                ms(r["a_time_ns"]),
                ms(r["b_time_ns"]),
                ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
            for r in per.iter_rows(named=True)
        ],
    )
    return Section("gpu_idle", "Why the GPUs are idle (idle time by cause)", body)


def breakdown_section(d: Diff) -> Section | None:
    if not d.breakdown.height:
        return None
    tot = breakdown_totals(d.breakdown)
    body = "<h3>Summed over ranks</h3>" + table(
        "breakdown_totals",
        ["where", "state", "a_time_ns", "b_time_ns", "delta_ns"],
        [
            (r["kind"], r["state"], ms(r["a_time_ns"]), ms(r["b_time_ns"]), ms(r["delta_ns"]))
            for r in tot.iter_rows(named=True)
        ],
    )
    per = d.breakdown.filter((pl.col("a_time_ns") != 0) | (pl.col("b_time_ns") != 0))
    body += "<h3>Per rank</h3>" + table(
        "breakdown",
        ["rank", "scope", "state", "a_time_ns", "b_time_ns", "delta_ns", "a_share", "b_share"],
        [
            (
                r["rank"],
                r["scope"],
                r["state"],
                ms(r["a_time_ns"]),
                ms(r["b_time_ns"]),
                ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
            for r in per.iter_rows(named=True)
        ],
    )
    body += "<h3>Overlap</h3>" + table(
        "overlap",
        ["rank", "pair", "a_ratio", "b_ratio", "delta points"],
        [
            (
                r["rank"],
                r["pair"],
                pct(r["a_ratio"]),
                pct(r["b_ratio"]),
                Cell("—", None)
                if r["delta_ratio"] is None
                else Cell(f"{100 * r['delta_ratio']:+.1f}", r["delta_ratio"]),
            )
            for r in d.overlap.iter_rows(named=True)
        ],
    )
    return Section(
        "breakdown",
        "Breakdown and overlap",
        body + '<p class="note">Exclusive time per state (gpuN: a device\'s streams, host: CPU threads); '
        "overlap: share of the first activity's time during which the second also runs.</p>",
    )
