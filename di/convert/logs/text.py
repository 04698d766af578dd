"""Reading a text log into a polars frame of clean lines, vectorised.

The file (gzip too, within the input size limit) is decoded as UTF-8 with
undecodable bytes replaced, split into lines, and cleaned with polars string
ops only (no Python loop per line): carriage returns and ANSI colour/cursor
escapes are removed, and launcher prefixes (``srun -l``'s ``0: ``, torchrun's
``[rank0]:``, Open MPI ``--tag-output``'s ``[1,0]<stdout>:``) are taken off into
a ``prefix_rank`` column. Garbled lines are kept and counted per reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
from numba import njit

from di.convert import gunzip
from di.convert.columns import readonly, utf8_buffers
from di.inputsize import check_size

__all__ = ["LINE_TS_RE", "LogText", "clean_lines", "head_lines", "line_times", "own_line_times", "read_lines"]

ANSI_RE = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]"
"""ECMA-48 CSI sequences (colours, cursor moves) and charset selections."""
PREFIX_RE = r"^(?:\s{0,8}(\d{1,7}): |\[rank(\d{1,7})\]:\s?|\[\d{1,7},(\d{1,7})\]<std(?:out|err)>:\s?)"
"""srun -l (``12: ``), torchrun --local-ranks-filter / tee (``[rank3]:``), Open MPI --tag-output (``[1,3]<stdout>:``)."""
LINE_TS_RE = r"^(?:\[[^\]]*\]\s*){0,3}\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
"""A timestamp at the start of a line, maybe after ``[rank0]:[titan]``-like tags (HF: ``[INFO|trainer.py:1143] 2021-05-25 06:38:26,284``)."""
_PREFIX = re.compile(PREFIX_RE)
_ANSI = re.compile(ANSI_RE)


@dataclass
class LogText:
    """A log's lines, cleaned.

    Attributes:
        lines: columns ``line`` (0-based line number, u32), ``prefix_rank`` (i64 or
            null: the rank a launcher prefix named) and ``text`` (the cleaned line).
        garbled: count of garbled lines per reason (kept, not dropped).
        nbytes: bytes of (decompressed) text read.
    """

    lines: pl.DataFrame
    garbled: dict[str, int] = field(default_factory=dict)
    nbytes: int = 0


def _read_bytes(path: Path, limit: int | None) -> bytes:
    with open(path, "rb") as fh:
        if fh.read(2) == gunzip.GZIP_MAGIC:
            fh.seek(0)
            buf, _ = gunzip.gunzip(fh, path=path, limit=limit)
            return buf.tobytes()
        fh.seek(0)
        data = fh.read() if limit is None else fh.read(limit + 1)
    check_size(path, len(data), limit)
    return data


_NL = np.uint8(10)
_LB = np.uint8(91)
_COLON = np.uint8(58)
_RB = np.uint8(93)
_COMMA = np.uint8(44)
_SP = np.uint8(32)
_WS_RUN = np.int64(8)
_DIGITS = np.int64(7)


@njit(cache=True, _nrt=False, inline="always")
def _digits(buf, j, n):
    """(index after the run of ASCII digits at ``j``, its length (capped at 8), whether a non-ASCII byte ends it)."""
    d = 0
    while j < n and buf[j] >= np.uint8(48) and buf[j] <= np.uint8(57) and d <= _DIGITS:
        j += 1
        d += 1
    return j, d, j < n and buf[j] >= np.uint8(128)


@njit(cache=True, _nrt=False, inline="always")
def _is(buf, j, n, word):
    """``buf[j:]`` starts with the ASCII bytes ``word``."""
    if j + word.size > n:
        return False
    for k in range(word.size):
        if buf[j + k] != word[k]:
            return False
    return True


@njit(cache=True, _nrt=False)
def _may_have_prefix(buf, starts, rank, stdout, stderr):
    """False when no line of ``buf`` (UTF-8 bytes, lines beginning at ``starts``) can start with a
    :data:`PREFIX_RE` prefix, read on its ASCII bytes: srun's ``\\s{0,8}\\d{1,7}: ``, torchrun's ``[rank\\d{1,7}]:``
    (``rank``: ``b"[rank"``), Open MPI's ``[\\d{1,7},\\d{1,7}]<stdout>:`` (``stdout``, ``stderr``: ``b"]<stdout>:"``...).
    A byte above ASCII where a space or a digit may stand counts as a possible prefix (the regex reads Unicode
    spaces and digits)."""
    n = buf.size
    for r in range(starts.size):
        j = starts[r]
        if _is(buf, j, n, rank):
            j, d, other = _digits(buf, j + rank.size, n)
            if other or (1 <= d <= _DIGITS and j + 1 < n and buf[j] == _RB and buf[j + 1] == _COLON):
                return True
            continue
        if j < n and buf[j] == _LB:
            j, d, other = _digits(buf, j + 1, n)
            if other:
                return True
            if 1 <= d <= _DIGITS and j < n and buf[j] == _COMMA:
                j, d, other = _digits(buf, j + 1, n)
                if other or (1 <= d <= _DIGITS and (_is(buf, j, n, stdout) or _is(buf, j, n, stderr))):
                    return True
            continue
        w = 0
        while j < n and (buf[j] == _SP or (buf[j] >= np.uint8(9) and buf[j] <= np.uint8(13))) and w <= _WS_RUN:
            j += 1
            w += 1
        if w > _WS_RUN:
            continue
        j, d, other = _digits(buf, j, n)
        if other:
            return True
        if 1 <= d <= _DIGITS and j + 1 < n and buf[j] == _COLON and buf[j + 1] == _SP:
            return True
    return False


_RANK = np.frombuffer(b"[rank", dtype=np.uint8)
_STDOUT = np.frombuffer(b"]<stdout>:", dtype=np.uint8)
_STDERR = np.frombuffer(b"]<stderr>:", dtype=np.uint8)


def _prefix_possible(raw: pl.Series, whole: str | bytes) -> bool:
    """Whether a line of ``raw`` (the lines of ``whole``) may start with a launcher prefix (:func:`_may_have_prefix`):
    a few bytes per line instead of a multi-line regex that tries every line."""
    data = whole if isinstance(whole, bytes) else whole.encode("utf-8", errors="surrogatepass")
    buf = np.frombuffer(data, dtype=np.uint8)
    starts = np.zeros(raw.len(), dtype=np.int64)
    np.cumsum(raw.str.len_bytes().to_numpy()[:-1] + 1, out=starts[1:])
    return bool(_may_have_prefix(readonly(buf), readonly(starts), _RANK, _STDOUT, _STDERR))


def clean_lines(raw: pl.Series, *, whole: str | bytes | None = None) -> pl.DataFrame:
    """Cleaned lines of ``raw`` (one string per line): see the module docstring.

    ``whole``, the lines' text joined by newlines (or its UTF-8 bytes) when the caller has it, lets the passes it
    shows to change nothing (no carriage return, no escape, no launcher prefix anywhere) be skipped.
    """
    if whole is None:
        has_cr = ansi = True
    elif isinstance(whole, str):
        has_cr, ansi = "\r" in whole, "\x1b" in whole
    else:
        has_cr, ansi = b"\r" in whole, b"\x1b" in whole
    s = raw.str.strip_chars_end("\r") if has_cr else raw
    if ansi:
        s = s.str.replace_all(ANSI_RE, "")
    # without escapes the joined text shows whether any line starts with a prefix (one search, stopping at the first)
    if ansi or (whole is not None and _prefix_possible(raw, whole) and _prefix_found(whole)):
        groups = s.str.extract_groups(PREFIX_RE).struct.unnest()
        prefix_rank = pl.coalesce(*(pl.lit(groups.get_column(c)) for c in groups.columns)).cast(pl.Int64)
        text = pl.col("text").str.replace(PREFIX_RE, "")
    else:
        prefix_rank, text = pl.lit(None, pl.Int64), pl.col("text")
    return pl.DataFrame({"text": s}).select(
        pl.int_range(0, pl.len(), dtype=pl.UInt32).alias("line"), prefix_rank.alias("prefix_rank"), text
    )


def _prefix_found(whole: str | bytes) -> bool:
    text = whole if isinstance(whole, str) else whole.decode("utf-8")
    return bool(pl.Series([text]).str.contains("(?m)" + PREFIX_RE).item())


def read_lines(path: Path, *, max_input_bytes: int | None = None) -> LogText:
    """Read and clean a text log (plain or gzip). UTF-8 text goes to polars as bytes (checked there, no Python
    string of it); other bytes are decoded with U+FFFD for what is not UTF-8.

    Raises:
        InputTooLargeError: over ``max_input_bytes``.
    """
    data = _read_bytes(Path(path), max_input_bytes)
    garbled: dict[str, int] = {}
    whole: str | bytes = data
    try:
        series = pl.Series("text", [data], dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:  # not UTF-8
        whole = data.decode("utf-8", errors="replace")
        series = pl.Series("text", [whole])
    raw = series.str.split("\n").explode()  # no Python string per line
    if raw.len() and raw[-1] == "":
        raw = raw.head(raw.len() - 1)
    out = clean_lines(raw, whole=whole)
    t = out.get_column("text")
    for char, reason in (("\ufffd", "lines with bytes that are not UTF-8"), ("\x00", "lines with NUL bytes")):
        # the text's search stops at the first
        there = char in whole if isinstance(whole, str) else char.encode() in whole
        n = int(t.str.contains(char, literal=True).sum()) if there else 0
        if n:
            garbled[reason] = n
    return LogText(out, garbled, len(data))


def head_lines(head: bytes) -> list[str]:
    """The first lines of a file's head, cleaned like :func:`read_lines` (for sniffing; the last, maybe cut, line is kept)."""
    text = head.decode("utf-8", errors="replace")
    return [_PREFIX.sub("", _ANSI.sub("", ln.rstrip("\r")), count=1) for ln in text.split("\n")]


