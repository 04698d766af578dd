"""Bytes that are not UTF-8 in a Chrome JSON document, replaced in place.

Only a document whose kept texts (names, categories, args, top-level members) are
not UTF-8 is repaired: :func:`di.convert.chrome.decode.decode` checks those texts
after the scan, which is cheaper than a look at every byte before it, and scans
the repaired document again.
"""

from __future__ import annotations

from numba import njit


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
