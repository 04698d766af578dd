"""An archive's Region definitions read into one int64 table by a numba ``cfunc``.

A trace of many distinct event names (a Triton or CUTLASS kernel name per
shape) defines a region per name: hundreds of thousands. A ctypes callback per
Region definition cost about 2 us of Python and a tuple each; here the Region
callback is a numba ``cfunc`` that appends the fields di reads to a table.
Every global definition callback gets the same ``userData``, the
:class:`~di.convert.otf2.stringdefs.StringBuffer`; its ``OTHER`` header word
holds the address of this table.

Table layout (``int64`` words): ``[regions, room for regions]``, then ``room``
rows of :data:`FIELDS`. A definition past the room is counted, not stored
(:meth:`RegionBuffer.overflow`, and the definitions are read again with room
for all, as the strings are); the room is the archive's count of global
definitions, of which the regions are a part.
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc, types

from di.convert.ccall import load_at, store_at
from di.convert.otf2.stringdefs import HEADER, OTHER

FIELDS = ("ref", "name", "description", "role", "paradigm")
"""The words of a row: the region's ref, the string refs of its name and description, its OTF2_RegionRole and
OTF2_Paradigm."""
_WIDTH = np.int64(len(FIELDS))
_WORD = np.int64(8)
_TOP = np.int64(2)
"""Words before the first row."""

_u32, _u8 = types.uint32, types.uint8


@cfunc(types.int32(types.voidptr, _u32, _u32, _u32, _u32, _u8, _u8, _u32, _u32, _u32, _u32), cache=True)
def _region(user, ref, name, canonical, description, role, paradigm, flags, source, begin, end):
    """OTF2_GlobalDefReaderCallback_Region: append (ref, name, description, role, paradigm) to the table."""
    table = carray(user, (HEADER,), np.int64)[OTHER]
    n, room = np.int64(load_at(table)), np.int64(load_at(table + _WORD))
    if n < room:
        at = table + _WORD * (_TOP + _WIDTH * n)
        store_at(at, ref)
        store_at(at + _WORD, name)
        store_at(at + 2 * _WORD, description)
        store_at(at + 3 * _WORD, role)
        store_at(at + 4 * _WORD, paradigm)
    store_at(table, n + 1)
    return 0


def region_callback() -> int:
    """The address of the Region definition callback."""
    return _region.address


class RegionBuffer:
    """Room for ``regions`` Region definitions (the pages of rows not filled are never touched)."""

    def __init__(self, regions: int) -> None:
        self.array = np.empty(int(_TOP) + int(_WIDTH) * max(int(regions), 1), np.int64)
        self.array[0], self.array[1] = 0, max(int(regions), 1)

    @property
    def address(self) -> int:
        return int(self.array.ctypes.data)

    def overflow(self) -> int | None:
        """The room the definitions need when some did not fit, else None."""
        n, room = int(self.array[0]), int(self.array[1])
        return n if n > room else None

    def rows(self) -> np.ndarray:
        """The definitions stored, one row each (:data:`FIELDS`)."""
        n = min(int(self.array[0]), int(self.array[1]))
        return self.array[int(_TOP) : int(_TOP) + int(_WIDTH) * n].reshape(n, int(_WIDTH))