_HIGH = np.uint8(128)
_BRACKET_GROUPS = np.int64(3)
_DATE = np.frombuffer(b"0000-00-00 00:00:00", dtype=np.uint8)
"""The shape of :data:`LINE_TS_RE`'s date: ``0`` a digit, ``' '`` a space or ``T``, other bytes themselves."""


_REGEX = np.int64(-2)


@njit(cache=True, _nrt=False)
def _timestamp_spans(buf, offs, shape, start, length):
    """``start[i]``, ``length[i]``: where :data:`LINE_TS_RE`'s capture lies in line i (``buf[offs[i]:offs[i+1]]``),
    read on ASCII bytes: after up to three ``[...]`` groups (each with the whitespace after it; the most groups that
    lead to a date, as the regex takes them), an optional ``[``, a date of ``shape`` and maybe ``[.,]digits``.
    ``start`` -1 where there is none, :data:`_REGEX` where a byte above ASCII stands before the date's end (a Unicode
    space or digit the regex reads, or characters that are not one byte each)."""
    for i in range(offs.size - 1):
        s = offs[i]
        e = offs[i + 1]
        start[i] = -1
        high = False
        p = s
        k = 0
        after1 = np.int64(-1)
        after2 = np.int64(-1)
        after3 = np.int64(-1)
        while k < _BRACKET_GROUPS and p < e and buf[p] == _LB:
            q = p + 1
            while q < e and buf[q] != _RB:
                if buf[q] >= _HIGH:
                    high = True
                q += 1
            if q >= e:
                break
            q += 1
            while q < e and (buf[q] == _SP or (buf[q] >= np.uint8(9) and buf[q] <= np.uint8(13))):
                q += 1
            if q < e and buf[q] >= _HIGH:
                high = True
            k += 1
            p = q
            if k == 1:
                after1 = p
            elif k == 2:
                after2 = p
            else:
                after3 = p
        for g in range(3, -1, -1):
            a = s if g == 0 else (after1 if g == 1 else (after2 if g == 2 else after3))
            if a < 0:
                continue
            if a < e and buf[a] == _LB:
                a += 1
            if a + shape.size > e:
                continue
            ok = True
            for j in range(shape.size):
                b = buf[a + j]
                c = shape[j]
                if c == np.uint8(48):
                    if b >= _HIGH:
                        high = True
                    ok = b >= np.uint8(48) and b <= np.uint8(57)
                elif c == _SP:
                    ok = b == _SP or b == np.uint8(84)
                else:
                    ok = b == c
                if not ok:
                    break
            if ok:
                z = a + shape.size
                if z + 1 < e and (buf[z] == np.uint8(46) or buf[z] == _COMMA):
                    d = z + 1
                    while d < e and buf[d] >= np.uint8(48) and buf[d] <= np.uint8(57):
                        d += 1
                    if d < e and buf[d] >= _HIGH:
                        high = True
                    if d > z + 1:
                        z = d
                start[i] = a - s
                length[i] = z - a
                break
        if high:
            start[i] = _REGEX


