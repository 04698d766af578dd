"""Event records of one OTF2 location -> rows of an int64 array, no Python per event.

Each OTF2 event callback is a numba ``cfunc`` (:mod:`eventcallbacks`, and
:mod:`iorecords` for the I/O records) that appends one row of ``WIDTH`` int64
through :func:`_push` to a buffer passed as the reader's ``userData``::

    row = [kind, time, a, b, c, d, e]     time: clock ticks, clock offsets applied

followed by one ``ATTRIBUTE`` row per attribute the record carries
(``[ATTRIBUTE, time, attribute ref, OTF2_Type, raw 8 value bytes, 0, 0]``) and,
for ``METRIC`` rows, one ``METRIC_VALUE`` row per value
(``[METRIC_VALUE, time, OTF2_Type, raw 8 value bytes, 0, 0, 0]``).

Buffer layout: ``HEADER`` int64 slots, then the rows. Header slots:
``[rows, capacity_rows, buffer_address, fn GetNumberOfElements,
fn GetAttributeByIndex, records_handled, attributes_dropped, 0]``. A callback
returns OTF2_CALLBACK_INTERRUPT when fewer than ``ROOM`` rows are left, the
caller grows the buffer and resumes reading (:func:`read_location`).

Which fields a..e hold, per kind, is listed beside each callback and
named by the column constants (``PEER``, ``COMM``, ``TAG``, ...); the meaning
of each field is the OTF2 record's (see the OTF2 event records docs).
"""

from __future__ import annotations

import ctypes

import numpy as np
from numba import carray, njit, types

from di.convert.otf2 import clib

WIDTH = 7
KIND, TIME, A, B, C, D, E = range(WIDTH)
"""Columns of a row: the record kind, its time, then the fields a..e, whose meaning is the record kind's."""
REGION = A
"""Enter, Leave: the region ref."""
PEER, COMM, TAG, MSG_BYTES, REQUEST = A, B, C, D, E
"""MPI point-to-point records: the peer's rank within the communicator (the receiver of a send, the sender of a
receive), the communicator ref, the tag, the message bytes and (non-blocking records and the request records) the
request id; MpiCollectiveEnd has its communicator in COMM too."""
COLL_OP, COLL_ROOT, COLL_SENT, COLL_RECEIVED = A, C, D, E
"""MpiCollectiveEnd: the OTF2_CollectiveOp, the root's rank within the communicator, bytes sent and received."""
RMA_WIN, RMA_REMOTE, RMA_BYTES, RMA_MATCHING = A, B, C, D
"""RmaPut, RmaGet (RmaOpCompleteBlocking: RMA_WIN and RMA_MATCHING): window, remote rank, bytes, matching id."""
METRIC_REF, METRIC_COUNT = A, B
"""Metric: the metric ref and how many METRIC_VALUE rows follow."""
VALUE_TYPE, VALUE_BITS = A, B
"""METRIC_VALUE: the OTF2_Type and the raw 8 value bytes."""
ATTR_REF, ATTR_TYPE, ATTR_VALUE = A, B, C
"""ATTRIBUTE: the attribute ref, the OTF2_Type and the raw 8 value bytes."""
IO_HANDLE, IO_MODE, IO_FLAGS, IO_BYTES, IO_MATCHING = A, B, C, D, E
"""IoOperationBegin: handle, mode, operation flags, bytes requested, matching id; IoOperationComplete: IO_HANDLE,
IO_BYTES (transferred), IO_MATCHING; IoOperationCancelled: IO_HANDLE, IO_MATCHING."""
HEADER = 8
ROOM = 1024
"""Rows kept free: one record adds at most 1 + 255 metric values + its attributes."""
CALLBACK_SUCCESS, CALLBACK_INTERRUPT = 0, 1
ERROR_INTERRUPTED_BY_CALLBACK = 92
"""OTF2_ERROR_INTERRUPTED_BY_CALLBACK (``_otf2.ErrorCodes``)."""
READ_BATCH = 1 << 16
"""Records one ``OTF2_EvtReader_ReadEvents`` call reads at most. The library counts every record it decodes, those of
types di registers no callback for too, so a bounded call returns and the reader can tell a file it reads in a loop
(more records than the file has bytes) from one it reads to the end; an unbounded one need never return."""

