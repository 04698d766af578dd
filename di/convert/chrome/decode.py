"""From a Chrome JSON file to the scanner's raw columns, with what was lost counted.

This layer knows bytes, compression and JSON syntax; it knows nothing of
phases or Kineto. It returns a :class:`Raw` record of numpy columns (see
:mod:`di.convert.chrome.scan`) plus the decoded strings, the args texts and
the other top-level keys of the document.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.convert.chrome import scan as S
from di.convert import gunzip
from di.convert.chrome.utf8repair import fix_utf8
from di.convert.provenance import TRUNCATED_TAIL
from di.convert.stringviews import gather_spans, texts_at_offsets, texts_in_place, with_validity
from di.inputsize import check_size
from di.convert.symbols import decode_symbols, new_table, valid_utf8
from di.errors import FormatError

JSON_SPACE = b" \t\r\n\xef\xbb\xbf"
"""Bytes that may come before a JSON document's first value (whitespace and a UTF-8 BOM)."""
NOT_JSON = "not JSON: expected '{' or '[' at the start"
_TOP_KEYS = 4096
# top-level keys whose values the reader uses; others are only listed by name
TOP_KEYS_DECODED = frozenset(
    {
        "distributedInfo",
        "baseTimeNanoseconds",
        "diTrace",
        "traceName",
        "schemaVersion",
        "displayTimeUnit",
        "deviceProperties",
        "metadata",
        "otherData",
    }
)


