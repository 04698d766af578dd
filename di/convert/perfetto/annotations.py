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
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.jsonstrings import json_strings
from di.convert.stringviews import gather_spans, nullable, texts_in_place
from di.convert.symbols import decoded_texts
from di.schema import optional_args_keys

from di.convert.perfetto.decode import A_BOOL, A_DOUBLE, A_INT, A_ISTRING, A_JSON, A_NESTED, A_POINTER, A_STRING, A_UINT

OWN_ARGS, OWN_BYTES = "args", "bytes"
LIFTED = optional_args_keys()
"""(column, args key) of the optional events columns read from integer annotations named by the key."""


def span_strings(buf: np.ndarray, s0: np.ndarray, s1: np.ndarray, valid: np.ndarray | None = None) -> pl.Series:
    """The spans ``buf[s0[i]:s1[i]]`` (null where ``valid`` is False) as a String Series: string views of ``buf``
    itself, no text copied (the Series keeps ``buf``, the file's mapped pages, alive); where some span is not UTF-8
    (a damaged file), each text decoded on its own, U+FFFD replacing the bad bytes."""
    import pyarrow as pa

    s0, s1 = np.ascontiguousarray(s0, dtype=np.int64), np.ascontiguousarray(s1, dtype=np.int64)
    if valid is None:
        valid = np.ones(s0.size, np.bool_)
    try:
        return texts_in_place(buf, s0, s1, "", check_utf8=True, valid=valid)
    except pa.ArrowInvalid:
        texts = decoded_texts(*gather_spans(buf, s0, s1, valid)).alias("")
        return texts if valid.all() else texts.set(pl.Series(~valid), None)


def annotation_columns(
    ann: np.ndarray,
    ann_dbl: np.ndarray,
    buf: np.ndarray,
    strings: pl.Series,
    slice_of: np.ndarray,
    slice_row: np.ndarray,
    n_rows: int,
    *,
    own: bool,
) -> tuple[pl.Series, pl.Series, dict[str, pl.Series], int]:
    """(args String per row, bytes Int64 per row, the lifted columns that have a value (Int64 per row, by column
    name), number of nested annotations written as null) of the ``n_rows`` events, from the decoder's annotation
    fields ``ann`` (5, n: rows of event, name id, value type, value (an int, or a text's span start), text span end)
    and doubles ``ann_dbl``; ``slice_of``: each event's slice (-1: none), ``slice_row``: each slice's row (-1:
    dropped; its nested annotations are counted all the same).

    Annotations are told apart by their interned name ids (:func:`_name_codes`) and sorted into the columns in one
    pass (:func:`_sort_annotations`): the texts of names and values are made only for the annotations that go into
    an args text (a real-shaped trace of di's has five million annotations, most of them ids and byte counts)."""
    own_keys = [OWN_ARGS, OWN_BYTES] if own else [None, None]  # another producer's "args" and "bytes" stay in args
    lut = _name_codes(strings, [*own_keys, *(key for _, key in LIFTED)])
    first = np.zeros((2 + len(LIFTED), n_rows), np.int64)  # rows never written cost no memory
    has = np.zeros(first.shape, np.bool_)
    args_end, counts = np.zeros(n_rows, np.int64), np.zeros(first.shape[0] + 1, np.int64)
    events, names, vtype, ival, end = (np.ascontiguousarray(row) for row in ann)  # each row is: no copy
    rest = np.empty_like(events)
    n_rest = _sort_annotations(
        events, names, vtype, ival, end, slice_of, slice_row, lut, first, has, args_end, rest, counts
    )
    nested = int(counts[-1])
    lifted = {col: nullable(first[2 + k], has[2 + k], col) for k, (col, _) in enumerate(LIFTED) if counts[2 + k]}
    if own:  # di's own annotations: the args text and bytes of each row, the rest read as any producer's
        args = span_strings(buf, first[0], args_end, valid=has[0]).alias("args")
        nbytes = nullable(first[1], has[1], "bytes")
    else:
        args = pl.Series("args", dtype=pl.String).extend_constant(None, n_rows)
        nbytes = pl.Series("bytes", dtype=pl.Int64).extend_constant(None, n_rows)
    if not n_rest:
        return args, nbytes, lifted, nested
    at = rest[:n_rest]
    names, vtype, ival = names[at], vtype[at], ival[at]
    name = strings.gather(pl.Series(names).replace(-1, None)).fill_null("")
    has_text = (vtype == A_STRING) | (vtype == A_JSON)
    text = span_strings(buf, np.where(has_text, ival, 0), np.where(has_text, end[at], 0))
    row = slice_row[slice_of[events[at]]]
    df = pl.DataFrame({"row": row, "name": name, "type": vtype, "i": ival, "d": ann_dbl[at], "text": text})
    istr = np.where(vtype == A_ISTRING, ival, -1)
    df = df.with_columns(istr=strings.gather(pl.Series(istr).replace(-1, None)).fill_null(""))
    uint = pl.Series(ival.view(np.uint64))
    return _foreign_args(df, args, uint), nbytes, lifted, nested


def _name_codes(strings: pl.Series, texts: list[str | None]) -> np.ndarray:
    """For each name id (a row of ``strings``; the last entry: -1, no name) the index of its text in ``texts``
    (None: a text left out), -1 for another: one comparison of each text with the interned strings."""
    lut = np.full(strings.len() + 1, -1, dtype=np.int64)
    for j, text in enumerate(texts):
        if text is not None:
            lut[(strings == text).arg_true().to_numpy()] = j
    return lut


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _sort_annotations(events, names, vtype, ival, end, slice_of, slice_row, lut, first, has, args_end, rest, counts):
    """Sort the annotations of kept events' rows (``r = slice_row[slice_of[events[a]]] >= 0``) by the code
    ``c = lut[names[a]]`` of their name (:func:`_name_codes`: 0 args, 1 bytes, 2 + k the k-th :data:`LIFTED` key):
    the first one of a row with a value of the code's type (legacy JSON; int; int, or uint within int64's range)
    sets ``has[c, r]`` and ``first[c, r]`` (its value: an int, or an args text's span start; ``args_end[r]`` its
    end) and counts in ``counts[c]``; a row's later args and bytes are dropped; the indexes of the others go to
    ``rest``, in order. ``counts[-1]``: the nested annotations of slices, kept or dropped. Returns how many went to
    ``rest``."""
    n_rest = 0
    for a in range(events.size):
        s = slice_of[events[a]]
        if s < 0:  # an annotation of no slice (a counter's, an unmatched end's)
            continue
        r, t, v = slice_row[s], vtype[a], ival[a]
        if t == A_NESTED:
            counts[-1] += 1
        if r < 0:  # of a dropped slice
            continue
        c = lut[names[a]]  # a name id of -1 (none) reads the last entry
        if c == 0:
            fits = t == A_JSON
        elif c == 1:
            fits = t == A_INT
        else:
            fits = c > 1 and (t == A_INT or (t == A_UINT and v >= 0))
        if fits and not has[c, r]:
            has[c, r] = True
            counts[c] += 1
            first[c, r] = v
            if c == 0:
                args_end[r] = end[a]
        elif not fits or c > 1:
            rest[n_rest] = a
            n_rest += 1
    return n_rest


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
    """One JSON object per events row (``row``) from the annotation rows of ``df``, into ``args``."""
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
        .group_by("row", maintain_order=True)
        .agg(pl.col("_kv").str.join(","))
        .with_columns(_o=pl.lit("{") + pl.col("_kv") + pl.lit("}"))
    )
    return args.scatter(objs.get_column("row").to_numpy(), objs.get_column("_o"))
