"""Nullable integer columns as the writers' event kernels read them (Perfetto's and OTF2's): in place, where polars
holds them.

A column of c is read as ``ints[cols[INT_AT, c] + i]`` (row i's value) and is valid where bit
``cols[INT_VALID, c] + i`` of ``valid`` is set (Arrow's validity bitmap: least significant bit first);
``cols[INT_AT, c]`` -1: the column is absent (every value null), ``cols[INT_VALID, c]`` -1: no value is null.
``ints`` and ``valid`` are read-only spans of the address space from the lowest address of the columns' buffers
to the highest end of one, as :func:`di.convert.columns.text_spans` reads texts: no column is copied or filled (six
Kineto id columns of 1.2 M events filled with a null marker were 58 MB of fresh memory and 0.04-0.09 CPU-s). Only
a row's own value and bit may be read (:func:`value_at`); the spans keep the columns' buffers alive.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.convert.columns import HeldMemory
from di.jitpipeline import ScalarKernelCompiler

INT_ROWS = ("at", "valid")
INT_AT, INT_VALID = range(len(INT_ROWS))
NULL = np.iinfo(np.int64).min
"""What :func:`value_at` gives for a null (a value equal to it reads as null too)."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def value_at(ints, valid, at, b, i):
    """Row i's value of the column at ``at`` in ``ints`` (``cols[INT_AT, c]``) with validity bits from ``b``
    (``cols[INT_VALID, c]``) on in ``valid``; :data:`NULL` when null or when the column is absent."""
    if at < 0:
        return NULL
    if b >= 0:
        b += i
        if not (valid[b >> 3] >> (b & 7)) & 1:
            return NULL
    return ints[at + i]


def _span(parts: list[tuple[int, int]], dtype: type, owner: object) -> tuple[np.ndarray, int]:
    """A read-only array of ``dtype`` from the lowest ``at`` of ``parts`` ((address, bytes) each) to the highest end
    of one, and that lowest address; an empty array when there is no part."""
    if not parts:
        empty = np.zeros(0, dtype)
        empty.flags.writeable = False
        return empty, 0
    first = min(at for at, _ in parts)
    size = (max(at + nbytes for at, nbytes in parts) - first) // np.dtype(dtype).itemsize
    return np.asarray(HeldMemory(first, size, np.dtype(dtype).str, owner)), first


def int_columns(columns: list[pl.Series | None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ints`` (int64), ``valid`` (uint8) and ``cols`` (int64 (``len(INT_ROWS)``, len(columns))) of ``columns``
    (integer Series of one length, or None for an absent one), as the module docstring says."""
    cols = np.full((len(INT_ROWS), len(columns)), -1, dtype=np.int64)
    arrays, values, bitmaps = [], [], []
    for c, s in enumerate(columns):
        if s is None or s.null_count() == s.len():
            continue
        if s.dtype != pl.Int64:
            s = s.cast(pl.Int64)
        if s.n_chunks() > 1:
            s = s.rechunk()
        arr = s.to_arrow()
        bitmap, data = arr.buffers()
        if data.address % 8:  # numba reads aligned int64 only: polars' new buffer of s + 0 is aligned
            arr = (s + 0).to_arrow()
            bitmap, data = arr.buffers()
        at = data.address + 8 * arr.offset
        arrays.append(arr)
        values.append((c, at, 8 * s.len()))
        if s.null_count():
            bitmaps.append((c, bitmap.address, arr.offset, (arr.offset + s.len() + 7) // 8))
    ints, first = _span([(at, size) for _, at, size in values], np.int64, arrays)
    for c, at, _ in values:
        cols[INT_AT, c] = (at - first) // 8
    valid, first = _span([(at, size) for _, at, _, size in bitmaps], np.uint8, arrays)
    for c, at, offset, _ in bitmaps:
        cols[INT_VALID, c] = 8 * (at - first) + offset
    cols.flags.writeable = False
    return ints, valid, cols
