"""Columns as the numba kernels of the writers take them: UTF-8 buffers and dense codes."""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

INLINE_TEXT_BYTES = np.int64(12)
"""The longest text an Arrow string view holds itself (:mod:`di.convert.stringviews`)."""


def utf8_buffers(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes and int64 offsets (len + 1) of a String Series; null = empty."""
    import pyarrow as pa

    arr = s.cast(pl.String).fill_null("").to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    _, offsets, data = arr.buffers()
    off = np.frombuffer(offsets, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    return (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)), off


def text_spans(values: pl.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(UTF-8 bytes, start and end of each row's text there) of a String column, empty for a null, read in place.

    polars holds a String column as Arrow string views (:mod:`di.convert.stringviews`): a text of at most 12 bytes
    sits in its 16-byte view, a longer one in one of the chunk's data buffers. Each row's text is at a byte address
    in memory the column holds, so the bytes returned are one read-only span of the address space from the lowest
    address of the column's buffers to the highest end of one, and each row's start is its address minus the
    span's first: no text is copied (a column of 177 MB of args texts, loaded from a store in row-group chunks,
    would otherwise be copied into one buffer first), and besides the starts only the ends are made. The span may
    cover memory that is not the column's between its buffers: only ``bytes[start:end]`` of a row may be read. The
    span keeps the column's buffers alive. A column that is not held as views (an older polars) is copied into one
    buffer (:func:`utf8_buffers`)."""
    import pyarrow as pa

    chunks = [part.to_arrow(compat_level=pl.CompatLevel.newest()) for part in values.get_chunks()]  # no rechunk
    if values.dtype != pl.String or any(not isinstance(c, pa.Array) or c.type != pa.string_view() for c in chunks):
        data, offsets = utf8_buffers(values)
        return data, offsets[:-1], offsets[1:]
    address = np.empty(len(values), np.uint64)
    length = np.empty(len(values), np.int64)
    row = 0
    for chunk in chunks:
        n = len(chunk)
        buffers = chunk.buffers()  # validity, views, then the data buffers
        views = np.frombuffer(buffers[1], np.uint32).reshape(-1, 4)[chunk.offset : chunk.offset + n]
        at, size = address[row : row + n], length[row : row + n]
        size[:] = views[:, 0]
        held = size <= INLINE_TEXT_BYTES
        if len(buffers) == 3:  # one data buffer, as a loaded Kineto trace's args
            np.add(views[:, 3], np.uint64(buffers[2].address), out=at, casting="unsafe")
        elif len(buffers) > 3:  # a held text's view has no buffer number
            far = np.flatnonzero(~held)
            at[far] = np.array([b.address for b in buffers[2:]], np.uint64)[views[far, 2]] + views[far, 3]
        in_view = np.flatnonzero(held)
        at[in_view] = buffers[1].address + 16 * (chunk.offset + in_view).astype(np.uint64) + 4
        row += n
    if values.has_nulls():
        length[values.is_null().to_numpy()] = 0
    used = length > 0
    if not used.any():  # no text (or no row)
        return np.zeros(0, np.uint8), np.zeros(len(values), np.int64), np.zeros(len(values), np.int64)
    held_buffers = [b for chunk in chunks for b in chunk.buffers()[1:] if b is not None]  # views, then data
    first = min(b.address for b in held_buffers)
    span = np.asarray(HeldMemory(first, max(b.address + b.size for b in held_buffers) - first, "|u1", chunks))
    starts = np.subtract(address, np.uint64(first), out=address).view(np.int64)
    if not used.all():
        starts[~used] = 0
    return span, starts, np.add(starts, length, out=length)


class HeldMemory:
    """``size`` read-only items of numpy type ``typestr`` at address ``at`` as numpy takes them, keeping ``owner``
    (what holds them) alive."""

    def __init__(self, at: int, size: int, typestr: str, owner: object) -> None:
        self.owner = owner
        self.__array_interface__ = {"shape": (size,), "typestr": typestr, "data": (at, True), "version": 3}


def code_index(s: pl.Series) -> tuple[np.ndarray, np.ndarray, pl.Series]:
    """The distinct non-null values of ``s`` in order of first appearance (String), the uint32 code of each row
    (read-only, where polars holds them when ``s`` has no null; a null's code is the largest), and ``index``: the
    position of each code's value among those values (int64; -1: the null code, or a code no row has).

    A Categorical or Enum column is numbered on its physical codes (no text hashed); another is made a Categorical
    first (polars hashes each text once). A row's position among the distinct values is ``index[code]``."""
    if not (s.dtype == pl.Categorical or isinstance(s.dtype, pl.Enum)):
        s = s.cast(pl.String).cast(pl.Categorical)
    phys = s.to_physical()
    nulls = phys.null_count()
    if nulls == len(phys):
        return readonly(np.zeros(len(phys), np.uint32)), np.full(1, -1, np.int64), pl.Series([], dtype=pl.String)
    top = int(phys.max()) + 1  # type: ignore[arg-type]
    values = (s.drop_nulls() if nulls else s).unique(maintain_order=True)
    index = np.full(top + 1, -1, dtype=np.int64)  # code top: null
    index[values.to_physical().to_numpy()] = np.arange(len(values))
    code = np.ascontiguousarray((phys.fill_null(top) if nulls else phys).to_numpy(), dtype=np.uint32)
    return readonly(code), index, values.cast(pl.String)


def dense_codes(s: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """Row -> int32 index into the distinct non-null values of ``s`` in order of first appearance (-1: null), and
    those values (String): :func:`code_index` per row."""
    code, index, values = code_index(s)
    return index.astype(np.int32)[code], values


def with_values(df: pl.DataFrame, columns: list[str] | tuple[str, ...]) -> list[str]:
    """Those of ``columns`` that ``df`` has with a value on some row, in that order (the optional columns a trace
    has: a writer writes no attribute or annotation for the others)."""
    return [c for c in columns if c in df.columns and df.get_column(c).null_count() < df.height]


def filled_rows(df: pl.DataFrame, columns: list[str], fill: int) -> tuple[np.ndarray, list[str]]:
    """The integer ``columns`` of ``df`` that it has with some value, as the rows of one int64 (k, n) array with
    ``fill`` for null (the writers' kernels take the lifted args members, :func:`di.schema.args_keys`, so: one
    signature whichever a trace has), and those k columns' names."""
    present = with_values(df, columns)
    out = np.empty((len(present), df.height), dtype=np.int64)
    for r, c in enumerate(present):
        out[r] = df.get_column(c).cast(pl.Int64).fill_null(fill).to_numpy()
    return out, present


def filled_or_empty(col: pl.Series, fill: int) -> np.ndarray:
    """An integer column as int64 with ``fill`` for null, or an empty array when every value is null (as ``bytes`` is
    in most traces: the writers' kernels read an empty column as absent, and no column of n is made to say so)."""
    if col.null_count() == col.len():
        return np.zeros(0, np.int64)
    return col.cast(pl.Int64).fill_null(fill).to_numpy()


def run_starts(key: np.ndarray) -> np.ndarray:
    """First row of each run of equal adjacent values of ``key`` (int64)."""
    if not key.size:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.r_[True, key[1:] != key[:-1]])


def readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``. Byte buffers from polars and from ``bytes`` are read-only and
    numba compiles a kernel once more for a writable one: kernels take read-only buffers."""
    view = a.view()
    view.flags.writeable = False
    return view


_MIX = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _dense_ids(rows, slots, ids, first, m, start, lo, direct):
    """Equal columns of the (k, n) int64 array get equal ids (into ``ids``), numbered in order of
    first appearance; ``first[id]``: the first column of each id. ``slots``: the hash table, a power
    of two, all -1 (allocated by the caller: numba's ``np.full`` and ``np.empty`` compile once per
    signature and process, part of every cold start). Resumes at column ``start`` with ``m`` ids
    known, which go into ``slots`` first. Returns (ids, the column where it stopped): it stops when
    the table is half full, for the caller to go on with a bigger one.

    A column equal to the one before it takes that one's id without hashing (runs of equal keys, as of the
    timelines of a trace's records in file order, cost a compare).

    ``direct`` (one row, ``m`` and ``start`` 0): ``slots`` has a slot per value from ``lo`` up, each key's own,
    so a key is found without hashing, probing or comparing, and keys that rise (ids, correlations) read the
    table in order."""
    k, n = rows.shape
    if direct:
        for r in range(n):
            j = rows[0, r] - lo
            s = slots[j]
            if s < 0:
                slots[j] = m
                first[m] = r
                ids[r] = m
                m += 1
            else:
                ids[r] = s
        return m, n
    mask = np.uint64(slots.size - 1)
    room = slots.size // 2
    r = -m  # first the ids known: -m..-1 stand for columns first[0..m-1]
    while r < n:
        if r == 0:
            r = start  # the columns before it have their ids
            if r >= n:
                break
        c0 = first[r + m] if r < 0 else r
        if r > 0:
            same = True
            for c in range(k):
                if rows[c, r] != rows[c, r - 1]:
                    same = False
                    break
            if same:
                ids[r] = ids[r - 1]
                r += 1
                continue
        if r >= 0 and m >= room:
            return m, r
        h = np.uint64(0)
        for c in range(k):
            h = (h ^ np.uint64(rows[c, c0])) * _MIX
            h ^= h >> np.uint64(31)
        j = h & mask
        while True:
            s = slots[j]
            if s < 0:
                if r < 0:
                    slots[j] = r + m
                else:
                    slots[j] = m
                    first[m] = r
                    ids[r] = m
                    m += 1
                break
            f = first[s]
            same = True
            for c in range(k):
                if rows[c, f] != rows[c, c0]:
                    same = False
                    break
            if same:
                ids[r] = s
                break
            j = (j + np.uint64(1)) & mask
        r += 1
    return m, n


DIRECT_SPAN = 1
"""The widest range of values, in rows, that :func:`dense_row_ids` numbers through a slot per value (8 bytes of
fresh memory each, filled before the pass: at most what the ids themselves take, even where few values fall in
the range and a hash table would have stayed small). On the real-shaped 1.2 M-event profile: its 300,000 flow ids
among 600,000 rows 2.8 ms instead of 18.2 (hashed, the table 8 MB, each probe a cache miss), its correlation ids
1.6 instead of 18.7, its (name, category) pairs 2.8 instead of 6.5; the kernel's cold compile grew from 0.15 to
0.17 CPU-s."""
_DIRECT, _HASHED = np.bool_(True), np.bool_(False)
"""The ``direct`` argument of :func:`_dense_ids`, typed (one compiled version for both)."""
_NO_LO = np.int64(0)

_FIRST_SLOTS = 1 << 12
"""The hash table :func:`dense_row_ids` starts with (32 KB): most keys it numbers (timelines,
names, categories) have a few distinct values, and a table of 2n slots filled with -1 costs
8 bytes of fresh memory per slot."""


def packed_key(columns: list[np.ndarray]) -> np.ndarray | None:
    """The integer ``columns`` (of equal length, any signed or small unsigned width) packed into one int64 word
    per position, as a (1, n) array for :func:`dense_row_ids`, or None when their ranges need more than 63 bits
    together (or one is uint64, or not integers): each column's value less its minimum, in as many bits as its range takes, so
    equal words are equal columns and the ids come out as of the columns apart, for one word to hash (and no
    (k, n) copy of them)."""
    n = columns[0].size
    if not n:
        return np.zeros((1, 0), dtype=np.int64)
    spans = []
    for col in columns:
        if col.dtype.kind not in "iu" or col.dtype == np.uint64:
            return None
        lo = int(col.min())
        spans.append((lo, (int(col.max()) - lo).bit_length()))
    if sum(bits for _, bits in spans) > 63:
        return None
    out = np.empty((1, n), dtype=np.int64)
    key = out[0]
    # the columns' values shifted in one after another (wrapping int64), then all their minima so shifted taken
    # off at once: a column of one value (0 bits) adds nothing and is not read
    varying = [(col, lo, bits) for col, (lo, bits) in zip(columns, spans) if bits]
    if not varying:
        key.fill(0)
        return out
    offset = 0
    for k, (col, lo, bits) in enumerate(varying):
        if k == 0:
            np.copyto(key, col, casting="unsafe")
        else:
            key <<= np.int64(bits)
            np.add(key, col, out=key, casting="unsafe")  # in place, no column of n made
        offset = ((offset << bits) + lo) & _WORD
    key -= np.uint64(offset).astype(np.int64)
    return out


_WORD = (1 << 64) - 1


def dense_row_ids(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense int64 ids of the columns of a (k, n) int64 array (equal columns, equal
    ids), numbered in order of first appearance, and the first column of each id.

    One row of values within :data:`DIRECT_SPAN` times n of each other (a packed key of a few columns,
    correlation ids, symbol ids) is numbered through a table with a slot per value. Otherwise the hash table
    starts small and grows sixteenfold (up to 2n slots) when half full; the ids found so far move to the
    bigger table, and the numbering goes on where it stopped."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    n = rows.shape[1]
    ids, first = np.empty(n, np.int64), np.empty(n, np.int64)  # pages touched only as written
    if rows.shape[0] == 1 and n:
        lo = int(rows[0].min())
        span = int(rows[0].max()) - lo + 1
        if span <= DIRECT_SPAN * n:
            m, _ = _dense_ids(rows, np.full(span, -1, np.int64), ids, first, 0, 0, np.int64(lo), _DIRECT)
            return ids, first[:m]
    full = 16
    while full < 2 * n:
        full *= 2
    size = min(_FIRST_SLOTS, full)
    m, at = _dense_ids(rows, np.full(size, -1, np.int64), ids, first, 0, 0, _NO_LO, _HASHED)
    while at < n:
        size = min(size * 16, full)
        m, at = _dense_ids(rows, np.full(size, -1, np.int64), ids, first, m, at, _NO_LO, _HASHED)
    return ids, first[:m]


def match_rows(table: np.ndarray, queries: np.ndarray, joined: np.ndarray | None = None) -> np.ndarray:
    """For each column of the (k, q) int64 ``queries``, the first column of the (k, m)
    ``table`` equal to it, or -1: a join of many rows onto a key table in one
    hashing pass. ``joined``: the (k, m + q) int64 array of both side by side, when the caller has it
    (then ``table`` and ``queries`` give only their sizes): no copy of them is made."""
    if joined is None:
        joined = np.concatenate([table, queries], axis=1)
    ids, first = dense_row_ids(joined)
    owner = first[ids[table.shape[1] :]]
    return np.where(owner < table.shape[1], owner, -1)