# kinds
ENTER, LEAVE = 1, 2
MPI_SEND, MPI_ISEND, MPI_ISEND_COMPLETE, MPI_IRECV_REQUEST = 3, 4, 5, 6
MPI_RECV, MPI_IRECV, MPI_REQUEST_TEST, MPI_REQUEST_CANCELLED = 7, 8, 9, 10
COLL_BEGIN, COLL_END = 11, 12
RMA_PUT, RMA_GET, RMA_COMPLETE = 13, 14, 15
METRIC, METRIC_VALUE, ATTRIBUTE = 16, 17, 18
PROGRAM_BEGIN, PROGRAM_END = 19, 20
THREAD_FORK, THREAD_JOIN, TEAM_BEGIN, TEAM_END = 21, 22, 23, 24
LOCK_ACQUIRE, LOCK_RELEASE = 25, 26
MEASUREMENT_ON_OFF, BUFFER_FLUSH = 27, 28
RMA_WIN_CREATE, RMA_WIN_DESTROY = 29, 30
PARAMETER_STRING, PARAMETER_INT, PARAMETER_UINT = 31, 32, 33
IO_BEGIN, IO_COMPLETE, IO_CANCELLED = 34, 35, 36
IO_ISSUED, IO_TEST, IO_CREATE_HANDLE, IO_DESTROY_HANDLE, IO_DUPLICATE_HANDLE = 37, 38, 39, 40, 41
IO_SEEK, IO_CHANGE_STATUS_FLAGS, IO_DELETE_FILE, IO_ACQUIRE_LOCK, IO_RELEASE_LOCK, IO_TRY_LOCK = 42, 43, 44, 45, 46, 47
IO_OPERATION_READ, IO_OPERATION_WRITE, IO_OPERATION_FLUSH = 48, 49, 50
"""Not record kinds: the event kinds of I/O operations (IoOperationBegin .. Complete), by OTF2_IoOperationMode 0, 1, 2."""

INSTANT_NAMES = {
    PROGRAM_BEGIN: "ProgramBegin",
    PROGRAM_END: "ProgramEnd",
    THREAD_FORK: "ThreadFork",
    THREAD_JOIN: "ThreadJoin",
    TEAM_BEGIN: "ThreadTeamBegin",
    TEAM_END: "ThreadTeamEnd",
    LOCK_ACQUIRE: "ThreadAcquireLock",
    LOCK_RELEASE: "ThreadReleaseLock",
    MEASUREMENT_ON_OFF: "MeasurementOnOff",
    BUFFER_FLUSH: "BufferFlush",
    RMA_WIN_CREATE: "RmaWinCreate",
    RMA_WIN_DESTROY: "RmaWinDestroy",
    PARAMETER_STRING: "ParameterString",
    PARAMETER_INT: "ParameterInt",
    PARAMETER_UINT: "ParameterUnsignedInt",
    IO_ISSUED: "IoOperationIssued",
    IO_TEST: "IoOperationTest",
    IO_CREATE_HANDLE: "IoCreateHandle",
    IO_DESTROY_HANDLE: "IoDestroyHandle",
    IO_DUPLICATE_HANDLE: "IoDuplicateHandle",
    IO_SEEK: "IoSeek",
    IO_CHANGE_STATUS_FLAGS: "IoChangeStatusFlags",
    IO_DELETE_FILE: "IoDeleteFile",
    IO_ACQUIRE_LOCK: "IoAcquireLock",
    IO_RELEASE_LOCK: "IoReleaseLock",
    IO_TRY_LOCK: "IoTryLock",
}
"""Records kept as instant events, by kind: their OTF2 record names (kinds PROGRAM_BEGIN..PARAMETER_UINT and
IO_ISSUED..IO_TRY_LOCK)."""
IO_INSTANTS = range(IO_ISSUED, IO_TRY_LOCK + 1)

_u8, _u32, _u64, _i64, _ptr = types.uint8, types.uint32, types.uint64, types.int64, types.voidptr
_COMMON = (_u64, _u64, _u64, _ptr, _u64)  # location, time, event position, userData, attribute list


def _sig(*extra):
    return types.int32(*_COMMON, *extra)


@njit(
    types.int32(
        types.voidptr,
        types.int64,
        types.int64,
        types.int64,
        types.int64,
        types.int64,
        types.int64,
        types.int64,
        types.int64,
    ),
    cache=True,
)
def _push(user, kind, time, a, b, c, d, e, attrs):
    hdr = carray(user, (HEADER,), np.int64)
    buf = carray(user, (HEADER + hdr[1] * WIDTH,), np.int64)
    r = hdr[0]
    o = HEADER + r * WIDTH
    buf[o + KIND] = kind
    buf[o + TIME] = np.int64(time)
    buf[o + A] = np.int64(a)
    buf[o + B] = np.int64(b)
    buf[o + C] = np.int64(c)
    buf[o + D] = np.int64(d)
    buf[o + E] = np.int64(e)
    r += 1
    if attrs != 0:
        n = clib.ccall(hdr[3], (attrs,)) & 0xFFFFFFFF
        for i in range(n):
            if hdr[1] - r < ROOM // 2:
                hdr[6] += n - i
                break
            o = HEADER + r * WIDTH
            for k in range(WIDTH):
                buf[o + k] = 0
            buf[o + KIND] = ATTRIBUTE
            buf[o + TIME] = np.int64(time)
            at = hdr[2] + 8 * o  # GetAttributeByIndex writes the ref, type and value into their fields
            if (
                clib.ccall(hdr[4], (attrs, np.int64(i), at + 8 * ATTR_REF, at + 8 * ATTR_TYPE, at + 8 * ATTR_VALUE))
                == 0
            ):
                r += 1
            else:
                hdr[6] += 1
    hdr[0] = r
    hdr[5] += 1
    return CALLBACK_INTERRUPT if hdr[1] - r < ROOM else CALLBACK_SUCCESS


