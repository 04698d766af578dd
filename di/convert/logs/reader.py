"""Sniffing a log's families and reading every family it holds into one trace.

:func:`families_in` looks at a file's first lines; :func:`read_log` reads the
whole file once (:func:`di.convert.logs.text.read_lines`), runs each family's
parser over it, and counts every non-blank line no family understood as
``unknown lines`` (dropped, never silently). A file in which no family finds
anything is refused with one :class:`~di.errors.UnknownFormatError` line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.convert import gunzip
from di.convert.logs import nccl, slurm
from di.convert.logs.build import Parts, build_trace
from di.convert.logs.slurm_json import is_slurm_json, parse_slurm_json
from di.convert.logs.text import LINE_TS_RE, head_lines, line_times, own_line_times, read_bytes, read_lines
from di.errors import UnknownFormatError
from di.trace import Trace

__all__ = ["FAMILIES", "families_in", "is_log", "read_log"]


def _training(lines: pl.DataFrame) -> Parts:
    from di.convert.logs.training import parse_training

    return parse_training(lines)


def _smi(lines: pl.DataFrame) -> Parts:
    from di.convert.logs.smi import parse_smi

    return parse_smi(lines)


def _sniff_training(lines: list[str]) -> bool:
    from di.convert.logs.training import SNIFF_RE

    return any(re.search(SNIFF_RE, ln) for ln in lines)


def _sniff_smi(lines: list[str]) -> bool:
    from di.convert.logs.smi import sniff_smi

    return sniff_smi(lines)


def _nccl_tests(lines: pl.DataFrame) -> Parts:
    from di.convert.logs.nccltests import parse_nccl_tests

    return parse_nccl_tests(lines)


def _sniff_nccl_tests(lines: list[str]) -> bool:
    from di.convert.logs.nccltests import SNIFF_RE

    return any(re.search(SNIFF_RE, ln) for ln in lines)


def _progress(lines: pl.DataFrame) -> Parts:
    from di.convert.logs.progress import parse_progress

    return parse_progress(lines)


def _sniff_progress(lines: list[str]) -> bool:
    from di.convert.logs.progress import SNIFF_RE

    return any(re.search(SNIFF_RE, ln) for ln in lines)


def _slurm(lines: pl.DataFrame) -> Parts:
    from di.convert.logs.slurm import parse_slurm

    return parse_slurm(lines)


def _sniff_slurm(lines: list[str]) -> bool:
    from di.convert.logs.slurm import SNIFF_RE

    return any(re.search(SNIFF_RE, ln) for ln in lines)


def _darshan(lines: pl.DataFrame) -> Parts:
    from di.convert.logs.darshan_text import parse_darshan_text

    return parse_darshan_text(lines)


def _sniff_darshan(lines: list[str]) -> bool:
    from di.convert.logs.darshan_text import SNIFF_RE

    return any(re.search(SNIFF_RE, ln) for ln in lines)


FAMILIES: dict[str, tuple[Callable[[list[str]], bool], Callable[[pl.DataFrame], Parts]]] = {
    "nccl": (lambda ls: any(re.search(nccl.SNIFF_RE, ln) or "NCCL version" in ln for ln in ls), nccl.parse_nccl),
    "nccl_tests": (_sniff_nccl_tests, _nccl_tests),
    "training": (_sniff_training, _training),
    "progress": (_sniff_progress, _progress),
    "nvidia_smi": (_sniff_smi, _smi),
    "slurm": (_sniff_slurm, _slurm),
    "darshan": (_sniff_darshan, _darshan),
}
"""Family name -> (sniff over the first cleaned lines, parser of the whole file)."""


LOG_EXTENSIONS = (".log", ".log.gz", ".out", ".err")
"""File names read as logs when their head is text but shows no family yet (launcher chatter first)."""
JSON_START = re.compile(rb"^\s*(?:\{\s*[\"}]|\[\s*[\[{\"\]])")


def is_log(path: Path, head: bytes) -> bool:
    """True when ``head`` shows a log family or is Slurm's JSON, or ``path`` is named like a log and its head is text
    but not JSON."""
    if is_slurm_json(head):
        return True
    if JSON_START.match(head) and (b'"traceEvents"' in head or b'"schemaVersion"' in head):
        return False  # a Chrome / Kineto trace, however its events look
    if families_in(head):
        return True
    if not path.name.endswith(LOG_EXTENSIONS) or b"\x00" in head[:1024] or JSON_START.match(head):
        return False
    return head.decode("utf-8", errors="replace").count("\ufffd") < len(head) // 100 + 1


GATES: dict[str, tuple[str, ...]] = {
    "nccl": (r" NCCL |CCL version",),
    "nccl_tests": (r"^# (?:Collective test starting|nThread \d+ nGpus|nccl-tests version)",),
    # training.KIND_HINTS' literals, and training.ERROR_RE's literals and line starts (a bare "step" would admit every
    # nccl-tests header, a bare "Error" every nvidia-smi -q report; overflow lines alone give no training part)
    "training": (
        r"iteration|MLLOG|step=|SamplesPerSec=|E2E latency=|loss:|CUDA out of memory|slurmstepd|ChildFailedError"
        r"|return code|Segmentation fault|core dumped",
        r"^(?:\{|epoch: |Traceback|[\w.]*(?:Error|Exception|Interrupt)(?::|$))",
    ),
    # the -q report's banner (smi.QLOG_RE: no report is read without one), and the tables' lines (--format=csv,noheader
    # rows, dmon/pmon and dcgmi dmon headers, --query-gpu headers), which no literal marks; not the default table's
    # title ("| NVIDIA-SMI 460.32.03 ...") or a capture's command line, of which the parser reads nothing
    "nvidia_smi": (
        r"NVSMI LOG",
        r"^\d{4}/\d\d/\d\d \d\d:",
        r"^[^\S\n]*#[^\S\n]*(?:(?:Date[^\S\n]+)?Time[^\S\n]+)?gpu[^\S\n]",
        r"^#[^\S\n]*Entity[^\S\n]",
        r"^(?:timestamp|index|[a-z_]+\.[\w.]*)(?: \[[^\]\n]+\])?, ",
    ),
    "progress": (r"it/s|s/it",),
    "slurm": (r"(?i)job_?id",),
    "darshan": (r"^# darshan log version",),
}
r"""A cheap search per family over the whole file: a family none of whose regexes match is not run.

