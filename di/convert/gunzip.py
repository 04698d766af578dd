"""Inflating gzip input within a size limit: the first bytes (to sniff a format) or all of it.

Every reader that takes gzip input goes through here, so that none inflates
more than the input size limit (:mod:`di.inputsize`): a gzip bomb
stops with :class:`~di.errors.InputTooLargeError` after at most the limit
plus one piece (:data:`PIECE_BYTES`) was inflated. Sizes are in bytes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from di.inputsize import check_size, too_large

GZIP_MAGIC = b"\x1f\x8b"
HEAD_READ_BYTES = 4096
"""Compressed bytes read per step while inflating a file's head."""
HEAD_MAX_COMPRESSED_BYTES = 1 << 20
"""The most compressed bytes read to inflate a head (a stream that yields nothing from
this much input is not a trace worth sniffing)."""
PIECE_BYTES = 124 << 10
"""Bytes per decompressed piece: under glibc's initial 128 KiB mmap threshold, so
each piece reuses the heap memory of the one before instead of faulting in
fresh pages (halves the page faults of gunzipping a 15 MB trace)."""


def head(path: Path, nbytes: int = HEAD_READ_BYTES) -> bytes:
    """The first ``nbytes`` (or fewer) bytes of ``path``, inflated when it is gzip.

    Reads at most :data:`HEAD_MAX_COMPRESSED_BYTES` of the file and inflates at most
    ``nbytes``; a damaged stream gives what inflated before the damage (maybe nothing).
    """
    with open(path, "rb") as fh:
        first = fh.read(HEAD_READ_BYTES)
        if first[:2] != GZIP_MAGIC:
            return first[:nbytes] if len(first) >= nbytes else first + fh.read(nbytes - len(first))
        dec = zlib.decompressobj(31)
        out = bytearray()
        chunk, taken = first, len(first)
        try:
            while chunk and len(out) < nbytes:
                out += dec.decompress(chunk, nbytes - len(out))
                if dec.eof or taken >= HEAD_MAX_COMPRESSED_BYTES:
                    break
                if dec.unconsumed_tail:  # output full: the head is complete
                    break
                chunk = fh.read(HEAD_READ_BYTES)
                taken += len(chunk)
        except zlib.error:
            pass
        return bytes(out)


def gunzip(fh: Any, *, path: object = "<stream>", limit: int | None = None) -> tuple[np.ndarray, list[str]]:
    """Decompress a gzip file (members concatenated or not) into one uint8 numpy buffer.

    The buffer is sized from the last member's ISIZE trailer (the uncompressed
    size mod 2**32, capped at ``limit``) and grows when that is short; it is
    filled in pieces of :data:`PIECE_BYTES`, so no second full-size copy is made
    and its pages come from numpy's allocator (huge pages where the kernel gives
    them). ISA-L (about three times as fast as zlib) decompresses where
    installed. A truncated or corrupt stream yields what came before the
    damage and a warning that says where it stopped.

    Args:
        fh: the file, open for binary reading at its start.
        path: the file's name, for the error message.
        limit: the most decompressed bytes accepted; None: no limit.

    Raises:
        InputTooLargeError: the file (compressed or decompressed) is larger than ``limit``.
    """
    data = fh.read() if limit is None else fh.read(limit + 1)
    check_size(path, len(data), limit)
    hint = _size_hint(data)
    out = np.empty(hint if limit is None else min(hint, limit + 1), dtype=np.uint8)
    used = 0
    warnings: list[str] = []
    for piece in _pieces(data, warnings):
        if limit is not None and used + len(piece) > limit:
            raise too_large(path, "decompresses to", limit)
        if used + len(piece) > out.size:
            out = _grown(out, used, used + len(piece), None if limit is None else limit + 1)
        out[used : used + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
        used += len(piece)
    return out[:used], warnings


def _pieces(data: bytes, warnings: list[str]) -> Iterator[bytes]:
    """The decompressed bytes of the gzip members in ``data``, at most :data:`PIECE_BYTES`
    at a time; a damaged stream ends them, with a warning appended to ``warnings``."""
    try:
        from isal import igzip_lib
    except ImportError:
        yield from _zlib_pieces(data, warnings)
        return
    done = 0
    try:
        while data:
            dec = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)
            piece = dec.decompress(data, PIECE_BYTES)
            while True:
                done += len(piece)
                yield piece
                if dec.eof or (dec.needs_input and not piece):
                    break
                piece = dec.decompress(b"", PIECE_BYTES)
            if not dec.eof:
                warnings.append(
                    f"gzip stream truncated: file ends after {len(data)} compressed / {done} decompressed bytes"
                )
                return
            data = dec.unused_data  # the next gzip member
    except igzip_lib.error as exc:
        warnings.append(f"gzip data corrupt after {done} decompressed bytes ({exc}); loaded what came before")


def _zlib_pieces(data: bytes, warnings: list[str]) -> Iterator[bytes]:
    """:func:`_pieces` with the standard library's zlib."""
    done = 0
    dec = zlib.decompressobj(31)
    rest = data
    try:
        while True:
            piece = dec.decompress(rest, PIECE_BYTES)
            done += len(piece)
            yield piece
            if dec.eof:
                rest = dec.unused_data
                if not rest:
                    return
                dec = zlib.decompressobj(31)  # the next gzip member
                continue
            rest = dec.unconsumed_tail
            if not rest and not piece:
                warnings.append(
                    f"gzip stream truncated: file ends after {len(data)} compressed / {done} decompressed bytes"
                )
                return
    except zlib.error as exc:
        warnings.append(f"gzip data corrupt after {done} decompressed bytes ({exc}); loaded what came before")


def _size_hint(data: bytes) -> int:
    """Bytes to allocate for gunzipping ``data``: its ISIZE trailer, unless that is
    impossibly small (a wrapped size of a file over 4 GiB, or a damaged trailer)."""
    isize = int.from_bytes(data[-4:], "little") if len(data) >= 18 else 0
    return max(isize + 1, len(data) * 4 + PIECE_BYTES) if isize < len(data) else isize + 1


def _grown(out: np.ndarray, used: int, need: int, cap: int | None) -> np.ndarray:
    """A buffer of at least ``need`` bytes (half as big again as ``out``, at most ``cap``) holding ``out[:used]``."""
    size = max(need, out.size + out.size // 2)
    bigger = np.empty(size if cap is None else max(min(size, cap), need), dtype=np.uint8)
    bigger[:used] = out[:used]
    return bigger