class Callbacks:
    """An OTF2_EvtReaderCallbacks with every callback of :data:`eventcallbacks.CALLBACKS` set, and those of
    :data:`iorecords.IO_CALLBACKS` when ``io`` (numba compiles them on first use, so archives without I/O
    definitions, which cannot hold I/O records, do not pay for it; the others on the first reader made, so the
    modules that import the record kinds from here do not)."""

    def __init__(self, io: bool = True) -> None:
        from di.convert.otf2.eventcallbacks import CALLBACKS

        lib = clib.library()
        lib.OTF2_EvtReaderCallbacks_New.restype = ctypes.c_void_p
        self.ptr = lib.OTF2_EvtReaderCallbacks_New()
        io_callbacks = {}
        if io:
            from di.convert.otf2.iorecords import IO_CALLBACKS as io_callbacks

        for record, fn in {**CALLBACKS, **io_callbacks}.items():
            setter = getattr(lib, f"OTF2_EvtReaderCallbacks_Set{record}Callback")
            setter.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            code = setter(self.ptr, fn.address)
            if code:
                raise RuntimeError(f"OTF2_EvtReaderCallbacks_Set{record}Callback: {clib.error_text(code)}")

    def close(self) -> None:
        lib = clib.library()
        lib.OTF2_EvtReaderCallbacks_Delete.argtypes = [ctypes.c_void_p]
        lib.OTF2_EvtReaderCallbacks_Delete(self.ptr)


class RecordBuffer:
    """One growing record buffer for every location of an archive (rows appended location after location).

    ``array`` holds the header and the rows; when a callback interrupts because
    fewer than ``ROOM`` rows are left, :func:`read_location` grows it (the rows
    read so far are copied once, never per drain).
    """

    def __init__(self, capacity_rows: int) -> None:
        self.array = np.zeros(0, np.int64)
        self.fns = clib.addresses("OTF2_AttributeList_GetNumberOfElements", "OTF2_AttributeList_GetAttributeByIndex")
        self._resize(max(capacity_rows, 2 * ROOM), 0)

    def _resize(self, capacity_rows: int, rows: int) -> None:
        old = self.array
        buf = np.empty(HEADER + capacity_rows * WIDTH, dtype=np.int64)
        buf[:HEADER] = 0
        if rows:
            buf[HEADER : HEADER + rows * WIDTH] = old[HEADER : HEADER + rows * WIDTH]
        buf[0] = rows
        buf[1] = capacity_rows
        buf[2] = buf.ctypes.data
        buf[3], buf[4] = self.fns
        self.array = buf

    def grow(self) -> None:
        """At least double the room left (rows kept)."""
        rows, cap = int(self.array[0]), int(self.array[1])
        counters = self.array[5:7].copy()
        self._resize(max(2 * cap, cap + 4 * ROOM), rows)
        self.array[5:7] = counters

    @property
    def rows(self) -> int:
        return int(self.array[0])

    def view(self) -> np.ndarray:
        """The rows read so far, (n, WIDTH) int64 (a view, valid until the next :meth:`grow`)."""
        n = self.rows
        return self.array[HEADER : HEADER + n * WIDTH].reshape(n, WIDTH)


CORRUPT = -1
"""read_location's code when a location yields more rows than its event file has bytes (a corrupt file read in a loop)."""


def read_location(evt_reader: int, callbacks: Callbacks, buf: RecordBuffer, max_rows: int) -> tuple[int, int, int, int]:
    """Append every record of one location to ``buf``.

    Args:
        evt_reader: the location's OTF2_EvtReader* (an address).
        callbacks: the callbacks to use.
        buf: the buffer rows are appended to (grown as needed).
        max_rows: rows this location can yield at most (every row stands for at
            least one byte of its event file: pass the file size).

    Returns:
        (records read, records stored, attributes dropped, OTF2 error code
        that ended reading early, :data:`CORRUPT`, or 0).
    """
    lib = clib.library()
    lib.OTF2_EvtReader_SetCallbacks.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.OTF2_EvtReader_ReadEvents.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]
    buf.array[5] = buf.array[6] = 0
    first = buf.rows
    total = 0
    read = ctypes.c_uint64(0)
    while True:
        code = lib.OTF2_EvtReader_SetCallbacks(evt_reader, callbacks.ptr, buf.array.ctypes.data)
        if code:
            break
        before = buf.rows
        code = lib.OTF2_EvtReader_ReadEvents(evt_reader, READ_BATCH, ctypes.byref(read))
        total += read.value
        if total > max_rows:
            code = CORRUPT  # a corrupt file can make the library read one stretch of bytes again and again
            break
        if code == 0 and read.value == READ_BATCH:
            continue  # the batch is read; fewer records than asked is the end of the file
        if code != ERROR_INTERRUPTED_BY_CALLBACK:
            break
        if buf.rows - first > max_rows or (buf.rows == before and read.value == 0):
            code = CORRUPT  # a corrupt file can make the library deliver one record again and again
            break
        if int(buf.array[1]) - buf.rows < ROOM:
            buf.grow()
    return total, int(buf.array[5]), int(buf.array[6]), code
