"""JSON numbers to exact integers: decimal text straight to int64, never through float64.

``parse_number(buf, i, n, shift)`` gives the value in units of 10**-shift
(shift 3 turns Chrome's microseconds into nanoseconds); up to 19 significant
digits are exact and the next one rounds half up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import load_u64
from di.convert.chrome.jsontext import DIGIT_0, DIGIT_9, DOT, EXP_LOWER, EXP_UPPER, MINUS, PLUS

_MAX_MANT = np.uint64(10**18)
_ONE, _TEN, _E8 = np.uint64(1), np.uint64(10), np.uint64(10**8)
_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)
_INT64_MAX = np.uint64(2**63 - 1)

_SCALE_MAX_U64 = np.array(
    [(2**63 - 1) // 10**k for k in range(20)], dtype=np.uint64
)  # largest v with v * 10**k in int64


@njit(cache=True, _nrt=False, error_model="numpy", no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def parse_number(buf, i, n, shift):
    """Parse the JSON number at i as an integer of unit 10**-shift of its value.

    Returns (value, index after the number, status) where status is 0 on
    success, 1 when it is not a number and 3 when the value overflows int64.
    Up to 19 significant digits are exact; the next one rounds half up.

    The digits before the point, then those after it, into one mantissa: beyond
    18 digits of mantissa an integer digit raises the exponent, and the first
    digit dropped decides the rounding. The first integer digits go eight per step while they
    fit 19 (Kineto's absolute epoch microseconds, "1712195495519689.047", are
    16 of them). One path for every number, with no division unless the number
    has more decimals than ``shift``: a fast path of its own doubled the
    function and its compile time. ``error_model="numpy"``: the divisors are
    powers of ten, never zero, so no check that would raise.
    """
    neg = i < n and buf[i] == MINUS
    if neg:
        i += 1
    first = i
    mant = np.uint64(0)
    while i - first <= 11 and i + 8 <= n:
        w = load_u64(buf, i)
        if not _all_digits(w):
            break
        mant = mant * _E8 + _eight_digits(w)
        i += 8
    exp10 = 0
    rd = -1
    while i < n:
        c = buf[i]
        if c < DIGIT_0 or c > DIGIT_9:
            break
        if mant < _MAX_MANT:
            mant = mant * _TEN + (c - DIGIT_0)
        else:
            exp10 += 1
            if rd < 0:
                rd = c - 48
        i += 1
    digits = i - first
    if i < n and buf[i] == DOT:
        i += 1
        first = i
        while i < n:
            c = buf[i]
            if c < DIGIT_0 or c > DIGIT_9:
                break
            if mant < _MAX_MANT:
                mant = mant * _TEN + (c - DIGIT_0)
                exp10 -= 1
            elif rd < 0:
                rd = c - 48
            i += 1
        digits += i - first
    if digits == 0:
        return 0, i, 1
    if i < n and (buf[i] == EXP_LOWER or buf[i] == EXP_UPPER):
        i += 1
        eneg = False
        if i < n and (buf[i] == MINUS or buf[i] == PLUS):
            eneg = buf[i] == MINUS
            i += 1
        e = 0
        ed = 0
        while i < n and DIGIT_0 <= buf[i] <= DIGIT_9:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            ed += 1
            i += 1
        if ed == 0:
            return 0, i, 1
        exp10 += -e if eneg else e
    e = exp10 + shift
    if e >= 0:
        if e > 19:
            if mant == 0:
                return 0, i, 0
            return 0, i, 3
        if mant > _SCALE_MAX_U64[e]:
            return 0, i, 3
        v = mant * _POW10[e]
        if e == 0 and rd >= 5:
            v += _ONE
    else:
        k = -e
        if k > 19:
            v = np.uint64(0)
        else:
            p = _POW10[k]
            v = mant // p
            if mant % p >= p >> _ONE:  # half up; (mant % p) * 2 wraps in uint64 when p is 10**19
                v += _ONE
    if v > _INT64_MAX:
        return 0, i, 3
    r = np.int64(v)
    return (-r if neg else r), i, 0


@njit(cache=True, _nrt=False, inline="always")
def _all_digits(w):
    """True when all eight bytes of the word are ASCII digits."""
    high = np.uint64(0xF0F0F0F0F0F0F0F0)
    zeros = np.uint64(0x3030303030303030)
    return (w & high) == zeros and ((w + np.uint64(0x0606060606060606)) & high) == zeros


@njit(cache=True, _nrt=False, inline="always")
def _eight_digits(w):
    """The value of eight ASCII digits loaded little-endian (first digit in the low byte):
    pairs, then quads, then the whole, each step one multiply-add per lane."""
    w = w - np.uint64(0x3030303030303030)
    w = (w * np.uint64(10) + (w >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    w = (w * np.uint64(100) + (w >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    return (w * np.uint64(10000) + (w >> np.uint64(32))) & np.uint64(0xFFFFFFFF)
