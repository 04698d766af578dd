"""A symbol table for byte spans, usable from numba kernels.

Text formats repeat the same names millions of times. Scanners intern each
string's raw byte span ``buf[start:end]`` into a dense id: equal ids mean
byte-equal text (the table compares bytes on every hash hit, so a 64-bit
hash collision cannot merge two names). Only the unique spans are decoded to
Python strings, once, afterwards.

State is four arrays (slots, starts, ends, count) of a fixed capacity that
``new_table`` makes. A full table makes :func:`intern` return ``FULL``; the
caller then starts again with a bigger one (:func:`grown_capacity`): kernels
that return no arrays compile much faster, and a rescan is rare as capacities
grow sixteenfold.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.bytewords import load_u64

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


FULL = -1
FIRST_CAPACITY = 1 << 16


def grown_capacity(capacity: int) -> int:
    """The capacity to retry with after a table of ``capacity`` filled up."""
    return capacity * 16


def new_table(capacity: int = FIRST_CAPACITY) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """An empty table for up to ``capacity`` symbols: (slots, starts, ends, count array)."""
    size = 1
    while size < 2 * capacity:
        size *= 2
    slots = np.full(size, -1, dtype=np.int64)
    starts = np.empty(capacity, dtype=np.int64)
    ends = np.empty(capacity, dtype=np.int64)
    count = np.zeros(1, dtype=np.int64)
    return slots, starts, ends, count


_MIX = np.uint64(0xFF51AFD7ED558CCD)


@njit(cache=True, _nrt=False)
def _hash(buf, s, e):
    """A 64-bit hash of buf[s:e]: FNV-style over 8-byte words (the last word
    overlapping the one before it), with a final mix so the low bits that pick
    a slot depend on every byte."""
    L = e - s
    h = _FNV_OFFSET ^ np.uint64(L)
    if L >= 8:
        k = s
        while k + 8 <= e:
            h = (h ^ load_u64(buf, k)) * _FNV_PRIME
            k += 8
        if k < e:
            h = (h ^ load_u64(buf, e - 8)) * _FNV_PRIME
    else:
        for k in range(s, e):
            h = (h ^ np.uint64(buf[k])) * _FNV_PRIME
    h ^= h >> np.uint64(32)
    h *= _MIX
    h ^= h >> np.uint64(29)
    return h


@njit(cache=True, _nrt=False)
def _same(buf, s1, e1, s2, e2):
    L = e1 - s1
    if e2 - s2 != L:
        return False
    if L >= 8:
        k = 0
        while k + 8 <= L:
            if load_u64(buf, s1 + k) != load_u64(buf, s2 + k):
                return False
            k += 8
        return k == L or load_u64(buf, e1 - 8) == load_u64(buf, e2 - 8)
    for k in range(L):
        if buf[s1 + k] != buf[s2 + k]:
            return False
    return True


@njit(cache=True, _nrt=False)
def intern(buf, s, e, slots, starts, ends, count):
    """Id of span buf[s:e], or ``FULL`` when it is new and the table has no room."""
    mask = np.uint64(slots.size - 1)
    j = _hash(buf, s, e) & mask
    while True:
        sid = slots[j]
        if sid < 0:
            break
        if _same(buf, s, e, starts[sid], ends[sid]):
            return sid
        j = (j + np.uint64(1)) & mask
    sid = count[0]
    if sid >= starts.size:
        return FULL
    starts[sid] = s
    ends[sid] = e
    count[0] = sid + 1
    slots[j] = sid
    return sid


hash_span = _hash
"""The table's hash of buf[s:e], for kernels that hash a whole column in one pass before probing the table (on long
texts several times faster than :func:`intern` row by row)."""
same_span = _same
"""True when buf[s1:e1] and buf[s2:e2] hold the same bytes."""


def decode_symbols(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, count: int) -> list[str]:
    """Python strings of the first ``count`` interned JSON string spans (escapes decoded)."""
    import orjson

    raw = buf.data
    out = []
    for sid in range(count):
        b = bytes(raw[starts[sid] : ends[sid]])
        if b"\\" not in b:
            out.append(b.decode("utf-8", "replace"))
            continue
        try:
            out.append(orjson.loads(b'"' + b + b'"'))
        except orjson.JSONDecodeError:
            out.append(_unescape_leniently(b))
    return out


def _unescape_leniently(b: bytes) -> str:
    """A string whose escapes orjson refuses: a lone surrogate (``\\ud800``) becomes "?"; an
    invalid escape (``\\x41``, a cut ``\\u00``) is kept as written."""
    import json

    text = b.decode("utf-8", "replace")
    try:
        decoded = json.loads(f'"{text}"', strict=False)
    except ValueError:
        return text
    return decoded.encode("utf-8", "replace").decode("utf-8")
