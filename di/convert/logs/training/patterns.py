"""The regexes and literal tests that find a training log's lines: the kind of each step line, the ``key: value``
pairs, the ``[Rank N]`` tags and the errors.

Constants only: :mod:`.kinds` classifies lines with them, :mod:`.pairs` reads pairs, :mod:`.instants` errors; the
numba scans (:mod:`~di.convert.logs.linekinds`, :mod:`~di.convert.logs.pairscan`) find what they find.
"""

from __future__ import annotations

import polars as pl

__all__ = [
    "ASCII_KINDS",
    "ERROR_LITERALS",
    "ERROR_RE",
    "HINT_RE",
    "KINDS",
    "KIND_HINTS",
    "KIND_SURE",
    "LEVEL_HEAD_RE",
    "MARKS_RE",
    "MEGATRON_RE",
    "PAIR_RE",
    "RANK_TAG_RE",
    "SNIFF_RE",
    "TAGS_RE",
]

MEGATRON_RE = r"\biteration\s+(\d+)/\s*\d+\s*\|"
KINDS = {
    "megatron": MEGATRON_RE,
    "mllog": r":::MLLOG \{",
    "deepspeed": r"\bstep=\d+, skipped=\d+|SamplesPerSec=|E2E latency=",
    "torchtitan": r"\bstep:\s*\d+\s+loss:",
    "epoch_step": r"^epoch: \d+\|step: \d+\|",
    "hf": r"^\{'\w+': [-+\d.]",
    "jsonl": r"^\{\".*\"(?:loss|train_loss|lm_loss|step|global_step|iteration|lr|learning_rate)\":\s*[-+\d.]",
}
"""Line kinds and the regex that marks each (first match wins)."""
SNIFF_RE = "|".join(f"(?:{r})" for r in KINDS.values())
TAGS_RE = r"^(?:\[[^\]]*\]:?\s*)+"
"""A line's leading ``[...]`` tags (time, level, source, rank): no pair is read in them."""
PAIR_RE = (
    r"[A-Za-z_][\w \-/().]*?['\"]?\s*[:=]\s*\[?(?:[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
    r"(?:%|[KMGT]i?B|ms\b|s\b)?"
)
ERROR_RE = (
    r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)(?::\s|$)|CUDA out of memory|slurmstepd: error:|ChildFailedError"
    r"|^Traceback \(most recent call last\)|exits with return code = [1-9]|Segmentation fault|core dumped"
)

HINT_RE = r"iteration|MLLOG|step|SamplesPerSec|E2E latency"
"""Literals one of which every KINDS line holds (or it starts with ``{``): one fast search picks the lines the KINDS
regexes then test (an anchored branch in this alternation would make the search try every position)."""
KIND_HINTS = {
    "megatron": pl.col("text").str.contains("iteration", literal=True),
    "mllog": pl.col("text").str.contains(":::MLLOG {", literal=True),
    "deepspeed": pl.col("text").str.contains("step=|SamplesPerSec=|E2E latency="),
    "torchtitan": pl.col("text").str.contains("loss:", literal=True),
    "epoch_step": pl.col("text").str.starts_with("epoch: "),
    "hf": pl.col("text").str.starts_with("{'"),
    "jsonl": pl.col("text").str.starts_with('{"'),
}
"""Per kind, a literal test that each of its lines passes: its regex runs only on the lines that pass it."""
KIND_SURE = {"deepspeed": ("SamplesPerSec=|E2E latency=", r"\bstep=\d+, skipped=\d+")}
"""Per kind, (literal alternatives of its regex: a line that holds one matches it, with no regex run; the regex's
other alternatives, run on the other lines)."""


ASCII_KINDS = frozenset(("megatron", "mllog", "deepspeed", "torchtitan", "epoch_step", "hf"))
"""The kinds whose regex cannot match a non-ASCII byte (see :data:`~di.convert.logs.text.ASCII_MODE`)."""
RANK_TAG_RE = r"\[Rank (\d+)\]"
"""DeepSpeed's ``[Rank N]`` tag."""

LEVEL_HEAD_RE = " - (?:INFO|WARNING) - "
"""Python logging's level between its logger's name and the message: what comes before it holds no pair."""

ERROR_LITERALS = (
    r"Error|Exception|Interrupt|CUDA out of memory|slurmstepd|Traceback|return code|Segmentation fault|core dumped"
    r"|OVERFLOW"
)
"""Literals one of which every :data:`ERROR_RE` line (and overflow line) holds: a fast first search."""


MARKS_RE = rf"{HINT_RE}|{ERROR_LITERALS}|\[Rank " + "|\\{'|\\{\""
"""The literals of :data:`HINT_RE`, :data:`ERROR_LITERALS` and the ``[Rank N]`` tag, and the ``{'`` and ``{"`` that
HF and JSON Lines lines start with (a literal ``{`` alone would make the search stop at every brace)."""
