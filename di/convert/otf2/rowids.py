"""Dense ids of event rows for the OTF2 writer's plan (:mod:`di.convert.otf2.layout`), in numba.

* :func:`key_ids`: one id per distinct non-negative int64 key, numbered in
  order of first use, and the first row of each id;
* :func:`combined_ids`: the same for tuples of four non-negative code columns
  (region = (name, cat, src_cat, instant)), by their mixed-radix key.

Columns of texts are numbered by polars' categorical hashing (:func:`di.convert.columns.code_index`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.columns import dense_row_ids
from di.nesting import readonly_int64


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _first_use_ids(key, slot, ids, first):
    """Fill ``ids`` and ``first`` (see :func:`key_ids`) through the direct-address table ``slot`` (all -1, one
    entry per key value); returns the number of ids."""
    count = 0
    for i in range(key.size):
        k = key[i]
        if slot[k] < 0:
            slot[k] = count
            first[count] = i
            count += 1
        ids[i] = slot[k]
    return count


def combined_ids(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id per row, first row of each id) for the rows' (a, b, c, d) non-negative codes, ids numbered in order of
    first use: :func:`key_ids` of their mixed-radix key."""
    if not a.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    radix = [int(col.max()) + 1 for col in (b, c, d)]
    key = a.astype(np.int64)
    for col, r in zip((b, c, d), radix):
        key *= r
        key += col
    return key_ids(key, (int(a.max()) + 1) * radix[0] * radix[1] * radix[2])


def key_ids(key: np.ndarray, span: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(id per row, numbered in order of first use; first row of each id) for non-negative int64 keys
    (all below ``span`` when given): a direct-address table when the span is small, else
    :func:`di.convert.columns.dense_row_ids`' hash table. The arrays are allocated here, not in the kernel:
    numba compiles its ``np.empty`` once more per signature and cold start (issue 15)."""
    if not key.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = int(key.max()) + 1 if span is None else span
    if span > 4 * key.size + (1 << 20):
        return dense_row_ids(key.reshape(1, -1))
    ids, first = np.empty(key.size, np.int64), np.empty(key.size, np.int64)
    count = _first_use_ids(readonly_int64(key), np.full(span, -1, np.int64), ids, first)
    return ids, first[:count]
