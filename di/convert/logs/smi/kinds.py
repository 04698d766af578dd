"""The lines each kind of nvidia-smi table is looked for in (:class:`_Kinds`), found in one pass over a log's lines
(:func:`_kinds`): lines that hold a ``, `` (``--query-gpu`` CSV), lines that start with ``#`` (dmon/pmon and dcgmi
headers, unit lines, a capture's rules), with a digit (dmon/pmon rows), with ``#`` or a digit after whitespace, and
with ``=`` (``-q``'s banner). Each kind keeps the lines' ``line`` and ``text``, in line order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.text import lead_in


@dataclass
class _Kinds:
    """The lines each kind of table is looked for in (columns ``line``, ``text``), each sorted by line.

    Attributes:
        comma: lines that hold a ``, `` (``--query-gpu`` CSV; the text as ``t``).
        hashed: lines that start with ``#`` (dmon/pmon and dcgmi headers, unit lines, a capture's rules).
        digits: lines that start with a digit (dmon/pmon rows).
        indented: lines that start with ``#`` or a digit after whitespace, with ``hash``: whether ``#`` (dmon/pmon
            headers, unit lines and rows too).
        eqs: lines that start with ``=`` (``-q``'s banner).
    """

    comma: pl.DataFrame
    hashed: pl.DataFrame
    digits: pl.DataFrame
    indented: pl.DataFrame
    eqs: pl.DataFrame


def _kinds(lines: pl.DataFrame) -> _Kinds:
    """:class:`_Kinds` of ``lines``: one search over all lines (for ``, ``), and each line's first byte, which its
    string view holds (:func:`~di.convert.logs.leadbytes.lead_bytes`). Of the lines that start with whitespace or a
    non-ASCII character (which may be Unicode whitespace or a digit), those that ``^\\s*[#\\d]`` matches are found by
    their first byte after the leading spaces, and by the regex itself where that byte does not tell."""
    t = pl.col("text")
    length, (b,) = lead_bytes(lines.get_column("text"))
    indent = lines.filter(pl.Series(((b < ord("!")) & (length > 0)) | (b >= 0x80)))
    # their first character after the leading spaces: "#" or an ASCII digit is kept, any other ASCII character but
    # whitespace is not (none at all: not either); after other whitespace, or a non-ASCII character (Unicode
    # whitespace, a digit of another script), the regex decides, and a strip of all whitespace tells "#"
    _, (first,) = lead_bytes(indent.get_column("text").str.strip_chars_start(" "))
    hashed = first == ord("#")
    keep = hashed | ((first >= ord("0")) & (first <= ord("9")))
    other = np.flatnonzero(((first >= 0x09) & (first <= 0x0D)) | (first >= 0x80))
    if other.size:
        said = indent[other].select(
            t.str.contains(r"^\s*[#\d]").alias("keep"), lead_in(t.str.strip_chars_start(), "#", "$").alias("hash")
        )
        keep[other] = said.get_column("keep").to_numpy()
        hashed[other] = said.get_column("hash").to_numpy()
    indented = indent.filter(pl.Series(keep)).with_columns(pl.Series("hash", hashed[keep]))
    return _Kinds(
        comma=lines.filter(t.str.contains(", ", literal=True)).rename({"text": "t"}),
        hashed=lines.filter(pl.Series(b == ord("#"))),
        digits=lines.filter(pl.Series((b >= ord("0")) & (b <= ord("9")))),
        indented=indented,
        eqs=lines.filter(pl.Series(b == ord("="))),
    )
