"""Classifying a training log's lines: which of them a search marks, the kind of each (:data:`.patterns.KINDS`) and
its ``[Rank N]`` tag, and whether the numba scans or the polars regexes read them.

:func:`_classify` gives every line its ``kind``, ``tag_rank`` and ``line_ts``; on ASCII text long enough
(:func:`_scans_pay`) by :func:`~di.convert.logs.linekinds.line_kinds`, else by :func:`_regex_kinds` and
:func:`_rank_tags`, which find the same.
"""

from __future__ import annotations

import sys

import polars as pl

from di.convert.logs.text import ASCII_MODE, all_ascii
from di.convert.logs.training.patterns import ASCII_KINDS, KIND_HINTS, KIND_SURE, KINDS, MARKS_RE, RANK_TAG_RE

__all__ = ["BEYOND_RANK", "SCAN_ALONE_BYTES", "SCAN_MIN_BYTES"]


def _marked(lines: pl.DataFrame) -> pl.Series:
    """Per line: whether it holds one of :data:`MARKS_RE`'s literals (one search of the whole text for the kinds, the
    rank tags and the errors; each of their tests then runs on these lines only)."""
    return lines.get_column("text").str.contains(MARKS_RE)


BEYOND_RANK = 2**62
"""The rank of a ``[Rank N]`` tag whose N is beyond int64: no rank a trace holds, so the trace's build drops the line's
rows and counts them (:data:`di.convert.logs.build.MAX_RANK`)."""


def _tag_number(digits: pl.Series) -> pl.Series:
    """A tag's digits as an Int64 (null: no tag), :data:`BEYOND_RANK` where they are too many for one."""
    n = digits.cast(pl.Int64, strict=False)
    return n.zip_with(n.is_not_null() | digits.is_null(), pl.Series([BEYOND_RANK], dtype=pl.Int64))


def _rank_tags(text: pl.Series, ascii: bool) -> pl.Series:
    """Per line of ``text``: the N of its first :data:`RANK_TAG_RE` (null for none). On ASCII text the digits after
    the first ``[Rank `` are read from a short slice, and only a line where they are not a whole tag (or too long for
    the slice) is searched by the regex."""
    pos = text.str.find("[Rank ", literal=True)
    tagged = pos.is_not_null().arg_true()
    if not tagged.len():
        return pl.Series("tag_rank", [], pl.Int64).extend_constant(None, text.len())
    if not ascii:  # str.find gives a byte offset, str.slice counts characters
        rank = _tag_number(text.gather(tagged).str.extract(RANK_TAG_RE))
        return pl.Series("tag_rank", [], pl.Int64).extend_constant(None, text.len()).scatter(tagged, rank)
    rank = (
        pl.DataFrame({"text": text.gather(tagged), "pos": pos.gather(tagged)})
        .select(pl.col("text").str.slice(pl.col("pos") + len("[Rank "), 12).str.extract(ASCII_MODE + r"^(\d+)\]"))
        .to_series()
        .cast(pl.Int64, strict=False)  # too many digits: null, then read by the regex below
    )
    again = rank.is_null().arg_true()
    if again.len():
        rank = rank.scatter(again, _tag_number(text.gather(tagged.gather(again)).str.extract(RANK_TAG_RE)))
    return pl.Series("tag_rank", [], pl.Int64).extend_constant(None, text.len()).scatter(tagged, rank)


SCAN_MIN_BYTES = 4 << 20
"""The bytes of marked lines (:func:`_marked`, about half a training log's) from which ASCII text is read by the numba
scans (:mod:`~di.convert.logs.linekinds`, :mod:`~di.convert.logs.pairscan`) rather than by polars regexes and
hashing, in a process that runs numba already (``di convert`` and ``di analyze`` of a job with traces, a program that
loaded a trace). The scans read about twice as fast (some 6 CPU ms less per MB of log) and cost the loading of their
kernels (about 30 ms) and, on a cold cache, their compiles (about 5.5 CPU s, once): they win from about 8 MB."""
SCAN_ALONE_BYTES = 64 << 20
"""The same where numba has not been imported yet (``di info`` of a log): its start costs 0.6-1 CPU s more, which the
scans win back from about 75 MB; a smaller log never imports numba here."""


def _scans_pay(nbytes: int, scan_min_bytes: int | None) -> bool:
    """Whether ``nbytes`` of marked ASCII lines are read by the scans: ``scan_min_bytes`` when given, else
    :data:`SCAN_MIN_BYTES` with numba imported already and :data:`SCAN_ALONE_BYTES` without."""
    if scan_min_bytes is None:
        scan_min_bytes = SCAN_MIN_BYTES if "numba" in sys.modules else SCAN_ALONE_BYTES
    return nbytes >= scan_min_bytes


def _classify(lines: pl.DataFrame, marked: pl.Series, scan_min_bytes: int | None) -> tuple[pl.DataFrame, bool, bool]:
    """``lines`` with ``kind`` (the first :data:`KINDS` name whose regex matches, null for none), ``line_ts`` the
    line's own time and ``tag_rank`` (a ``[Rank N]`` tag's N); whether the ``marked`` lines (:func:`_marked`) are
    all ASCII, and whether they are read by the scans (ASCII and long enough: :func:`_scans_pay`), else by the regexes (:func:`_regex_kinds`). Results are put back by row."""
    at = marked.arg_true()
    text = lines.get_column("text").gather(at)
    ascii = all_ascii(text)
    scan = ascii and _scans_pay(text.str.len_bytes().sum(), scan_min_bytes)
    n = lines.height
    if scan:
        from di.convert.logs.linekinds import line_kinds

        found, ranks = line_kinds(text)
    else:
        found, ranks = _regex_kinds(text, ascii), _rank_tags(text, ascii)
    kind = pl.Series("kind", [], pl.String).extend_constant(None, n).scatter(at, found)
    tag_rank = pl.Series("tag_rank", [], pl.Int64).extend_constant(None, n).scatter(at, ranks)
    return lines.with_columns(kind, tag_rank, pl.col("own_ts").alias("line_ts")), ascii, scan


def _regex_kinds(text: pl.Series, ascii: bool) -> pl.Series:
    """Per line of ``text``: the first :data:`KINDS` name whose regex matches, null for none (``ascii``: every line
    is ASCII). Each regex runs on the lines a literal test picked; the results are put back by row."""
    hints = pl.DataFrame({"text": text}).select(**KIND_HINTS)  # one pass, no copy of the lines per kind
    at = pl.int_range(0, text.len(), dtype=pl.UInt32, eager=True)
    kind = pl.Series("kind", [], pl.String).extend_constant(None, text.len())
    for name, rx in reversed(KINDS.items()):  # the first kind that matches is set last
        hinted = hints.get_column(name)
        if not hinted.any():
            continue
        sub, rows = text.filter(hinted), at.filter(hinted)
        if name in KIND_SURE:  # the lines a literal alternative of the regex finds need no regex
            literals, rx = KIND_SURE[name]
            sure = sub.str.contains(literals)
            kind = kind.scatter(rows.filter(sure), name)
            sub, rows = sub.filter(~sure), rows.filter(~sure)
        rx = ASCII_MODE + rx if ascii and name in ASCII_KINDS else rx  # \b in ASCII: the DFA runs
        kind = kind.scatter(rows.filter(sub.str.contains(rx)), name)
    return kind
