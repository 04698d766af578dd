"""OTF2 event records -> record rows: the numba ``cfunc`` callbacks of the records that are not I/O records.

Each callback appends its record through :func:`records._push` (the row layout is
:mod:`records`'); the fields a..e it fills are noted beside it. :data:`CALLBACKS`
maps each OTF2 record name to its callback; the I/O records' are in
:mod:`iorecords`. Importing this module compiles the callbacks (or loads them
from numba's cache), so :class:`records.Callbacks` imports it when it is first made.
"""

from __future__ import annotations

import numpy as np
from numba import carray, cfunc

from di.convert.otf2.records import (
    BUFFER_FLUSH,
    C,
    CALLBACK_INTERRUPT,
    COLL_BEGIN,
    COLL_END,
    D,
    E,
    ENTER,
    HEADER,
    KIND,
    LEAVE,
    LOCK_ACQUIRE,
    LOCK_RELEASE,
    MEASUREMENT_ON_OFF,
    METRIC,
    METRIC_VALUE,
    MPI_IRECV,
    MPI_IRECV_REQUEST,
    MPI_ISEND,
    MPI_ISEND_COMPLETE,
    MPI_RECV,
    MPI_REQUEST_CANCELLED,
    MPI_REQUEST_TEST,
    MPI_SEND,
    PARAMETER_INT,
    PARAMETER_STRING,
    PARAMETER_UINT,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RMA_COMPLETE,
    RMA_GET,
    RMA_PUT,
    RMA_WIN_CREATE,
    RMA_WIN_DESTROY,
    ROOM,
    TEAM_BEGIN,
    TEAM_END,
    THREAD_FORK,
    THREAD_JOIN,
    TIME,
    VALUE_BITS,
    VALUE_TYPE,
    WIDTH,
    _i64,
    _ptr,
    _push,
    _sig,
    _u8,
    _u32,
    _u64,
)


@cfunc(_sig(_u32), cache=True)
def _enter(loc, time, pos, user, attrs, region):
    return _push(user, ENTER, np.int64(time), np.int64(region), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32), cache=True)
def _leave(loc, time, pos, user, attrs, region):
    return _push(user, LEAVE, np.int64(time), np.int64(region), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u32, _u32, _u64), cache=True)
def _mpi_send(loc, time, pos, user, attrs, receiver, comm, tag, length):  # a=receiver b=comm c=tag d=bytes
    return _push(
        user,
        MPI_SEND,
        np.int64(time),
        np.int64(receiver),
        np.int64(comm),
        np.int64(tag),
        np.int64(length),
        0,
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u32, _u32, _u64, _u64), cache=True)
def _mpi_isend(loc, time, pos, user, attrs, receiver, comm, tag, length, request):  # e=request
    return _push(
        user,
        MPI_ISEND,
        np.int64(time),
        np.int64(receiver),
        np.int64(comm),
        np.int64(tag),
        np.int64(length),
        np.int64(request),
        np.int64(attrs),
    )


@cfunc(_sig(_u64), cache=True)
def _mpi_isend_complete(loc, time, pos, user, attrs, request):  # e=request
    return _push(user, MPI_ISEND_COMPLETE, np.int64(time), 0, 0, 0, 0, np.int64(request), np.int64(attrs))


@cfunc(_sig(_u64), cache=True)
def _mpi_irecv_request(loc, time, pos, user, attrs, request):  # e=request
    return _push(user, MPI_IRECV_REQUEST, np.int64(time), 0, 0, 0, 0, np.int64(request), np.int64(attrs))


@cfunc(_sig(_u32, _u32, _u32, _u64), cache=True)
def _mpi_recv(loc, time, pos, user, attrs, sender, comm, tag, length):  # a=sender b=comm c=tag d=bytes
    return _push(
        user,
        MPI_RECV,
        np.int64(time),
        np.int64(sender),
        np.int64(comm),
        np.int64(tag),
        np.int64(length),
        0,
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u32, _u32, _u64, _u64), cache=True)
def _mpi_irecv(loc, time, pos, user, attrs, sender, comm, tag, length, request):  # e=request
    return _push(
        user,
        MPI_IRECV,
        np.int64(time),
        np.int64(sender),
        np.int64(comm),
        np.int64(tag),
        np.int64(length),
        np.int64(request),
        np.int64(attrs),
    )


