"""Byte fragments and blocks of lines for the Chrome writer's line kernel (:mod:`di.convert.chrome.lines`).

* :class:`Pool`: the fragments the kernel copies by id; whole columns of strings
  are added at once and the pool is frozen into one UTF-8 buffer with offsets.
* :class:`Block`: one kind of line (X/i events, C samples, s/f flows) as a
  template of ops plus column-major fragment ids, time cells, integers and text.
* :func:`json_text`, :func:`json_column`, :func:`json_literals`: strings are escaped once per distinct
  value (:func:`di.convert.columns.dense_codes`; a column of them by polars' JSON encoder, a single one by
  orjson, DEL escaped too), never per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import polars as pl

from di.convert.columns import dense_codes, utf8_buffers
from di.convert.jsonstrings import json_strings

__all__ = ["Block", "Pool", "json_column", "json_literals", "json_text"]


class Pool:
    """Byte fragments the line kernel copies by id; strings are added in bulk."""

    def __init__(self) -> None:
        self.parts: list[pl.Series] = []
        self.size = 0

    def add(self, texts: pl.Series | list[str]) -> int:
        """Register fragments; returns the id of the first."""
        s = texts if isinstance(texts, pl.Series) else pl.Series(texts, dtype=pl.String)
        base, self.size = self.size, self.size + len(s)
        self.parts.append(s.cast(pl.String).rename(""))
        return base

    def freeze(self) -> tuple[np.ndarray, np.ndarray]:
        """The fragments as UTF-8 bytes and int64 offsets (len + 1), for the line kernel."""
        return utf8_buffers(pl.concat(self.parts) if self.parts else pl.Series([], dtype=pl.String))


@dataclass(frozen=True)
class Block:
    """Lines to assemble: a template, column-major fragment ids (int32), times (ns), integers, and text per row."""

    rows: int
    ops: list[tuple[int, int]]
    frag: np.ndarray
    times: np.ndarray
    ints: np.ndarray
    text: pl.Series | None = None
    keys: list[str] = field(default_factory=list)
    """The member name of each row of ``ints`` (an ARGS op's integer members)."""


def json_text(value: Any) -> str:
    """JSON text by orjson, with DEL escaped too: Perfetto's tokenizer rejects raw control characters in strings."""
    return orjson.dumps(value).decode().replace("\x7f", "\\u007f")


def json_column(values: pl.Series) -> pl.Series:
    """Each text of a String column as a JSON string literal, escaped as :func:`json_text` escapes it (DEL too),
    by polars' JSON encoder: no Python per text (``"null"`` for a null)."""
    return json_strings(values.cast(pl.String)).str.replace_all("\x7f", "\\u007f", literal=True)


def json_literals(s: pl.Series) -> pl.Series:
    """Each value as a JSON string literal (escaped once per distinct value); null stays null."""
    codes, values = dense_codes(s)
    if not values.len():
        return pl.Series([None] * len(s), dtype=pl.String)
    return json_column(values).gather(pl.Series(codes).replace(-1, None))
