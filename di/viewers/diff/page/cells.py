"""What the page's sections share: the rows a table shows at most (the JSON holds all), the note saying a table
was cut, and a cell for a text of A and one of B."""

from __future__ import annotations

import polars as pl

ROWS = 200
"""Rows per table at most (the JSON holds all)."""


def pair(a: str | None, b: str | None) -> str:
    """One text when A's and B's agree, else ``A → B``; — for null."""
    return a or "—" if a == b else f"{a or '—'} → {b or '—'}"


def more(df: pl.DataFrame) -> str:
    return f" The first {ROWS} of {df.height} rows; the JSON (--json) holds all." if df.height > ROWS else ""
