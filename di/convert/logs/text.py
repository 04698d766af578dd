"""Reading a text log into a polars frame of clean lines, vectorised.

The file (gzip too, within the input size limit) is decoded as UTF-8 with
undecodable bytes replaced, split into lines, and cleaned with polars string
ops only (no Python loop per line): carriage returns and ANSI colour/cursor
escapes are removed, and launcher prefixes (``srun -l``'s ``0: ``, torchrun's
``[rank0]:``, Open MPI ``--tag-output``'s ``[1,0]<stdout>:``) are taken off into
a ``prefix_rank`` column. Garbled lines are kept and counted per reason.

Each line's own and nearest timestamp (:func:`own_line_times`, :func:`line_times`) is read here too; the dense ids of
repeated values that the parsers use (:func:`dense_ids`, :func:`distinct_ids`, :func:`by_distinct`) live in
:mod:`di.convert.logs.ids` and are re-exported.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from di.convert import gunzip
from di.convert.logs.ids import by_distinct, dense_ids, distinct_ids, distinct_ids_by_join
from di.inputsize import check_size

__all__ = [
    "ASCII_MODE",
    "LINE_TS_RE",
    "LogText",
    "all_ascii",
    "ascii_mode",
    "by_distinct",
    "clean_lines",
    "dense_ids",
    "distinct_ids",
    "distinct_ids_by_join",
    "head_lines",
    "lead_in",
    "line_times",
    "own_line_times",
    "read_lines",
]

ANSI_RE = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]"
"""ECMA-48 CSI sequences (colours, cursor moves) and charset selections."""
PREFIX_RE = r"^(?:\s{0,8}(\d{1,7}): |\[rank(\d{1,7})\]:\s?|\[\d{1,7},(\d{1,7})\]<std(?:out|err)>:\s?)"
"""srun -l (``12: ``), torchrun --local-ranks-filter / tee (``[rank3]:``), Open MPI --tag-output (``[1,3]<stdout>:``)."""
LINE_TS_RE = r"^(?:\[[^\]]*\]\s*){0,3}\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
"""A timestamp at the start of a line, maybe after ``[rank0]:[titan]``-like tags (HF: ``[INFO|trainer.py:1143] 2021-05-25 06:38:26,284``)."""
TS_FIRST_RE = r"^\[?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
""":data:`LINE_TS_RE` with no tag before the time."""
TS_AFTER_TAGS_RE = r"^(?:\[[^\]]*\]\s*){1,3}\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d"
"""Whether :data:`LINE_TS_RE` can match after one to three tags (then it prefers that match)."""
ASCII_MODE = "(?-u)"
"""A regex prefix for ASCII classes (``\\d``, ``\\s``, ``\\w``, ``\\b``): on ASCII text such a regex matches what the
Unicode one matches, and runs on the faster engines (a Unicode ``\\b`` rules the DFA out; Unicode classes make
captures several times slower). Only for regexes that cannot match a non-ASCII byte (no ``.``, ``\\S``, ``[^...]``)."""


def all_ascii(text: pl.Series) -> bool:
    """Whether every string of ``text`` is ASCII (as many bytes as characters)."""
    return bool((text.str.len_bytes() == text.str.len_chars()).all())


def ascii_mode(pattern: str, text: pl.Series) -> str:
    """``pattern`` in ASCII mode (:data:`ASCII_MODE`) when every string of ``text`` is ASCII, else as it is."""
    return ASCII_MODE + pattern if all_ascii(text) else pattern


def lead_in(t: pl.Expr, lo: str, hi: str) -> pl.Expr:
    """Whether a string lies in [``lo``, ``hi``) (with ``hi`` ``lo`` with its last byte plus one: whether it starts
    with ``lo``): two comparisons of string views, which hold their first 4 bytes inline (several times cheaper than a
    regex or ``starts_with`` where ``lo`` and ``hi`` have at most 4 bytes; a longer bound reads the text of every
    string whose first 4 bytes are its own)."""
    return (t >= pl.lit(lo)) & (t < pl.lit(hi))


_PREFIX = re.compile(PREFIX_RE)
_ANSI = re.compile(ANSI_RE)


BOM = "\ufeff"
"""A UTF-8 byte-order mark (some Windows tools start a file with it): removed from a log's first line."""


