"""An archive's String definitions read into one byte buffer, and looked up by ref column by column.

A real-shaped trace defines a string per distinct args text: a million and
more. A Python callback per String definition (and a ``dict[int, str]`` of
them, then ``replace_strict`` with it) cost seconds and gigabytes. Here the
String callback is a numba ``cfunc`` that appends the text's bytes to a
buffer (``strlen`` and ``memcpy`` of the C library) and its ref and end
offset to two arrays; the texts become one polars String column viewing that
buffer, and :meth:`StringDefs.gather` resolves a column of refs at once.

Buffer layout (``int64`` words, then bytes): ``HEADER`` words
``[strings, room for strings, text bytes, room for bytes, strings that did
not fit, their bytes, buffer address, strlen's address, memcpy's address, other]``
(addresses live in the buffer, not in the compiled code, so the cached cfunc
is valid in every process; ``other``: the address of the table the Region
callback fills, :mod:`~di.convert.otf2.regiondefs`, as every definition callback
gets this buffer), then ``room for strings`` refs,
as many end offsets, then the text bytes. A definition that does not fit is
counted, not stored, and :func:`di.convert.otf2.globaldefs.read_global_definitions`
reads the definitions again with room for all.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import carray, cfunc, types

from di.convert.otf2 import clib
from di.convert.stringviews import texts_at_offsets
from di.convert.symbols import decoded_texts, valid_utf8

HEADER = 10
N, ROOM_N, BYTES, ROOM_BYTES, OVER_N, OVER_BYTES, ADDRESS, STRLEN, MEMCPY, OTHER = range(HEADER)
NULL_REF = np.int64(1) << np.int64(40)
"""Added to the ref of a definition whose text pointer is NULL (stored as an empty, null text)."""


@cfunc(types.int32(types.voidptr, types.uint32, types.uint64), cache=True)
def _string(user, ref, text):
    """OTF2_GlobalDefReaderCallback_String: append ``text`` (a C string's address) under ``ref``."""
    hdr = carray(user, (HEADER,), np.int64)
    n, room_n = hdr[N], hdr[ROOM_N]
    words = carray(user, (HEADER + 2 * room_n,), np.int64)
    length = clib.ccall_i64(hdr[STRLEN], (text,)) if text != 0 else np.int64(0)
    if n >= room_n or hdr[BYTES] + length > hdr[ROOM_BYTES]:
        hdr[OVER_N] += 1
        hdr[OVER_BYTES] += length
        return 0
    if length:
        at = hdr[ADDRESS] + 8 * (HEADER + 2 * room_n) + hdr[BYTES]
        clib.ccall_i64(hdr[MEMCPY], (at, text, length))
    hdr[BYTES] += length
    words[HEADER + n] = np.int64(ref) + (NULL_REF if text == 0 else np.int64(0))
    words[HEADER + room_n + n] = hdr[BYTES]
    hdr[N] = n + 1
    return 0


def string_callback() -> int:
    """The address of the String definition callback (its ``userData``: a :class:`StringBuffer`'s ``address``)."""
    return _string.address


class StringBuffer:
    """Room for ``strings`` String definitions of ``text_bytes`` bytes in all (see the module docstring)."""

    def __init__(self, strings: int, text_bytes: int) -> None:
        strings, text_bytes = max(int(strings), 1), max(int(text_bytes), 8)
        self.words = HEADER + 2 * strings
        self.array = np.empty(self.words + (text_bytes + 7) // 8, np.int64)  # the text bytes are touched as written
        self.array[:HEADER] = 0
        self.array[ROOM_N], self.array[ROOM_BYTES], self.array[ADDRESS] = strings, text_bytes, self.array.ctypes.data
        self.array[STRLEN], self.array[MEMCPY] = clib.libc_addresses("strlen", "memcpy")

    @property
    def address(self) -> int:
        return int(self.array.ctypes.data)

    def overflow(self) -> tuple[int, int] | None:
        """(strings, bytes) the definitions need in all when some did not fit, else None."""
        h = self.array
        return (int(h[N] + h[OVER_N]), int(h[BYTES] + h[OVER_BYTES])) if h[OVER_N] else None

    def table(self) -> StringDefs:
        """The definitions stored."""
        h, n = self.array, int(self.array[N])
        refs = h[HEADER : HEADER + n].copy()
        ends = h[HEADER + int(h[ROOM_N]) : HEADER + int(h[ROOM_N]) + n]
        offsets = np.zeros(n + 1, np.int64)
        offsets[1:] = ends
        data = h[self.words :].view(np.uint8)[: int(h[BYTES])]
        valid = refs < NULL_REF
        refs[~valid] -= NULL_REF
        if valid_utf8(data, offsets):
            texts = texts_at_offsets(data, offsets, valid, "text")
        else:  # bytes that are not UTF-8: U+FFFD, as Python's "replace"
            texts = decoded_texts(data, offsets).set(pl.Series(~valid), None)
        return StringDefs(refs, texts)


class StringDefs:
    """String definitions: ``texts[i]`` is the text of ``refs[i]`` (null for a NULL text); a ref defined
    twice has its last text."""

    def __init__(self, refs: np.ndarray, texts: pl.Series) -> None:
        self.texts = texts
        last = refs.size - 1 - np.unique(refs[::-1], return_index=True)[1]  # each ref's last definition
        self._refs = refs[last]  # sorted, distinct
        self._at = last

    def __len__(self) -> int:
        return int(self._refs.size)

    def positions(self, refs: np.ndarray) -> np.ndarray:
        """Row in :attr:`texts` of each ref (int64), -1 where undefined."""
        refs = np.asarray(refs, np.int64)
        n = self._refs.size
        if n and self._refs[0] == 0 and self._refs[-1] == n - 1:  # refs 0..n-1, as writers number them: a lookup
            ok = (refs >= 0) & (refs < n)
            return np.where(ok, self._at[np.where(ok, refs, 0)], -1)
        i = np.searchsorted(self._refs, refs)
        i = np.minimum(i, max(self._refs.size - 1, 0))
        found = (self._refs[i] == refs) if self._refs.size else np.zeros(refs.size, bool)
        return np.where(found, self._at[i] if self._refs.size else 0, -1)

    def gather(self, refs: np.ndarray) -> pl.Series:
        """The text of each ref (a String Series, null where undefined)."""
        return self.texts.gather(pl.Series(self.positions(refs)).replace(-1, None)).alias("text")

    @classmethod
    def of(cls, strings: dict[int, str | None]) -> StringDefs:
        """A table of a few strings given in Python (tests, archives built in memory)."""
        return cls(np.array(list(strings), np.int64), pl.Series("text", list(strings.values()), dtype=pl.String))
