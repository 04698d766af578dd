"""The byte-span symbol table: ids are stable, a full table says so, grow keeps every symbol."""

from __future__ import annotations

import numpy as np

from di.convert.symbols import FULL, decode_symbols, grow, intern, new_table


def test_full_then_grow_keeps_ids() -> None:
    words = [f"w{i}".encode() for i in range(40)] + [b"w3", b"", b"w0"]
    buf = np.frombuffer(b"".join(words), dtype=np.uint8)
    bounds = np.cumsum([0] + [len(w) for w in words])
    slots, starts, ends, count = new_table(8)
    ids = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        sid = intern(buf, a, b, slots, starts, ends, count)
        while sid == FULL:
            slots, starts, ends = grow(buf, slots, starts, ends, count)
            sid = intern(buf, a, b, slots, starts, ends, count)
        ids.append(sid)
    assert ids[:40] == list(range(40)) and ids[40:] == [3, 40, 0]
    assert decode_symbols(buf, starts, ends, int(count[0])) == [w.decode() for w in words[:40]] + [""]
