"""The Chrome scanner's intrinsics (``di.convert.chrome.jsontext``): ``skip_ws`` and ``head_word``
against plain Python on every position of small buffers, their ends and buffers shorter than a word."""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.chrome.jsontext import head_word, skip_ws


@njit(cache=False)
def _skip_ws(buf, i, n):
    return skip_ws(buf, i, n)


@njit(cache=False)
def _head_word(buf, s, e, n):
    return head_word(buf, s, e, n)


def _readonly(text: bytes) -> np.ndarray:
    return np.frombuffer(text, dtype=np.uint8)


def test_skip_ws_stops_at_the_first_byte_that_is_not_json_whitespace() -> None:
    for text in (b"", b" ", b" \t\r\n x", b"a", b"  \x0b\x0c y  ", b"\n" * 20 + b"}"):
        buf = _readonly(text)
        for i in range(len(text) + 2):
            want = i
            while want < len(text) and text[want] in b" \t\r\n":
                want += 1
            assert _skip_ws(buf, i, len(text)) == max(want, i), (text, i)
        assert _skip_ws(buf, -3, len(text)) == -3  # a negative position is returned as it is


def test_head_word_is_the_first_eight_bytes_or_fewer_as_a_little_endian_word() -> None:
    for text in (b'{"name":"x","ph":"X"}', b'[{"ts":1', b"abcdefgh", b"abcdefghi", b"abc"):
        buf = _readonly(text)
        n = len(text)
        for s in range(n + 1):
            for e in range(s, n + 1):
                got = int(_head_word(buf, s, e, n))
                want = int.from_bytes(text[s : s + min(e - s, 8)], "little") if n >= 8 else 0
                assert got == want, (text, s, e)
