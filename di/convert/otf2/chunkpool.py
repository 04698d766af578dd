"""The OTF2 writer's memory: each buffer holds at most :data:`CHUNKS` chunks, and reuses them after each flush.

Without memory callbacks the OTF2 library lets every buffer (each location's events, the global definitions) grow
to 128 MiB of freshly allocated chunks before it writes them, and frees them after: writing the 1.2 M-event
real-shaped trace (bench/realshape.py), whose global definitions hold 206 MB of strings, touched 240 MB of new
pages (0.15-0.45 s of system time on a VM whose host takes back freed memory) and held up to 128 MiB per location.
With these callbacks (``OTF2_Archive_SetMemoryCallbacks``, as Score-P registers its own), a buffer's
:data:`CHUNKS` chunks fill, the library flushes them to the file (the writer's pre-flush callback always says
flush), and the same chunks take the next records: a buffer's memory is touched once.

Each chunk is mapped on its own (``mmap``), whatever malloc's mmap threshold is: its pages cost nothing until
the library touches them. From malloc, where a program's threshold has risen (glibc raises it with every large
block freed, up to 32 MiB), chunks came from the heap: resident once touched, kept there after the archive
closed, and the heap's fragments added up (:func:`di.save` of a 512-rank job to OTF2 with 1 MiB chunks peaked
1,572 MB above its start).

When a buffer is deleted the library has written its end-of-chunk marker over the whole rest of each chunk, so
every page of it is resident: up to :data:`POOLED` such chunks are kept for the next buffers (the writer opens
the locations' buffers one after another), the others unmapped, and :func:`release` unmaps the kept ones once
the archive is closed. Unmapped instead, a 512-rank job's 3,072 buffers faulted in 3 GB of fresh pages: 0.8 M
page faults and 2.2-4.1 s of system time.

The callbacks are numba ``cfunc``s taking pointers as integers. ``userData`` is the address of a small int64 array
(:func:`callback_data`: the addresses of the C library's ``malloc``, ``free``, ``mmap`` and ``munmap``, the chunk
limit, a count of the chunks made and ``mmap``'s protection and flags) that the caller keeps alive until the
archive is closed; each buffer's ``perBufferData`` slot holds the address of its own state block (``malloc``-ed:
chunks in use, chunks made, their size, then the chunks' addresses).
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
from numba import cfunc, types

from di.convert.ccall import ccall_i64, load_at, store_at
from di.convert.otf2.clib import libc_addresses

CHUNKS = 2
"""Chunks a buffer may hold before the library must flush it (the writer's chunks are 1 MiB: 2 MiB a buffer)."""
POOLED = 4
"""Chunks of deleted buffers kept for the next ones."""
_MALLOC, _FREE, _LIMIT, _MADE, _MMAP, _MUNMAP, _PROT, _FLAGS, _POOL_SIZE, _POOLED, _POOL0 = (
    np.uint64(8 * k) for k in range(11)
)
"""Byte offsets of the fields of the callbacks' data (:func:`callback_data`); uint64 like the addresses they are
added to (an int64 beside a uint64 makes numba compute in float64)."""
_USED, _COUNT, _SIZE, _CHUNK0 = np.uint64(0), np.uint64(8), np.uint64(16), np.uint64(24)
"""Byte offsets in a buffer's state block: chunks in use, chunks made, their size, the first chunk's address."""
_WORD, _ONE, _NULL = np.uint64(8), np.uint64(1), np.uint64(0)
_POOL_CAP = np.uint64(POOLED)
_NO_FILE = np.uint64(2**64 - 1)
"""``mmap``'s file descriptor -1 (an anonymous mapping), and its MAP_FAILED."""


@cfunc(types.uint64(types.uint64, types.uint8, types.uint64, types.uint64, types.uint64), cache=True)
def allocate(data, file_type, location, per_buffer, chunk_size):
    """OTF2_MemoryAllocate: the buffer's next chunk (a free one of its own, else a newly mapped one while it holds
    fewer than the limit), or 0 (NULL), after which the library flushes the buffer, frees its chunks and asks again."""
    state = load_at(per_buffer)
    limit = load_at(data + _LIMIT)
    if state == _NULL:
        state = np.uint64(ccall_i64(load_at(data + _MALLOC), (_CHUNK0 + _WORD * limit,)))
        if state == _NULL:
            return _NULL
        store_at(state + _USED, _NULL)
        store_at(state + _COUNT, _NULL)
        store_at(state + _SIZE, chunk_size)
        store_at(per_buffer, state)
    used = load_at(state + _USED)
    if used >= limit:
        return _NULL
    count = load_at(state + _COUNT)
    pooled = load_at(data + _POOLED)
    if used < count:
        chunk = load_at(state + _CHUNK0 + _WORD * used)
    elif pooled > _NULL and load_at(data + _POOL_SIZE) == chunk_size:  # a deleted buffer's, resident
        chunk = load_at(data + _POOL0 + _WORD * (pooled - _ONE))
        store_at(data + _POOLED, pooled - _ONE)
        store_at(state + _CHUNK0 + _WORD * count, chunk)
        store_at(state + _COUNT, count + _ONE)
    else:
        chunk = np.uint64(
            ccall_i64(
                load_at(data + _MMAP),
                (_NULL, chunk_size, load_at(data + _PROT), load_at(data + _FLAGS), _NO_FILE, _NULL),
            )
        )
        if chunk == _NO_FILE:
            return _NULL
        store_at(state + _CHUNK0 + _WORD * count, chunk)
        store_at(state + _COUNT, count + _ONE)
        store_at(data + _MADE, load_at(data + _MADE) + _ONE)
    store_at(state + _USED, used + _ONE)
    return chunk


@cfunc(types.void(types.uint64, types.uint8, types.uint64, types.uint64, types.boolean), cache=True)
def free_all(data, file_type, location, per_buffer, final):
    """OTF2_MemoryFreeAll: after a flush every chunk of the buffer is free again (kept for its next records); when
    the buffer is deleted (``final``) its chunks are kept for the next buffers (up to :data:`POOLED` of one size)
    or unmapped, and its state freed."""
    state = load_at(per_buffer)
    if state == _NULL:
        return
    if not final:
        store_at(state + _USED, _NULL)
        return
    unmap, size = load_at(data + _MUNMAP), load_at(state + _SIZE)
    count = load_at(state + _COUNT)
    i = _NULL
    while i < count:
        chunk = load_at(state + _CHUNK0 + _WORD * i)
        pooled = load_at(data + _POOLED)
        if pooled == _NULL:
            store_at(data + _POOL_SIZE, size)
        if pooled < _POOL_CAP and load_at(data + _POOL_SIZE) == size:
            store_at(data + _POOL0 + _WORD * pooled, chunk)
            store_at(data + _POOLED, pooled + _ONE)
        else:
            ccall_i64(unmap, (chunk, size))
        i += _ONE
    ccall_i64(load_at(data + _FREE), (state,))
    store_at(per_buffer, _NULL)


CHUNKS_MADE, _KEPT_SIZE, _KEPT, _KEPT0 = (int(offset) // 8 for offset in (_MADE, _POOL_SIZE, _POOLED, _POOL0))
"""Indexes in :func:`callback_data` of the count of chunks the callbacks mapped (what a test reads), of the size
of the kept chunks, their count and the first one's address."""


def callback_data() -> np.ndarray:
    """The callbacks' data (keep it alive while the archive is open; its address is ``userData``): the addresses
    of ``malloc``, ``free``, :data:`CHUNKS`, the count of chunks made so far, the addresses of ``mmap`` and
    ``munmap``, the protection and flags of a chunk's private anonymous mapping (this system's values), then
    the size and count of the chunks kept and room for :data:`POOLED` addresses (:func:`release` unmaps them)."""
    malloc, free, map_, unmap = libc_addresses("malloc", "free", "mmap", "munmap")
    prot, flags = mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    return np.array([malloc, free, CHUNKS, 0, map_, unmap, prot, flags, 0, 0] + [0] * POOLED, dtype=np.int64)


def release(data: np.ndarray) -> None:
    """Unmap the chunks the callbacks kept (call once the archive is closed: no buffer uses them then)."""
    unmap = ctypes.CDLL(None).munmap
    unmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    for k in range(int(data[_KEPT])):
        unmap(int(data[_KEPT0 + k]), int(data[_KEPT_SIZE]))
    data[_KEPT] = 0


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
