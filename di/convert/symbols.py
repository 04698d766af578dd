"""A symbol table for byte spans, usable from numba kernels.

Text formats repeat the same names millions of times. Scanners intern each
string's raw byte span ``buf[start:end]`` into a dense id: equal ids mean
byte-equal text (the table compares bytes on every hash hit, so a 64-bit
hash collision cannot merge two names). Only the unique spans are decoded to
Python strings, once, afterwards.

State is four arrays (slots, starts, ends, hashes) that the kernel grows by
returning new arrays; ``new_table`` makes an empty one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def new_table(capacity: int = 1024) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """An empty table: (slots, starts, ends, count array)."""
    size = 1
    while size < 2 * capacity:
        size *= 2
    slots = np.full(size, -1, dtype=np.int64)
    starts = np.empty(capacity, dtype=np.int64)
    ends = np.empty(capacity, dtype=np.int64)
    count = np.zeros(1, dtype=np.int64)
    return slots, starts, ends, count


@njit(cache=True, inline="always")
def _hash(buf, s, e):
    h = _FNV_OFFSET
    for k in range(s, e):
        h = (h ^ np.uint64(buf[k])) * _FNV_PRIME
    return h


@njit(cache=True, inline="always")
def _same(buf, s1, e1, s2, e2):
    if e1 - s1 != e2 - s2:
        return False
    for k in range(e1 - s1):
        if buf[s1 + k] != buf[s2 + k]:
            return False
    return True


@njit(cache=True)
def _rehash(buf, slots, starts, ends, count):
    size = slots.size * 2
    new = np.full(size, -1, dtype=np.int64)
    mask = np.uint64(size - 1)
    for sid in range(count):
        j = _hash(buf, starts[sid], ends[sid]) & mask
        while new[j] >= 0:
            j = (j + np.uint64(1)) & mask
        new[j] = sid
    return new


@njit(cache=True)
def intern(buf, s, e, slots, starts, ends, count):
    """Id of span buf[s:e]; returns (id, slots, starts, ends) as arrays may grow."""
    mask = np.uint64(slots.size - 1)
    j = _hash(buf, s, e) & mask
    while True:
        sid = slots[j]
        if sid < 0:
            break
        if _same(buf, s, e, starts[sid], ends[sid]):
            return sid, slots, starts, ends
        j = (j + np.uint64(1)) & mask
    sid = count[0]
    if sid >= starts.size:
        bigger = starts.size * 2
        ns = np.empty(bigger, dtype=np.int64)
        ne = np.empty(bigger, dtype=np.int64)
        ns[:sid] = starts[:sid]
        ne[:sid] = ends[:sid]
        starts, ends = ns, ne
    starts[sid] = s
    ends[sid] = e
    count[0] = sid + 1
    slots[j] = sid
    if 2 * (sid + 1) > slots.size:
        slots = _rehash(buf, slots, starts, ends, sid + 1)
    return sid, slots, starts, ends


def decode_symbols(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, count: int) -> list[str]:
    """Python strings of the first ``count`` interned JSON string spans (escapes decoded)."""
    import orjson

    raw = buf.data
    out = []
    for sid in range(count):
        b = bytes(raw[starts[sid] : ends[sid]])
        out.append(orjson.loads(b'"' + b + b'"') if b"\\" in b else b.decode("utf-8", "replace"))
    return out