Each regex runs over the cleaned lines one by one (:func:`_search`: the first lines first), so none may match across
a line break (``[^\S\n]``, not ``\s``); a literal alternation is split from a literal-free branch, which would make
the search try every position of every line, and a branch anchored at a line's start (``^``) is a regex of its own
(searched with the other anchored ones)."""
CONFIRM = {"slurm": f"{slurm.DELIMITED_HEAD}|{slurm.RULE}|{slurm.SCONTROL_RE}"}
"""A second search, run only where the family's gate matched, in multi-line mode over the lines joined by newlines:
what its parser needs to find anything (Slurm: a table's header or rule, or a record; Darshan and training logs name
job ids too). It runs line by line (:data:`CONFIRM_BY_LINE`, :func:`_confirmed`)."""
CONFIRM_BY_LINE = {"slurm": (r"(?i)job_?id|- -", rf"{slurm.DELIMITED_HEAD}|{slurm.RULE}|^JobId=\d+(?:\s|$)")}
r""":data:`CONFIRM` line by line: (a search every match needs, which picks the lines; the regex on a line that a line
break follows). ``\s`` can match that line break in the joined text: a header's ``\s*`` spanning lines leaves a
match on the line of its key (``^\s*key`` or ``key\s*$``), a rule's ``\s*$`` one on the rule's line, and a record's
``JobId=\d+\s`` is ``JobId=\d+(?:\s|$)`` on its line; the last line, which no line break follows, takes
:data:`CONFIRM` itself."""
ANCHORED = (LINE_TS_RE, *(rx for rxs in GATES.values() for rx in rxs if rx.startswith("^")))
"""The regexes anchored at a line's start that a read searches every line with: each line's time and the gates' anchored
ones. :func:`~di.convert.logs.text.read_lines` finds the lines one of them may match in its search for launcher
prefixes (one pass for all), and only those are searched again."""
HEAD_LINES = 1000
"""The gates search these first lines before the whole text: a family seen there is not searched for again."""


def _search(
    lines: pl.DataFrame, regexes: dict[str, tuple[str, ...]], candidates: pl.Series | None = None
) -> dict[str, bool]:
    """Name -> whether one of its ``regexes`` matches a line of ``lines``' ``text``.

    The first :data:`HEAD_LINES` lines are searched first, and the lines after them only for the names not found there
    (a search costs about a pass over the text however early it matches). Each part is searched in two groups: the
    regexes anchored at a line's start (``^``: their alternation fails at each line's first bytes) and the others
    (literal-led: their alternation is one scan for literals). A group's alternation, one search, picks the lines
    that match one of its regexes, and each regex then runs on those lines only. ``candidates``: the rows
    (ascending) of the only lines an anchored regex may match (:attr:`~di.convert.logs.text.LogText.anchored_rows`
    of a search that included them all); None: every line."""
    found = dict.fromkeys(regexes, False)
    text = lines.get_column("text")
    parts = [(text.head(HEAD_LINES), 0)] + ([(text.slice(HEAD_LINES), 1)] if text.len() > HEAD_LINES else [])
    for whole, i in parts:
        for anchored in (False, True):
            part = whole
            if anchored and candidates is not None:
                part = text.gather(
                    candidates.filter((candidates < HEAD_LINES) if i == 0 else (candidates >= HEAD_LINES))
                )
            todo = [
                (name, rx)
                for name, rxs in regexes.items()
                if not found[name]
                for rx in rxs
                if rx.startswith("^") == anchored
            ]
            # each regex, flags and all, in a group of its own
            hits = part.filter(part.str.contains("|".join(f"(?:{rx})" for _, rx in todo))) if len(todo) > 1 else part
            for name, rx in todo:
                found[name] = found[name] or (hits.len() > 0 and bool(hits.str.contains(rx).any()))
    return found


def _confirmed(lines: pl.DataFrame, name: str) -> bool:
    """Whether :data:`CONFIRM` ``[name]`` matches ``lines``' ``text`` joined by newlines: searched line by line
    (:data:`CONFIRM_BY_LINE`), the first :data:`HEAD_LINES` lines first."""
    lead, by_line = CONFIRM_BY_LINE[name]
    text = lines.get_column("text")
    if not text.len():
        return False
    if text.tail(1).str.contains(CONFIRM[name]).any():
        return True
    body = text.head(text.len() - 1)
    for part in [body.head(HEAD_LINES)] + ([body.slice(HEAD_LINES)] if body.len() > HEAD_LINES else []):
        if part.filter(part.str.contains(lead)).str.contains(by_line).any():
            return True
    return False


def present_families(lines: pl.DataFrame, candidates: pl.Series | None = None) -> dict[str, bool]:
    """Family name -> whether its :data:`GATES` (and :data:`CONFIRM`) match ``lines``' ``text`` (``candidates``:
    see :func:`_search`)."""
    present = _search(lines, GATES, candidates)
    return present | {name: _confirmed(lines, name) for name in CONFIRM if present[name]}


def families_in(head: bytes) -> list[str]:
    """The families whose lines appear in a file's first bytes (gunzipped); [] for binary data."""
    if b"\x00" in head[:1024]:
        return []
    lines = head_lines(head)
    return [name for name, (sniff, _) in FAMILIES.items() if sniff(lines)]


