"""Opening an OTF2 archive for reading: anchor file, definitions, per-location records.

An archive is an anchor file ``NAME.otf2``, the global definitions
``NAME.def`` beside it and a directory ``NAME/`` with one ``<location>.evt``
(and usually ``<location>.def``, holding mapping tables and ClockOffset
records) per location. Event records are read location by location with
OTF2_EvtReader, the OTF2 library applying each location's mapping tables and
clock offsets (linear interpolation between the ClockOffset records, on by
default in OTF2's event reader), so the times match the official reader's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from di.convert.otf2 import clib
from di.convert.otf2.globaldefs import GlobalDefs, read_global_definitions
from di.errors import FormatError

if TYPE_CHECKING:
    from di.convert.otf2.records import Callbacks, RecordBuffer

LOCATION_WITHOUT_EVENT_FILE = "locations without an event file"
TRUNCATED_EVENT_FILE = "event files cut short (truncated or corrupt)"
UNREADABLE_ATTRIBUTE = "attributes of an unreadable type"
LOCATION_WITHOUT_LOCAL_DEFINITIONS = "locations without local definitions"
UNREADABLE_LOCAL_DEFINITIONS = "unreadable local definition files"
"""The archive's drop reasons (:mod:`di.convert.provenance`'s vocabulary)."""

ANCHOR_MAGIC = b"OTF2"
"""Bytes 2..5 of every anchor file (after a 2-byte header)."""
ATTRIBUTE_ROOM = 2.0
"""Initial buffer rows per record the definitions announce: a record and its attribute or metric value rows (di's
Enter carries args, corr, bytes and flows). The rows past those filled are pages never touched, so room to spare costs
no memory, while a buffer that fills is copied into one twice its size: at 1.125 (and 65,536 rows when the buffer
served one location at a time) a 1.2 M-event real-shaped archive's largest location grew the buffer six times,
0.1 CPU-s of copies and fresh pages."""


def rows_per_record(enter_attributes: int) -> float:
    """Buffer rows per record to reserve when ``enter_attributes`` of the archive's attributes are ones di's writer
    puts on Enter records (args, corr, bytes, flows, Kineto's ids): at most one row each for half the records (the
    Enters), never fewer than :data:`ATTRIBUTE_ROOM`. A real-shaped 1.2 M-event archive with six id attributes
    grew both buffers twice at 2.0 (0.28 CPU-s of copies and fresh pages)."""
    return max(ATTRIBUTE_ROOM, 1 + enter_attributes / 2)


FIRST_ROWS = (1 << 16, 1 << 24)
"""Bounds of the buffer's first room in rows (the largest, 0.9 GB of address space, where damaged definitions
announce more records than the memory holds: past it the buffer grows as it fills)."""


def is_anchor(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) is an OTF2 anchor file."""
    return head[2:6] == ANCHOR_MAGIC


def find_anchor(path: Path) -> Path:
    """The anchor file: ``path`` itself, or the one ``*.otf2`` anchor in directory ``path``.

    An archive that a killed ``di`` left half replaced (:func:`di.output.replace_parts`)
    is completed first.

    Raises:
        FormatError: no anchor, several, or not an OTF2 anchor file.
    """
    _finish_replacements(path)
    if path.is_dir():
        found = sorted(p for p in path.glob("*.otf2") if p.is_file())
        if len(found) != 1:
            what = (
                "no *.otf2 anchor file"
                if not found
                else f"{len(found)} anchor files ({', '.join(p.name for p in found)}); name one"
            )
            raise FormatError(path, f"directory holds {what}")
        path = found[0]
    with open(path, "rb") as fh:
        head = fh.read(ANCHOR_READ_BYTES)
    if not is_anchor(head):
        raise FormatError(path, "not an OTF2 anchor file (no 'OTF2' magic at byte 2)")
    problem = anchor_problem(head)
    if problem:
        raise FormatError(path, f"damaged OTF2 anchor file: {problem}")
    return path


