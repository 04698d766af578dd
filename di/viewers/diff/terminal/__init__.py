"""The terminal summary of a :class:`di.viewers.diff.Diff` (rich): the biggest changes first, then the tables.

Times are shown in ms, memory in MiB (2^20 bytes), matrix work's rates in TFLOP/s, training phases' shares in % of
the rank's steps; Δ is B - A. Only what changed is listed in the long tables (the JSON and the HTML page hold every
row).

This module prints the headlines and the biggest changes; the tables come from one module per analysis:
:mod:`~di.viewers.diff.terminal.names` (kernels and operators by name, renamed kernels, launch stacks),
:mod:`~di.viewers.diff.terminal.collectives` (collectives and communicators),
:mod:`~di.viewers.diff.terminal.counters`, :mod:`~di.viewers.diff.terminal.breakdown` (breakdown, overlap, GPU
idle), :mod:`~di.viewers.diff.terminal.phases`, :mod:`~di.viewers.diff.terminal.memory`,
:mod:`~di.viewers.diff.terminal.flops` and :mod:`~di.viewers.diff.terminal.critical_path`;
:mod:`~di.viewers.diff.terminal.cells` makes the tables and their cells' texts.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.viewers.diff import Diff
from di.viewers.diff.sides import by_change
from di.viewers.diff.terminal.breakdown import print_breakdown, print_gpu_idle
from di.viewers.diff.terminal.cells import NAME_CHARS, TOP, cut, ms, new_table, rel, signed_ms
from di.viewers.diff.terminal.collectives import print_collectives, print_communicators
from di.viewers.diff.terminal.counters import print_counters
from di.viewers.diff.terminal.critical_path import print_critical_path
from di.viewers.diff.terminal.flops import flops_line, print_flops
from di.viewers.diff.terminal.memory import memory_line, print_memory
from di.viewers.diff.terminal.names import print_named, print_renamed, print_stacks
from di.viewers.diff.terminal.phases import phases_line, print_phases

__all__ = ["NAME_CHARS", "TOP", "biggest_changes", "flops_line", "memory_line", "phases_line", "render"]


def biggest_changes(d: Diff, n: int = TOP) -> pl.DataFrame:
    """kind (kernel, op, collective), name, status, a_total_ns, b_total_ns, delta_ns, note: the ``n`` largest |delta_ns|
    over kernels, operators and collectives."""

    def part(df: pl.DataFrame, kind: str, name: pl.Expr, note: pl.Expr) -> pl.DataFrame:
        return df.filter(pl.col("delta_ns") != 0).select(
            pl.lit(kind).alias("kind"),
            name.alias("name"),
            pl.col("status").cast(pl.String),
            "a_total_ns",
            "b_total_ns",
            "delta_ns",
            note.alias("note"),
        )

    renamed = (
        pl.when(pl.col("match") == "op")
        .then(pl.lit("paired by launch stack with ") + pl.col("matched_name"))
        .otherwise(pl.lit(""))
    )
    coll_name = pl.col("op") + pl.lit(" ") + pl.col("bytes").cast(pl.String).fill_null("?") + pl.lit(" B")
    parts = [
        part(d.kernels, "kernel", pl.col("name"), renamed),
        part(d.ops, "op", pl.col("name"), pl.lit("")),
        part(d.collectives, "collective", coll_name, pl.lit("")),
    ]
    return by_change(pl.concat(parts), "delta_ns", "kind", "name").head(n)


def render(d: Diff, console: Any, *, names: tuple[str, str] = ("A", "B")) -> None:
    """Print the summary on a rich console."""
    from rich.markup import escape

    console.print(f"[bold]di diff[/bold] A = {escape(names[0])}  B = {escape(names[1])}  window: {escape(d.window)}")
    console.print(_steps_line(d))
    cp = d.critical_path
    if cp["a_length_ns"] is not None and cp["b_length_ns"] is not None:
        console.print(
            f"Critical path: {ms(cp['a_length_ns'])} → {ms(cp['b_length_ns'])} ms ({signed_ms(cp['delta_ns'])} ms, {rel(cp['a_length_ns'], cp['b_length_ns'])})"
        )
    for line in (memory_line(d), flops_line(d), phases_line(d)):
        if line:
            console.print(line)
    big = biggest_changes(d)
    t = new_table(
        "Biggest changes (total time over all ranks; Δ = B - A)",
        "kind",
        "name",
        "A ms",
        "B ms",
        "Δ ms",
        "Δ %",
        "status",
    )
    for r in big.iter_rows(named=True):
        t.add_row(
            r["kind"],
            cut(r["name"]),
            ms(r["a_total_ns"]),
            ms(r["b_total_ns"]),
            signed_ms(r["delta_ns"]),
            rel(r["a_total_ns"], r["b_total_ns"]),
            r["status"] + (f", {cut(r['note'], 50)}" if r["note"] else ""),
        )
    console.print(t if big.height else "No kernel, operator or collective changed its total time.")
    print_named(console, d.kernels, "Kernels by name (GPU kernels, copies, sets)")
    print_renamed(console, d)
    print_stacks(console, d)
    print_named(console, d.ops, "Operators by name (CPU)")
    print_collectives(console, d)
    print_counters(console, d)
    print_communicators(console, d)
    print_breakdown(console, d)
    print_phases(console, d)
    print_gpu_idle(console, d)
    print_memory(console, d)
    print_flops(console, d)
    print_critical_path(console, d)


def _steps_line(d: Diff) -> str:
    a, b = d.step_stat("a", "mean_ns"), d.step_stat("b", "mean_ns")
    if a is None or b is None:
        return f"Step time: {'no steps in A' if a is None else ''}{' and ' if a is None and b is None else ''}{'no steps in B' if b is None else ''}"
    parts = [
        f"{k.removesuffix('_ns')} {ms(d.step_stat('a', k))} → {ms(d.step_stat('b', k))} ms ({signed_ms(d.step_stat('delta', k))}, "
        f"{rel(d.step_stat('a', k), d.step_stat('b', k))})"
        for k in ("mean_ns", "p50_ns", "p90_ns")
    ]
    return (
        f"[bold]Step time[/bold] ({d.step_stat('a', 'count')} steps in A, {d.step_stat('b', 'count')} in B): "
        + "; ".join(parts)
    )
