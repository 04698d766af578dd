"""Numba passes over NCCL messages' bytes: each distinct message's kind and first words, and dense ids of byte spans.

:func:`message_kinds` gives a message's kind: which of :data:`KIND_LITERALS` it holds
(bit ``1 << i`` for the ``i``-th), whether it starts with one of
:data:`TOPOLOGY_PREFIXES` (:data:`KIND_TOPOLOGY`) and whether its words (at single
spaces) begin as a COLL line's do (:data:`KIND_COLL_HEAD`): what
:mod:`di.convert.logs.nccl` would otherwise find with one polars search of every message
per literal. It looks for the literals' rare bytes (``:``, ``B``, ``I``, ``C``) eight bytes
per step and checks each literal where one is, and gives the byte offsets of the first
:data:`WORD_SPACES` spaces, where a COLL line's words are cut.

:func:`first_spans` numbers byte spans by their bytes (ids in order of first span): a
COLL line's name and its words past the buffers repeat, and are cut and parsed once per
distinct one; :func:`dense_ids` numbers integer codes with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from di.convert.bytewords import load_u64

__all__ = [
    "COLL_HEAD_WORDS",
    "KIND_COLL_HEAD",
    "KIND_LITERALS",
    "KIND_TOPOLOGY",
    "TOPOLOGY_PREFIXES",
    "WORD_SPACES",
    "ScannedMessages",
    "dense_ids",
    "first_spans",
    "message_kinds",
    "scan_messages",
    "span_ids",
]

KIND_LITERALS = (": opCount ", " Bytes -> Algo ", "Init ", "CCL version ")
"""Texts a message is searched for (a COLL line, a TUNING line, a communicator init, a version); bit ``1 << i`` of
its kind says it holds the ``i``-th."""
TOPOLOGY_PREFIXES = ("Channel ", "Ring ", "Tree")
"""A topology line's message starts with one of these."""
KIND_TOPOLOGY = 1 << len(KIND_LITERALS)
"""The kind's bit of a message that starts with one of :data:`TOPOLOGY_PREFIXES`."""
KIND_COLL_HEAD = KIND_TOPOLOGY << 1
"""The kind's bit of a message whose words 1, 3 and 5 (at single spaces) are those of :data:`COLL_HEAD_WORDS`."""
COLL_HEAD_WORDS = {1: "opCount", 3: "sendbuff", 5: "recvbuff"}
"""A COLL line's words before its count, by position, in the layout of NCCL 2.7 to 2.29 (the name, the opCount and
the buffers between them)."""
WORD_SPACES = 7
"""Spaces whose offsets :func:`message_kinds` gives: a COLL line's words up to its buffers end at the first seven."""
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
_COLL_HEAD = np.uint8(KIND_COLL_HEAD)
_HEAD_WORD_AT = np.array(list(COLL_HEAD_WORDS), dtype=np.int64)
_HEAD_WORDS = _padded(tuple(COLL_HEAD_WORDS.values()))
_HEAD_WORD_LEN = np.array([len(t) for t in COLL_HEAD_WORDS.values()], dtype=np.int64)
_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_SPACES = np.uint64(0x2020202020202020)
_SPACE = np.uint8(32)
_EIGHT = np.int64(8)
_MUL = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(29)
_FIRST_BITS = np.int64(10)
PAD_BYTES = 8
"""Bytes a buffer holds past the last span's (any value): a word of eight bytes can be read anywhere."""


@njit(cache=True)
def message_kinds(data, offsets, kinds, spaces):
    """``kinds[k]``: the kind of message ``k``, ``data[offsets[k]:offsets[k + 1]]`` (see the module docstring), and
    ``spaces[k]``, the byte offsets in it of its first :data:`WORD_SPACES` spaces (-1 past its last)."""
    for k in range(offsets.size - 1):
        a = offsets[k]
        b = offsets[k + 1]
        kind = np.uint8(0)
        # the spaces, eight bytes per step (the lowest flag of a word is exact, a higher one may be false: each is
        # checked)
        found = 0
        i = a
        while i < b and found < spaces.shape[1]:
            x = load_u64(data, i) ^ _SPACES
            flags = (x - _ONES) & ~x & _HIGHS
            if b - i < 8:
                flags &= (np.uint64(1) << np.uint64(8 * (b - i))) - np.uint64(1)
            while flags and found < spaces.shape[1]:
                j = i + np.int64(trailing_zeros(flags) >> 3)
                flags &= flags - np.uint64(1)
                if data[j] == _SPACE:
                    spaces[k, found] = j - a
                    found += 1
            i += _EIGHT
        for f in range(found, spaces.shape[1]):
            spaces[k, f] = -1
        head = True
        for c in range(_HEAD_WORD_AT.size):
            at = _HEAD_WORD_AT[c]
            if found < at:
                head = False
                break
            start = a + spaces[k, at - 1] + 1
            end = a + spaces[k, at] if found > at else b
            if end - start != _HEAD_WORD_LEN[c]:
                head = False
                break
            for q in range(_HEAD_WORD_LEN[c]):
                if data[start + q] != _HEAD_WORDS[c, q]:
                    head = False
            if not head:
                break
        if head:
            kind |= _COLL_HEAD
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