def _finish_replacements(path: Path) -> None:
    from di.output import JOURNAL_TAG, finish_swap

    journals = path.glob(f".*.otf2.{JOURNAL_TAG}") if path.is_dir() else [path.with_name(f".{path.name}.{JOURNAL_TAG}")]
    for journal in journals:
        if journal.exists():
            try:
                finish_swap(journal.with_name(journal.name[1:].removesuffix("." + JOURNAL_TAG)))
            except OSError as exc:
                raise FormatError(
                    journal.parent,
                    f"an interrupted di write left this archive half replaced and it cannot be "
                    f"finished here ({exc.strerror}); write the archive again",
                ) from None


def archive_bytes(anchor: Path) -> int:
    """Bytes of the archive's files: the anchor, its global definitions and the files
    of its folder (``traces.otf2`` -> ``traces.def``, ``traces/``)."""
    folder = anchor.with_suffix("")
    files = [anchor, anchor.with_suffix(".def")] + (list(folder.rglob("*")) if folder.is_dir() else [])
    return sum(f.stat().st_size for f in files if f.is_file())


ANCHOR_READ_BYTES = 1 << 20
"""Bytes of an anchor file checked before the OTF2 library opens it (Score-P's are under 1 KiB)."""


def anchor_problem(data: bytes) -> str | None:
    """What in an anchor file's header cannot be right, else None (the OTF2 library judges the rest).

    The library allocates and walks as many property entries as the header
    declares (up to 2**32, a minute or more) before it finds the file too short;
    each property is two NUL-terminated strings, so it cannot declare more than
    half the bytes that follow. Layout: endianness byte, "OTF2" string, anchor
    format, 38 bytes of versions, chunk sizes and counts, three strings
    (machine, creator, description), then from anchor format 2 on a uint32
    property count.
    """
    if len(data) < 8 or data[1] not in (ENDIAN_LITTLE, ENDIAN_BIG):
        return None
    pos = data.find(b"\0", 2) + 1
    if pos == 0:
        return "it ends inside its magic string"
    anchor_format = data[pos] if pos < len(data) else 0
    pos += 1 + 38
    for _ in range(3):
        end = data.find(b"\0", pos)
        if end < 0:
            return "it ends before its machine, creator and description strings"
        pos = end + 1
    if anchor_format < 2:
        return None
    if pos + 4 > len(data):
        return "it ends before its property count"
    count = int.from_bytes(data[pos : pos + 4], "little" if data[1] == ENDIAN_LITTLE else "big")
    if 2 * count > len(data) - pos - 4:
        return f"it declares {count:,} properties in {len(data) - pos - 4} bytes"
    return None


ENDIAN_LITTLE, ENDIAN_BIG = 0x42, 0x23
"""OTF2_LITTLE_ENDIAN and OTF2_BIG_ENDIAN, byte 1 of an anchor file."""


def _otf2_error(anchor: Path, exc: Exception) -> FormatError:
    return FormatError(anchor, f"OTF2 library could not open the archive ({str(exc).strip() or type(exc).__name__})")


class ArchiveReader:
    """An open OTF2_Reader (``handle``, the ``_otf2`` pointer) with its global definitions read (``global_defs``)."""

    def __init__(self, handle: Any, global_defs: GlobalDefs) -> None:
        self.handle = handle
        self.global_defs = global_defs

    def close(self) -> None:
        import _otf2

        _otf2.Reader_Close(self.handle)


def open_reader(anchor: Path) -> ArchiveReader:
    """The archive opened for reading, with the global definitions read.

    Raises:
        FormatError: the library cannot open the archive (missing or broken definitions).
    """
    import _otf2

    if not anchor.with_suffix(".def").is_file():
        raise FormatError(
            anchor, f"global definitions {anchor.with_suffix('.def').name} missing beside the anchor file"
        )
    try:
        handle = _otf2.Reader_Open(str(anchor))
        _otf2.Reader_SetSerialCollectiveCallbacks(handle)
    except Exception as exc:  # the otf2 package raises its own error types and plain ones
        raise _otf2_error(anchor, exc) from None
    try:
        return ArchiveReader(
            handle, read_global_definitions(clib.handle(handle), anchor.with_suffix(".def").stat().st_size)
        )
    except Exception as exc:
        _otf2.Reader_Close(handle)
        raise _otf2_error(anchor, exc) from None


