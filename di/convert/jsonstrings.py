"""Texts of a polars String column as JSON string literals, for connectors that build JSON args as columns."""

from __future__ import annotations

import polars as pl


def json_strings(values: pl.Series) -> pl.Series:
    """Each string as a JSON string literal, quoted and escaped as polars' JSON writer does (``"null"`` for a
    null): one struct JSON encoding of the column, cut to the value (no Python per string)."""
    encoded = pl.DataFrame({"v": values}).select(pl.struct("v").struct.json_encode()).to_series()
    return encoded.str.slice(5).str.head(-1)  # '{"v":' ... '}'