@njit(cache=True)
def first_spans(data, starts, ends, ids, firsts):
    """Each span's id among the distinct ones (``data[starts[e]:ends[e]]``; ids 0 to their count - 1 in order of first
    span) in ``ids`` and, per id, its first span in ``firsts``; returns the count. An open-addressing table of
    (hash, id + 1) pairs, a quarter full at most (grown four times over when it would pass that), stays small where
    the spans are few: the lookups then hit the cache; equal hashes are told apart by the spans' bytes."""
    bits = _FIRST_BITS
    table = np.zeros((np.int64(1) << bits, 2), dtype=np.uint64)
    count = 0
    for e in range(starts.size):
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
        a = starts[e]
        b = ends[e]
        h = np.uint64(b - a) * _MUL
        i = a
        while i < b:
            w = load_u64(data, i)
            if b - i < 8:
                w &= (np.uint64(1) << np.uint64(8 * (b - i))) - np.uint64(1)
            h = (h ^ w) * _MUL
            h ^= h >> _MIX
            i += _EIGHT
        slot = np.int64((h * _MUL) >> np.uint64(64 - bits))
        while True:
            got = table[slot, 1]
            if got == 0:
                table[slot, 0] = h
                table[slot, 1] = np.uint64(count + 1)
                firsts[count] = e
                ids[e] = count
                count += 1
                break
            if table[slot, 0] == h:
                r = firsts[np.int64(got) - 1]
                ra = starts[r]
                if ends[r] - ra == b - a:
                    i = 0
                    while i < b - a:
                        x = load_u64(data, a + i) ^ load_u64(data, ra + i)
                        if b - a - i < 8:
                            x &= (np.uint64(1) << np.uint64(8 * (b - a - i))) - np.uint64(1)
                        if x != 0:
                            break
                        i += _EIGHT
                    if i >= b - a:
                        ids[e] = np.int64(got) - 1
                        break
            slot = (slot + 1) & (table.shape[0] - 1)
    return count


def _read_only(data: np.ndarray) -> np.ndarray:
    """``data`` read-only (a view where it is not), as polars gives its buffers: the kernels get one type of buffer,
    so one specialisation each."""
    if not data.flags.writeable:
        return data
    view = data.view()
    view.flags.writeable = False
    return view


def span_ids(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_spans` of the spans ``data[starts[e]:ends[e]]`` (``data`` with :data:`PAD_BYTES` past the last):
    each span's id and, per id, its first span (uint32 both)."""
    ids = np.empty(starts.size, dtype=np.uint32)
    firsts = np.empty(starts.size, dtype=np.uint32)
    count = first_spans(_read_only(data), starts.astype(np.int64), ends.astype(np.int64), ids, firsts)
    return ids, firsts[:count]


def dense_ids(codes: pl.Series) -> tuple[pl.Series, pl.Series]:
    """What :func:`di.convert.logs.text.dense_ids` gives (each row's id among the distinct integer ``codes``, in the
    order of their first rows, and per id its first row; both UInt32), from :func:`first_spans` over the codes' eight
    bytes each: several times less CPU than a polars join of the codes to the distinct ones. ``codes`` hold no
    null."""
    data = codes.cast(pl.UInt64).to_numpy().view(np.uint8)
    starts = np.arange(0, data.size, 8, dtype=np.int64)
    ids, firsts = span_ids(data, starts, starts + 8)
    return pl.Series("kid", ids), pl.Series(codes.name, firsts)


@dataclass(frozen=True)
class ScannedMessages:
    """Messages' bytes one after another (``data``, :data:`PAD_BYTES` past the last; message ``k`` is
    ``data[offsets[k]:offsets[k + 1]]``), each one's kind and the byte offsets of its first spaces (in it; -1 past
    its last), from :func:`message_kinds`."""

    data: np.ndarray
    offsets: np.ndarray
    kinds: np.ndarray
    spaces: np.ndarray


def scan_messages(messages: pl.Series) -> ScannedMessages:
    """The bytes, kind and first spaces of each message (a String Series without nulls)."""
    n = messages.len()
    raw = pl.concat([messages.cast(pl.Binary), pl.Series([b"\0" * PAD_BYTES], dtype=pl.Binary)])
    data = raw.cast(pl.List(pl.UInt8)).explode(empty_as_null=False, keep_nulls=False).to_numpy()
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(messages.str.len_bytes().to_numpy(), out=offsets[1:])
    kinds = np.empty(n, dtype=np.uint8)
    spaces = np.empty((n, WORD_SPACES), dtype=np.int64)
    data = _read_only(data)
    message_kinds(data, offsets, kinds, spaces)
    return ScannedMessages(data, offsets, kinds, spaces)
