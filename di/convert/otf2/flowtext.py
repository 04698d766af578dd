"""The ``di.flows_in`` texts of the OTF2 writer, written in numba.

A destination event's text is the JSON list of the flows that end at it, in
the order of the ``flows`` table: ``[{"l":L,"k":K,"t":"KIND","i":ID,"c":CAT},...]``
with L the source's output location, K its Enter ordinal there, KIND the flow
kind, ID the flow id (``null`` when absent) and CAT the JSON of the source's
``src_cat`` (``null`` when absent). :mod:`di.convert.otf2.events` reads them back.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import copy_bytes
from di.convert.columns import readonly
from di.convert.otf2.digits import write_int

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
