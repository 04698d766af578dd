"""JSON numbers to exact integers: decimal text straight to int64, never through float64.

``parse_number(buf, i, n, shift)`` gives the value in units of 10**-shift
(shift 3 turns Chrome's microseconds into nanoseconds); up to 19 significant
digits are exact and the next one rounds half up.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.bytewords import load_u64

_MAX_MANT = np.uint64(10**18)
_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)
_INT64_MAX = np.uint64(2**63 - 1)

_SCALE_MAX_U64 = np.array(
    [(2**63 - 1) // 10**k for k in range(20)], dtype=np.uint64
)  # largest v with v * 10**k in int64


@njit(cache=True, _nrt=False)
def parse_number(buf, i, n, shift):
    """Parse the JSON number at i as an integer of unit 10**-shift of its value.

    Returns (value, index after the number, status) where status is 0 on
    success, 1 when it is not a number and 3 when the value overflows int64.
    Up to 19 significant digits are exact; the next one rounds half up.
    """
    # fast path: [-]digits[.digits], at most 19 digits (they fit a uint64), no more
    # decimals than ``shift``, no exponent, no overflow; everything else goes to
    # the general parser. Kineto's absolute epoch microseconds with 3 decimals
    # ("1712195495519689.047") are 19 digits.
    j = i
    neg = j < n and buf[j] == 45
    if neg:
        j += 1
    v = np.uint64(0)
    d = 0
    while d <= 11 and j + 8 <= n:  # eight digits per step while they fit 19
        w = load_u64(buf, j)
        if not _all_digits(w):
            break
        v = v * np.uint64(100_000_000) + _eight_digits(w)
        d += 8
        j += 8
    while j < n and 48 <= buf[j] <= 57:
        v = v * np.uint64(10) + np.uint64(buf[j] - 48)
        d += 1
        j += 1
    if d > 0:
        f = 0
        if j < n and buf[j] == 46:
            j += 1
            while j < n and 48 <= buf[j] <= 57:
                v = v * np.uint64(10) + np.uint64(buf[j] - 48)
                f += 1
                j += 1
            if f == 0:
                d = 99
        if (
            d + f <= 19
            and f <= shift
            and v <= _SCALE_MAX_U64[shift - f]
            and not (j < n and (buf[j] == 101 or buf[j] == 69))
        ):
            r = np.int64(v * _POW10[shift - f])
            return (-r if neg else r), j, 0
    # the general case: exponents, long mantissas, overflow. One loop over the
    # digits before and after the point: beyond 18 digits of mantissa an integer
    # digit raises the exponent, and the first digit dropped decides the rounding.
    neg = i < n and buf[i] == 45
    if neg:
        i += 1
    mant = np.uint64(0)
    exp10 = 0
    digits = 0
    rd = -1
    frac = 0
    while i < n:
        c = buf[i]
        if 48 <= c <= 57:
            if mant < _MAX_MANT:
                mant = mant * np.uint64(10) + np.uint64(c - 48)
                exp10 -= frac
            else:
                exp10 += 1 - frac
                if rd < 0:
                    rd = c - 48
            digits += 1
        elif c == 46 and frac == 0:
            frac = 1
        else:
            break
        i += 1
    if digits == 0:
        return 0, i, 1
    if i < n and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < n and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        e = 0
        ed = 0
        while i < n and 48 <= buf[i] <= 57:
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
        p = _POW10[e]
        if mant > _INT64_MAX // p:
            return 0, i, 3
        v = mant * p
        if e == 0 and rd >= 5:
            v += np.uint64(1)
    else:
        k = -e
        if k > 19:
            v = np.uint64(0)
        else:
            p = _POW10[k]
            v = mant // p
            if (mant % p) * np.uint64(2) >= p:
                v += np.uint64(1)
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