@dataclass
class Records:
    """Every record of the selected locations, location after location."""

    rows: np.ndarray  # (n, records.WIDTH) int64; empty when a consumer took them location by location
    bounds: np.ndarray  # (locations + 1,): rows[bounds[i]:bounds[i+1]] are location i's (rows counted either way)
    records_read: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)

    @property
    def loc(self) -> np.ndarray:
        """Dense location index of every row."""
        return np.repeat(np.arange(self.bounds.size - 1, dtype=np.int64), np.diff(self.bounds))


def read_records(
    reader: Any,
    location_refs: list[int],
    anchor: Path,
    *,
    apply_clock_offsets: bool = True,
    expected_records: int = 0,
    room: float = ATTRIBUTE_ROOM,
    consume: Callable[[np.ndarray, int], None] | None = None,
    time_window: tuple[int, int] | None = None,
    io_records: bool = True,
) -> Records:
    """Read the event records of every location (see :mod:`records`).

    ``apply_clock_offsets=False`` keeps each location's own clock (for checks);
    ``expected_records`` (the definitions' event counts: of all locations, or with ``consume`` of the largest one)
    times ``room`` (rows per record: :func:`rows_per_record`) sizes the buffer.
    ``io_records=False`` leaves the I/O records unread (counted as unsupported):
    for archives without I/O definitions, which cannot hold any.
    ``time_window`` (first, last tick of the trace, from the clock properties)
    bounds the times of a damaged location's records (see :func:`_cut_garbage`).
    With ``consume``, each location's rows are handed to ``consume(rows, i)``
    (i: position in ``location_refs``) once read, and the buffer is reused for
    the next location, so only one location's records are held at a time.

    A location whose event file is missing or unreadable keeps what was read
    before the error; a warning names it and ``dropped`` counts it.
    """
    import _otf2

    from di.convert.otf2 import records  # its kernel compiles on import: the writer, which needs is_anchor, skips it

    handle = reader.handle
    evt_dir = anchor.with_suffix("")
    defs_open = _open_files(handle, location_refs, anchor)
    out = Records(np.zeros((0, records.WIDTH), np.int64), np.zeros(len(location_refs) + 1, np.int64))
    callbacks = records.Callbacks(io_records)
    buf = records.RecordBuffer(min(max(int(expected_records * room), FIRST_ROWS[0]), FIRST_ROWS[1]))
    taken = 0
    try:
        for i, ref in enumerate(location_refs):
            out.bounds[i] = taken + buf.rows
            if defs_open:
                _local_definitions(_otf2, handle, ref, evt_dir, out)
            evt_file = _event_file(evt_dir, ref, anchor, out)
            if evt_file is None:
                continue
            first = buf.rows
            n, attrs_dropped, code = _read_events(handle, ref, evt_file, callbacks, buf, apply_clock_offsets)
            out.records_read += n
            if code:
                _note_damage(
                    out, anchor, ref, evt_file, n, code, buf, first, time_window if apply_clock_offsets else None
                )
            if attrs_dropped:
                out.dropped[UNREADABLE_ATTRIBUTE] += attrs_dropped
            if consume is not None:
                consume(buf.view(), i)
                taken += buf.rows
                buf.array[0] = 0
    finally:
        callbacks.close()
        if defs_open:
            _otf2.Reader_CloseDefFiles(handle)
    out.bounds[len(location_refs)] = taken + buf.rows
    if consume is None:
        out.rows = buf.view()
    return out


def _open_files(handle: Any, location_refs: list[int], anchor: Path) -> bool:
    """Select the locations and open their files; returns whether their local definition files are open.

    Raises:
        FormatError: the library cannot open the event files.
    """
    import _otf2

    for ref in location_refs:
        _otf2.Reader_SelectLocation(handle, ref)
    try:
        _otf2.Reader_OpenDefFiles(handle)
        defs_open = True
    except _otf2.Error:
        defs_open = False
    try:
        _otf2.Reader_OpenEvtFiles(handle)
    except _otf2.Error as exc:
        raise _otf2_error(anchor, exc) from None
    return defs_open


