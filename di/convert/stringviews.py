"""Polars String columns built as Arrow string views over text di already holds.

An Arrow string view is 16 bytes: the length (uint32), then the text itself
when it has at most 12 bytes, else its first four bytes, the number of the data
buffer that holds it and its offset there (uint32 each). A column of views
points into existing UTF-8 bytes, so building one writes 16 bytes per row and
copies no text; polars takes such an Arrow array without converting it.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import copy_bytes, load_u64
from di.convert.columns import INLINE_TEXT_BYTES as _INLINE_BYTES, readonly

VIEW_BUFFER_BYTES = (1 << 31) - 1
"""Largest data buffer one Arrow string view can point into (offsets are int32)."""


@njit(cache=True)
def _put_u32(views, at, v):
    for b in range(4):
        views[at + b] = np.uint8((v >> (8 * b)) & 0xFF)


@njit(cache=True)
def put_view(views, e, text, lo, hi, buffer, at):
    """Write string view ``e`` of ``text[lo:hi]``, which sits at byte ``at`` of data buffer ``buffer``."""
    v = 16 * e
    length = hi - lo
    _put_u32(views, v, length)
    if length <= _INLINE_BYTES:
        for b in range(length):
            views[v + 4 + b] = text[lo + b]
    else:
        for b in range(4):
            views[v + 4 + b] = text[lo + b]
        _put_u32(views, v + 8, buffer)
        _put_u32(views, v + 12, at)


def string_views(
    n: int,
    views: np.ndarray,
    texts: list[tuple[np.ndarray, np.ndarray]],
    valid: np.ndarray,
    name: str,
    *,
    check_utf8: bool = False,
) -> pl.Series:
    """A polars String Series from Arrow string views and their data buffers: ``texts`` holds (bytes, buffer
    starts + end) pairs, the buffers numbered in that order (no copy of the text).

    Raises:
        pyarrow.ArrowInvalid: with ``check_utf8``, a text is not UTF-8 (bytes of unknown origin).
    """
    import pyarrow as pa

    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if not valid.all() else None
    chunks = [pa.py_buffer(data[starts[i] : starts[i + 1]]) for data, starts in texts for i in range(starts.size - 1)]
    arr = pa.Array.from_buffers(pa.string_view(), n, [bitmap, pa.py_buffer(views), *chunks])
    if check_utf8:
        arr.validate(full=True)
    return pl.Series(name, _CArray(arr)).alias(name)


def nullable(values: np.ndarray, valid: np.ndarray, name: str) -> pl.Series:
    """A Series of the numeric ``values``, null where ``valid`` is False, over the numpy buffer itself (its
    validity a bitmap of n / 8 bytes): where a ``when/then`` would write a new column."""
    values = np.ascontiguousarray(values)
    if valid.all():
        return pl.Series(name, values)
    return with_validity(values, np.packbits(valid, bitorder="little"), name)


def with_validity(values: np.ndarray, bitmap: np.ndarray, name: str) -> pl.Series:
    """A Series of the contiguous numeric ``values``, null where bit i (little-endian order) of the uint8
    ``bitmap`` is 0, over both buffers themselves (Arrow's validity bitmap, as :func:`numpy.packbits` with
    ``bitorder="little"`` makes it)."""
    import pyarrow as pa

    arr = pa.Array.from_buffers(
        pa.from_numpy_dtype(values.dtype), values.size, [pa.py_buffer(bitmap), pa.py_buffer(values)]
    )
    return pl.Series(name, _CArray(arr)).alias(name)


class _CArray:
    """An Arrow array offered to polars through the Arrow PyCapsule interface only (zero-copy, as
    a pyarrow array is): polars' pyarrow path imports ``pyarrow.compute``, 40-60 ms of every
    ``di`` command that reads text."""

    def __init__(self, array: object) -> None:
        self._array = array

    def __arrow_c_array__(self, requested_schema: object = None) -> object:
        return self._array.__arrow_c_array__(requested_schema)  # type: ignore[attr-defined]


_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _span_views(data, los, his, end, limit, views, starts):
    """Fill the views (two uint64 words each) of the texts ``data[los[e]:his[e]]`` and ``starts``
    (zeros) with the data buffers' starts and ``end`` (a new buffer begins where a text would end
    beyond ``limit`` bytes of the current one: the spans ascend, unless all of them lie in the
    first ``limit`` bytes); returns the number of buffers."""
    n = los.size
    size = data.size
    nb = 1
    for e in range(n):
        lo = los[e]
        hi = his[e]
        if hi - starts[nb - 1] > limit:
            starts[nb] = lo
            nb += 1
        length = hi - lo
        # the text's first twelve bytes (fewer when it is shorter; zeros above) as
        # ``head`` (bytes 0-7) and ``tail`` (bytes 8-11)
        m = length if length < _INLINE_BYTES else _INLINE_BYTES
        head = np.uint64(0)
        tail = np.uint64(0)
        if lo + 16 <= size:
            head = load_u64(data, lo)
            tail = load_u64(data, lo + 8) & _LOW32
            if m < 8:
                head &= (np.uint64(1) << np.uint64(8 * m)) - np.uint64(1)
                tail = np.uint64(0)
            else:
                tail &= (np.uint64(1) << np.uint64(8 * (m - 8))) - np.uint64(1)
        else:
            for k in range(m):
                if k < 8:
                    head |= np.uint64(data[lo + k]) << np.uint64(8 * k)
                else:
                    tail |= np.uint64(data[lo + k]) << np.uint64(8 * (k - 8))
        views[2 * e] = np.uint64(length) | (head << np.uint64(32))
        if length <= _INLINE_BYTES:
            views[2 * e + 1] = (head >> np.uint64(32)) | (tail << np.uint64(32))
        else:
            views[2 * e + 1] = np.uint64(nb - 1) | (np.uint64(lo - starts[nb - 1]) << np.uint64(32))
    starts[nb] = end
    return nb


def texts_at_offsets(
    data: np.ndarray,
    offsets: np.ndarray,
    valid: np.ndarray,
    name: str,
    *,
    limit: int = VIEW_BUFFER_BYTES,
    check_utf8: bool = False,
) -> pl.Series:
    """A String Series of the UTF-8 texts ``data[offsets[i]:offsets[i + 1]]`` (int64
    offsets, one more than rows), null where ``valid`` is False, viewing ``data``
    in place (``limit``: the most bytes of one data buffer; smaller only in tests;
    ``check_utf8``: see :func:`string_views`)."""
    n = offsets.size - 1
    views = np.empty(2 * n, np.uint64)  # every word is written
    starts = np.zeros(2 * (int(offsets[n]) // limit) + 3, np.int64)
    buffers = _span_views(readonly(data), offsets[:-1], offsets[1:], offsets[n], np.int64(limit), views, starts)
    return string_views(n, views, [(data, starts[: buffers + 1])], valid, name, check_utf8=check_utf8)


def gather_spans(
    data: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The bytes ``data[starts[i]:ends[i]]`` of the ``valid`` spans one after another in a new
    buffer, and their offsets there (one more than spans; an invalid span is empty).

    Raises:
        IndexError: a valid span reaches outside ``data`` or ends before it starts (the copy is unchecked).
    """
    length = np.where(valid, ends - starts, 0)
    if valid.any() and (length.min() < 0 or starts[valid].min() < 0 or ends[valid].max() > data.size):
        raise IndexError(f"a span outside the {data.size} bytes it reads")
    offsets = np.zeros(length.size + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    _copy_spans(readonly(data), np.ascontiguousarray(starts, dtype=np.int64), offsets, out)
    return out, offsets


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _copy_spans(data, starts, offsets, out):
    """Copy ``data[starts[e]:starts[e] + offsets[e + 1] - offsets[e]]`` to ``out[offsets[e]:offsets[e + 1]]`` for
    every span e (one ``memcpy`` each); returns the bytes copied. A numpy gather through an int64 index of every
    byte took 82 ms and 92 MB of fresh memory for the 115,000 kernel names of a real-shaped trace (11.5 MB)."""
    for e in range(starts.size):
        copy_bytes(out, offsets[e], data, starts[e], starts[e] + offsets[e + 1] - offsets[e])
    return offsets[starts.size]


def texts_in_place(
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    name: str,
    *,
    check_utf8: bool = False,
    valid: np.ndarray | None = None,
) -> pl.Series:
    """A String Series of the UTF-8 texts ``data[starts[i]:ends[i]]`` (int64 spans in any order, null where
    ``valid`` is False), viewing ``data`` in place when it fits one view buffer (:data:`VIEW_BUFFER_BYTES`), else
    gathered (:func:`texts_at_spans`); ``check_utf8``: see :func:`string_views`."""
    if valid is None:
        valid = np.ones(starts.size, np.bool_)
    if data.size > VIEW_BUFFER_BYTES:
        return texts_at_spans(data, starts, ends, valid, name, check_utf8=check_utf8)
    views = np.empty(2 * starts.size, np.uint64)  # every word is written
    first = np.zeros(3, np.int64)
    _span_views(readonly(data), starts, ends, np.int64(data.size), np.int64(VIEW_BUFFER_BYTES), views, first)
    return string_views(starts.size, views, [(data, first[:2])], valid, name, check_utf8=check_utf8)


def texts_at_spans(
    data: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray, name: str, *, check_utf8: bool = False
) -> pl.Series:
    """A String Series of the UTF-8 texts ``data[starts[i]:ends[i]]`` (null where ``valid`` is
    False): the spans' bytes gathered into one new buffer (so ``data`` can be released) and
    viewed there; ``check_utf8``: see :func:`string_views`."""
    gathered, offsets = gather_spans(data, starts, ends, valid)
    return texts_at_offsets(gathered, offsets, valid, name, check_utf8=check_utf8)
