"""Typed OTF2 values (attribute values, metric values) -> numbers and JSON text.

OTF2 passes a value as 8 raw bytes plus an ``OTF2_Type`` code; the record
buffer keeps the bytes as one int64. Integers of a narrower type sit in the
low bytes (little endian), a FLOAT in the low 4 bytes, a DOUBLE in all 8;
the reference types (STRING, REGION, LOCATION, ...) hold a definition id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import orjson
import polars as pl

from di.convert.jsonstrings import json_strings

if TYPE_CHECKING:  # the String cfunc compiles on import: the writers that import this module do not need it
    from di.convert.otf2.stringdefs import StringDefs


TYPE_UINT8, TYPE_UINT16, TYPE_UINT32, TYPE_UINT64 = 1, 2, 3, 4
TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64 = 5, 6, 7, 8
TYPE_FLOAT, TYPE_DOUBLE, TYPE_STRING = 9, 10, 11
TYPE_REGION, TYPE_COMM = 14, 17

TYPE_LOCATION = 13
_UNSIGNED_BITS = {
    TYPE_UINT8: 8,
    TYPE_UINT16: 16,
    TYPE_UINT32: 32,
    **{t: 32 for t in range(11, 26) if t != TYPE_LOCATION},
}
"""Bits that carry the value; the reference types other than LOCATION are uint32 ids, the rest of the 8 bytes is undefined."""
_SIGNED_BITS = {TYPE_INT8: 8, TYPE_INT16: 16, TYPE_INT32: 32}
REF_MASKS = np.array([(1 << _UNSIGNED_BITS[t]) - 1 if t in _UNSIGNED_BITS else -1 for t in range(32)], np.int64)
"""The bits of a value of each OTF2_Type (index) that carry a reference: all for 64-bit types."""


def as_float(types: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Float64 value of each (type, raw bytes) pair (metric samples)."""
    raw = np.ascontiguousarray(raw, dtype=np.int64)
    out = raw.astype(np.float64)
    unsigned = raw.view(np.uint64)
    out = np.where(types == TYPE_UINT64, unsigned.astype(np.float64), out)
    out = np.where(types == TYPE_DOUBLE, raw.view(np.float64), out)
    low32 = (unsigned & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    with np.errstate(
        invalid="ignore"
    ):  # the low 4 bytes of other types can be signalling-NaN patterns; np.where drops them
        out = np.where(types == TYPE_FLOAT, low32.view(np.float32).astype(np.float64), out)
    for code, bits in _UNSIGNED_BITS.items():
        out = np.where(types == code, (unsigned & np.uint64((1 << bits) - 1)).astype(np.float64), out)
    for code, bits in _SIGNED_BITS.items():
        shift = np.int64(64 - bits)
        out = np.where(types == code, ((raw << shift) >> shift).astype(np.float64), out)
    return out


def ref_ids(types: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """The definition ids (int64) held by reference-typed values (the bytes beyond their width cleared)."""
    raw = np.asarray(raw, dtype=np.int64)
    return raw & REF_MASKS[np.clip(types, 0, 31)]


def as_json(
    types: np.ndarray, raw: np.ndarray, strings: StringDefs, regions: dict[int, str], comms: dict[int, str]
) -> pl.Series:
    """JSON text of each value: numbers as numbers, STRING/REGION/COMM refs as their names, other refs as ids."""
    raw = np.ascontiguousarray(raw, dtype=np.int64)
    unsigned = raw.view(np.uint64)
    sext, uext = raw.copy(), unsigned.copy()
    for code, bits in _SIGNED_BITS.items():
        m = types == code
        sext[m] = (raw[m] << np.int64(64 - bits)) >> np.int64(64 - bits)
    for code, bits in _UNSIGNED_BITS.items():
        m = types == code
        uext[m] = unsigned[m] & np.uint64((1 << bits) - 1)
    t = pl.Series(types)
    text = pl.select(
        pl.when(t.is_in([TYPE_FLOAT, TYPE_DOUBLE]))
        .then(pl.Series(as_float(types, raw)).cast(pl.String))
        .when(t.is_in([TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64]))
        .then(pl.Series(sext).cast(pl.String))
        .otherwise(pl.Series(uext).cast(pl.String))
    ).to_series()
    mask = types == TYPE_STRING
    if mask.any():  # a real-shaped trace has a string per event: resolved and quoted as columns
        names = strings.gather(uext[mask].astype(np.int64))
        text = text.scatter(np.flatnonzero(mask), json_strings(names).set(names.is_null(), None))
    for code, table in {TYPE_REGION: regions, TYPE_COMM: comms}.items():
        mask = types == code
        if mask.any():
            ids, inv = np.unique(uext[mask], return_inverse=True)
            quoted = [
                None if (name := table.get(int(v))) is None else orjson.dumps(name).decode() for v in ids.tolist()
            ]
            text = text.scatter(np.flatnonzero(mask), pl.Series(quoted, dtype=pl.String).gather(inv.ravel()))
    return text.alias("value")
