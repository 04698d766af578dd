"""Printing a table of the terminal summary, and the text of its cells: milliseconds, percentages, sizes, TFLOP/s
and short event names. The report and ``di diff`` viewers use some of them too.
"""

from __future__ import annotations

import os
from typing import Any


def pct_text(x: float | None) -> str:
    """A share (0.25) as percent text with one decimal (``25.0``); — for null."""
    return "—" if x is None else f"{100 * x:.1f}"


def ms_text(ns: float | int | None) -> str:
    """Nanoseconds as milliseconds with two decimals and thousands separators (``1,234.57``); — for null."""
    return "—" if ns is None else f"{ns / 1e6:,.2f}"


def mib_text(b: float | int | None, sign: str = "") -> str:
    """Bytes as MiB text (2**20 bytes): one decimal, three significant digits under 0.1 MiB (a 4 KiB host buffer is
    not 0.0); ``sign`` "+" for a change."""
    if b is None:
        return "—"
    return f"{b / 2**20:{sign},.1f}" if b == 0 or abs(b) >= 2**20 / 10 else f"{b / 2**20:{sign}.3g}"


def size_text(value: int | None) -> str:
    """Bytes in the largest binary unit they reach (``8 B``, ``1.5 KiB``, ``30.0 MiB``, ``2.00 GiB``)."""
    if value is None:
        return "—"
    for unit, scale, fmt in (("GiB", 2**30, "{:.2f}"), ("MiB", 2**20, "{:.1f}"), ("KiB", 2**10, "{:.1f}")):
        if abs(value) >= scale:
            return f"{fmt.format(value / scale)} {unit}"
    return f"{value} B"


def tflops_text(value: float | None) -> str:
    """TFLOP/s with three significant digits (``12.7``, ``0.418``); — for null."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


RANKS_SHOWN = 16
"""The most ranks a per-rank table of the terminal summary lists (each section says which it picks); all are in
``--csv``/``--json``."""

NAME_CHARS = 60
"""The most characters of an event name in a table cell (all of it is in ``--csv``/``--json``)."""


def short_name(name: str | None, width: int = NAME_CHARS) -> str:
    """A kernel or function name for a table cell: C++ template arguments and parameter lists folded to ``<…>`` and
    ``(…)`` (``void cutlass::Kernel2<cutlass_80_…>(Params)`` -> ``cutlass::Kernel2<…>(…)``), then cut to ``width``."""
    if name is None:
        return "—"
    text = name.removeprefix("void ")
    out, depth, prev = [], 0, ""
    for ch in text:  # one pass over a name of a table row (at most a few dozen rows)
        opens = ch == "<" or (ch == "(" and prev not in ("", " "))  # "Memcpy DtoD (Device -> Device)" stays whole
        if opens or (ch in "<(" and depth):
            if depth == 0:
                out.append(ch + "…")
            depth += 1
        elif ch in ">)" and depth and prev != "-":
            depth -= 1
            if depth == 0:
                out.append(">" if ch == ">" else ")")
        elif depth == 0:
            out.append(ch)
        prev = ch
    folded = "".join(out).strip() or text
    return folded if len(folded) <= width else folded[: width - 1] + "…"


def print_table(console: Any, table: Any) -> None:
    """Print a rich table whose right-aligned (number) columns are never cut: each keeps the width of its widest
    cell. On a narrow terminal the headers and the text columns wrap or shorten instead, and the cells lose
    their padding when even that does not fit (all of it in a boxed table, all but one space in one without lines). Written to a file or a pipe (``di analyze x.di > summary.txt``),
    where no window crops the lines, the table is as wide as its cells ask: nothing is cut or wrapped, unless
    ``COLUMNS`` sets a width to keep to."""
    for column in table.columns:
        if column.justify == "right":  # a number is one word: at its width it never wraps
            column.min_width = max((len(str(c)) for c in column.cells), default=0)
    from rich.measure import Measurement

    wide = Measurement.get(console, console.options.update_width(UNBOUNDED_WIDTH), table).maximum
    if wide > console.width and not console.is_terminal and "COLUMNS" not in os.environ:
        narrow, console.width = console.width, wide  # rich's print never goes past the console's width
        try:
            console.print(table)
        finally:
            console.width = narrow
        return
    if wide > console.width:  # without lines between them, cells keep one space
        table.padding = (0, 0) if table.box is not None else (0, 1, 0, 0)
    console.print(table)


UNBOUNDED_WIDTH = 1 << 16
"""Columns offered to a table when measuring the width its cells ask for."""
