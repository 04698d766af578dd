"""The OTF2 writer's memory: each buffer holds at most :data:`CHUNKS` chunks, and reuses them after each flush.

Without memory callbacks the OTF2 library lets every buffer (each location's events, the global definitions) grow
to 128 MiB of freshly allocated chunks before it writes them, and frees them after: writing the 1.2 M-event
real-shaped trace (bench/realshape.py), whose global definitions hold 206 MB of strings, touched 240 MB of new
pages (0.15-0.45 s of system time on a VM whose host takes back freed memory) and held up to 128 MiB per location.
With these callbacks (``OTF2_Archive_SetMemoryCallbacks``, as Score-P registers its own), a buffer's
:data:`CHUNKS` chunks fill, the library flushes them to the file (the writer's pre-flush callback always says
flush), and the same chunks take the next records: a buffer's memory is touched once.

The callbacks are numba ``cfunc``s taking pointers as integers. ``userData`` is the address of a small int64 array
(:func:`callback_data`: the addresses of the C library's ``malloc`` and ``free``, the chunk limit and a count of
the chunks allocated) that the
caller keeps alive until the archive is closed; each buffer's ``perBufferData`` slot holds the address of its own
state block (``malloc``-ed: chunks in use, chunks allocated, then the chunks' addresses).
"""

from __future__ import annotations

import ctypes

import numpy as np
from numba import cfunc, types

from di.convert.ccall import ccall_i64, load_at, store_at
from di.convert.otf2.clib import libc_addresses

CHUNKS = 2
"""Chunks a buffer may hold before the library must flush it (the writer's chunks are 4 MiB, or 1 MiB: 8 or 2 MiB a buffer)."""
_MALLOC, _FREE, _LIMIT, _MADE = np.uint64(0), np.uint64(8), np.uint64(16), np.uint64(24)
"""Byte offsets of the fields of the callbacks' data (:func:`callback_data`); uint64 like the addresses they are
added to (an int64 beside a uint64 makes numba compute in float64)."""
_USED, _COUNT, _CHUNK0 = np.uint64(0), np.uint64(8), np.uint64(16)
"""Byte offsets in a buffer's state block: chunks in use, chunks allocated, the first chunk's address."""
_WORD, _ONE, _NULL = np.uint64(8), np.uint64(1), np.uint64(0)


@cfunc(types.uint64(types.uint64, types.uint8, types.uint64, types.uint64, types.uint64), cache=True)
def allocate(data, file_type, location, per_buffer, chunk_size):
    """OTF2_MemoryAllocate: the buffer's next chunk (a free one of its own, else a new one while it holds fewer than
    the limit), or 0 (NULL), after which the library flushes the buffer, frees its chunks and asks again."""
    state = load_at(per_buffer)
    limit = load_at(data + _LIMIT)
    if state == _NULL:
        state = np.uint64(ccall_i64(load_at(data + _MALLOC), (_CHUNK0 + _WORD * limit,)))
        if state == _NULL:
            return _NULL
        store_at(state + _USED, _NULL)
        store_at(state + _COUNT, _NULL)
        store_at(per_buffer, state)
    used = load_at(state + _USED)
    if used >= limit:
        return _NULL
    count = load_at(state + _COUNT)
    if used < count:
        chunk = load_at(state + _CHUNK0 + _WORD * used)
    else:
        chunk = np.uint64(ccall_i64(load_at(data + _MALLOC), (chunk_size,)))
        if chunk == _NULL:
            return _NULL
        store_at(state + _CHUNK0 + _WORD * count, chunk)
        store_at(state + _COUNT, count + _ONE)
        store_at(data + _MADE, load_at(data + _MADE) + _ONE)
    store_at(state + _USED, used + _ONE)
    return chunk


@cfunc(types.void(types.uint64, types.uint8, types.uint64, types.uint64, types.boolean), cache=True)
def free_all(data, file_type, location, per_buffer, final):
    """OTF2_MemoryFreeAll: after a flush every chunk of the buffer is free again (kept for its next records); when
    the buffer is deleted (``final``) its chunks and state go back to the C library."""
    state = load_at(per_buffer)
    if state == _NULL:
        return
    if not final:
        store_at(state + _USED, _NULL)
        return
    free = load_at(data + _FREE)
    count = load_at(state + _COUNT)
    i = _NULL
    while i < count:
        ccall_i64(free, (load_at(state + _CHUNK0 + _WORD * i),))
        i += _ONE
    ccall_i64(free, (state,))
    store_at(per_buffer, _NULL)


CHUNKS_MADE = 3
"""Index in :func:`callback_data` of the count of chunks the callbacks allocated (what a test reads)."""


def callback_data() -> np.ndarray:
    """The callbacks' data (keep it alive while the archive is open; its address is ``userData``): the addresses
    of ``malloc`` and ``free``, :data:`CHUNKS`, and the count of chunks allocated so far."""
    malloc, free = libc_addresses("malloc", "free")
    return np.array([malloc, free, CHUNKS, 0], dtype=np.int64)


_CALLBACKS: list[ctypes.Array] = []
"""The OTF2_MemoryCallbacks struct, made once: the library keeps its address, so it outlives every archive."""


def set_callbacks(lib: ctypes.CDLL, archive: int, data: np.ndarray) -> int:
    """Register :func:`allocate` and :func:`free_all` on the OTF2 archive at address ``archive`` (before any writer
    is asked for), ``data`` (:func:`callback_data`, alive until the archive is closed) their ``userData``; returns
    the OTF2 error code."""
    if not _CALLBACKS:
        _CALLBACKS.append((ctypes.c_void_p * 2)(allocate.address, free_all.address))
    lib.OTF2_Archive_SetMemoryCallbacks.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.OTF2_Archive_SetMemoryCallbacks.restype = ctypes.c_int
    return lib.OTF2_Archive_SetMemoryCallbacks(archive, ctypes.addressof(_CALLBACKS[0]), data.ctypes.data)
