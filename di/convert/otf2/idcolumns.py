"""The integer id columns of the OTF2 writer's Enter attributes, as :func:`emit.emit_events` reads them: in place.

Each column's int64 values are read where polars holds them, through one read-only array spanning the columns'
buffers (as :func:`di.convert.columns.text_spans` reads texts), with a flag per row for the values present. Filled
into a (k, rows) array of their own, the seven id columns of a real-shaped 1.2 M-event trace cost 0.048 CPU-s, most
of it the first touch of its 67 MB; read in place, 0.007 (the flags).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.columns import readonly

__all__ = ["IdColumns", "id_columns"]


@dataclass(frozen=True)
class IdColumns:
    """The id columns of the events that have a value on some row, for :func:`emit.emit_events`."""

    names: tuple[str, ...]
    values: np.ndarray
    """int64, read-only: column j's value of row e is ``values[at[j] + e]`` (other elements are not the columns')."""
    at: np.ndarray
    """int64 (k,): where each column's values start in ``values``."""
    valid: np.ndarray
    """bool (k, rows), read-only: whether the row has a value."""


class _HeldWords:
    """``size`` read-only int64 words at address ``at`` as numpy takes them, keeping ``owner`` (what holds them) alive."""

    def __init__(self, at: int, size: int, owner: object) -> None:
        self.owner = owner
        self.__array_interface__ = {"shape": (size,), "typestr": "<i8", "data": (at, True), "version": 3}


def id_columns(ev: pl.DataFrame, columns: tuple[str, ...]) -> IdColumns:
    """The ``columns`` of ``ev`` that it has with some value (in that order), read in place (a column of several
    chunks, as a store's row groups load, is made one first)."""
    names = tuple(c for c in columns if c in ev.columns and ev.get_column(c).null_count() < ev.height)
    cols = [ev.get_column(c).cast(pl.Int64).rechunk() for c in names]
    valid = np.empty((len(cols), ev.height), np.bool_)
    for row, col in zip(valid, cols):
        row[:] = col.is_not_null().to_numpy()
    if not cols:
        return IdColumns(names, readonly(np.zeros(0, np.int64)), readonly(np.zeros(0, np.int64)), readonly(valid))
    arrays = [col.to_arrow() for col in cols]
    address = np.array([a.buffers()[1].address + 8 * a.offset for a in arrays], np.int64)
    if (address % 8).any():  # not int64-aligned (never seen): each column copied
        values = np.concatenate([col.fill_null(0).to_numpy() for col in cols])
        at = np.arange(len(cols), dtype=np.int64) * ev.height
    else:
        first = int(address.min())
        values = np.asarray(_HeldWords(first, (int(address.max()) - first) // 8 + ev.height, arrays))
        at = (address - first) // 8
    return IdColumns(names, readonly(values), readonly(at), readonly(valid))