def _event_file(evt_dir: Path, ref: int, anchor: Path, out: Records) -> Path | None:
    """Location ``ref``'s event file, or None (warned and counted in ``out``) when it is missing."""
    evt_file = evt_dir / f"{ref}.evt"
    if not evt_file.is_file():
        out.warnings.append(f"{anchor}: location {ref}: event file {evt_file.name} missing; its events are not loaded")
        out.dropped[LOCATION_WITHOUT_EVENT_FILE] += 1
        return None
    return evt_file


def _read_events(
    handle: Any, ref: int, evt_file: Path, callbacks: Callbacks, buf: RecordBuffer, apply_clock_offsets: bool
) -> tuple[int, int, int]:
    """Append location ``ref``'s records to ``buf``: (records read, attributes dropped, error code or 0)."""
    import _otf2

    from di.convert.otf2 import records

    evt = _otf2.Reader_GetEvtReader(handle, ref)
    try:
        if not apply_clock_offsets:
            _otf2.EvtReader_ApplyClockOffsets(evt, False)
        n, _, attrs_dropped, code = records.read_location(
            clib.handle(evt), callbacks, buf, evt_file.stat().st_size + records.ROOM
        )
    finally:
        # its chunk (the archive's chunk size, filled past the file's end by the library) goes back for the next
        # location's: left open until the archive closed, a 512-rank archive's 1,536 readers held 1.5 GB
        _otf2.Reader_CloseEvtReader(handle, evt)
    return n, attrs_dropped, code


def _note_damage(
    out: Records,
    anchor: Path,
    ref: int,
    evt_file: Path,
    n: int,
    code: int,
    buf: RecordBuffer,
    first: int,
    window: tuple[int, int] | None,
) -> None:
    """Warn of and count an event file read only up to record ``n`` (error ``code``), its garbage rows cut."""
    from di.convert.otf2 import records

    why = (
        "more records than the file has bytes: truncated or corrupt"
        if code == records.CORRUPT
        else clib.error_text(code)
    )
    garbage = _cut_garbage(buf, first, window)
    out.warnings.append(
        f"{anchor}: location {ref}: {evt_file.name} unreadable after {n} records ({why}); the rest is dropped"
        + (f", with {garbage} record rows decoded from the damaged part" if garbage else "")
    )
    out.dropped[TRUNCATED_EVENT_FILE] += 1


def _cut_garbage(buf: RecordBuffer, first: int, window: tuple[int, int] | None) -> int:
    """Drop the rows a damaged event file yielded past its sound part; returns how many.

    OTF2 requires each location's times to never decrease; the library decodes
    the bytes past a truncated file's end as records, so the sound part ends
    before the first row whose time goes back or leaves the trace's time window.
    """
    rows = buf.view()[first:]
    t = rows[:, 1]
    bad = np.zeros(t.size, dtype=bool)
    bad[1:] = t[1:] < t[:-1]
    if window is not None:
        bad |= (t < window[0]) | (t > window[1])
    hit = np.flatnonzero(bad)
    if not hit.size:
        return 0
    buf.array[0] = first + int(hit[0])
    return t.size - int(hit[0])


def _local_definitions(_otf2: Any, handle: Any, ref: int, evt_dir: Path, out: Records) -> None:
    """Read one location's local definitions (mapping tables, clock offsets), if it has any."""
    if not (evt_dir / f"{ref}.def").is_file():
        out.warnings.append(
            f"{evt_dir / f'{ref}.def'}: local definitions missing; clock offsets of location {ref} not applied"
        )
        out.dropped[LOCATION_WITHOUT_LOCAL_DEFINITIONS] += 1
        return
    try:
        def_reader = _otf2.Reader_GetDefReader(handle, ref)
        if def_reader:
            _otf2.Reader_ReadAllLocalDefinitions(handle, def_reader)
            _otf2.Reader_CloseDefReader(handle, def_reader)
    except _otf2.Error as exc:
        out.warnings.append(
            f"{evt_dir / f'{ref}.def'}: unreadable local definitions ({exc}); clock offsets of location {ref} not applied"
        )
        out.dropped[UNREADABLE_LOCAL_DEFINITIONS] += 1
