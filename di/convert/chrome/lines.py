"""The Chrome writer's line assembly: one numba kernel writes JSON lines from
byte fragments, time cells and text, following a small template.

A template is a list of (op, column) pairs: ``FRAG`` a per-row fragment id
(-1: none), ``TIME`` a per-row ns value written as exact microseconds
(``NO_TIME``: nothing), ``TEXT`` the row's text, ``CONST`` one fixed fragment,
``ARGS`` the row's args object with the members of integer columns put first
(``correlation``, ``bytes``, Kineto's ids: :func:`di.schema.args_keys`). Rows are
written comma-first (``,\n{...}``) so blocks concatenate.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import copy_bytes
from di.convert.columns import readonly

NO_TIME = np.iinfo(np.int64).min  # a time cell that writes nothing
FRAG, TIME, TEXT, CONST, ARGS = 0, 1, 2, 3, 4  # template ops: fragment column, time column, text, fixed fragment, args
_TIME_CHARS = 22  # most characters one time cell can take ("-" + 16 digits + ".nnn")


def us_text(ns: int) -> str:
    """A ns count as the exact microsecond text the writer emits (``1234`` -> ``"1.234"``)."""
    sign, v = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{v // 1000}.{v % 1000:03d}"


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _put_int(out: np.ndarray, pos: int, v: int) -> int:
    if v < 0:
        out[pos] = 45  # "-"
        pos += 1
        v = -v
    digits, q = 1, v
    while q >= 10:
        q //= 10
        digits += 1
    for j in range(pos + digits - 1, pos - 1, -1):
        out[j] = 48 + v % 10
        v //= 10
    return pos + digits


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _put_time(out: np.ndarray, pos: int, v: int) -> int:
    if v < 0:
        out[pos] = 45
        pos += 1
        v = -v
    pos = _put_int(out, pos, v // 1000)
    frac = v % 1000
    out[pos] = 46  # "."
    out[pos + 1] = 48 + frac // 100
    out[pos + 2] = 48 + frac // 10 % 10
    out[pos + 3] = 48 + frac % 10
    return pos + 4


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _put_args(
    out: np.ndarray,
    pos: int,
    text: np.ndarray,
    a: int,
    b: int,
    ints: np.ndarray,
    i: int,
    pool: np.ndarray,
    pool_off: np.ndarray,
    key: int,
) -> int:
    """``,"args":`` + the args text, with the members ``ints[r, i]`` (not NO_TIME) put first: fragment
    ``key`` is ``,"args":``, ``key + 1 + r`` the member name of ``ints`` row r (``"correlation":``)."""
    first = True
    for r in range(ints.shape[0]):
        v = ints[r, i]
        if v != NO_TIME:
            if first:
                pos = copy_bytes(out, pos, pool, pool_off[key], pool_off[key + 1])
                out[pos] = 123  # "{"
                pos += 1
                first = False
            else:
                out[pos] = 44  # ","
                pos += 1
            pos = _put_int(out, copy_bytes(out, pos, pool, pool_off[key + 1 + r], pool_off[key + 2 + r]), v)
    if first:
        if b > a:
            pos = copy_bytes(out, pos, pool, pool_off[key], pool_off[key + 1])
            pos = copy_bytes(out, pos, text, a, b)
        return pos
    j = a
    while j < b and (text[j] == 123 or text[j] == 32 or text[j] == 9 or text[j] == 10 or text[j] == 13):
        j += 1  # the opening brace and whitespace of the stored object
    if j < b and text[j] != 125:
        out[pos] = 44  # ","
        return copy_bytes(out, pos + 1, text, j, b)
    out[pos] = 125  # "}"
    return pos + 1


@njit(cache=True, _nrt=False, pipeline_class=ScalarKernelCompiler)
def _assemble_kernel(
    ops: np.ndarray,
    lo: int,
    hi: int,
    frag: np.ndarray,
    times: np.ndarray,
    ints: np.ndarray,
    pool: np.ndarray,
    pool_off: np.ndarray,
    text: np.ndarray,
    text_off: np.ndarray,
    out: np.ndarray,
) -> int:
    pos = 0
    for i in range(lo, hi):
        t = i - lo  # row of the text column, which holds rows lo..hi only
        out[pos] = 44  # ","
        out[pos + 1] = 10  # "\n"
        pos += 2
        for k in range(ops.shape[0]):
            op, c = ops[k, 0], ops[k, 1]
            if op == TIME:
                if times[c, i] != NO_TIME:
                    pos = _put_time(out, pos, times[c, i])
            elif op == TEXT:
                pos = copy_bytes(out, pos, text, text_off[t], text_off[t + 1])
            elif op == ARGS:
                pos = _put_args(out, pos, text, text_off[t], text_off[t + 1], ints, i, pool, pool_off, c)
            else:
                f = frag[c, i] if op == FRAG else c
                if f >= 0:
                    pos = copy_bytes(out, pos, pool, pool_off[f], pool_off[f + 1])
    return pos


def assemble(
    ops: list[tuple[int, int]],
    lo: int,
    hi: int,
    frag: np.ndarray,
    times: np.ndarray,
    ints: np.ndarray,
    pool: tuple[np.ndarray, np.ndarray],
    text: tuple[np.ndarray, np.ndarray] | None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Comma-first JSON lines of rows lo..hi, following the template ``ops``.

    ``frag``/``times``/``ints`` are column-major (column, row); ``text`` holds rows lo..hi only.
    """
    n = hi - lo
    text_data, text_off = text if text is not None else (np.zeros(0, np.uint8), np.zeros(n + 1, np.int64))
    flen = np.append(np.diff(pool[1]), 0)  # fragment lengths; index -1 (absent) -> 0
    size = n * (2 + _TIME_CHARS * times.shape[0]) + int(text_off[-1] - text_off[0])
    for op, c in ops:
        if op == FRAG:
            size += int(flen[frag[c, lo:hi]].sum())
        elif op in (CONST, ARGS):
            k = ints.shape[0]  # ARGS: the members of the integer columns, each at most a time cell long
            size += n * (int(flen[c]) if op == CONST else int(flen[c : c + 1 + k].sum()) + k * (_TIME_CHARS + 1) + 2)
    out = out if out is not None and len(out) >= size else np.empty(size, dtype=np.uint8)
    texts = (readonly(a) for a in (pool[0], pool[1], text_data, text_off))  # one signature: see di.convert.columns
    end = _assemble_kernel(np.array(ops, dtype=np.int64).reshape(-1, 2), lo, hi, frag, times, ints, *texts, out)
    return out[:end]
