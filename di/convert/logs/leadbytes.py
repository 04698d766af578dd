"""The first bytes of each string of a polars String column, read from its Arrow string views without a pass over
the text.

A string view (16 bytes) holds a string's length and, inline, its first 4 bytes (all of it up to 12 bytes): the
parsers pick the lines a table can start or continue on by their first bytes, which this gives for every line at
the cost of one numpy copy of those words (a ``str.head``, or two string comparisons per byte range, each read every
line's view through polars: tens of times more).
"""

from __future__ import annotations

import numpy as np
import polars as pl

__all__ = ["lead_bytes"]

VIEW_PREFIX = 4
"""Bytes of a string a view holds inline whatever its length."""


def lead_bytes(values: pl.Series, k: int = 1) -> tuple[np.ndarray, list[np.ndarray]]:
    """(each of ``values``' length in bytes, uint32 (read-only: a view of the column's views); its first ``k`` (at most 4) bytes: ``k`` uint8 arrays, byte
    ``j`` of each string in the ``j``-th). A null is the empty string; byte ``j`` of a string is 0 where ``j`` is not
    below its length (a NUL byte of the text itself is 0 too: the length tells them apart where it matters)."""
    if not 1 <= k <= VIEW_PREFIX:
        raise ValueError(f"lead_bytes reads 1 to {VIEW_PREFIX} bytes, not {k}")
    lengths, prefix = _views(values)
    lead = []
    for j in range(k):  # byte j of the little-endian word, where the string has one
        byte = (prefix >> np.uint32(8 * j)).astype(np.uint8) if j else prefix.astype(np.uint8)
        lead.append(byte * (lengths > j))
    return lengths, lead


def _views(values: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(lengths in bytes, uint32, 0 for a null; each view's second 32-bit word: its string's first 4 bytes, as a
    little-endian uint32)."""
    import pyarrow as pa

    arr = values.to_arrow(compat_level=pl.CompatLevel.newest())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    null = values.is_null().to_numpy() if values.null_count() else None
    if arr.type != pa.string_view():  # (polars gives its String columns as views; another type is cast)
        arr = arr.cast(pa.string_view())
    words = np.frombuffer(arr.buffers()[1], "<u4").reshape(-1, 4)[arr.offset : arr.offset + len(arr)]
    lengths = words[:, 0] if null is None else np.where(null, np.uint32(0), words[:, 0])
    return lengths, words[:, 1]
