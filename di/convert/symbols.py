"""A symbol table for byte spans, usable from numba kernels.

Text formats repeat the same names millions of times. Scanners intern each
string's raw byte span ``buf[start:end]`` into a dense id: equal ids mean
byte-equal text (the table compares bytes on every hash hit, so a 64-bit
hash collision cannot merge two names). Only the unique spans are decoded to
Python strings, once, afterwards.

State is four arrays (slots, starts, ends, count) of a fixed capacity that
``new_table`` makes. A full table makes :func:`intern` return ``FULL``; the
caller then goes on with a bigger one holding the same ids (:func:`grown_table`),
or starts again with a bigger one (:func:`grown_capacity`): kernels that return
no arrays compile much faster, and capacities grow sixteenfold.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import load_u64
from di.convert.columns import readonly
from di.convert.stringviews import gather_spans, texts_at_offsets

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


@njit(cache=True, _nrt=False, inline="always")
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


@njit(cache=True, _nrt=False, inline="always")
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


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def intern(buf, s, e, slots, starts, ends, count):
    """Id of span buf[s:e], or ``FULL`` when it is new and the table has no room.

    :func:`_hash` and :func:`_same` are inlined leaves: two compiles fewer on every cold start."""
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


@njit(cache=True, _nrt=False)  # numba's own pipeline: reached only when a table fills (tests/test_jitpipeline.py)
def _rehash(buf, slots, starts, ends, n):
    """Put symbols 0..n-1 (their spans in ``starts``/``ends``, all distinct) into the empty ``slots``."""
    mask = np.uint64(slots.size - 1)
    for sid in range(n):
        j = _hash(buf, starts[sid], ends[sid]) & mask
        while slots[j] >= 0:
            j = (j + np.uint64(1)) & mask
        slots[j] = sid


def grown_table(
    buf: np.ndarray, table: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A table of :func:`grown_capacity` holding the symbols of the full ``table`` (spans of ``buf``) under the same
    ids, for a scan to go on where it stopped instead of starting again (loading a Kineto trace of 115,327 distinct
    kernel names, ``bench/realshape.py --shapes 1500``: 1.48 CPU-s with the scan started again, 1.25 going on)."""
    _, starts, ends, count = table
    n = int(count[0])
    grown = new_table(grown_capacity(starts.size))
    grown[1][:n], grown[2][:n], grown[3][0] = starts[:n], ends[:n], n
    _rehash(readonly(buf), grown[0], grown[1], grown[2], np.int64(n))  # read-only as the scanners': one version
    return grown


hash_span = _hash
"""The table's hash of buf[s:e], for kernels that hash a whole column in one pass before probing the table (on long
texts several times faster than :func:`intern` row by row)."""
same_span = _same
"""True when buf[s1:e1] and buf[s2:e2] hold the same bytes."""


def decode_symbols(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, count: int) -> pl.Series:
    """The first ``count`` interned JSON string spans as a String Series ``sym`` (row = symbol
    id), escapes decoded.

    The spans' bytes are gathered and viewed as strings in one step; only the texts
    with a backslash are decoded again, as JSON strings, by polars. Escapes polars
    does not take as Python does (a ``\\uD800``-style surrogate escape, an invalid
    escape) are decoded one text at a time: those are rare, and mostly damaged input.
    Bytes that are not UTF-8 (the Chrome reader repairs them before) become U+FFFD.
    """
    valid = np.ones(count, dtype=np.bool_)
    data, offsets = gather_spans(np.asarray(buf), starts[:count], ends[:count], valid)
    texts = texts_at_offsets(data, offsets, valid, "sym") if valid_utf8(data, offsets) else decoded_texts(data, offsets)
    escaped = np.flatnonzero(texts.str.contains("\\", literal=True).to_numpy())
    if not escaped.size:
        return texts
    raw = texts.gather(escaped)
    by_python = raw.str.contains(r"(?i)\\u[d][89a-f]").to_numpy()
    decoded = pl.Series("sym", [None] * escaped.size, dtype=pl.String)
    simple = np.flatnonzero(~by_python)
    try:
        quoted = pl.DataFrame({"t": raw.gather(simple)}).select(
            pl.concat_str(pl.lit('"'), pl.col("t"), pl.lit('"')).str.json_decode(pl.String)
        )
        decoded = decoded.scatter(simple, quoted.to_series())
        rest = np.flatnonzero(by_python)
    except pl.exceptions.PolarsError:  # an escape JSON does not allow: each text on its own
        rest = np.arange(escaped.size)
    if rest.size:
        decoded = decoded.scatter(rest, pl.Series([_unescape(t.encode()) for t in raw.gather(rest).to_list()]))
    return texts.scatter(escaped, decoded)


def valid_utf8(data: np.ndarray, offsets: np.ndarray) -> bool:
    """True when every text ``data[offsets[i]:offsets[i + 1]]`` is valid UTF-8: all of them
    together are and none starts inside a character (so none ends inside one but the last).

    Read in 8 MB pieces (ASCII pieces only compared), so a buffer of hundreds of MB costs no copy of itself."""
    import codecs

    chunk = 1 << 23
    first = next((at for at in range(0, data.size, chunk) if int(data[at : at + chunk].max()) >= 0x80), None)
    if first is None:
        return True
    starts = offsets[:-1][offsets[1:] > offsets[:-1]]
    if ((data[starts] & 0xC0) == 0x80).any():
        return False
    decoder = codecs.getincrementaldecoder("utf-8")()  # the pieces before the first are ASCII: nothing pending
    try:
        for at in range(first, data.size, chunk):
            part = data[at : at + chunk]
            if decoder.getstate()[0] or int(part.max()) >= 0x80:
                decoder.decode(memoryview(part))
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def decoded_texts(data: np.ndarray, offsets: np.ndarray) -> pl.Series:
    """The texts decoded with U+FFFD for bytes that are not UTF-8 (damaged input only)."""
    raw = data.tobytes()
    return pl.Series("sym", [raw[s:e].decode("utf-8", "replace") for s, e in zip(offsets[:-1], offsets[1:])])


def _unescape(b: bytes) -> str:
    """A JSON string's text with its escapes decoded as orjson does; one whose escapes orjson
    refuses: a lone surrogate (``\\ud800``) becomes "?"; an invalid escape (``\\x41``, a
    cut ``\\u00``) is kept as written."""
    import orjson

    try:
        return orjson.loads(b'"' + b + b'"')
    except orjson.JSONDecodeError:
        return _unescape_leniently(b)


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
