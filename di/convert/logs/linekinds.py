"""Training-log line kinds and ``[Rank N]`` tags of ASCII lines, found by one numba scan of their bytes.

Per line, what :data:`di.convert.logs.training.KINDS`' regexes (in ASCII mode) and
:data:`~di.convert.logs.training.RANK_TAG_RE` find with polars, each literal test and regex a pass over the lines:

- its kind: the first of ``megatron`` (``\\biteration\\s+\\d+/\\s*\\d+\\s*\\|``), ``mllog`` (``:::MLLOG {``),
  ``deepspeed`` (``SamplesPerSec=``, ``E2E latency=`` or ``\\bstep=\\d+, skipped=\\d+``), ``torchtitan``
  (``\\bstep:\\s*\\d+\\s+loss:``), ``epoch_step`` (``^epoch: \\d+\\|step: \\d+\\|``), ``hf``
  (``^\\{'\\w+': [-+\\d.]``) and ``jsonl`` (``^\\{"`` then, anywhere after, ``"`` one of the step or metric keys
  ``":\\s*[-+\\d.]``) that the line holds;
- the N of its first ``[Rank N]`` tag (:data:`~di.convert.logs.training.BEYOND_RANK` where N is beyond int64).

Each pattern is a fixed word followed by classes with one way to match (``\\s`` then ``\\d``, never the same byte),
so it is tested where its word occurs, in one left-to-right pass.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.logs import training
from di.convert.columns import utf8_buffers
from di.convert.logs.pairscan import DIGIT, SPACE, WORD, is_class

__all__ = ["KIND_CODES", "line_kinds"]

KIND_CODES = ("megatron", "mllog", "deepspeed", "torchtitan", "epoch_step", "hf", "jsonl")
"""The kinds in the order the scan gives their codes (0, 1...; -1: none), that of
:data:`di.convert.logs.training.KINDS`."""
NO_KIND = np.int8(-1)
BEYOND_RANK = np.int64(training.BEYOND_RANK)
"""The rank of a tag whose N is beyond int64 (typed for the kernel)."""
_MAX_DIV10 = np.int64((2**63 - 1) // 10)

_ITERATION = np.frombuffer(b"iteration", np.uint8)
_MLLOG = np.frombuffer(b":::MLLOG {", np.uint8)
_SAMPLES = np.frombuffer(b"SamplesPerSec=", np.uint8)
_E2E = np.frombuffer(b"E2E latency=", np.uint8)
_STEP_EQ = np.frombuffer(b"step=", np.uint8)
_SKIPPED = np.frombuffer(b", skipped=", np.uint8)
_STEP_COLON = np.frombuffer(b"step:", np.uint8)
_LOSS_COLON = np.frombuffer(b"loss:", np.uint8)
_EPOCH = np.frombuffer(b"epoch: ", np.uint8)
_BAR_STEP = np.frombuffer(b"|step: ", np.uint8)
_RANK = np.frombuffer(b"[Rank ", np.uint8)
_JSON_KEYS = [
    np.frombuffer(k.encode() + b'":', np.uint8)
    for k in ("loss", "train_loss", "lm_loss", "step", "global_step", "iteration", "lr", "learning_rate")
]
_JSON_KEY_BYTES = np.zeros((len(_JSON_KEYS), 16), np.uint8)
_JSON_KEY_LENGTHS = np.zeros(len(_JSON_KEYS), np.int64)
for _k, _word in enumerate(_JSON_KEYS):
    _JSON_KEY_BYTES[_k, : _word.size] = _word
    _JSON_KEY_LENGTHS[_k] = _word.size
"""JSON Lines' keys (with their closing ``":``), as rows of bytes and lengths (kernel constants)."""