@dataclass
class Raw:
    """Scanner output for one file, trimmed to the events found."""

    path: Path
    cols: dict[str, np.ndarray]
    symbols: pl.Series
    """The interned strings, row = symbol id (String)."""
    args_data: np.ndarray
    """The args texts the scanner copied (uint8; a record's text: ``cols`` ``args_at`` to ``args_end``, where its
    ``flags`` have ``F_ARGS``): read as a column only for the records asked for (:meth:`args_of`)."""
    packed_values: np.ndarray
    """The values of the records' lifted args members, packed (:func:`di.convert.chrome.scan.lifted_columns`; read with
    :meth:`lifted`)."""
    top: dict[str, Any]
    di_flow: pl.Series | None = None
    dropped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    array_format: bool = False

    @property
    def symbol_texts(self) -> pl.Series:
        """The symbols as a String Series (row = symbol id)."""
        return self.symbols

    def symbol_ids(self, wanted: tuple[str, ...]) -> np.ndarray:
        """The symbol ids of those strings of ``wanted`` that the file has."""
        return np.flatnonzero(self.symbol_texts.is_in(list(wanted)).to_numpy()).astype(np.int64)

    def args_of(self, rows: np.ndarray) -> pl.Series:
        """The args texts of the scanner ``rows`` (null for a record without args), as string views into
        :attr:`args_data` (records with equal texts view one copy): no column of every record is made first."""
        c = self.cols
        valid = (c["flags"][rows] & S.F_ARGS) != 0
        return texts_in_place(self.args_data, c["args_at"][rows], c["args_end"][rows], "args", valid=valid)

    def lifted(self, rows: np.ndarray, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The values of the lifted args members ``columns`` (of :data:`~di.convert.chrome.scan.LIFTED`) of the
        scanner ``rows``, by column, in one pass; 0 where a row has none (:func:`~di.convert.chrome.scan.lifted` says
        which have)."""
        return S.lifted_columns(self.cols, self.packed_values, rows, columns)

    def lifted_series(self, rows: np.ndarray) -> dict[str, pl.Series]:
        """The columns of the lifted args members (:data:`~di.convert.chrome.scan.LIFTED`) of the scanner ``rows``,
        null where one has none (the values' own buffers with a validity bitmap): ``corr`` and ``bytes`` always, all
        null without a gather when no row has one; the optional ids (:data:`~di.convert.chrome.scan.LIFTED_IDS`)
        only those some row has."""
        bits = self.cols["lifted"][rows]  # the members' presence bits, gathered once for all eight
        found = int(np.bitwise_or.reduce(bits)) if bits.size else 0
        every = int(np.bitwise_and.reduce(bits)) if bits.size else 0
        values = self.lifted(rows, tuple(column for column in S.LIFTED if found & S.LIFTED_BIT[column]))
        out: dict[str, pl.Series] = {}
        for column in ("corr", "bytes", *S.LIFTED_IDS):
            bit = S.LIFTED_BIT[column]
            if column in values:
                # packbits reads a nonzero byte as a set bit: the masked bits are the validity bitmap
                out[column] = (
                    pl.Series(column, values.pop(column))
                    if every & bit
                    else with_validity(values.pop(column), np.packbits(bits & np.uint8(bit), bitorder="little"), column)
                )
            elif column in ("corr", "bytes"):
                out[column] = pl.Series(column, dtype=pl.Int64).extend_constant(None, rows.size)
        return out

    def set_lifted(self, rows: np.ndarray, bits: np.ndarray, values: np.ndarray) -> None:
        """Give the scanner ``rows`` the lifted members of ``bits`` (their ``lifted`` field), valued ``values`` (a row
        of :data:`~di.convert.chrome.scan.LIFTED` values each, those of the bits set read)."""
        self.cols["lifted"][rows] = bits
        self.packed_values = S.repacked(self.cols, self.packed_values, rows, values)


def read_bytes(path: Path, limit: int | None = None) -> tuple[np.ndarray, list[str]]:
    """The file's bytes as a writable uint8 array, gunzipped when it starts with
    the gzip magic.

    A plain file is memory-mapped copy-on-write: no copy of the file is made
    (its pages are the page cache's) and in-place repairs stay private. A
    truncated or corrupt gzip stream yields what decompressed cleanly and a
    warning saying where it stopped. The first bytes are checked before the
    rest is read: a file that does not start like JSON is refused at once.

    Args:
        path: the file.
        limit: the most bytes accepted (decompressed); None: no limit.

    Raises:
        FormatError: the file does not start with '{' or '[' (after whitespace).
        InputTooLargeError: it is (or decompresses to) more than ``limit`` bytes.
    """
    import mmap

    first = gunzip.head(path)
    if first.lstrip(JSON_SPACE)[:1] not in (b"", b"{", b"["):
        raise FormatError(path, NOT_JSON)
    with open(path, "rb") as fh:
        magic = fh.read(2)
        fh.seek(0)
        if magic == gunzip.GZIP_MAGIC:
            return gunzip.gunzip(fh, path=path, limit=limit)
        if not magic:
            return np.zeros(0, dtype=np.uint8), []
        check_size(path, os.fstat(fh.fileno()).st_size, limit)
        try:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):  # a file system or special file without mmap
            data = bytearray(fh.read() if limit is None else fh.read(limit + 1))
            check_size(path, len(data), limit)
            return np.frombuffer(data, dtype=np.uint8), []
        if len(mapped) < RELEASE_MIN_BYTES:
            _populate(mapped)
        return np.frombuffer(mapped, dtype=np.uint8), []


MADV_POPULATE_READ = 22
"""Linux's ``madvise`` advice (5.14 and later) that maps a range's pages, readable, in one call: Python 3.11's
:mod:`mmap` does not name it."""


def _populate(mapped: Any) -> None:
    """Map all the pages of a file mapping now, in one system call (``MADV_POPULATE_READ``), instead of one page
    fault per 64 KB as the first pass reads them: 0.020 s instead of 0.034 for a 470 MB file, the copy-on-write
    pages left shared with the page cache. Nothing where the system has no such advice."""
    import mmap
    import sys

    if sys.platform != "linux" or not hasattr(mapped, "madvise"):
        return
    try:
        mapped.madvise(getattr(mmap, "MADV_POPULATE_READ", MADV_POPULATE_READ))
    except OSError:  # an older kernel (EINVAL)
        pass


def _where(buf: np.ndarray, pos: int) -> str:
    line = int(np.count_nonzero(buf[:pos] == 10)) + 1
    return f"byte {pos} (line {line})"


def _top_level(buf: np.ndarray, top: np.ndarray, ntop: int, warnings: list[str]) -> dict[str, Any]:
    import orjson

    raw = buf.data
    out: dict[str, Any] = {}
    for ks, ke, vs, ve in top[:ntop]:
        key = bytes(raw[ks:ke]).decode("utf-8", "replace")
        if key not in TOP_KEYS_DECODED:
            out[key] = None
            continue
        try:
            out[key] = orjson.loads(bytes(raw[vs:ve]))
        except orjson.JSONDecodeError:
            warnings.append(f"top-level key {key!r} holds invalid JSON; ignored")
    return out


def decode(path: Path, limit: int | None = None) -> Raw:
    """Scan one Chrome JSON file (plain or gzip) into raw columns.

    Args:
        path: the file.
        limit: the most bytes read (decompressed); None: no limit.

    Raises:
        FormatError: the file is not JSON, not a trace, or empty of events
            because its very first bytes are broken.
        InputTooLargeError: the file is (or decompresses to) more than ``limit`` bytes.
    """
    buf, warnings = read_bytes(path, limit)
    dropped: Counter[str] = Counter()
    for repaired in (False, True):
        got, abuf, top, progress = _scan(buf, repaired=repaired)
        cols = S.columns(got.cols, got.events)
        # only di's own writer adds di_flow: other files' xs and xe rows are never read (nor their pages touched)
        di_flow = _spans(buf, cols["xs"], cols["xe"]) if progress[1] else None
        if repaired or _kept_utf8(buf, got, abuf, top, di_flow):
            break
        # a text the trace keeps is not UTF-8: the document is repaired in place ('?' for each such byte) and
        # scanned again, so that texts equal after the repair are one symbol, as if the file had been written so
        bad, first = fix_utf8(buf)
        if not bad:
            break
        warnings.append(f"{bad} bytes that are not UTF-8 replaced by '?' (first at byte {first})")
        dropped["non-UTF-8 bytes replaced"] += int(bad)
    _, starts, ends, count = got.symbols
    n, err, pos = got.events, got.error, got.error_at
    if err == S.E_NOT_TRACE:
        if bytes(buf[:4096]).lstrip(JSON_SPACE)[:1] not in (b"{", b"["):
            raise FormatError(path, NOT_JSON)
        raise FormatError(path, "JSON but not a Chrome trace: no 'traceEvents' array and not an array of events")
    if err != S.E_NONE:
        what = "truncated" if err == S.E_TRUNCATED else "invalid JSON"
        if n == 0:
            raise FormatError(path, f"{what} at {_where(buf, pos)} before any complete event")
        rest = int(buf.size - pos)
        warnings.append(
            f"{what} at {_where(buf, pos)}: kept the {n} events before it, dropped the remaining {rest} bytes"
        )
        dropped[TRUNCATED_TAIL] += rest
    symbols = decode_symbols(buf, starts, ends, int(count[0]))
    di_flow_texts = texts_at_offsets(*di_flow, "di_flow") if di_flow is not None else None
    top_keys = _top_level(buf, top, got.top_keys, warnings)
    del buf  # the file's pages (unmapped here) are not needed for the args texts: peak memory drops by the file size
    return Raw(
        path,
        cols,
        symbols,
        abuf[: got.args_bytes],
        got.packed_values(),
        top_keys,
        di_flow_texts,
        dropped,
        warnings,
        got.array_format,
    )


def _scan(buf: np.ndarray, *, repaired: bool) -> tuple[S.Scanned, np.ndarray, np.ndarray, np.ndarray]:
    """The scanner's result on the document ``buf``, and the buffers it filled: the args texts, the top-level
    members' spans and the progress counters (:func:`~di.convert.chrome.scan.new_progress`)."""
    abuf = np.empty(buf.size + S.ARGS_SLACK, dtype=np.uint8)
    top = np.empty((_TOP_KEYS, 4), dtype=np.int64)
    progress = S.new_progress()
    text = buf.view()  # read-only, as the buffers of the Perfetto reader and of JSON text from polars are:
    text.flags.writeable = False  # the kernels they share (symbols, jsontext) then compile once
    with _released_behind(buf, progress, repaired=repaired):
        # the columns' pages are touched only as rows are filled; the scan grows them, and the symbol table, when full
        got = S.scan(text, S.alloc_columns(S.capacity_guess(buf.size)), *new_table(), abuf, top, progress)
    return got, abuf, top, progress


def _kept_utf8(
    buf: np.ndarray,
    got: S.Scanned,
    abuf: np.ndarray,
    top: np.ndarray,
    di_flow: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> bool:
    """Whether every text the scan kept is UTF-8: the symbols (names, categories, text ids), the args texts copied,
    the ``di_flow`` objects and the top-level members (keys and values). Each is looked at once, and only its
    bytes outside ASCII are decoded; the bytes the scan skipped are never read again."""
    _, starts, ends, count = got.symbols
    n = int(count[0])
    if not valid_utf8(*gather_spans(buf, starts[:n], ends[:n], np.ones(n, dtype=np.bool_))):
        return False
    # the args texts are JSON objects one after another: each starts with '{', never inside a character
    if not valid_utf8(abuf[: got.args_bytes], np.array([0, got.args_bytes], dtype=np.int64)):
        return False
    if di_flow is not None and not valid_utf8(di_flow[0], di_flow[1]):
        return False
    texts = top[: got.top_keys].reshape(-1, 2)  # (key start, key end), (value start, value end) of each member
    return valid_utf8(*gather_spans(buf, texts[:, 0], texts[:, 1], np.ones(len(texts), dtype=np.bool_)))


RELEASE_MIN_BYTES = 4 << 30
"""Files smaller than this are not released page by page while scanned. Releasing
costs the kernel about 1 us per 4 KiB page (1.2 CPU-s for 1.3 GB) and below this
size the peak comes later anyway, while the trace's tables are built (about 1.8x
the file), so only files of several GB are worth it."""
RELEASE_MARGIN_BYTES = 8 << 20
"""Bytes kept mapped behind the scanner's last reported offset."""


@contextmanager
def _released_behind(buf: np.ndarray, progress: np.ndarray, *, repaired: bool) -> Iterator[None]:
    """While the scanner runs, give the pages of a memory-mapped file it has passed
    back to the kernel (``MADV_DONTNEED``), so resident memory holds a window of
    the file instead of all of it. Pages read again later (a name's bytes) come
    back from the page cache. Not done for small files, for gunzipped buffers, or
    when bytes were repaired in place (a released page would lose the repair)."""
    import mmap
    import threading

    owner = buf.base.obj if isinstance(buf.base, memoryview) else None
    if (
        repaired
        or not isinstance(owner, mmap.mmap)
        or buf.size < RELEASE_MIN_BYTES
        or not hasattr(mmap, "MADV_DONTNEED")
    ):
        yield
        return
    stop = threading.Event()

    def release() -> None:
        done = 0
        while not stop.wait(0.02):
            upto = (int(progress[0]) - RELEASE_MARGIN_BYTES) // mmap.PAGESIZE * mmap.PAGESIZE
            if upto > done:
                owner.madvise(mmap.MADV_DONTNEED, done, upto - done)
                done = upto

    worker = threading.Thread(target=release, name="di-release-pages", daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


def _spans(buf: np.ndarray, xs: np.ndarray, xe: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The per-event ``di_flow`` objects di's writer adds (None when there are none): their bytes gathered into
    one buffer (the file's is released after the scan), their offsets there and which events have one."""
    has = xe > xs
    if not has.any():
        return None
    return (*gather_spans(buf, xs, xe, has), has)
