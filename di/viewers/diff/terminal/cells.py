"""The tables of the terminal summary (rich) and the texts of their cells.

Times in ms or µs, memory in MiB (:func:`di.viewers.terminal.mib_text`), bandwidths in GB/s, shares in %, B's
change over A's in %; names cut to :data:`NAME_CHARS` characters and escaped for rich's markup. A missing value
(None) shows as —.
"""

from __future__ import annotations

from typing import Any

from di.viewers.terminal import mib_text

TOP = 12
"""Rows per table."""
NAME_CHARS = 70
"""Names are cut to this many characters."""


def new_table(title: str, *cols: str) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for i, c in enumerate(cols):
        text = c in ("name", "A name", "B name", "launched from")
        left = text or i == 0 or c in ("status", "state", "pair", "op", "kind", "where", "counter", "unit", "NCCL")
        left = left or c in ("inside a node", "across nodes", "device", "op at peak A → B", "phase")
        t.add_column(c, justify="left" if left else "right", overflow="fold", min_width=20 if text else None)
    return t


def cut(text: str | None, n: int = NAME_CHARS) -> str:
    from rich.markup import escape

    return escape(short(text, n) or "")


def short(text: str | None, n: int = NAME_CHARS) -> str | None:
    """``text`` cut to ``n`` characters (not escaped); None stays None."""
    return text if text is None or len(text) <= n else text[: n - 1] + "…"


def pair(a: str | None, b: str | None) -> str:
    from rich.markup import escape

    return escape(a or "—") if a == b else f"{escape(a or '—')} → {escape(b or '—')}"


def ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:,.3f}"


def signed_ms(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e6:+,.3f}"


def us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e3:,.1f}"


def signed_mib(b: float | None) -> str:
    return mib_text(b, "+")


def gb(x: float | None) -> str:
    return "—" if x is None else f"{x:,.2f}"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def rel(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "—"
    if not a:
        return "new" if b else "0 %"
    return f"{100 * (b - a) / a:+.1f} %"
