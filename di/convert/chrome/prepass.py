"""One pass over a JSON document's bytes before scanning it.

:func:`prescan` bounds the number of event objects (every one starts with
``{`` that is not a member's value) and says whether any byte is outside ASCII; only then does
:func:`fix_utf8` check the UTF-8 and repair it in place.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.bytewords import load_u64


_ONES = np.uint64(0x0101010101010101)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGH = np.uint64(0x8080808080808080)


@njit(cache=True, _nrt=False, inline="always")
def _lanes_equal(w, byte):
    """0x80 in each byte lane of the word ``w`` that equals ``byte``, else 0 (exact per lane)."""
    x = w ^ (_ONES * byte)
    return ~(((x & _LOW7) + _LOW7) | x | _LOW7)


@njit(cache=True, _nrt=False, inline="always")
def _lanes_set(mask):
    """The number of byte lanes with 0x80 set in ``mask``."""
    return ((mask >> np.uint64(7)) * _ONES) >> np.uint64(56)


@njit(cache=True, _nrt=False)
def prescan(buf):
    """(an upper bound on the number of event objects, whether any byte is >= 0x80).

    The bound counts the '{' bytes that do not follow ':' or ': ': an event is
    an array element, after '[' or ',' and whitespace, never a member's value
    (such as its own ``args``), so this bound is about the event count for
    the compact and the pretty-printed JSON that tracers write. Eight bytes per
    step: each word is compared with its neighbours one and two bytes back.
    """
    n = buf.size
    opens = np.uint64(0)
    values = np.uint64(0)
    high = np.uint64(0)
    i = 8
    while i + 8 <= n:
        w = load_u64(buf, i)
        back1 = load_u64(buf, i - 1)
        back2 = load_u64(buf, i - 2)
        brace = _lanes_equal(w, np.uint64(123))
        after_colon = _lanes_equal(back1, np.uint64(58)) | (
            _lanes_equal(back1, np.uint64(32)) & _lanes_equal(back2, np.uint64(58))
        )
        opens += _lanes_set(brace)
        values += _lanes_set(brace & after_colon)
        high |= w
        i += 8
    rest = 0
    top = 0
    for j in range(min(n, 8)):  # the head without the value test, the tail with it, byte by byte
        rest += buf[j] == 123
        top |= buf[j]
    for j in range(max(i, 8), n):
        rest += buf[j] == 123 and not (buf[j - 1] == 58 or (buf[j - 1] == 32 and buf[j - 2] == 58))
        top |= buf[j]
    return np.int64(opens - values) + rest, (high & _HIGH) != 0 or top >= 0x80


@njit(cache=True, _nrt=False)
def fix_utf8(buf):
    """Replace each byte that is not part of valid UTF-8 by '?', in place.

    Returns (number of bytes replaced, offset of the first one or -1).
    """
    n = buf.size
    i = 0
    bad = 0
    first = -1
    while i < n:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            need = 1
        elif 0xE0 <= c <= 0xEF:
            need = 2
        elif 0xF0 <= c <= 0xF4:
            need = 3
        else:
            need = -1
        ok = need > 0 and i + need < n + 1
        if ok:
            for k in range(1, need + 1):
                if i + k >= n or (buf[i + k] & 0xC0) != 0x80:
                    ok = False
                    break
        if ok and need == 2:
            c1 = buf[i + 1]
            if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 >= 0xA0):
                ok = False
        if ok and need == 3:
            c1 = buf[i + 1]
            if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 >= 0x90):
                ok = False
        if ok:
            i += need + 1
        else:
            if first < 0:
                first = i
            buf[i] = 63
            bad += 1
            i += 1
    return bad, first
