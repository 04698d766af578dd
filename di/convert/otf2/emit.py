"""Event records of every OTF2 location written from one numba loop (no Python per event).

:func:`emit_events` walks each output location's events in (start, -end)
order and writes, through OTF2_EvtWriter function addresses (:func:`clib.ccall`):

* ``Enter(start)`` with the event's attributes (``di.bytes``; the INT64 ids ``di.corr`` and those of the
  optional id columns a trace has, ``di.ext_id`` ...; ``di.args``, ``di.flows_in``), then the records attached
  to the event's start (MpiSend or MpiIsend, MpiIrecvRequest, MpiCollectiveBegin);
* before an open event is left: the records attached to its end (MpiRecv or
  MpiIrecv, MpiIsendComplete, MpiCollectiveEnd), then ``Leave(end)``. An open event is left when the next
  event starts at or after its end (the same rule as :mod:`di.convert.lanes`,
  whose lanes guarantee the events of one location nest).

:func:`emit_metrics` writes one Metric record (one DOUBLE value) per sample.

Attachment records are rows of ``att`` (int64, ``ATT_WIDTH`` columns):
``[event, phase (0 start / 1 end), type, f1..f5, a1..a4]`` sorted by
(output location, event, phase), location k's rows from ``att_bounds[k]``
to ``att_bounds[k+1]``; the loop walks them with a cursor (events of one
location are emitted in row order). f1..f5 are the
record's fields (f5: the request id of the non-blocking records; I/O operations: f1 handle, f2 mode, f3 flags, f4 bytes,
f5 matching id); a1..a4 the values of attributes 3..6 (``layout.ATTRIBUTES``:
dtype, op, group size, group ranks) that MpiCollectiveEnd carries, NO_VALUE
when absent.
"""

from __future__ import annotations

import numpy as np
from numba import cfunc, njit, types

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import load_u64, store_u64
from di.convert.intcolumns import INT_AT, INT_VALID, NULL, value_at
from di.convert.otf2 import clib

