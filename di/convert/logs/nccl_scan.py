"""The kind of each distinct NCCL message, found in one numba pass over their bytes.

A message's kind says which of :data:`KIND_LITERALS` it holds (bit ``1 << i`` for the
``i``-th) and whether it starts with one of :data:`TOPOLOGY_PREFIXES`
(:data:`KIND_TOPOLOGY`): what :mod:`di.convert.logs.nccl` would otherwise find with one
polars search of every message per literal. The pass looks for the literals' rare bytes
(``:``, ``B``, ``I``, ``C``) eight bytes per step and checks each literal where one is.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from di.convert.bytewords import load_u64

__all__ = ["KIND_LITERALS", "KIND_TOPOLOGY", "TOPOLOGY_PREFIXES", "message_kinds"]

KIND_LITERALS = (": opCount ", " Bytes -> Algo ", "Init ", "CCL version ")
"""Texts a message is searched for (a COLL line, a TUNING line, a communicator init, a version); bit ``1 << i`` of
its kind says it holds the ``i``-th."""
TOPOLOGY_PREFIXES = ("Channel ", "Ring ", "Tree")
"""A topology line's message starts with one of these."""
KIND_TOPOLOGY = 1 << len(KIND_LITERALS)
"""The kind's bit of a message that starts with one of :data:`TOPOLOGY_PREFIXES`."""
_ANCHOR_AT = (0, 1, 0, 0)
"""The byte of each literal looked for first (a rare one: ``:``, ``B``, ``I``, ``C``)."""


def _padded(texts: tuple[str, ...]) -> np.ndarray:
    width = max(len(t) for t in texts)
    return np.array([[ord(c) for c in t.ljust(width, "\0")] for t in texts], dtype=np.uint8)


_LITERALS = _padded(KIND_LITERALS)
_LITERAL_LEN = np.array([len(t) for t in KIND_LITERALS], dtype=np.int64)
_ANCHOR = np.array(_ANCHOR_AT, dtype=np.int64)
_ANCHOR_WORDS = np.array([ord(t[a]) * 0x0101010101010101 for t, a in zip(KIND_LITERALS, _ANCHOR_AT)], dtype=np.uint64)
_PREFIXES = _padded(TOPOLOGY_PREFIXES)
_PREFIX_LEN = np.array([len(t) for t in TOPOLOGY_PREFIXES], dtype=np.int64)
_TOPOLOGY = np.uint8(KIND_TOPOLOGY)
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_EIGHT = np.int64(8)
PAD_BYTES = 8
"""Bytes the buffer holds past the last message's (any value): a word of eight bytes can be read anywhere."""


@njit(cache=True)
def message_kinds(data, offsets, kinds):
    """``kinds[k]``: the kind of message ``k``, ``data[offsets[k]:offsets[k + 1]]`` (see the module docstring)."""
    for k in range(offsets.size - 1):
        a = offsets[k]
        b = offsets[k + 1]
        kind = np.uint8(0)
        for c in range(_PREFIX_LEN.size):
            if b - a >= _PREFIX_LEN[c]:
                same = True
                for q in range(_PREFIX_LEN[c]):
                    if data[a + q] != _PREFIXES[c, q]:
                        same = False
                if same:
                    kind |= _TOPOLOGY
        i = a
        while i < b:
            w = load_u64(data, i)
            # the bytes of the word equal to an anchor (the lowest flag of a word is exact, a higher one may be
            # false: each is checked)
            flags = np.uint64(0)
            for c in range(_ANCHOR_WORDS.size):
                x = w ^ _ANCHOR_WORDS[c]
                flags |= (x - _ONES) & ~x & _HIGHS
            if b - i < 8:
                flags &= (np.uint64(1) << np.uint64(8 * (b - i))) - np.uint64(1)
            while flags:
                j = i + np.int64(trailing_zeros(flags) >> 3)
                flags &= flags - np.uint64(1)
                for c in range(_LITERAL_LEN.size):
                    start = j - _ANCHOR[c]
                    if start < a or start + _LITERAL_LEN[c] > b:
                        continue
                    same = True
                    for q in range(_LITERAL_LEN[c]):
                        if data[start + q] != _LITERALS[c, q]:
                            same = False
                            break
                    if same:
                        kind |= np.uint8(1 << c)
            i += _EIGHT
        kinds[k] = kind


def kinds_of(messages: pl.Series) -> np.ndarray:
    """The kind of each message (a String Series without nulls; see the module docstring), uint8."""
    n = messages.len()
    # the messages' bytes one after another, and PAD_BYTES more
    raw = pl.concat([messages.cast(pl.Binary), pl.Series([b"\0" * PAD_BYTES], dtype=pl.Binary)])
    data = raw.cast(pl.List(pl.UInt8)).explode(empty_as_null=False, keep_nulls=False).to_numpy()
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(messages.str.len_bytes().to_numpy(), out=offsets[1:])
    kinds = np.empty(n, dtype=np.uint8)
    message_kinds(data, offsets, kinds)
    return kinds


_MUL = np.uint64(0x9E3779B97F4A7C15)
_FIRST_BITS = np.int64(10)


@njit(cache=True)
def first_codes(codes, ids, firsts):
    """Each row's id among the distinct ``codes`` (uint64; 0 to their count - 1, in the order of their first rows)
    in ``ids`` and, per id, its first row in ``firsts``; returns the count. An open-addressing table of (code, id + 1)
    pairs, a quarter full at most (grown four times over when it would pass that), stays small where the codes are
    few: the rows' lookups then hit the cache."""
    bits = _FIRST_BITS
    table = np.zeros((np.int64(1) << bits, 2), dtype=np.uint64)
    count = 0
    for e in range(codes.size):
        if 4 * (count + 1) > table.shape[0]:
            bits += 2
            grown = np.zeros((np.int64(1) << bits, 2), dtype=np.uint64)
            for s in range(table.shape[0]):
                if table[s, 1] != 0:
                    slot = np.int64((table[s, 0] * _MUL) >> np.uint64(64 - bits))
                    while grown[slot, 1] != 0:
                        slot = (slot + 1) & (grown.shape[0] - 1)
                    grown[slot, 0] = table[s, 0]
                    grown[slot, 1] = table[s, 1]
            table = grown
        code = codes[e]
        slot = np.int64((code * _MUL) >> np.uint64(64 - bits))
        while True:
            got = table[slot, 1]
            if got == 0:
                table[slot, 0] = code
                table[slot, 1] = np.uint64(count + 1)
                firsts[count] = e
                ids[e] = count
                count += 1
                break
            if table[slot, 0] == code:
                ids[e] = np.int64(got) - 1
                break
            slot = (slot + 1) & (table.shape[0] - 1)
    return count


def dense_ids(codes: pl.Series) -> tuple[pl.Series, pl.Series]:
    """What :func:`di.convert.logs.text.dense_ids` gives (each row's id among the distinct integer ``codes``, in the
    order of their first rows, and per id its first row; both UInt32), from :func:`first_codes`: several times less
    CPU than a polars join of the codes to the distinct ones. ``codes`` hold no null."""
    n = codes.len()
    ids = np.empty(n, dtype=np.uint32)
    firsts = np.empty(n, dtype=np.uint32)
    count = first_codes(codes.cast(pl.UInt64).to_numpy(), ids, firsts)
    return pl.Series("kid", ids), pl.Series(codes.name, firsts[:count])
