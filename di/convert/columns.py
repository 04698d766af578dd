"""Columns as the numba kernels of the writers take them: UTF-8 buffers and dense codes."""

from __future__ import annotations

import numpy as np
import polars as pl


def utf8_buffers(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes and int64 offsets (len + 1) of a String Series; null = empty."""
    import pyarrow as pa

    arr = s.cast(pl.String).fill_null("").to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    _, offsets, data = arr.buffers()
    off = np.frombuffer(offsets, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    return (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)), off
