"""The first bytes of each string of a polars String column, read from its Arrow string views without a pass over
the text.

A string view (16 bytes) holds a string's length and, inline, its first 4 bytes (all of it up to 12 bytes): the
parsers pick the lines a table can start or continue on by their first bytes, which this gives for every line at
the cost of one numpy copy of those words (a ``str.head``, or two string comparisons per byte range, each read every
line's view through polars: several times more). The views are read through the Arrow C stream interface that
polars offers (``__arrow_c_stream__``, zero-copy), with ``ctypes``: no pyarrow import (about 20 MB and tens of ms of
a log-only command).
"""

from __future__ import annotations

import ctypes

import numpy as np
import polars as pl

__all__ = ["lead_bytes"]

VIEW_PREFIX = 4
"""Bytes of a string a view holds inline whatever its length."""


def lead_bytes(values: pl.Series, k: int = 1) -> tuple[np.ndarray, list[np.ndarray]]:
    """(each of ``values``' length in bytes, uint32; its first ``k`` (at most 4) bytes: ``k`` uint8 arrays, byte
    ``j`` of each string in the ``j``-th). A null is the empty string; byte ``j`` of a string is 0 where ``j`` is not
    below its length (a NUL byte of the text itself is 0 too: the length tells them apart where it matters)."""
    if not 1 <= k <= VIEW_PREFIX:
        raise ValueError(f"lead_bytes reads 1 to {VIEW_PREFIX} bytes, not {k}")
    read = _view_bytes(values, k)
    if read is None:  # not exported as views: polars reads the bytes (slower, the same numbers)
        binary = values.cast(pl.Binary).to_frame("b")
        lengths = binary.select(pl.col("b").bin.size().fill_null(0)).to_series().to_numpy().astype(np.uint32)
        lead = [
            binary.select(pl.col("b").bin.get(j, null_on_oob=True).fill_null(0)).to_series().to_numpy().astype(np.uint8)
            for j in range(k)
        ]
        return lengths, lead
    lengths, lead = read
    if values.null_count():
        lengths[values.is_null().to_numpy()] = 0
    for j in range(k):  # an inline string's bytes past its end are not always zero
        lead[j] *= lengths > j
    return lengths, lead


# the Arrow C data interface's structs (https://arrow.apache.org/docs/format/CDataInterface.html)
class _ArrowSchema(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_char_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("private_data", ctypes.c_void_p),
    ]


class _ArrowArray(ctypes.Structure):
    _fields_ = [
        ("length", ctypes.c_int64),
        ("null_count", ctypes.c_int64),
        ("offset", ctypes.c_int64),
        ("n_buffers", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("buffers", ctypes.POINTER(ctypes.c_void_p)),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("private_data", ctypes.c_void_p),
    ]


class _ArrowArrayStream(ctypes.Structure):
    _fields_ = [
        ("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)),
        ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)),
        ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)),
        ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("private_data", ctypes.c_void_p),
    ]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _view_bytes(values: pl.Series, k: int) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """(each view's length word, uint32; bytes 4 to 4 + ``k`` of each view, the first ``k`` of its string, as ``k``
    uint8 arrays), copied from the Arrow C stream polars exports (format ``vu``: string views); None where it exports
    another format."""
    export = getattr(values, "__arrow_c_stream__", None)  # (polars versions before the PyCapsule interface: none)
    if export is None:
        return None
    capsule = export()  # (its destructor releases the stream)
    stream = _ArrowArrayStream.from_address(_capsule_pointer(capsule, b"arrow_array_stream"))
    at = ctypes.addressof(stream)
    schema = _ArrowSchema()
    if stream.get_schema(at, ctypes.addressof(schema)):
        return None
    views = schema.format == b"vu"
    schema.release(ctypes.addressof(schema))
    if not views:
        return None
    chunks = []
    while True:
        array = _ArrowArray()
        if stream.get_next(at, ctypes.addressof(array)):
            return None
        if not array.release:  # the stream's end
            break
        try:
            n, offset = array.length, array.offset
            if n:
                words = (ctypes.c_uint32 * (4 * (offset + n))).from_address(array.buffers[1])
                view = np.frombuffer(words, np.uint8).reshape(-1, 16)[offset:]
                # (copied before the array is released)
                chunks.append((view[:, :4].view(np.uint32)[:, 0].copy(), [view[:, 4 + j].copy() for j in range(k)]))
        finally:
            array.release(ctypes.addressof(array))
    if len(chunks) == 1:
        return chunks[0]
    if not chunks:
        return np.zeros(0, np.uint32), [np.zeros(0, np.uint8) for _ in range(k)]
    return np.concatenate([c[0] for c in chunks]), [np.concatenate([c[1][j] for c in chunks]) for j in range(k)]