@dataclass
class LogText:
    """A log's lines, cleaned.

    Attributes:
        lines: columns ``line`` (0-based line number, u32), ``prefix_rank`` (i64 or
            null: the rank a launcher prefix named) and ``text`` (the cleaned line).
        garbled: count of garbled lines per reason (kept, not dropped).
        nbytes: bytes of (decompressed) text read.
        anchored_rows: the rows (ascending) of the lines of which one of the ``anchored`` regexes given to
            :func:`read_lines` may match ``text``: every line it matches is among them; None where they were not
            searched (none given, or launcher prefixes were taken off after the search).
    """

    lines: pl.DataFrame
    garbled: dict[str, int] = field(default_factory=dict)
    nbytes: int = 0
    anchored_rows: pl.Series | None = None


def read_bytes(path: Path, limit: int | None) -> bytes:
    """The whole file (gunzipped when it is gzip).

    Raises:
        InputTooLargeError: over ``limit``.
    """
    with open(path, "rb") as fh:
        if fh.read(2) == gunzip.GZIP_MAGIC:
            fh.seek(0)
            buf, _ = gunzip.gunzip(fh, path=path, limit=limit)
            return buf.tobytes()
        fh.seek(0)
        data = fh.read() if limit is None else fh.read(limit + 1)
    check_size(path, len(data), limit)
    return data


def _has_prefix(lines: pl.Series) -> bool:
    """Whether a line of ``lines`` starts with a launcher prefix: :data:`PREFIX_RE` is anchored at the line's start,
    so it fails at a line's first bytes where there is none (a search of the whole text in multi-line mode, or of
    the line heads holding a prefix's mark, costs about twice as much)."""
    return bool(lines.str.contains(PREFIX_RE).any())


def clean_lines(raw: pl.Series, *, whole: str | bytes | None = None) -> pl.DataFrame:
    """Cleaned lines of ``raw`` (one string per line): see the module docstring.

    ``whole``, the lines' text joined by newlines (or its UTF-8 bytes) when the caller has it, lets the passes it
    shows to change nothing (no carriage return, no escape anywhere) be skipped; launcher prefixes are searched for
    line by line either way.
    """
    has_cr, ansi = (True, True) if whole is None else _cr_and_escape(whole)
    return _clean(raw, has_cr=has_cr, ansi=ansi)[0]


def _cr_and_escape(whole: str | bytes) -> tuple[bool, bool]:
    """Whether the text ``whole`` holds a carriage return, and an escape."""
    if isinstance(whole, str):
        return "\r" in whole, "\x1b" in whole
    return b"\r" in whole, b"\x1b" in whole


