"""Numbers in the whitespace-separated words of log lines, read by one numba pass over the lines' UTF-8 bytes.

Table rows of text logs (nccl-tests, ``nvidia-smi dmon``) hold numbers in known word positions. Splitting each
row into a list of strings and casting words one by one costs a string per word; this scanner walks the bytes once
and parses the words asked for straight into a float64 matrix. A word is a number as Rust's ``f64`` parser (polars'
``cast(pl.Float64, strict=False)``) reads it: an optional sign, digits with at most one ``.`` (at least one digit),
an optional exponent; else NaN. Values are exact (one rounding, as the parser's) where the digits fit in 2**53 and
the power of ten in 10**22; other numbers are counted, so the caller reads those rows the slow way.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.convert.columns import readonly, utf8_buffers

__all__ = ["numbers_at"]

_POW10 = np.array([10.0**k for k in range(23)], dtype=np.float64)
"""Powers of ten that float64 holds exactly."""
_SPACE = np.uint8(32)
_TAB = np.uint8(9)
_CR = np.uint8(13)
_DOT = np.uint8(46)
_MINUS = np.uint8(45)
_PLUS = np.uint8(43)
_ZERO = np.uint8(48)
_NINE = np.uint8(57)
_E_LOW = np.uint8(101)
_E_UP = np.uint8(69)
_EXACT_DIGITS = np.int64(2**53)


@njit(cache=True, _nrt=False, inline="always")
def _is_space(b):
    return b == _SPACE or (b >= _TAB and b <= _CR)


@njit(cache=True, _nrt=False)
def _scan(buf, offs, picks, pow10, out):
    """For each string i (bytes ``buf[offs[i]:offs[i+1]]``) and word w with ``picks[w] >= 0``: ``out[i, picks[w]]``
    the word's number, NaN when it is none (``out`` comes NaN-filled). Returns how many numbers were not exact."""
    inexact = 0
    npick = picks.size
    for i in range(offs.size - 1):
        j = offs[i]
        end = offs[i + 1]
        w = 0
        while j < end and w < npick:
            while j < end and _is_space(buf[j]):
                j += 1
            if j >= end:
                break
            a = j
            while j < end and not _is_space(buf[j]):
                j += 1
            col = picks[w]
            w += 1
            if col < 0:
                continue
            # the word buf[a:j] as a number
            k = a
            neg = False
            if buf[k] == _MINUS or buf[k] == _PLUS:
                neg = buf[k] == _MINUS
                k += 1
            mant = 0
            digits = 0
            frac = 0
            dots = 0
            big = False
            while k < j and ((buf[k] >= _ZERO and buf[k] <= _NINE) or buf[k] == _DOT):
                if buf[k] == _DOT:
                    dots += 1
                else:
                    digits += 1
                    if dots:
                        frac += 1
                    if mant >= _EXACT_DIGITS // 10:
                        big = True
                    else:
                        mant = mant * 10 + (buf[k] - _ZERO)
                k += 1
            if digits == 0 or dots > 1:
                continue
            exp = 0
            if k < j and (buf[k] == _E_LOW or buf[k] == _E_UP):
                k += 1
                eneg = False
                if k < j and (buf[k] == _MINUS or buf[k] == _PLUS):
                    eneg = buf[k] == _MINUS
                    k += 1
                edigits = 0
                while k < j and buf[k] >= _ZERO and buf[k] <= _NINE:
                    if exp < 10000:
                        exp = exp * 10 + (buf[k] - _ZERO)
                    edigits += 1
                    k += 1
                if edigits == 0:
                    continue
                if eneg:
                    exp = -exp
            if k != j:
                continue
            p = exp - frac
            if big or p > 22 or p < -22:
                inexact += 1
                continue
            v = float(mant)
            v = v * pow10[p] if p >= 0 else v / pow10[-p]
            out[i, col] = -v if neg else v
    return inexact


def numbers_at(strings: pl.Series, words: list[int]) -> pl.DataFrame | None:
    """Columns ``w<k>`` (Float64, null where not a number) of the numbers in word ``k`` of each string, for each k of
    ``words`` (0-based; words are runs of non-whitespace); None when a number is beyond the exact fast path (the
    caller then reads these strings another way), or when a string is not ASCII."""
    buf, offs = utf8_buffers(strings)
    if buf.size and buf.max() >= 0x80:
        return None  # Unicode spaces split words too
    picks = np.full(max(words) + 1 if words else 0, -1, dtype=np.int64)
    picks[np.array(words, dtype=np.int64)] = np.arange(len(words), dtype=np.int64)
    out = np.full((len(strings), len(words)), np.nan, dtype=np.float64)
    if _scan(readonly(buf), readonly(offs), readonly(picks), readonly(_POW10), out):
        return None
    return pl.DataFrame({f"w{k}": out[:, n] for n, k in enumerate(words)}).fill_nan(None)
