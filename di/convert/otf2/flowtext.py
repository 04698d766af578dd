"""The ``di.flows_in`` texts of the OTF2 writer, written and read back in numba.

A destination event's text is the JSON list of the flows that end at it, in
the order of the ``flows`` table: ``[{"l":L,"k":K,"t":"KIND","i":ID,"c":CAT},...]``
with L the source's output location, K its Enter ordinal there, KIND the flow
kind, ID the flow id (``null`` when absent) and CAT the JSON of the source's
``src_cat`` (``null`` when absent). :func:`read_flow_lists` parses texts of
exactly that form for :mod:`di.convert.otf2.events`, which reads any other text
(a damaged archive) as JSON.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import copy_bytes
from di.convert.columns import readonly
from di.convert.otf2.digits import write_int
from di.convert.symbols import FULL, decode_symbols, intern, new_table

_PIECES = ('[{"l":', ',{"l":', ',"k":', ',"t":"', '","i":', ',"c":', "}", "]", "null")
"""Fixed texts, numbered in this order (the kinds and the categories' JSON follow them in the piece table)."""
_OPEN, _NEXT, _K, _T, _I, _C, _CLOSE, _END, _NULL = (np.int64(i) for i in range(len(_PIECES)))
_LONGEST_INT = 20
"""Characters of the longest int64 in decimal (with its sign)."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _flow_lists(order, first, last, loc, ordinal, kind, ids, has_id, cat, pieces, bounds, kinds_at, cats_at, out, ends):
    """Write the lists into ``out`` (inputs read-only: one signature); the flows in ``order``, a list opening at
    ``first[j]`` and closing after ``last[j]`` (j: position in ``order``); ``ends``: each list's end in ``out``.
    The five fields of an item go through one loop (one call site per helper: a smaller kernel to compile); the
    pieces are copied by :func:`di.convert.bytewords.copy_bytes` (one ``memcpy``). ``out`` has room for the longest
    lists (:func:`flow_lists` sizes it: copy_bytes does not check)."""
    o = np.int64(0)
    m = 0
    for j in range(order.size):
        f = order[j]
        for field in range(5):  # l, k, t, i, c: its key piece, then its value
            key = (_OPEN if first[j] else _NEXT) if field == 0 else _K + field - 1
            o = copy_bytes(out, o, pieces, bounds[key], bounds[key + 1])
            piece = np.int64(-1)
            value = np.int64(0)
            if field == 0:
                value = loc[f]
            elif field == 1:
                value = ordinal[f]
            elif field == 2:
                piece = kinds_at + kind[f]
            elif field == 3:
                if has_id[f]:
                    value = ids[f]
                else:
                    piece = _NULL
            else:
                piece = cats_at + cat[f]
            if piece >= 0:
                o = copy_bytes(out, o, pieces, bounds[piece], bounds[piece + 1])
            else:
                o = write_int(out, o, value)
        o = copy_bytes(out, o, pieces, bounds[_CLOSE], bounds[_CLOSE + 1])
        if last[j]:
            o = copy_bytes(out, o, pieces, bounds[_END], bounds[_END + 1])
            ends[m] = o
            m += 1
    return o


def flow_lists(
    order: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    loc: np.ndarray,
    ordinal: np.ndarray,
    kind: np.ndarray,
    kinds: list[str],
    ids: np.ndarray,
    has_id: np.ndarray,
    cat: np.ndarray,
    cats_json: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, int64 offsets: one more than lists) of the ``di.flows_in`` lists.

    Args:
        order: the flows (rows of the ``flows`` table) in writing order: those of one destination back to back.
        first, last: per position in ``order``, True where a destination's list opens / closes.
        loc, ordinal: per flow, its source's output location and Enter ordinal there (int64).
        kind: per flow, its kind's number in ``kinds`` (the kind names).
        ids, has_id: per flow, its id (int64) and whether it has one.
        cat: per flow, the number of its source category's JSON text (``null`` included) in ``cats_json``.
    """
    table = [p.encode() for p in (*_PIECES, *kinds, *cats_json)]
    bounds = np.zeros(len(table) + 1, np.int64)
    np.cumsum([len(p) for p in table], out=bounds[1:])
    pieces = np.frombuffer(b"".join(table) or b"\0", np.uint8)
    longest = max(len(p) for p in table)
    out = np.empty(order.size * (3 * _LONGEST_INT + 8 * longest), np.uint8)
    lists = int(np.count_nonzero(last))
    offsets = np.zeros(lists + 1, np.int64)
    as64 = [readonly(np.ascontiguousarray(a, np.int64)) for a in (order, loc, ordinal, kind, ids, cat)]
    flags = [readonly(np.ascontiguousarray(a, np.bool_)) for a in (first, last, has_id)]
    size = _flow_lists(
        as64[0],
        flags[0],
        flags[1],
        as64[1],
        as64[2],
        as64[3],
        as64[4],
        flags[2],
        as64[5],
        readonly(pieces),
        readonly(bounds),
        np.int64(len(_PIECES)),
        np.int64(len(_PIECES) + len(kinds)),
        out,
        offsets[1:],
    )
    return out[:size], offsets


_QUOTE, _BACKSLASH, _MINUS, _ZERO, _NINE = (np.int64(ord(c)) for c in '"\\-09')
_KEYS = np.frombuffer(b'[{"l":,"k":,"t":,"i":,"c":}],{"l":null', np.uint8)
"""The fixed bytes a list is read against: ``[{"l":`` (0-6), ``,"k":`` (6-11), ``,"t":`` (11-16), ``,"i":`` (16-21),
``,"c":`` (21-26), ``}`` (26), ``]`` (27), ``,{"l":`` (28-34), ``null`` (34-38)."""
_AT_OPEN, _AT_K, _AT_CLOSE, _AT_END, _AT_NEXT, _AT_NULL = (np.int64(v) for v in (0, 6, 26, 27, 28, 34))
_LONGEST_DIGITS = np.int64(18)
"""Digits of the longest integer read here (any int64 of 18 digits; a longer one is left to the JSON reader)."""
ITEM_ROWS = ("text", "l", "k", "t", "i", "c")
"""Rows of :func:`read_flow_lists`' item array: the text's position, then the fields (t and c as symbol ids)."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _read_flow_lists(data, starts, ends, keys, slots, sym_starts, sym_ends, count, items, has_id, irregular):
    """Parse the texts ``data[starts[x]:ends[x]]`` of the writer's exact form into ``items`` (rows ITEM_ROWS; c -1 for
    null) and ``has_id``; a text of any other form writes no item and is flagged in ``irregular``. Returns the items
    written, or FULL when the symbol table filled up."""
    m = 0
    cap = has_id.size
    for x in range(starts.size):
        p, e = starts[x], ends[x]
        m0 = m
        bad = False
        piece = _AT_OPEN
        while not bad:
            for field in range(5):  # l, k, t, i, c: the key's bytes, then the value
                lo = piece if field == 0 else _AT_K + 5 * (field - 1)
                hi = lo + (6 if field == 0 else 5)
                if e - p < hi - lo or m >= cap:
                    bad = True
                    break
                for b in range(hi - lo):
                    if data[p + b] != keys[lo + b]:
                        bad = True
                if bad:
                    break
                p += hi - lo
                if field == 4 or field == 3:  # null, for the id and the category
                    if e - p >= 4 and data[p] == keys[_AT_NULL] and data[p + 1] == keys[_AT_NULL + 1]:
                        if data[p + 2] == keys[_AT_NULL + 2] and data[p + 3] == keys[_AT_NULL + 3]:
                            p += 4
                            if field == 3:
                                has_id[m] = False
                                items[4, m] = 0
                            else:
                                items[5, m] = -1
                            continue
                if field == 2 or field == 4:  # a JSON string: its span with the quotes, interned
                    if p >= e or data[p] != _QUOTE:
                        bad = True
                        break
                    q = p + 1
                    while q < e and data[q] != _QUOTE:
                        q += 2 if data[q] == _BACKSLASH else 1
                    if q >= e:
                        bad = True
                        break
                    sid = intern(data, p + 1, q, slots, sym_starts, sym_ends, count)
                    if sid == FULL:
                        return FULL
                    items[3 if field == 2 else 5, m] = sid
                    p = q + 1
                    continue
                negative = p < e and data[p] == _MINUS
                q = p + 1 if negative else p
                v = np.int64(0)
                while q < e and _ZERO <= data[q] <= _NINE and q - p < _LONGEST_DIGITS:
                    v = v * 10 + (data[q] - _ZERO)
                    q += 1
                first = p + 1 if negative else p
                if q == first or (q < e and _ZERO <= data[q] <= _NINE) or (data[first] == _ZERO and q > first + 1):
                    bad = True
                    break
                items[1 + field if field < 2 else 4, m] = -v if negative else v
                if field == 3:
                    has_id[m] = True
                p = q
            if bad:
                break
            items[0, m] = x
            m += 1
            if p < e and data[p] == keys[_AT_CLOSE]:
                p += 1
            else:
                bad = True
                break
            if e - p == 1 and data[p] == keys[_AT_END]:
                break
            piece = _AT_NEXT
        if bad:
            m = m0
            irregular[x] = True
    return m


def read_flow_lists(text: pl.Series) -> tuple[pl.DataFrame, np.ndarray] | None:
    """The items of the ``di.flows_in`` texts of the writer's form, and the positions of the texts of another form
    (their items are not in the frame), or None when the texts name more distinct kinds and categories than a symbol
    table holds. Columns: ``text`` (the text's position in ``text``), ``l``, ``k``, ``t``, ``i``, ``c``, as
    :data:`di.convert.otf2.events` reads them from JSON (i and c null where the text says null)."""
    from di.convert.columns import text_spans

    data, starts, ends = text_spans(text)
    cap = int(text.str.count_matches("{", literal=True).sum() or 0)
    items = np.zeros((len(ITEM_ROWS), cap), np.int64)
    has_id = np.zeros(cap, np.bool_)
    irregular = np.zeros(text.len(), np.bool_)
    irregular[text.is_null().to_numpy()] = True
    slots, sym_starts, sym_ends, count = new_table(1 << 12)
    m = _read_flow_lists(
        readonly(data),
        readonly(starts),
        readonly(ends),
        readonly(_KEYS),
        slots,
        sym_starts,
        sym_ends,
        count,
        items,
        has_id,
        irregular,
    )
    if m == FULL:
        return None
    names = decode_symbols(data, sym_starts, sym_ends, int(count[0]))
    items, has_id = items[:, :m], has_id[:m]
    c = items[5]
    frame = pl.DataFrame(
        {
            "text": items[0],
            "l": items[1],
            "k": items[2],
            "t": names.gather(items[3]),
            "i": pl.Series(items[4]).set(pl.Series(~has_id), None),
            "c": names.gather(np.maximum(c, 0)).set(pl.Series(c < 0), None),
        }
    )
    return frame, np.flatnonzero(irregular)