def _clean(
    raw: pl.Series, *, has_cr: bool, ansi: bool, held: pl.Series | None = None, anchored: tuple[str, ...] = ()
) -> tuple[pl.DataFrame, pl.Series | None]:
    """:func:`clean_lines`, told whether ``raw`` holds a carriage return (``has_cr``) or an escape (``ansi``), and
    maybe the rows of the lines that can hold one (``held``, ascending: the others are not searched); with the
    rows of the lines one of the ``anchored`` regexes matches (:attr:`LogText.anchored_rows`), found by the search
    for launcher prefixes: one alternation of regexes anchored at a line's start fails at each line's first bytes
    as one of them does, so they cost one pass together (None where none are given, or a prefix was found)."""
    s = raw.str.strip_chars_end("\r") if has_cr else raw.clone()  # scatter below changes its series: not the caller's
    if ansi:
        # the regex runs on the lines that hold an escape only
        if held is None:
            rows = s.str.contains("\x1b", literal=True).arg_true()
        else:
            rows = held.filter(s.gather(held).str.contains("\x1b", literal=True))
        s = s.scatter(rows, s.gather(rows).str.replace_all(ANSI_RE, ""))
    # a prefix is searched for once the escapes are gone (one anchored search per line; most logs have none)
    rows = None
    if anchored:
        rows = s.str.contains("|".join(f"(?:{rx})" for rx in (PREFIX_RE, *anchored))).arg_true()
        prefixed = bool(rows.len()) and bool(s.gather(rows).str.contains(PREFIX_RE).any())
        rows = None if prefixed else rows  # the lines' text is not what was searched
    else:
        prefixed = _has_prefix(s)
    if prefixed:
        groups = s.str.extract_groups(PREFIX_RE).struct.unnest()
        prefix_rank = pl.coalesce(*(pl.lit(groups.get_column(c)) for c in groups.columns)).cast(pl.Int64)
        text = pl.col("text").str.replace(PREFIX_RE, "")
    else:
        prefix_rank, text = pl.lit(None, pl.Int64), pl.col("text")
    lines = pl.DataFrame({"text": s}).select(
        pl.int_range(0, pl.len(), dtype=pl.UInt32).alias("line"), prefix_rank.alias("prefix_rank"), text
    )
    return lines, rows


