"""A hash table of integer keys for numba kernels: plain arrays, not a typed Dict.

numba's typed ``Dict`` compiles dozens of functions per key/value type on
first use (~55 compiles, ~7 s for the Perfetto decoder alone) and costs more
per lookup than an array probe. This table is three arrays: ``keys``
(slots x 4 int64: an occupied flag, then the key's three int64 parts; a
shorter key pads with :data:`NO_KEY`), ``count`` and ``values`` (one row of
int64 per slot). Slots are a power of two, probed
linearly; the table holds at most half its slots, so a probe always ends.

Like the symbol table (:mod:`di.convert.symbols`), a full table does not
grow: :func:`claim` returns -1, the kernel reports it and its caller runs it
again with a bigger table, or, stopped before it fills, goes on with a bigger
one holding the same entries (:func:`grown`); kernels that return no new arrays
compile faster. Every key part is an int64 (pass :data:`NO_KEY`, not a
literal ``0``), so each function compiles once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

NO_KEY = np.int64(0)
"""The padding of unused key parts (typed, see the module docstring)."""


def new_table(slots: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, count, values) of an empty table with room for ``slots // 2`` keys and ``width`` int64
    values per key (zero until set); ``slots`` must be a power of two. Plain numpy: a kernel that
    allocates compiles numba's ``np.zeros`` overloads into every cold start."""
    return np.zeros((slots, 4), np.int64), np.zeros(1, np.int64), np.zeros((slots, width), np.int64)


@njit(cache=True, _nrt=False, inline="always")
def _start(keys, a, b, c):
    """First slot to probe for key (a, b, c): a multiplicative mix of the three parts."""
    h = (
        np.uint64(a) * np.uint64(0x9E3779B97F4A7C15)
        ^ np.uint64(b) * np.uint64(0xC2B2AE3D27D4EB4F)
        ^ np.uint64(c) * np.uint64(0x165667B19E3779F9)
    )
    return np.int64((h ^ (h >> np.uint64(29))) & np.uint64(keys.shape[0] - 1))


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def find(keys, a, b, c):
    """Slot of key (a, b, c), or -1 when it is not in the table."""
    mask = keys.shape[0] - 1
    h = _start(keys, a, b, c)
    while keys[h, 0]:
        if keys[h, 1] == a and keys[h, 2] == b and keys[h, 3] == c:
            return h
        h = (h + 1) & mask
    return -1


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def claim(keys, count, a, b, c):
    """Slot of key (a, b, c), taken for it when new (its value row is then as the caller allocated it);
    -1 when the key is new and the table is half full (see the module docstring)."""
    mask = keys.shape[0] - 1
    h = _start(keys, a, b, c)
    while keys[h, 0]:
        if keys[h, 1] == a and keys[h, 2] == b and keys[h, 3] == c:
            return h
        h = (h + 1) & mask
    if 2 * (count[0] + 1) > keys.shape[0]:
        return -1
    keys[h, 0], keys[h, 1], keys[h, 2], keys[h, 3] = 1, a, b, c
    count[0] += 1
    return h


@njit(cache=True, _nrt=False)  # numba's own pipeline: reached only when a table fills (tests/test_jitpipeline.py)
def _moved(keys, values, new_keys, new_count, new_values):
    """Claim every key of (keys, values) in the empty table (new_keys, new_count, new_values), with its values."""
    for h in range(keys.shape[0]):
        if keys[h, 0]:
            g = claim(new_keys, new_count, keys[h, 1], keys[h, 2], keys[h, 3])
            for k in range(values.shape[1]):
                new_values[g, k] = values[h, k]


def grown(
    table: tuple[np.ndarray, np.ndarray, np.ndarray], factor: int = 16
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A table of ``factor`` times the slots holding the keys and values of ``table`` (their slots differ: the
    caller looks them up again)."""
    keys, _, values = table
    bigger = new_table(keys.shape[0] * factor, values.shape[1])
    _moved(keys, values, *bigger)
    return bigger
