"""The array hash table of numba kernels (di.convert.inttable) against a Python dict."""

from __future__ import annotations

import numpy as np

from di.convert.inttable import NO_KEY, claim, find, new_table


def test_claim_and_find_agree_with_a_dict() -> None:
    rng = np.random.default_rng(3)
    keys, count, values = new_table(np.int64(64), np.int64(1))
    reference: dict[tuple[int, int, int], int] = {}
    for step in range(200):
        a, b = (int(x) for x in rng.integers(-3, 3, size=2))
        key = (a, b, int(NO_KEY))
        h = claim(keys, count, np.int64(a), np.int64(b), NO_KEY)
        if key not in reference and len(reference) == 32:
            assert h == -1  # half full: a new key is refused, the caller retries with a bigger table
            continue
        assert h >= 0
        values[h, 0] = step
        reference[key] = step
    assert count[0] == len(reference)
    for a in range(-4, 4):
        for b in range(-4, 4):
            h = find(keys, np.int64(a), np.int64(b), NO_KEY)
            if (a, b, 0) in reference:
                assert values[h, 0] == reference[(a, b, 0)]
            else:
                assert h == -1


def test_a_full_table_refuses_new_keys_only() -> None:
    keys, count, _ = new_table(np.int64(16), np.int64(1))
    slots = [claim(keys, count, np.int64(k), NO_KEY, NO_KEY) for k in range(8)]
    assert min(slots) >= 0 and len(set(slots)) == 8
    assert claim(keys, count, np.int64(99), NO_KEY, NO_KEY) == -1
    assert claim(keys, count, np.int64(3), NO_KEY, NO_KEY) == slots[3]