POLARS_UNPACKS = (gunzip.GZIP_MAGIC, b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x28\xb5\x2f\xfd")
"""First bytes (gzip, zlib, zstd headers) that make polars read a file as compressed data: a text log that starts with
``x^`` would be refused, and zlib or zstd data unpacked past the input size limit; such files are read as bytes."""
GARBLED = (("\ufffd", "lines with bytes that are not UTF-8"), ("\x00", "lines with NUL bytes"))
"""Characters that mark a garbled line, with the reason it is counted under."""
SPECIAL_RE = r"[\r\x1b\x{FFFD}\x00]"
"""The characters that make a line need cleaning (:func:`clean_lines`) or counting (:data:`GARBLED`)."""


def _utf8(name: str) -> bool:
    """Whether ``name`` (a path) is UTF-8 text: not a name of other bytes that Python holds as surrogate escapes."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_plain(path: Path, limit: int | None, anchored: tuple[str, ...] = ()) -> LogText | None:
    """A plain UTF-8 regular file read into lines by polars from the file itself (no Python bytes of it: about half
    the CPU of reading the bytes and splitting them); None for any other file (then :func:`_read_bytes_lines` reads
    it: gzip, a file that starts like what polars would unpack, :data:`POLARS_UNPACKS`, one of size 0), or where polars has no
    ``read_lines`` (older versions).

    Polars takes a carriage return off the end of each line, which :func:`clean_lines` takes off too.

    Raises:
        InputTooLargeError: over ``limit``.
    """
    # polars reads a leading "~" as the home folder and takes no name that is not UTF-8: it is given the path from
    # the root, and such a name is read as bytes
    source = os.fspath(path) if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    if not hasattr(pl, "read_lines") or not _utf8(source):
        return None
    with open(source, "rb") as fh:
        st = os.fstat(fh.fileno())
        # polars reads no more than the size the file system gives: 0 for an empty file, and for a pseudo-file
        # (/proc, /sys) of any length
        if not stat.S_ISREG(st.st_mode) or not st.st_size or fh.read(4).startswith(POLARS_UNPACKS):
            return None
    check_size(path, st.st_size, limit)
    try:
        # read in parallel pieces: one chunk (views only, well under a millisecond) keeps every parser's passes
        # over the lines about 5-10 % cheaper
        raw = pl.read_lines(source, name="text", glob=False).to_series().rechunk()
    except pl.exceptions.ComputeError:  # not UTF-8
        return None
    # one search of all lines for the four (most logs hold none); each is then looked for in the lines that hold one
    held = raw.str.contains(SPECIAL_RE).arg_true()
    special = raw.gather(held) if held.len() else None
    there = {
        c: special is not None and special.str.contains(c, literal=True).any() for c in ("\r", "\x1b", "\ufffd", "\x00")
    }
    out, rows = _clean(raw, has_cr=there["\r"], ansi=there["\x1b"], held=held, anchored=anchored)
    return LogText(out, _garbled(out, there), st.st_size, rows)


def _read_bytes_lines(path: Path, limit: int | None, anchored: tuple[str, ...] = ()) -> LogText:
    """Any log (gzip too) read as bytes: UTF-8 text goes to polars as bytes (checked there, no Python string of it);
    other bytes are decoded with U+FFFD for what is not UTF-8.

    Raises:
        InputTooLargeError: over ``limit``.
    """
    data = read_bytes(path, limit)
    whole: str | bytes = data
    try:
        series = pl.Series("text", [data], dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:  # not UTF-8
        whole = data.decode("utf-8", errors="replace")
        series = pl.Series("text", [whole])
    raw = series.str.split("\n").explode()  # no Python string per line
    if raw.len() and raw[-1] == "":
        raw = raw.head(raw.len() - 1)
    has_cr, ansi = _cr_and_escape(whole)
    out, rows = _clean(raw, has_cr=has_cr, ansi=ansi, anchored=anchored)
    # the text's search stops at the first
    there = {
        c: c in whole if isinstance(whole, str) else c.encode()[:1] in whole and c.encode() in whole  # a byte: memchr
        for c, _ in GARBLED
    }
    return LogText(out, _garbled(out, there), len(data), rows)


def _garbled(out: pl.DataFrame, there: dict[str, bool]) -> dict[str, int]:
    """Count of garbled lines per reason (:data:`GARBLED`) of the cleaned lines ``out``, searched for the
    characters ``there`` says the text holds."""
    t = out.get_column("text")
    counts = {reason: int(t.str.contains(char, literal=True).sum()) if there[char] else 0 for char, reason in GARBLED}
    return {reason: n for reason, n in counts.items() if n}


def read_lines(path: Path, *, max_input_bytes: int | None = None, anchored: tuple[str, ...] = ()) -> LogText:
    """Read and clean a text log (plain or gzip): a plain UTF-8 file by polars (:func:`_read_plain`), any other
    as bytes (:func:`_read_bytes_lines`); both give the same lines.

    Args:
        anchored: regexes, each anchored at a line's start (``^`` at the start of each alternative, nothing that
            matches across a line break), whose lines the caller will search: :attr:`LogText.anchored_rows`.

    Raises:
        InputTooLargeError: over ``max_input_bytes``.
    """
    path = Path(path)
    plain = _read_plain(path, max_input_bytes, anchored)
    text = plain if plain is not None else _read_bytes_lines(path, max_input_bytes, anchored)
    first = text.lines.get_column("text").head(1)
    if first.len() and first.str.starts_with(BOM).item():  # a byte-order mark would shift the first line's columns
        text.lines = text.lines.with_columns(
            pl.when(pl.col("line") == 0).then(pl.col("text").str.strip_prefix(BOM)).otherwise(pl.col("text"))
        )
        if text.anchored_rows is not None:  # the first line, searched with its mark, is one to search again
            rows = text.anchored_rows
            text.anchored_rows = (
                rows if rows.len() and rows[0] == 0 else pl.concat([pl.Series([0], dtype=rows.dtype), rows])
            )
    return text


def head_lines(head: bytes) -> list[str]:
    """The first lines of a file's head, cleaned like :func:`read_lines` (for sniffing; the last, maybe cut, line is kept)."""
    text = head.decode("utf-8", errors="replace").removeprefix(BOM)
    return [_PREFIX.sub("", _ANSI.sub("", ln.rstrip("\r")), count=1) for ln in text.split("\n")]