def own_line_times(lines: pl.DataFrame) -> pl.Series:
    """Per line: the ns since the epoch of its own leading timestamp (``own_ts``), null where it has none.
    Zone-less times are read as UTC. A numba scan (:func:`_timestamp_spans`) finds where each one lies, so polars
    only slices it out (the regex runs on lines with bytes above ASCII), and each distinct time is parsed once."""
    text = lines.get_column("text")
    buf, offs = utf8_buffers(text)
    start = np.empty(text.len(), dtype=np.int64)
    length = np.zeros(text.len(), dtype=np.int64)
    _timestamp_spans(readonly(buf), readonly(offs), _DATE, start, length)
    fast = np.flatnonzero(start >= 0)
    slow = np.flatnonzero(start == _REGEX)
    raw = pl.concat(
        [
            pl.DataFrame({"row": fast, "a": start[fast], "n": length[fast], "text": text.gather(fast)}).select(
                "row", pl.col("text").str.slice(pl.col("a"), pl.col("n")).alias("ts")
            ),
            pl.DataFrame({"row": slow, "text": text.gather(slow)}).select(
                "row", pl.col("text").str.extract(LINE_TS_RE).alias("ts")
            ),
        ]
    ).drop_nulls("ts")
    times = raw.select(pl.col("ts").unique()).with_columns(
        pl.col("ts")
        .str.replace(",", ".", literal=True)
        .str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ns")
        .dt.epoch("ns")
        .alias("ns")
    )
    ns = raw.join(times, on="ts", how="left").sort("row")
    own = pl.Series("own_ts", [], pl.Int64).extend_constant(None, text.len())
    return own.scatter(ns.get_column("row"), ns.get_column("ns")) if ns.height else own


def line_times(lines: pl.DataFrame, own: pl.Series | None = None) -> pl.Series:
    """Per line: the ns since the epoch of its own leading timestamp, else of the nearest one before (after, for
    the first lines); all null when no line has one. ``own``: :func:`own_line_times`, when already known."""
    own = own_line_times(lines) if own is None else own
    return own.forward_fill().backward_fill().alias("line_ts")
