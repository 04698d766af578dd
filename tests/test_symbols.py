"""The byte-span symbol table: ids are stable, equal text gets one id, a full table says so."""

from __future__ import annotations

import numpy as np
import pytest

from di.convert.symbols import FULL, decode_symbols, grown_capacity, intern, new_table


def _intern_all(words: list[bytes], capacity: int) -> tuple[list[int], list[str]]:
    buf = np.frombuffer(b"".join(words), dtype=np.uint8)
    bounds = np.cumsum([0] + [len(w) for w in words])
    slots, starts, ends, count = new_table(capacity)
    ids = [intern(buf, a, b, slots, starts, ends, count) for a, b in zip(bounds[:-1], bounds[1:])]
    return ids, decode_symbols(buf, starts, ends, int(count[0])).to_list()


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


def _reference(b: bytes) -> str:
    """The texts as decode_symbols decoded them one by one before it worked on columns."""
    import orjson

    from di.convert.symbols import _unescape_leniently

    if b"\\" not in b:
        return b.decode("utf-8", "replace")
    try:
        return orjson.loads(b'"' + b + b'"')
    except orjson.JSONDecodeError:
        return _unescape_leniently(b)


ESCAPED = [
    b"plain",
    b"",
    b"caf\xc3\xa9",
    b"a\\u00e9b",
    b'quote \\" and \\\\ backslash',
    b"tab\\tnew\\nline\\/slash",
    b"emoji \\ud83d\\ude00 pair",
    b"upper \\uD83D\\uDE00 pair",
    b"\\\\ud800 not an escape",
]


@pytest.mark.parametrize(
    "damaged",
    [[], [b"lone \\ud800 surrogate"], [b"bad \\x41 escape"], [b"cut \\u00"], [b"raw \t tab \\n"]],
)
def test_decoded_symbols_equal_json_strings_decoded_one_by_one(damaged: list[bytes]) -> None:
    words = ESCAPED + damaged
    _, texts = _intern_all(words, 64)
    assert texts == [_reference(w) for w in words]


def test_bytes_that_are_not_utf8_become_replacement_characters() -> None:
    words = [b"ok", b"bad \xff byte", b"\xa9 starts inside", b"caf\xc3\xa9", b"cut \xc3"]
    _, texts = _intern_all(words, 64)
    assert texts == [w.decode("utf-8", "replace") for w in words]