def own_line_times(lines: pl.DataFrame, candidates: pl.Series | None = None) -> pl.Series:
    """Per line: the ns since the epoch of its own leading timestamp (``own_ts``), null where it has none.
    Zone-less times are read as UTC. The regex captures only on the lines its plain search keeps (capturing costs
    more), and each distinct time is parsed once.

    Args:
        candidates: the rows (ascending) of the lines that may have a time (:attr:`LogText.anchored_rows` of a search
            that included :data:`LINE_TS_RE`); only these are searched. None: every line.
    """
    text = lines.get_column("text")
    if candidates is None:
        rows = text.str.contains(LINE_TS_RE).arg_true()
    else:
        rows = candidates.filter(text.gather(candidates).str.contains(LINE_TS_RE)).cast(pl.UInt32)
    timed = text.gather(rows)
    # LINE_TS_RE takes the time after the most bracketed tags (up to 3) it can: where no tag is followed by a time
    # (a search, no capture) its match is the time at the line's start, which a one-pass regex reads several times
    # faster; the other lines are read by LINE_TS_RE itself
    ts = timed.str.extract(TS_FIRST_RE)
    later = timed.str.contains(TS_AFTER_TAGS_RE).arg_true()
    if later.len():
        ts = ts.scatter(later, timed.gather(later).str.extract(LINE_TS_RE))
    own = pl.Series("own_ts", [], pl.Int64).extend_constant(None, text.len())
    if not rows.len():
        return own
    raw = pl.DataFrame({"row": rows, "ts": ts})
    parse = _ascii_epoch_ns if all_ascii(ts) else _epoch_ns
    # each distinct time parsed once where times repeat; where most are distinct the join would cost more than it saves
    if ts.n_unique() > SHARED_TIMES * ts.len():
        ns = raw.with_columns(parse(pl.col("ts")).alias("ns"))
    else:
        ns = by_distinct(raw, "ts", lambda d: d.with_columns(parse(pl.col("ts")).alias("ns")))
    return own.scatter(ns.get_column("row"), ns.get_column("ns"))


SHARED_TIMES = 0.5
""":func:`own_line_times` parses each distinct time once where at most this share of the times are distinct."""


def _epoch_ns(ts: pl.Expr) -> pl.Expr:
    """ns since the epoch of :data:`LINE_TS_RE`'s time (UTC; null where it is no date and time: ``02-30``, ``24:00``)."""
    return (
        ts.str.replace(",", ".", literal=True)
        .str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ns")
        .dt.epoch("ns")
    )


def _ascii_epoch_ns(ts: pl.Expr) -> pl.Expr:
    """:func:`_epoch_ns` of ASCII times: the whole seconds by a format without a fraction (``%.f`` made the parse
    about 4 times as costly) and the fraction's digits, at most 9 (as ``%.f`` reads them: nanoseconds, the rest
    ignored), as an integer. A time matched by :data:`LINE_TS_RE` is 19 characters, then maybe a separator and
    digits."""
    seconds = (
        ts.str.slice(0, 19)
        .str.replace("T", " ", literal=True)
        .str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="ns")
        .dt.epoch("ns")
    )
    return seconds + fraction_ns(ts)


def fraction_ns(ts: pl.Expr) -> pl.Expr:
    """The ns of the fraction of a second that follows 19 characters of whole seconds and a separator (``.123``,
    ``,5``): its digits, at most 9 (as ``%.f`` reads them: the rest ignored), as an integer; 0 where there is none,
    null where they are not digits."""
    digits = ts.str.slice(20, 9)
    return pl.when(digits == "").then(0).otherwise(digits.str.pad_end(9, "0").cast(pl.Int64, strict=False))


def line_times(lines: pl.DataFrame, own: pl.Series | None = None) -> pl.Series:
    """Per line: the ns since the epoch of its own leading timestamp, else of the nearest one before (after, for
    the first lines); all null when no line has one. ``own``: :func:`own_line_times`, when already known."""
    own = own_line_times(lines) if own is None else own
    return own.forward_fill().backward_fill().alias("line_ts")