def _non_blank(text: pl.Series) -> int:
    """How many strings of ``text`` hold a character that is not whitespace: those that start with a printable ASCII
    character (two comparisons of string views) and those of the others that stripping leading whitespace leaves
    non-empty."""
    first_printable = (text >= "!") & (text < "\x80")
    rest = text.filter(~first_printable)
    return int(first_printable.sum()) + int((rest.str.strip_chars_start() != "").sum())


def read_log(
    path: Path,
    *,
    rank: int | None = None,
    rank_source: str = "single",
    source: int = 0,
    max_input_bytes: int | None = None,
    **_: Any,
) -> Trace:
    """Read a text log of any family (see :mod:`di.convert.logs`).

    Every family runs over the whole file (a family first seen past the head is still
    found); lines no family understood are counted in the source's ``dropped``.

    Raises:
        UnknownFormatError: no family found anything in the file (one line, naming the connectors installed).
        InputTooLargeError: over ``max_input_bytes``.
    """
    path = Path(path)
    if is_slurm_json(gunzip.head(path)):  # a JSON document, not lines
        return _read_slurm_json(path, rank=rank, rank_source=rank_source, source=source, limit=max_input_bytes)
    text = read_lines(path, max_input_bytes=max_input_bytes, anchored=ANCHORED)
    own = own_line_times(text.lines, text.anchored_rows)  # each line's own timestamp, found once for every family
    lines = text.lines.with_columns(line_times(text.lines, own), own)
    present = present_families(lines, text.anchored_rows)
    parts = [parse(lines) for name, (_, parse) in FAMILIES.items() if present.get(name, True)]
    parts = [p for p in parts if p.events.height or p.samples.height or p.info]
    if not parts:
        from di.convert.registry import installed

        raise UnknownFormatError(
            f"{path}: no connector recognised this file (a text file in which no log family "
            f"was found: NCCL debug, nccl-tests, training log, progress bars, nvidia-smi, Slurm, Darshan text); installed: {installed()}"
        )
    fmt = "log:" + "+".join(p.family for p in parts)
    return build_trace(
        path,
        parts,
        rank=0 if rank is None else rank,
        rank_source=rank_source,
        source=source,
        fmt=fmt,
        unknown={"unknown lines (no log family understood them)": _unknown_lines(lines, parts)},
        garbled=text.garbled,
    )


def _read_slurm_json(path: Path, *, rank: int | None, rank_source: str, source: int, limit: int | None) -> Trace:
    """:func:`read_log` of Slurm's JSON document (``sacct --json``, ``squeue --json``...)."""
    parts = [parse_slurm_json(path, read_bytes(path, limit))]
    kw = {"rank": 0 if rank is None else rank, "rank_source": rank_source, "source": source}
    return build_trace(path, parts, fmt="log:slurm", unknown={}, garbled={}, **kw)


def _unknown_lines(lines: pl.DataFrame, parts: list[Parts]) -> int:
    """How many non-blank lines of ``lines`` no part claimed."""
    claimed = np.zeros(lines.height, dtype=np.bool_)  # by line number (lines are numbered 0..height-1)
    for p in parts:
        claimed[p.claimed.to_numpy()] = True
    return _non_blank(lines.get_column("text").filter(pl.Series(~claimed)))