ATT_WIDTH = 12
COL_EVENT, COL_PHASE, COL_TYPE = 0, 1, 2
"""Columns of an attachment row: its event row, its phase (0 start, 1 end) and type (``ATT_*``), then f1..f5, a1..a4."""
COL_PEER, COL_COMM, COL_TAG, COL_BYTES, COL_REQUEST = 3, 4, 5, 6, 7
"""f1..f5 of the message records: peer rank within the communicator, communicator ref, tag, bytes, request id."""
COL_OP, COL_ROOT, COL_SENT, COL_RECEIVED = 3, 5, 6, 7
"""f1, f3..f5 of MpiCollectiveEnd (f2: COL_COMM): OTF2_CollectiveOp, root rank within the communicator, bytes."""
COL_HANDLE, COL_MODE, COL_FLAGS, COL_MATCHING = 3, 4, 5, 7
"""f1..f3, f5 of the I/O operation records (f4: COL_BYTES, requested or transferred)."""
COL_ATTRS = 8
"""a1..a4: the values of attributes 3..6 that MpiCollectiveEnd carries."""
ATT_SEND, ATT_RECV, ATT_COLL_BEGIN, ATT_COLL_END = 1, 2, 3, 4
ATT_ISEND, ATT_ISEND_COMPLETE, ATT_IRECV_REQUEST, ATT_IRECV = 5, 6, 7, 8
ATT_IO_BEGIN, ATT_IO_COMPLETE, ATT_IO_CANCELLED = 9, 10, 11
FN_NAMES = (
    "OTF2_EvtWriter_Enter",
    "OTF2_EvtWriter_Leave",
    "OTF2_EvtWriter_MpiSend",
    "OTF2_EvtWriter_MpiRecv",
    "OTF2_EvtWriter_MpiCollectiveBegin",
    "OTF2_EvtWriter_MpiCollectiveEnd",
    "OTF2_EvtWriter_Metric",
    "OTF2_AttributeList_AddUint64",
    "OTF2_AttributeList_AddInt64",
    "OTF2_AttributeList_AddStringRef",
    "OTF2_GlobalDefWriter_WriteString",
    "OTF2_EvtWriter_MpiIsend",
    "OTF2_EvtWriter_MpiIsendComplete",
    "OTF2_EvtWriter_MpiIrecvRequest",
    "OTF2_EvtWriter_MpiIrecv",
    "OTF2_EvtWriter_IoOperationBegin",
    "OTF2_EvtWriter_IoOperationComplete",
    "OTF2_EvtWriter_IoOperationCancelled",
)
"""Function addresses :func:`emit_events` expects in ``fns``, in this order."""
(
    F_ENTER,
    F_LEAVE,
    F_SEND,
    F_RECV,
    F_CBEGIN,
    F_CEND,
    F_METRIC,
    F_ADD_U64,
    F_ADD_I64,
    F_ADD_STR,
    F_STRING,
    F_ISEND,
    F_ISEND_COMPLETE,
    F_IRECV_REQUEST,
    F_IRECV,
    F_IO_BEGIN,
    F_IO_COMPLETE,
    F_IO_CANCELLED,
) = range(len(FN_NAMES))
FLOWS_ATTRIBUTE = 7
"""Position of ``di.flows_in`` in ``layout.ATTRIBUTES``."""
IO_ATTRIBUTE = 8
"""Position of ``di.io`` in ``layout.ATTRIBUTES`` (on the I/O operation records, see :mod:`iolayout`)."""
NO_VALUE = NULL
"""Marks a missing bytes / args / flows / id value (the null of :func:`di.convert.intcolumns.value_at`)."""
_AT_ENTER, _AT_LEAVE = np.int64(0), np.int64(1)
"""Phases of an attachment (``att[:, 1]``)."""
TYPE_DOUBLE = 10
DOUBLE_TYPE_IDS = np.full(1, TYPE_DOUBLE, np.uint8)
"""The ``typeIDs`` of a Metric record of one DOUBLE value (:func:`emit_metrics`)."""
_NO_COLUMN = -1
ATT_CALLS = np.full((ATT_IO_CANCELLED + 1, 6), _NO_COLUMN, np.int64)
"""Per attachment type: the function (:data:`FN_NAMES` index) that writes it, then the ``att`` columns of its
arguments after (writer, attribute list, time); _NO_COLUMN passes 0 where the function takes fewer. One table
instead of a branch per record type: :func:`emit_events` writes every attachment record through one call site
(issue 15: each call site of :func:`clib.ccall` is typed and lowered at compile time)."""
for _kind, _fn, _cols in (
    (ATT_SEND, F_SEND, (COL_PEER, COL_COMM, COL_TAG, COL_BYTES)),
    (ATT_RECV, F_RECV, (COL_PEER, COL_COMM, COL_TAG, COL_BYTES)),
    (ATT_COLL_BEGIN, F_CBEGIN, ()),
    (ATT_COLL_END, F_CEND, (COL_OP, COL_COMM, COL_ROOT, COL_SENT, COL_RECEIVED)),
    (ATT_ISEND, F_ISEND, (COL_PEER, COL_COMM, COL_TAG, COL_BYTES, COL_REQUEST)),
    (ATT_ISEND_COMPLETE, F_ISEND_COMPLETE, (COL_REQUEST,)),
    (ATT_IRECV_REQUEST, F_IRECV_REQUEST, (COL_REQUEST,)),
    (ATT_IRECV, F_IRECV, (COL_PEER, COL_COMM, COL_TAG, COL_BYTES, COL_REQUEST)),
    (ATT_IO_BEGIN, F_IO_BEGIN, (COL_HANDLE, COL_MODE, COL_FLAGS, COL_BYTES, COL_MATCHING)),
    (ATT_IO_COMPLETE, F_IO_COMPLETE, (COL_HANDLE, COL_BYTES, COL_MATCHING)),
    (ATT_IO_CANCELLED, F_IO_CANCELLED, (COL_HANDLE, COL_MATCHING)),
):
    ATT_CALLS[_kind, 0] = _fn
    ATT_CALLS[_kind, 1 : 1 + len(_cols)] = _cols
ATT_CALLS.flags.writeable = False


@cfunc(types.int32(types.voidptr, types.int32, types.uint64, types.voidptr, types.boolean), cache=True)
def pre_flush(user, file_type, location, caller, final):
    """OTF2_PreFlushCallback: always flush (OTF2_FLUSH)."""
    return 1


