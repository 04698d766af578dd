"""Numeric ``key: value`` / ``key=value`` pairs of ASCII log lines, found by one numba scan of their bytes, and the
first of repeated training samples, for :mod:`di.convert.logs.training` on logs long enough to pay for numba.

:func:`line_pairs` finds what :data:`di.convert.logs.training.PAIR_RE` (in ASCII mode) finds with polars
``extract_all``, after the line's leading ``[...]`` tags (:data:`~di.convert.logs.training.TAGS_RE`) and, where
asked, Python logging's ``name - LEVEL -`` head: the same matches, leftmost first and not overlapping, told by their
byte spans. Keys (the text before the ``:`` or ``=``) are interned (:func:`di.convert.symbols.intern`); a pair that
repeats its key's last value (``skipped=0,``, a constant lr) shares it; each value's number is cast by polars (exact
float parsing) from a string view of its bytes, and its unit copied out.

Why one pass gives the regex's match: the key ``[A-Za-z_][\\w \\-/().]*?`` runs over key characters, none of which
is a quote, ``:`` or ``=``; so wherever it starts in a run of them, the ``:``/``=`` after the run (past one quote and
spaces) and all that follows are the same, and the greedy rest (spaces, ``[``, sign, digits, exponent, unit) has one
way to match. A run where no number follows is skipped whole.

:func:`first_samples` keeps one sample per (rank, series, time, value) by comparing the few samples of each run of
one (rank, time), where a polars ``unique`` hashes four columns per sample.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert import symbols
from di.convert.columns import utf8_buffers
from di.convert.stringviews import texts_at_spans, texts_in_place

__all__ = ["DIGIT", "SPACE", "WORD", "LinePairs", "first_samples", "is_class", "line_pairs"]

COMMA = np.int8(1)
"""A value's flag: its number holds a ``,`` (``1,024``; ``0,`` where a list goes on)."""
ODD_SPACE = np.int8(2)
"""A value's flag: a white space other than ``" "`` comes before it (a tab): it reads as no number (as
``str.strip_chars(" [")`` then a cast leave it)."""
_PAIRS_FULL = np.int64(-1)
"""What :func:`_scan` returns when its pair arrays filled up (the caller retries with more room)."""
_KEYS_FULL = np.int64(-2)
"""What :func:`_scan` returns when its key table filled up."""


SPACE, DIGIT, WORD, KEY_START, KEY_CHAR = np.uint8(1), np.uint8(2), np.uint8(4), np.uint8(8), np.uint8(16)
"""Bits of :data:`_CLASSES`: ASCII ``\\s`` (tab, newline, vertical tab, form feed, carriage return, space), ``\\d``,
``\\w``, a key's first character ``[A-Za-z_]`` and its others ``[\\w \\-/().]``."""


def _classes() -> np.ndarray:
    table = np.zeros(256, np.uint8)
    for c in range(256):
        ch = chr(c)
        word = c < 128 and (ch.isalnum() or ch == "_")
        table[c] = (
            SPACE * (ch in " \t\n\v\f\r")
            | DIGIT * (c < 128 and ch.isdigit())
            | WORD * word
            | KEY_START * (c < 128 and (ch.isalpha() or ch == "_"))
            | KEY_CHAR * (word or ch in " -/().")
        )
    return table


_CLASSES = _classes()
"""Per byte: its :data:`SPACE`... bits (a constant of the kernel: one load per byte, not a chain of compares)."""


