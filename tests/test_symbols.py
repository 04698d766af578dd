"""The byte-span symbol table: ids are stable, equal text gets one id, a full table says so."""

from __future__ import annotations

import numpy as np

from di.convert.symbols import FULL, decode_symbols, grown_capacity, intern, new_table


def _intern_all(words: list[bytes], capacity: int) -> tuple[list[int], list[str]]:
    buf = np.frombuffer(b"".join(words), dtype=np.uint8)
    bounds = np.cumsum([0] + [len(w) for w in words])
    slots, starts, ends, count = new_table(capacity)
    ids = [intern(buf, a, b, slots, starts, ends, count) for a, b in zip(bounds[:-1], bounds[1:])]
    return ids, decode_symbols(buf, starts, ends, int(count[0]))


def test_ids_are_dense_and_equal_text_shares_one() -> None:
    words = [f"w{i}".encode() for i in range(40)] + [b"w3", b"", b"w0"]
    ids, texts = _intern_all(words, 64)
    assert ids[:40] == list(range(40)) and ids[40:] == [3, 40, 0]
    assert texts == [w.decode() for w in words[:40]] + [""]


def test_a_full_table_says_full_and_the_grown_capacity_holds_all() -> None:
    words = [f"w{i}".encode() for i in range(40)]
    ids, _ = _intern_all(words, 8)
    assert ids[:8] == list(range(8)) and set(ids[8:]) == {FULL}
    ids, _ = _intern_all(words, grown_capacity(8))
    assert ids == list(range(40))
