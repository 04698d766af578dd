"""Dense ids of event rows for the OTF2 writer's plan (:mod:`di.convert.otf2.layout`), in numba.

* :func:`key_ids`: one id per distinct non-negative int64 key, numbered in
  order of first use, and the first row of each id;
* :func:`combined_ids`: the same for tuples of four non-negative code columns
  (region = (name, cat, src_cat, instant)), by their mixed-radix key;
* :func:`text_ids`: one id per distinct text of a column of UTF-8 texts (args, flow lists),
  by the byte-span hash table of :mod:`di.convert.symbols`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.columns import dense_row_ids
from di.convert.symbols import hash_span, new_table, same_span
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


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _text_ids(data, offsets, valid, slots, starts, ends, count, hashes, ids, first):
    n = valid.size
    for i in range(n):  # hashed first, in one pass: the table's cache misses below then do not wait on each hash
        hashes[i] = hash_span(data, offsets[i], offsets[i + 1])
    mask = np.uint64(slots.size - 1)
    for i in range(n):
        if not valid[i]:
            ids[i] = -1
            continue
        s, e = offsets[i], offsets[i + 1]
        j = hashes[i] & mask
        sid = slots[j]
        while sid >= 0 and not same_span(data, s, e, starts[sid], ends[sid]):
            j = (j + np.uint64(1)) & mask
            sid = slots[j]
        if sid < 0:  # new: the table has room for every row
            sid = count[0]
            starts[sid], ends[sid], first[sid] = s, e, i
            count[0] = sid + 1
            slots[j] = sid
        ids[i] = sid


def text_ids(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id per row, -1 where not ``valid``; first row of each id) of the texts ``data[offsets[i]:offsets[i + 1]]``
    (UTF-8 bytes, int64 offsets, one more than rows; ``valid``: bool per row): byte-equal texts get equal ids,
    numbered in order of first use."""
    table = new_table(max(int(valid.sum()), 1))
    n = valid.size
    ids, first = np.empty(n, np.int64), np.empty(n, np.int64)
    _text_ids(data, offsets, valid, *table, np.empty(n, np.uint64), ids, first)
    return ids, first[: table[3][0]]