_LOW_BITS = np.uint64(0x0101010101010101)
_HIGH_BITS = np.uint64(0x8080808080808080)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def write_strings(fns, writer, first_ref, data, starts, ends, rows, scratch):
    """WriteString(ref = first_ref + i, the UTF-8 text ``data[starts[r]:ends[r]]`` of row r = ``rows[i]``)
    for every i. Each text is copied, eight bytes per step, into ``scratch`` (uint8, at least 8 bytes more than
    the longest text, see :func:`scratch_for`) and NUL-terminated, a NUL inside it written as a space (OTF2
    strings end at the first NUL)."""
    base = scratch.ctypes.data
    for i in range(rows.size):
        lo = starts[rows[i]]
        n = ends[rows[i]] - lo
        k = 0
        while k + 8 <= n:
            w = load_u64(data, lo + k)
            store_u64(scratch, k, w)
            if (w - _LOW_BITS) & ~w & _HIGH_BITS:  # a zero byte in this word
                for b in range(k, k + 8):
                    if scratch[b] == 0:
                        scratch[b] = 32
            k += 8
        for b in range(k, n):
            scratch[b] = data[lo + b] if data[lo + b] != 0 else 32
        scratch[n] = 0
        code = clib.ccall(fns[F_STRING], (writer, first_ref + i, base))
        if code != 0:
            return code
    return 0


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def write_definitions(fn, writer, rows):
    """``fn(writer, rows[0, i], ..., rows[9, i])`` for each column i of the int64 (10, n) ``rows``: one global
    definition per column (a writer taking fewer arguments ignores the trailing ones, see :mod:`clib`); returns the
    first OTF2 error code (0 when none). The regions, as many as a trace's distinct event names, are written so
    (:mod:`regions`): through the ``_otf2`` module each cost 5 us of Python."""
    for i in range(rows.shape[1]):
        code = clib.ccall(
            fn,
            (
                writer,
                rows[0, i],
                rows[1, i],
                rows[2, i],
                rows[3, i],
                rows[4, i],
                rows[5, i],
                rows[6, i],
                rows[7, i],
                rows[8, i],
                rows[9, i],
            ),
        )
        if code != 0:
            return code
    return 0