@njit(cache=True, _nrt=False, inline="always")
def is_class(data, bits, i):
    """Whether byte ``i`` of ``data`` has one of the class ``bits``."""
    return (_CLASSES[data[i]] & bits) != 0


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _level_at(data, p, b1):
    """Length of `` - INFO - `` or `` - WARNING - `` at ``data[p:b1]``, else 0."""
    if p + 9 > b1 or data[p] != 32 or data[p + 1] != 45 or data[p + 2] != 32:
        return 0
    if (
        data[p + 3] == 73
        and data[p + 4] == 78
        and data[p + 5] == 70
        and data[p + 6] == 79
        and data[p + 7] == 32
        and data[p + 8] == 45
        and p + 9 < b1
        and data[p + 9] == 32
    ):
        return 10  # " - INFO - "
    if (
        p + 13 <= b1
        and data[p + 3] == 87
        and data[p + 4] == 65
        and data[p + 5] == 82
        and data[p + 6] == 78
        and data[p + 7] == 73
        and data[p + 8] == 78
        and data[p + 9] == 71
        and data[p + 10] == 32
        and data[p + 11] == 45
        and data[p + 12] == 32
    ):
        return 13  # " - WARNING - "
    return 0


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _scan(
    data, offsets, skip_row, level_heads, pair_row, pair_value, value_colon, value_number, value_unit, value_end,
    value_key, value_flags, values, kslots, kstarts, kends, kcount, last,
):  # fmt: skip
    """Find the pairs of every row ``data[offsets[r]:offsets[r + 1]]`` not in ``skip_row`` (see the module docstring;
    ``level_heads``: strip Python logging's head too). Per pair, in order: its row (``pair_row``) and value's number
    (``pair_value``). Per value (``values[0]`` of them): the bytes of its ``:``/``=`` (``value_colon``), number (sign
    included, ``value_number``), unit (``value_unit``) and end (``value_end``), its key's number (``value_key``) in the
    key table (``kslots...kcount``, :func:`_new_table`) and its :data:`COMMA` and :data:`ODD_SPACE` ``value_flags``.
    A pair whose text after the key is that of the last value of its key (``last``, -1: none yet) takes that value.
    Returns the number of pairs, or :data:`_PAIRS_FULL` or :data:`_KEYS_FULL`."""
    n = 0
    room = pair_row.size
    for r in range(offsets.size - 1):
        if skip_row[r]:
            continue
        b = offsets[r]
        b1 = offsets[r + 1]
        # the leading tags: ^(?:\[[^\]]*\]:?\s*)+
        while b < b1 and data[b] == 91:
            q = b + 1
            while q < b1 and data[q] != 93:
                q += 1
            if q >= b1:
                break
            q += 1
            if q < b1 and data[q] == 58:
                q += 1
            while q < b1 and is_class(data, SPACE, q):
                q += 1
            b = q
        if level_heads:  # ^.*? - (?:INFO|WARNING) -
            for p in range(b, b1):
                if data[p] == 32:
                    m = _level_at(data, p, b1)
                    if m:
                        b = p + m
                        break
        i = b
        while i < b1:
            if not is_class(data, KEY_START, i):
                i += 1
                continue
            s = i
            k = i + 1
            while k < b1 and is_class(data, KEY_CHAR, k):
                k += 1
            i = k  # no match starts in this run of key characters unless one starts at s
            j = k
            if j < b1 and (data[j] == 39 or data[j] == 34):
                j += 1
            while j < b1 and is_class(data, SPACE, j):
                j += 1
            if j >= b1 or (data[j] != 58 and data[j] != 61):
                continue
            c = j
            j += 1
            flags = np.int8(0)
            while j < b1 and is_class(data, SPACE, j):
                if data[j] != 32:
                    flags |= ODD_SPACE
                j += 1
            if j < b1 and data[j] == 91:
                j += 1
            number = j
            if j < b1 and (data[j] == 43 or data[j] == 45):
                j += 1
            if j < b1 and is_class(data, DIGIT, j):
                j += 1
                while j < b1 and (is_class(data, DIGIT, j) or data[j] == 44):
                    if data[j] == 44:
                        flags |= COMMA
                    j += 1
                if j < b1 and data[j] == 46:
                    j += 1
                while j < b1 and is_class(data, DIGIT, j):
                    j += 1
                if j < b1 and (data[j] == 101 or data[j] == 69):
                    t = j + 1
                    if t < b1 and (data[t] == 43 or data[t] == 45):
                        t += 1
                    if t < b1 and is_class(data, DIGIT, t):
                        while t < b1 and is_class(data, DIGIT, t):
                            t += 1
                        j = t
            elif j + 3 <= b1 and (
                (data[j] == 110 and data[j + 1] == 97 and data[j + 2] == 110)
                or (data[j] == 105 and data[j + 1] == 110 and data[j + 2] == 102)
            ):
                j += 3  # nan, inf
            else:
                continue
            unit = j  # (?:%|[KMGT]i?B|ms\b|s\b)?
            if j < b1:
                u = data[j]
                if u == 37:
                    j += 1
                elif u == 75 or u == 77 or u == 71 or u == 84:
                    if j + 1 < b1 and data[j + 1] == 66:
                        j += 2
                    elif j + 2 < b1 and data[j + 1] == 105 and data[j + 2] == 66:
                        j += 3
                elif u == 109:
                    if j + 1 < b1 and data[j + 1] == 115 and (j + 2 == b1 or not is_class(data, WORD, j + 2)):
                        j += 2
                elif u == 115:
                    if j + 1 == b1 or not is_class(data, WORD, j + 1):
                        j += 1
            if n == room:
                return _PAIRS_FULL
            key = symbols.intern(data, s, c, kslots, kstarts, kends, kcount)
            if key < 0:
                return _KEYS_FULL
            v = last[key]
            if v < 0 or not symbols.same_span(data, c, j, value_colon[v], value_end[v]):
                v = values[0]  # no more values than pairs: room enough
                value_colon[v] = c
                value_number[v] = number
                value_unit[v] = unit
                value_end[v] = j
                value_flags[v] = flags
                value_key[v] = key
                values[0] = v + 1
                last[key] = v
            pair_row[n] = r
            pair_value[n] = v
            n += 1
            i = j
    return n