_TRIGGERS = np.zeros(256, np.bool_)
_TRIGGERS[np.frombuffer(b'i:SEs"[', np.uint8)] = True
"""The first bytes of the words the scan tests (a constant of the kernel: other bytes are skipped by one load)."""


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _at(data, p, b1, word):
    """Whether ``data[p:b1]`` starts with the bytes ``word``."""
    if p + word.size > b1:
        return False
    for k in range(word.size):
        if data[p + k] != word[k]:
            return False
    return True


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _skip(data, p, b1, bits):
    """The first byte at or after ``p`` (up to ``b1``) of none of the class ``bits``."""
    while p < b1 and is_class(data, bits, p):
        p += 1
    return p


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _boundary(data, b0, p):
    """``\\b`` before a word byte at ``p``: the line starts there or a non-word byte comes before."""
    return p == b0 or not is_class(data, WORD, p - 1)


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _number_sign(data, p, b1):
    """``[-+\\d.]`` at ``p``."""
    return p < b1 and (data[p] == 45 or data[p] == 43 or data[p] == 46 or is_class(data, DIGIT, p))


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _scan(data, offsets, kind, rank, ranked):
    """Per line ``data[offsets[r]:offsets[r + 1]]``: its kind code (``kind``) and first tag's rank (``rank``, where
    ``ranked``; see the module docstring)."""
    for r in range(offsets.size - 1):
        b0 = offsets[r]
        b1 = offsets[r + 1]
        megatron = mllog = deepspeed = torchtitan = jsonl = False
        ranked[r] = False
        json = b1 - b0 >= 2 and data[b0] == 123 and data[b0 + 1] == 34
        p = b0 - 1
        while True:
            p += 1
            while p < b1 and not _TRIGGERS[data[p]]:
                p += 1
            if p >= b1:
                break
            c = data[p]
            if c == 105 and not megatron and _boundary(data, b0, p) and _at(data, p, b1, _ITERATION):
                q = _skip(data, p + 9, b1, SPACE)
                if q > p + 9:
                    d = _skip(data, q, b1, DIGIT)
                    if d > q and d < b1 and data[d] == 47:
                        q = _skip(data, d + 1, b1, SPACE)
                        d = _skip(data, q, b1, DIGIT)
                        if d > q:
                            q = _skip(data, d, b1, SPACE)
                            megatron = q < b1 and data[q] == 124
            elif c == 58 and not mllog and _at(data, p, b1, _MLLOG):
                mllog = True
            elif c == 83 and not deepspeed and _at(data, p, b1, _SAMPLES):
                deepspeed = True
            elif c == 69 and not deepspeed and _at(data, p, b1, _E2E):
                deepspeed = True
            elif c == 115 and _boundary(data, b0, p):
                if not deepspeed and _at(data, p, b1, _STEP_EQ):
                    d = _skip(data, p + 5, b1, DIGIT)
                    if d > p + 5 and _at(data, d, b1, _SKIPPED):
                        deepspeed = _skip(data, d + 10, b1, DIGIT) > d + 10
                elif not torchtitan and _at(data, p, b1, _STEP_COLON):
                    q = _skip(data, p + 5, b1, SPACE)
                    d = _skip(data, q, b1, DIGIT)
                    if d > q:
                        q = _skip(data, d, b1, SPACE)
                        torchtitan = q > d and _at(data, q, b1, _LOSS_COLON)
            elif c == 34 and json and not jsonl and p >= b0 + 2:
                for k in range(_JSON_KEY_LENGTHS.size):
                    word = _JSON_KEY_BYTES[k, : _JSON_KEY_LENGTHS[k]]
                    if _at(data, p + 1, b1, word):
                        q = _skip(data, p + 1 + word.size, b1, SPACE)
                        if _number_sign(data, q, b1):
                            jsonl = True
                            break
            elif c == 91 and not ranked[r] and _at(data, p, b1, _RANK):
                d = _skip(data, p + 6, b1, DIGIT)
                if d > p + 6 and d < b1 and data[d] == 93:
                    n = np.int64(0)
                    for k in range(p + 6, d):
                        digit = np.int64(data[k] - 48)
                        if n > _MAX_DIV10 or (n == _MAX_DIV10 and digit > 7):
                            n = BEYOND_RANK
                            break
                        n = n * 10 + digit
                    rank[r] = n
                    ranked[r] = True
        code = NO_KIND
        if megatron:
            code = 0
        elif mllog:
            code = 1
        elif deepspeed:
            code = 2
        elif torchtitan:
            code = 3
        elif _epoch_step(data, b0, b1):
            code = 4
        elif _hf(data, b0, b1):
            code = 5
        elif jsonl:
            code = 6
        kind[r] = code


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _epoch_step(data, b0, b1):
    """``^epoch: \\d+\\|step: \\d+\\|``."""
    if not _at(data, b0, b1, _EPOCH):
        return False
    d = _skip(data, b0 + 7, b1, DIGIT)
    if d == b0 + 7 or not _at(data, d, b1, _BAR_STEP):
        return False
    e = _skip(data, d + 7, b1, DIGIT)
    return e > d + 7 and e < b1 and data[e] == 124


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _hf(data, b0, b1):
    """``^\\{'\\w+': [-+\\d.]``."""
    if b1 - b0 < 2 or data[b0] != 123 or data[b0 + 1] != 39:
        return False
    w = _skip(data, b0 + 2, b1, WORD)
    return (
        w > b0 + 2
        and w + 2 < b1
        and data[w] == 39
        and data[w + 1] == 58
        and data[w + 2] == 32
        and (_number_sign(data, w + 3, b1))
    )


def line_kinds(text: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Per string of ``text`` (ASCII): its kind (String, null for none; see the module docstring) and its first
    ``[Rank N]`` tag's N (Int64, null for none)."""
    data, offsets = utf8_buffers(text)
    n = offsets.size - 1
    kind = np.empty(n, np.int8)
    rank = np.zeros(n, np.int64)
    ranked = np.empty(n, np.bool_)
    _scan(data, offsets, kind, rank, ranked)
    names = pl.Series("kind", KIND_CODES + (None,), pl.String)
    kinds = names.gather(np.where(kind < 0, len(KIND_CODES), kind))
    ranks = pl.Series("tag_rank", rank).scatter(np.flatnonzero(~ranked), None)
    return kinds.alias("kind"), ranks