@cfunc(_sig(_u64), cache=True)
def _mpi_request_test(loc, time, pos, user, attrs, request):
    return _push(user, MPI_REQUEST_TEST, np.int64(time), 0, 0, 0, 0, np.int64(request), np.int64(attrs))


@cfunc(_sig(_u64), cache=True)
def _mpi_request_cancelled(loc, time, pos, user, attrs, request):
    return _push(user, MPI_REQUEST_CANCELLED, np.int64(time), 0, 0, 0, 0, np.int64(request), np.int64(attrs))


@cfunc(_sig(), cache=True)
def _coll_begin(loc, time, pos, user, attrs):
    return _push(user, COLL_BEGIN, np.int64(time), 0, 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u8, _u32, _u32, _u64, _u64), cache=True)
def _coll_end(loc, time, pos, user, attrs, op, comm, root, sent, received):  # a=op b=comm c=root d=sent e=received
    return _push(
        user,
        COLL_END,
        np.int64(time),
        np.int64(op),
        np.int64(comm),
        np.int64(root),
        np.int64(sent),
        np.int64(received),
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u32, _u64, _u64), cache=True)
def _rma_put(loc, time, pos, user, attrs, win, remote, nbytes, matching):  # a=win b=remote c=bytes d=matching id
    return _push(
        user,
        RMA_PUT,
        np.int64(time),
        np.int64(win),
        np.int64(remote),
        np.int64(nbytes),
        np.int64(matching),
        0,
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u32, _u64, _u64), cache=True)
def _rma_get(loc, time, pos, user, attrs, win, remote, nbytes, matching):
    return _push(
        user,
        RMA_GET,
        np.int64(time),
        np.int64(win),
        np.int64(remote),
        np.int64(nbytes),
        np.int64(matching),
        0,
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u64), cache=True)
def _rma_complete(loc, time, pos, user, attrs, win, matching):  # a=win d=matching id
    return _push(user, RMA_COMPLETE, np.int64(time), np.int64(win), 0, 0, np.int64(matching), 0, np.int64(attrs))


@cfunc(_sig(_u32, _u8, _ptr, _ptr), cache=True)
def _metric(loc, time, pos, user, attrs, metric, count, type_ids, values):  # a=metric b=count
    code = _push(user, METRIC, np.int64(time), np.int64(metric), np.int64(count), 0, 0, 0, np.int64(attrs))
    hdr = carray(user, (HEADER,), np.int64)
    buf = carray(user, (HEADER + hdr[1] * WIDTH,), np.int64)
    tids = carray(type_ids, (count,), np.uint8)
    vals = carray(values, (count,), np.int64)
    r = hdr[0]
    for i in range(count):
        o = HEADER + r * WIDTH
        buf[o + KIND] = METRIC_VALUE
        buf[o + TIME] = np.int64(time)
        buf[o + VALUE_TYPE] = tids[i]
        buf[o + VALUE_BITS] = vals[i]
        buf[o + C] = 0
        buf[o + D] = 0
        buf[o + E] = 0
        r += 1
    hdr[0] = r
    return CALLBACK_INTERRUPT if hdr[1] - r < ROOM else code


@cfunc(_sig(_u32, _u32, _ptr), cache=True)
def _program_begin(loc, time, pos, user, attrs, name, nargs, args):  # a=program name string ref
    return _push(user, PROGRAM_BEGIN, np.int64(time), np.int64(name), np.int64(nargs), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_i64), cache=True)
def _program_end(loc, time, pos, user, attrs, status):  # a=exit status
    return _push(user, PROGRAM_END, np.int64(time), np.int64(status), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u8, _u32), cache=True)
def _thread_fork(loc, time, pos, user, attrs, model, threads):  # a=paradigm b=threads requested
    return _push(user, THREAD_FORK, np.int64(time), np.int64(model), np.int64(threads), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u8), cache=True)