class LinePairs:
    """The numeric pairs of some lines (:func:`line_pairs`).

    Attributes:
        row: per pair, in line order: its row among the lines (u32).
        at: per pair: its value's number (u32): pairs of a key that repeat its last value share it.
        key_code: per value: its key's number (i64).
        value: per value: its number (f64; null where it does not read as one, as ``str.cast`` says).
        unit: per value: the unit after its number (String, null for none).
        keys: per key number: the key as written, the text before the ``:`` or ``=`` (String).
    """

    def __init__(
        self, row: pl.Series, at: pl.Series, key_code: pl.Series, value: pl.Series, unit: pl.Series, keys: pl.Series
    ) -> None:
        self.row, self.at, self.key_code, self.value, self.unit, self.keys = row, at, key_code, value, unit, keys


def line_pairs(text: pl.Series, skip: pl.Series, *, level_heads: bool) -> LinePairs:
    """The pairs of the ASCII strings of ``text`` but those where ``skip`` is true (see the module docstring;
    ``level_heads``: a line's Python logging head, up to its `` - INFO - `` or `` - WARNING - ``, holds no pair).

    A value is read as the text after its ``:`` or ``=`` was read, less leading spaces and ``[``, its unit and its
    commas (a cast of that text): its number's bytes, commas taken out, cast by polars; none where a tab or other
    odd space comes first (:data:`ODD_SPACE`)."""
    data, offsets = utf8_buffers(text)
    skip_row = skip.to_numpy()
    capacity = max(1024, int(offsets[-1] - offsets[0]) // 32)
    key_capacity = 256
    while True:
        pair_row = np.empty(capacity, np.uint32)
        pair_value = np.empty(capacity, np.uint32)
        spans = np.empty((4, capacity), np.int64)  # per value: its colon, number, unit and end
        value_key = np.empty(capacity, np.int64)
        value_flags = np.empty(capacity, np.int8)
        values = np.zeros(1, np.int64)
        kslots, kstarts, kends, kcount = symbols.new_table(key_capacity)
        last = np.full(key_capacity, -1, np.int64)
        n = _scan(
            data, offsets, skip_row, level_heads, pair_row, pair_value, spans[0], spans[1], spans[2], spans[3],
            value_key, value_flags, values, kslots, kstarts, kends, kcount, last,
        )  # fmt: skip
        if n >= 0:
            break
        if n == _KEYS_FULL:
            key_capacity = symbols.grown_capacity(key_capacity)
        else:
            capacity = symbols.grown_capacity(capacity)
    m, keys = int(values[0]), int(kcount[0])
    number, unit, end = spans[1, :m], spans[2, :m], spans[3, :m]
    flags = value_flags[:m]
    numbers = texts_in_place(data, number, unit, "value")
    comma = np.flatnonzero(flags & COMMA)
    if comma.size:
        numbers = numbers.scatter(comma, numbers.gather(comma).str.replace_all(",", "", literal=True))
    value = numbers.cast(pl.Float64, strict=False)
    odd = np.flatnonzero(flags & ODD_SPACE)
    if odd.size:
        value = value.scatter(odd, None)
    # units and keys are copied out of the lines' bytes: the tables they go to do not hold on to the whole text
    has_unit = end > unit
    units = texts_at_spans(data, unit, end, has_unit, "u")
    key_text = texts_at_spans(data, kstarts[:keys], kends[:keys], np.ones(keys, np.bool_), "k")
    return LinePairs(
        pl.Series("r", pair_row[:n]),
        pl.Series("at", pair_value[:n]),
        pl.Series("code", value_key[:m]),
        value,
        units,
        key_text,
    )


MAX_RUN_SAMPLES = np.int64(256)
"""The most samples of one run of equal (rank, time) that :func:`_first_of_runs` compares with each other."""


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _first_of_runs(rank, rank_valid, ts, ts_valid, sid, value, keep, run_first):
    """Mark in ``keep`` each sample whose (series ``sid``, ``value``) no sample before it in its run has (values
    equal as polars groups them: -0.0 is 0.0, NaN is NaN), a run being consecutive samples of one (``rank``, ``ts``;
    their ``*_valid``: not null); ``run_first`` gets each run's first sample. Returns the number of runs, or -1 where
    a run holds more than :data:`MAX_RUN_SAMPLES`."""
    runs = 0
    start = 0
    for i in range(rank.size):
        if (
            i == 0
            or rank[i] != rank[i - 1]
            or ts[i] != ts[i - 1]
            or rank_valid[i] != rank_valid[i - 1]
            or ts_valid[i] != ts_valid[i - 1]
        ):
            start = i
            run_first[runs] = i
            runs += 1
        elif i - start >= MAX_RUN_SAMPLES:
            return -1
        keep[i] = True
        v = value[i]
        for j in range(start, i):
            if keep[j] and sid[j] == sid[i] and (value[j] == v or (value[j] != value[j] and v != v)):
                keep[i] = False
                break
    return runs


def first_samples(rank: pl.Series, ts: pl.Series, sid: pl.Series, value: pl.Series) -> pl.Series | None:
    """Per sample: whether it is the first of its (rank, series ``sid``, time, value), told within runs of samples of
    one (rank, time) (a few samples each, no hash of four columns); None where such a run is too long or a (rank,
    time) comes back after another (then the caller tells them apart by hashing)."""
    n = rank.len()
    keep = np.zeros(n, np.bool_)
    run_first = np.empty(n, np.int64)
    rank_np, rank_valid = _with_nulls(rank)
    ts_np, ts_valid = _with_nulls(ts)
    runs = _first_of_runs(rank_np, rank_valid, ts_np, ts_valid, sid.to_numpy(), value.to_numpy(), keep, run_first)
    if runs < 0:
        return None
    heads = run_first[:runs]
    t, r = ts_np[heads], rank_np[heads]
    # runs in ascending (time, rank) order, none null: no (rank, time) comes back (else a hash tells)
    ascending = ((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (r[1:] > r[:-1]))).all()
    if not (ascending and rank_valid[heads].all() and ts_valid[heads].all()):
        if pl.DataFrame([rank, ts]).select(pl.all().gather(pl.Series(heads))).is_duplicated().any():
            return None
    return pl.Series(keep)


def _with_nulls(column: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """An integer column's values (0 where null) and where they are not null, as numpy arrays."""
    if not column.null_count():
        return column.to_numpy(), np.ones(column.len(), np.bool_)
    return column.fill_null(0).to_numpy(), column.is_not_null().to_numpy()