def scratch_for(starts: np.ndarray, ends: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The scratch buffer :func:`write_strings` needs for these rows (allocated here: numba would compile its
    ``np.empty`` once more per cold start)."""
    if not rows.size:
        longest = 0
    elif rows.size == starts.size:  # every row (a column of no null): no gathers
        longest = int((ends - starts).max())
    else:
        longest = int((ends[rows] - starts[rows]).max())
    return np.empty(longest + 8, np.uint8)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def emit_events(
    fns,
    writers,
    alist,
    attr_refs,
    order,
    bounds,
    start_t,
    end_t,
    region,
    nbytes,
    ids,
    id_valid,
    id_cols,
    id_refs,
    args_ref,
    flows_ref,
    att,
    att_bounds,
    stack,
):
    """Write every location's events; returns the first OTF2 error code (0 when none).

    Args:
        fns: function addresses (:data:`FN_NAMES`).
        writers: OTF2_EvtWriter* of each output location.
        alist: an OTF2_AttributeList* (emptied by each record that uses it).
        attr_refs: refs of the attributes in ``layout.ATTRIBUTES`` order.
        order: event rows, location after location, each in (start, -end) order (empty: the rows in order).
        bounds: order[bounds[k]:bounds[k+1]] are location k's events.
        start_t, end_t: ticks of every event row; region: region ref per row.
        nbytes, args_ref, flows_ref: per row, NO_VALUE when absent (an empty array: absent everywhere);
            flows_ref is the string ref of the ``di.flows_in`` attribute (:mod:`layout`).
        ids, id_valid, id_cols, id_refs: the INT64 attributes (``di.corr`` and the optional id columns, only those
            the trace has: K = 0 for none, one signature for every trace), read in place: ``ints``, ``valid`` and
            ``cols`` (int64 (2, K)) of :func:`di.convert.intcolumns.int_columns`, each with the attribute ref
            ``id_refs[j]``; a null is not written.
        att, att_bounds: attachment records (see the module docstring) in emission order (output location,
            event row, phase); location k's are att[att_bounds[k]:att_bounds[k+1]].
        stack: int64 (at least the most events of one location, 3), scratch for the open events: the event
            and its attachment rows lo, hi (:func:`stack_for`).

    Each step either leaves the innermost open event (its end attachments, then Leave) or enters the next one
    (Enter, then its start attachments): the attachment records are written by one piece of code for both.
    """
    for k in range(writers.size):
        w = writers[k]
        top = 0
        p = bounds[k]
        q = att_bounds[k]  # next attachment row of this location
        while True:
            e = (order[p] if order.size else p) if p < bounds[k + 1] else -1
            leaving = top > 0 and (e < 0 or end_t[stack[top - 1, 0]] <= start_t[e])
            if not leaving and e < 0:
                break
            if leaving:
                top -= 1
                e, lo, hi, phase, t = stack[top, 0], stack[top, 1], stack[top, 2], _AT_LEAVE, end_t[stack[top, 0]]
            else:
                p += 1
                t, phase = start_t[e], _AT_ENTER
                while q < att_bounds[k + 1] and att[q, COL_EVENT] < e:
                    q += 1  # not an event of this location's emission: never the case for a planned layout
                lo = q
                while q < att_bounds[k + 1] and att[q, COL_EVENT] == e:
                    q += 1
                hi = q
                has_attrs = False
                if nbytes.size and nbytes[e] != NO_VALUE:
                    clib.ccall(fns[F_ADD_U64], (alist, attr_refs[0], nbytes[e]))
                    has_attrs = True
                for j in range(id_refs.size):  # one call site for every id column
                    v = value_at(ids, id_valid, id_cols[INT_AT, j], id_cols[INT_VALID, j], e)
                    if v != NO_VALUE:
                        clib.ccall(fns[F_ADD_I64], (alist, id_refs[j], v))
                        has_attrs = True
                if args_ref.size and args_ref[e] != NO_VALUE:
                    clib.ccall(fns[F_ADD_STR], (alist, attr_refs[2], args_ref[e]))
                    has_attrs = True
                if flows_ref.size and flows_ref[e] != NO_VALUE:
                    clib.ccall(fns[F_ADD_STR], (alist, attr_refs[FLOWS_ATTRIBUTE], flows_ref[e]))
                    has_attrs = True
                code = clib.ccall(fns[F_ENTER], (w, alist if has_attrs else 0, t, region[e]))
                if code != 0:
                    return code
                stack[top, 0] = e
                stack[top, 1] = lo
                stack[top, 2] = hi
                top += 1
            for a in range(lo, hi):  # most events have none
                if att[a, COL_PHASE] != phase:
                    continue
                kind = att[a, COL_TYPE]
                attrs = 0
                if kind >= ATT_IO_BEGIN:
                    clib.ccall(fns[F_ADD_U64], (alist, attr_refs[IO_ATTRIBUTE], np.int64(1)))
                    attrs = alist
                elif kind == ATT_COLL_END:
                    for m in range(4):
                        v = att[a, COL_ATTRS + m]
                        if v != NO_VALUE:
                            attrs = alist
                            clib.ccall(fns[F_ADD_I64 if m == 2 else F_ADD_STR], (alist, attr_refs[3 + m], v))
                c1, c2, c3, c4, c5 = (
                    ATT_CALLS[kind, 1],
                    ATT_CALLS[kind, 2],
                    ATT_CALLS[kind, 3],
                    ATT_CALLS[kind, 4],
                    ATT_CALLS[kind, 5],
                )
                code = clib.ccall(
                    fns[ATT_CALLS[kind, 0]],
                    (
                        w,
                        attrs,
                        t,
                        att[a, c1] if c1 >= 0 else 0,
                        att[a, c2] if c2 >= 0 else 0,
                        att[a, c3] if c3 >= 0 else 0,
                        att[a, c4] if c4 >= 0 else 0,
                        att[a, c5] if c5 >= 0 else 0,
                    ),
                )
                if code != 0:
                    return code
            if leaving:
                code = clib.ccall(fns[F_LEAVE], (w, 0, t, region[e]))
                if code != 0:
                    return code
    return 0


def stack_for(bounds: np.ndarray) -> np.ndarray:
    """The ``stack`` :func:`emit_events` needs for locations of these ``bounds`` (allocated here, see :func:`scratch_for`)."""
    return np.empty((max(int(np.diff(bounds).max(initial=0)), 1), 3), np.int64)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def emit_metrics(fns, writers, bounds, ts, metric, values, type_ids):
    """Metric records: location k writes samples bounds[k]:bounds[k+1] (time-sorted), one DOUBLE each.
    ``values``: contiguous float64, each passed by its address; ``type_ids``: uint8 [TYPE_DOUBLE]."""
    types_at = type_ids.ctypes.data
    base = values.ctypes.data
    for k in range(writers.size):
        for i in range(bounds[k], bounds[k + 1]):
            code = clib.ccall(fns[F_METRIC], (writers[k], 0, ts[i], metric[i], 1, types_at, base + 8 * i))
            if code != 0:
                return code
    return 0