def _thread_join(loc, time, pos, user, attrs, model):
    return _push(user, THREAD_JOIN, np.int64(time), np.int64(model), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32), cache=True)
def _team_begin(loc, time, pos, user, attrs, team):  # a=thread team comm
    return _push(user, TEAM_BEGIN, np.int64(time), np.int64(team), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32), cache=True)
def _team_end(loc, time, pos, user, attrs, team):
    return _push(user, TEAM_END, np.int64(time), np.int64(team), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u8, _u32, _u32), cache=True)
def _lock_acquire(loc, time, pos, user, attrs, model, lock, order):  # a=paradigm b=lock c=order
    return _push(
        user, LOCK_ACQUIRE, np.int64(time), np.int64(model), np.int64(lock), np.int64(order), 0, 0, np.int64(attrs)
    )


@cfunc(_sig(_u8, _u32, _u32), cache=True)
def _lock_release(loc, time, pos, user, attrs, model, lock, order):
    return _push(
        user, LOCK_RELEASE, np.int64(time), np.int64(model), np.int64(lock), np.int64(order), 0, 0, np.int64(attrs)
    )


@cfunc(_sig(_u8), cache=True)
def _measurement(loc, time, pos, user, attrs, mode):  # a=mode (1 on, 2 off)
    return _push(user, MEASUREMENT_ON_OFF, np.int64(time), np.int64(mode), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u64), cache=True)
def _buffer_flush(loc, time, pos, user, attrs, stop):  # a=stop time (ticks)
    return _push(user, BUFFER_FLUSH, np.int64(time), np.int64(stop), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32), cache=True)
def _win_create(loc, time, pos, user, attrs, win):
    return _push(user, RMA_WIN_CREATE, np.int64(time), np.int64(win), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32), cache=True)
def _win_destroy(loc, time, pos, user, attrs, win):
    return _push(user, RMA_WIN_DESTROY, np.int64(time), np.int64(win), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u32), cache=True)
def _param_string(loc, time, pos, user, attrs, param, value):  # a=parameter b=string ref
    return _push(user, PARAMETER_STRING, np.int64(time), np.int64(param), np.int64(value), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _i64), cache=True)
def _param_int(loc, time, pos, user, attrs, param, value):
    return _push(user, PARAMETER_INT, np.int64(time), np.int64(param), np.int64(value), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u64), cache=True)
def _param_uint(loc, time, pos, user, attrs, param, value):
    return _push(user, PARAMETER_UINT, np.int64(time), np.int64(param), np.int64(value), 0, 0, 0, np.int64(attrs))


CALLBACKS = {
    "Enter": _enter,
    "Leave": _leave,
    "MpiSend": _mpi_send,
    "MpiIsend": _mpi_isend,
    "MpiIsendComplete": _mpi_isend_complete,
    "MpiIrecvRequest": _mpi_irecv_request,
    "MpiRecv": _mpi_recv,
    "MpiIrecv": _mpi_irecv,
    "MpiRequestTest": _mpi_request_test,
    "MpiRequestCancelled": _mpi_request_cancelled,
    "MpiCollectiveBegin": _coll_begin,
    "MpiCollectiveEnd": _coll_end,
    "RmaPut": _rma_put,
    "RmaGet": _rma_get,
    "RmaOpCompleteBlocking": _rma_complete,
    "Metric": _metric,
    "ProgramBegin": _program_begin,
    "ProgramEnd": _program_end,
    "ThreadFork": _thread_fork,
    "ThreadJoin": _thread_join,
    "ThreadTeamBegin": _team_begin,
    "ThreadTeamEnd": _team_end,
    "ThreadAcquireLock": _lock_acquire,
    "ThreadReleaseLock": _lock_release,
    "MeasurementOnOff": _measurement,
    "BufferFlush": _buffer_flush,
    "RmaWinCreate": _win_create,
    "RmaWinDestroy": _win_destroy,
    "ParameterString": _param_string,
    "ParameterInt": _param_int,
    "ParameterUnsignedInt": _param_uint,
}
"""OTF2 record name -> the cfunc that stores it (the I/O records' are in :mod:`iorecords`)."""
