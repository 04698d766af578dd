"""Debug annotations of slices -> the ``args`` (JSON object text), ``bytes`` and lifted id columns.

In a trace di wrote, the annotation ``args`` holds the event's args JSON text
(legacy_json_value) and ``bytes`` the integer byte count; both come back as
they were. In any trace, an integer (int or uint) annotation named by the args
key of an optional events column (:data:`LIFTED`: "External id" -> ``ext_id``,
...) becomes that column's value (Int64; a uint above int64's range stays in
``args``), not a member of the args text; a column comes back only when some
slice has a value. Other annotations become one JSON object per slice,
keys in the order the annotations come: bool, integers, doubles (non-finite:
null), strings (interned or inline), pointers (``"0x.."``), legacy JSON as
it is; nested dicts and arrays are written as null and counted. Annotations
on a slice's end packet join that slice's, as in Perfetto's trace processor.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.jsonstrings import json_strings
from di.convert.stringviews import gather_spans, nullable, texts_in_place
from di.convert.symbols import decoded_texts
from di.schema import optional_args_keys

from di.convert.perfetto.decode import A_BOOL, A_DOUBLE, A_INT, A_ISTRING, A_JSON, A_NESTED, A_POINTER, A_STRING, A_UINT

OWN_ARGS, OWN_BYTES = "args", "bytes"
LIFTED = optional_args_keys()
"""(column, args key) of the optional events columns read from integer annotations named by the key."""


def span_strings(buf: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> pl.Series:
    """The spans ``buf[s0[i]:s1[i]]`` as a String Series: string views of ``buf`` itself, no text copied (the
    Series keeps ``buf``, the file's mapped pages, alive); where some span is not UTF-8 (a damaged file), each
    text decoded on its own, U+FFFD replacing the bad bytes."""
    import pyarrow as pa

    s0, s1 = s0.astype(np.int64), s1.astype(np.int64)
    try:
        return texts_in_place(buf, s0, s1, "", check_utf8=True)
    except pa.ArrowInvalid:
        return decoded_texts(*gather_spans(buf, s0, s1, np.ones(s0.size, np.bool_))).alias("")


def _spread(rows: np.ndarray, values: pl.Series, n: int) -> pl.Series:
    """A Series of ``n`` rows holding ``values[k]`` at row ``rows[k]`` (distinct rows), null elsewhere."""
    where = np.full(n, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    return values.gather(pl.Series(where).replace(-1, None))


def _first_per_slice(slices: np.ndarray, values: pl.Series, n: int) -> pl.Series:
    """:func:`_spread` of the first value of each slice (in annotation order; di writes one a slice, in order)."""
    if slices.size > 1 and not (slices[1:] > slices[:-1]).all():
        first = np.unique(slices, return_index=True)[1]
        slices, values = slices[first], values.gather(first)
    return _spread(slices, values, n)


def annotation_columns(
    ann: np.ndarray,
    ann_dbl: np.ndarray,
    buf: np.ndarray,
    strings: pl.Series,
    slice_of: np.ndarray,
    n_slices: int,
    *,
    own: bool,
) -> tuple[pl.Series, pl.Series, dict[str, pl.Series], int]:
    """(args String per slice, bytes Int64 per slice, the lifted columns that have a value (Int64 per slice, by
    column name), number of nested annotations written as null).

    Annotations are told apart by their interned name ids (:func:`_name_codes`): the texts of names and values are
    made only for the annotations that go into an args text (a real-shaped trace of di's has five million
    annotations, most of them ids and byte counts)."""
    ann_slice = slice_of[ann[:, 0]] if len(ann) else np.zeros(0, np.int64)
    ok = ann_slice >= 0
    if not ok.all():  # annotations of dropped slices (a copy of the rows only then)
        ann, ann_dbl, ann_slice = ann[ok], ann_dbl[ok], ann_slice[ok]
    vtype, ival = ann[:, 2], ann[:, 3]
    code = _name_codes(strings, ann[:, 1], [OWN_ARGS, OWN_BYTES, *(key for _, key in LIFTED)])
    args = pl.Series("args", dtype=pl.String).extend_constant(None, n_slices)
    nbytes = pl.Series("bytes", dtype=pl.Int64).extend_constant(None, n_slices)
    lifted, rest = _lifted_columns(code, 2, vtype, ival, ann_slice, n_slices)
    if own:  # di's own annotations: the args text and bytes of each slice, the rest read as any producer's
        is_args = (code == 0) & (vtype == A_JSON)
        is_bytes = (code == 1) & (vtype == A_INT)
        texts = span_strings(buf, ann[is_args, 4], ann[is_args, 5])
        args = _first_per_slice(ann_slice[is_args], texts, n_slices).alias("args")
        nbytes = _first_per_slice(ann_slice[is_bytes], pl.Series(ival[is_bytes]), n_slices).alias("bytes")
        rest &= ~(is_args | is_bytes)
    if not rest.any():
        return args, nbytes, lifted, 0
    ann, ann_dbl, ann_slice, vtype, ival = ann[rest], ann_dbl[rest], ann_slice[rest], vtype[rest], ival[rest]
    name = strings.gather(pl.Series(ann[:, 1]).replace(-1, None)).fill_null("")
    has_text = (vtype == A_STRING) | (vtype == A_JSON)
    text = span_strings(buf, np.where(has_text, ann[:, 4], 0), np.where(has_text, ann[:, 5], 0))
    df = pl.DataFrame({"slice": ann_slice, "name": name, "type": vtype, "i": ival, "d": ann_dbl, "text": text})
    istr = np.where(vtype == A_ISTRING, ival, -1)
    df = df.with_columns(istr=strings.gather(pl.Series(istr).replace(-1, None)).fill_null(""))
    uint = pl.Series(ival.view(np.uint64))
    return _foreign_args(df, args, uint), nbytes, lifted, int((vtype == A_NESTED).sum())


def _name_codes(strings: pl.Series, ids: np.ndarray, texts: list[str]) -> np.ndarray:
    """For each annotation's name id (a row of ``strings``; -1: none) the index of its text in ``texts``, -1 for
    another: one comparison of each text with the interned strings, then a lookup per annotation."""
    lut = np.full(strings.len() + 1, -1, dtype=np.int8)  # the last entry takes the ids of no name (-1, clipped)
    for j, text in enumerate(texts):
        lut[(strings == text).arg_true().to_numpy()] = j
    return np.take(lut, np.asarray(ids, np.int64).view(np.uint64), mode="clip")


def _lifted_columns(
    code: np.ndarray, first: int, vtype: np.ndarray, ival: np.ndarray, ann_slice: np.ndarray, n_slices: int
) -> tuple[dict[str, pl.Series], np.ndarray]:
    """The :data:`LIFTED` columns read from the integer annotations named by their keys (``code - first``: the
    index in LIFTED of each annotation's name; the first value of each slice), only those with some value; and
    which annotations are left for the args text (the others, and a key's later values on one slice)."""
    named = code >= first
    # a uint past int64's range stays in args
    integer = (vtype == A_INT) | ((vtype == A_UINT) & (ival >= 0)) if named.any() else named
    lifted = named & integer
    columns = {}
    present = np.bincount(code[lifted], minlength=first + len(LIFTED))[first:]
    for k in np.flatnonzero(present).tolist():  # a few keys at most
        col, rows = LIFTED[k][0], np.flatnonzero(lifted & (code == first + k))
        slices = ann_slice[rows]
        if slices.size > 1 and not (slices[1:] > slices[:-1]).all():  # the first value of each slice: a later
            firsts = np.unique(slices, return_index=True)[1]  # one of the same key stays in the args text
            again = np.ones(rows.size, np.bool_)
            again[firsts] = False
            lifted[rows[again]] = False
            slices, rows = slices[firsts], rows[firsts]
        values, has = np.zeros(n_slices, np.int64), np.zeros(n_slices, np.bool_)
        values[slices], has[slices] = ival[rows], True
        columns[col] = nullable(values, has, col)
    return columns, ~lifted


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_digits(values: np.ndarray) -> pl.Series:
    """Each uint64 of ``values`` as lower-case hex digits without leading zeros (``"0"`` for 0), as
    Perfetto's UI shows a pointer annotation after ``0x``: the 16 nibbles of every value cut from its
    big-endian bytes at once, the leading zeros dropped by one mask, no Python per value."""
    import pyarrow as pa

    raw = values.astype(">u8").view(np.uint8).reshape(-1, 8)
    nibbles = np.empty((len(values), 16), dtype=np.uint8)
    nibbles[:, 0::2] = raw >> 4
    nibbles[:, 1::2] = raw & 15
    nonzero = nibbles != 0
    lead = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 15)  # all zero: the last digit stays
    data = _HEX[nibbles[np.arange(16) >= lead[:, None]]]
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(16 - lead, out=offsets[1:])
    text = pa.LargeStringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(data))
    return pl.Series(pl.from_arrow(text)).cast(pl.String)


def _pointers(df: pl.DataFrame, uint: pl.Series) -> pl.Series:
    """The hex digits of the pointer annotations' values, null on the other rows."""
    rows = np.flatnonzero(df.get_column("type").to_numpy() == A_POINTER)
    column = pl.Series(dtype=pl.String).extend_constant(None, df.height)
    return column.scatter(rows, hex_digits(uint.to_numpy()[rows])) if len(rows) else column


def _foreign_args(df: pl.DataFrame, args: pl.Series, uint: pl.Series) -> pl.Series:
    """One JSON object per slice from the annotation rows of ``df``."""
    df = df.with_columns(
        _u=uint.cast(pl.String),
        _s=json_strings(df.get_column("text")),
        _is=json_strings(df.get_column("istr")),
        _k=json_strings(df.get_column("name")),
        _p=pl.lit('"0x') + _pointers(df, uint) + pl.lit('"'),
    )
    value = (
        pl.when(pl.col("type") == A_BOOL)
        .then(pl.when(pl.col("i") != 0).then(pl.lit("true")).otherwise(pl.lit("false")))
        .when(pl.col("type") == A_INT)
        .then(pl.col("i").cast(pl.String))
        .when(pl.col("type") == A_UINT)
        .then(pl.col("_u"))
        .when(pl.col("type") == A_POINTER)
        .then(pl.col("_p"))
        .when((pl.col("type") == A_DOUBLE) & pl.col("d").is_finite())
        .then(pl.col("d").cast(pl.String))
        .when(pl.col("type") == A_STRING)
        .then(pl.col("_s"))
        .when(pl.col("type") == A_ISTRING)
        .then(pl.col("_is"))
        .when(pl.col("type") == A_JSON)
        .then(pl.col("text"))
        .otherwise(pl.lit("null"))
    )
    objs = (
        df.with_columns(_kv=pl.col("_k") + pl.lit(":") + value)
        .group_by("slice", maintain_order=True)
        .agg(pl.col("_kv").str.join(","))
        .with_columns(_o=pl.lit("{") + pl.col("_kv") + pl.lit("}"))
    )
    return args.scatter(objs.get_column("slice").to_numpy(), objs.get_column("_o"))
