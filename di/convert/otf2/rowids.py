"""Dense ids of event rows for the OTF2 writer's plan (:mod:`di.convert.otf2.layout`), in numba.

* :func:`key_ids`: one id per distinct non-negative int64 key, numbered in
  order of first use, and the first row of each id;
* :func:`combined_ids`: the same for tuples of four non-negative code columns
  (region = (name, cat, src_cat, instant)), without building the key when its
  mixed-radix span is small;
* :func:`run_starts`: the first row of each run of equal adjacent values;
* :func:`text_ids`: one id per distinct text of a column of UTF-8 texts (args, flow lists),
  by the byte-span hash table of :mod:`di.convert.symbols`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.columns import dense_row_ids
from di.convert.symbols import hash_span, new_table, same_span


@njit(cache=True)
def _first_use_ids(key, span):
    ids = np.empty(key.size, np.int64)
    first = np.empty(key.size, np.int64)
    slot = np.full(span, -1, np.int64)
    count = 0
    for i in range(key.size):
        k = key[i]
        if slot[k] < 0:
            slot[k] = count
            first[count] = i
            count += 1
        ids[i] = slot[k]
    return ids, first[:count]


@njit(cache=True)
def combined_ids(a, b, c, d, limit):
    """(id per row, first row of each id, empty) for the rows' (a, b, c, d) non-negative codes, ids numbered in order
    of first use; (empty, empty, mixed-radix key per row) when the key span exceeds ``limit``: then the caller numbers
    the key with :func:`key_ids`. The key is never stored in the first case (one array per row less)."""
    n = a.size
    na, nb, nc, nd = 1, 1, 1, 1
    for i in range(n):
        na, nb, nc, nd = max(na, a[i] + 1), max(nb, b[i] + 1), max(nc, c[i] + 1), max(nd, d[i] + 1)
    span = np.int64(na) * nb * nc * nd
    if span > limit:
        key = np.empty(n, np.int64)
        for i in range(n):
            key[i] = ((np.int64(a[i]) * nb + b[i]) * nc + c[i]) * nd + d[i]
        return np.zeros(0, np.int64), np.zeros(0, np.int64), key
    ids = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
    slot = np.full(span, -1, np.int64)
    count = 0
    for i in range(n):
        k = ((np.int64(a[i]) * nb + b[i]) * nc + c[i]) * nd + d[i]
        if slot[k] < 0:
            slot[k] = count
            first[count] = i
            count += 1
        ids[i] = slot[k]
    return ids, first[:count], np.zeros(0, np.int64)


@njit(cache=True, _nrt=False)
def _count_runs(key):
    count = 0
    for i in range(key.size):
        if i == 0 or key[i] != key[i - 1]:
            count += 1
    return count


@njit(cache=True, _nrt=False)
def _fill_run_starts(key, first):
    count = 0
    for i in range(key.size):
        if i == 0 or key[i] != key[i - 1]:
            first[count] = i
            count += 1


def run_starts(key: np.ndarray) -> np.ndarray:
    """First row of each run of equal adjacent values of ``key``."""
    first = np.empty(_count_runs(key) if key.size else 0, np.int64)
    if key.size:
        _fill_run_starts(key, first)
    return first


def key_ids(key: np.ndarray, span: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(id per row, numbered in order of first use; first row of each id) for non-negative int64 keys
    (all below ``span`` when given): a direct-address table when the span is small, else
    :func:`di.convert.columns.dense_row_ids`' hash table."""
    if not key.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    span = int(key.max()) + 1 if span is None else span
    if span > 4 * key.size + (1 << 20):
        return dense_row_ids(key.reshape(1, -1))
    return _first_use_ids(key, span)


@njit(cache=True)
def _text_ids(data, offsets, valid, slots, starts, ends, count):
    n = valid.size
    hashes = np.empty(n, np.uint64)
    for i in range(n):  # hashed first, in one pass: the table's cache misses below then do not wait on each hash
        hashes[i] = hash_span(data, offsets[i], offsets[i + 1])
    ids = np.empty(n, np.int64)
    first = np.empty(n, np.int64)
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
    return ids, first[: count[0]]


def text_ids(data: np.ndarray, offsets: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id per row, -1 where not ``valid``; first row of each id) of the texts ``data[offsets[i]:offsets[i + 1]]``
    (UTF-8 bytes, int64 offsets, one more than rows; ``valid``: bool per row): byte-equal texts get equal ids,
    numbered in order of first use."""
    table = new_table(max(int(valid.sum()), 1))
    return _text_ids(data, offsets, valid, *table)
