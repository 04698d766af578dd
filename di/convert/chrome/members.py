"""The numeric top-level members of JSON objects held in a string column.

Chrome counter (``C``) events carry their values as the members of ``args``:
``{"allocated": 5, "freed": 2.5}``. This finds, for each object, every member
at depth 1 whose value is a JSON number, without a Python call per row:
nested objects, arrays, strings and literals are skipped whole. Positions are
returned in characters (not bytes) so polars' ``str.slice`` cuts the key and
the number's text out of the same column.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.chrome.jsontext import NO_OUT, SKIP, copy_value, end_string
from di.convert.columns import utf8_buffers


_AT_START = np.int64(0)
"""The ``o`` of :func:`copy_value` calls that write nothing (typed: a literal 0 compiles a version of its own)."""


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _end_string(data, i, end):
    """Index of the closing quote of the string whose opening quote is at i - 1 (``end`` if none)."""
    j = end_string(data, i, end)
    return end if j < 0 else j


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _skip(data, i, end, scratch):
    """Index after the (minified) JSON value starting at i (``end`` if it does not end); ``scratch``:
    the writable ``out`` :func:`copy_value` takes (nothing is written)."""
    j = copy_value(data, i, end, scratch, _AT_START, SKIP)[0]
    return end if j < 0 else j


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _scan(data, offsets, out, scratch):
    """Fill ``out`` rows (object row, key start, key length, number start, number length)
    in characters from the row's start; returns the number of members found."""
    m = 0
    for r in range(offsets.size - 1):
        start, end = offsets[r], offsets[r + 1]
        chars = 0  # characters before position i, counted incrementally
        last = start
        i = start + 1
        if end - start < 2 or data[start] != 123:
            continue
        while i < end and data[i] == 34:
            ks = i + 1
            ke = _end_string(data, ks, end)
            vs = ke + 2  # after '":'
            if vs >= end:
                break
            c = data[vs]
            ve = _skip(data, vs, end, scratch)
            if c == 45 or 48 <= c <= 57:
                for k in range(last, ks):
                    chars += (data[k] & 0xC0) != 0x80
                kc = chars
                for k in range(ks, vs):
                    chars += (data[k] & 0xC0) != 0x80
                out[m, 0] = r
                out[m, 1] = kc
                out[m, 2] = 0
                for k in range(ks, ke):
                    out[m, 2] += (data[k] & 0xC0) != 0x80
                out[m, 3] = chars
                out[m, 4] = ve - vs  # a number is ASCII
                last = vs
                m += 1
            if ve >= end or data[ve] != 44:
                break
            i = ve + 1
    return m


def numeric_members(objects: pl.Series) -> pl.DataFrame:
    """(row, key, value) for every numeric top-level member of the minified JSON
    objects in ``objects`` (rows that are null or hold no number give none).

    ``row`` is the position in ``objects``; ``value`` is Float64, parsed by polars
    from the number's text.
    """
    texts = objects.fill_null("").cast(pl.String).rename("text")
    data, offsets = utf8_buffers(texts)
    out = np.empty((int(np.count_nonzero(data == 58)) + 1, 5), dtype=np.int64)
    m = _scan(data, offsets, out, NO_OUT)
    found = pl.DataFrame(out[:m], schema=["row", "ks", "kl", "vs", "vl"], orient="row")
    text = texts.gather(found.get_column("row"))
    return found.with_columns(text).select(
        "row",
        pl.col("text").str.slice(pl.col("ks"), pl.col("kl")).alias("key"),
        pl.col("text").str.slice(pl.col("vs"), pl.col("vl")).cast(pl.Float64, strict=False).alias("value"),
    )
