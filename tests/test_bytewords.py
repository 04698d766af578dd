"""The unchecked byte-word intrinsics that numba scanners and writers share (di.convert.bytewords)."""

from __future__ import annotations

import numpy as np
from numba import njit

import pytest
from numba.core.errors import TypingError

from di.convert.bytewords import copy_bytes, load_u64, prefetch, shift_up, store_u64


@njit(_nrt=False)
def _copy(out, o, src, a, b):
    return copy_bytes(out, o, src, a, b)


@njit(_nrt=False)
def _word_round_trip(buf, i, out, o):
    store_u64(out, o, load_u64(buf, i))


@njit(_nrt=False)
def _shift_up(arr, a, b):
    shift_up(arr, a, b)


@njit(_nrt=False)
def _sum_with_prefetch(buf, ahead):
    total = 0
    for i in range(buf.size):
        prefetch(buf, i + ahead)
        total += buf[i]
    return total


def test_prefetch_is_a_hint_that_changes_nothing_and_never_faults() -> None:
    buf = np.arange(256, dtype=np.uint8)
    want = int(buf.sum(dtype=np.int64))
    # ahead of the data, far past the end of the buffer (unmapped memory) and behind its start
    for ahead in (0, 64, 1 << 40, -(1 << 40)):
        assert _sum_with_prefetch(buf, ahead) == want


def test_prefetch_takes_only_byte_buffers() -> None:
    with pytest.raises(TypingError):
        _sum_with_prefetch(np.arange(4, dtype=np.int64), 0)


def test_copy_bytes_copies_the_span_and_returns_the_end() -> None:
    src = np.frombuffer(b'{"name": "ncclKernel"}', dtype=np.uint8)
    out = np.full(40, 0xAA, dtype=np.uint8)
    end = _copy(out, 3, src, 9, 21)
    assert end == 15
    assert out[3:15].tobytes() == b'"ncclKernel"'
    assert (out[:3] == 0xAA).all() and (out[15:] == 0xAA).all()  # nothing outside the span is touched


def test_copy_bytes_of_an_empty_or_reversed_span_copies_nothing() -> None:
    src = np.arange(10, dtype=np.uint8)
    out = np.zeros(10, dtype=np.uint8)
    assert _copy(out, 4, src, 6, 6) == 4
    assert _copy(out, 4, src, 7, 2) == 4
    assert not out.any()


def test_copy_bytes_across_lengths_and_offsets_equals_slicing() -> None:
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, 300, dtype=np.uint8)
    for a, b, o in rng.integers(0, 150, (200, 3)):
        a, b = min(a, b), max(a, b) + int(o) % 40
        out = np.zeros(400, dtype=np.uint8)
        assert _copy(out, o, src, a, b) == o + (b - a)
        assert out[o : o + b - a].tobytes() == src[a:b].tobytes()


def test_words_load_and_store_little_endian_at_any_offset() -> None:
    buf = np.frombuffer(b"xxabcdefghyy", dtype=np.uint8)
    out = np.zeros(11, dtype=np.uint8)
    _word_round_trip(buf, 2, out, 3)
    assert out.tobytes() == b"\0\0\0abcdefgh"


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.int32])
@pytest.mark.parametrize(("a", "b"), [(0, 5), (2, 5), (4, 5), (5, 5), (6, 5), (0, 0), (0, 9)])
def test_shift_up_moves_a_span_one_place_up(dtype: type, a: int, b: int) -> None:
    """arr[a:b] moves to arr[a + 1 : b + 1] (overlapping, as an insertion needs), items of any width; an empty or
    reversed span moves nothing."""
    arr = np.arange(10, dtype=dtype)
    want = arr.copy()
    if b > a:
        want[a + 1 : b + 1] = arr[a:b].copy()
    _shift_up(arr, a, b)
    assert arr.tolist() == want.tolist()
