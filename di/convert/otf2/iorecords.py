"""OTF2 I/O event records -> record rows (see :mod:`records` for the row layout).

Fields a..e per kind are listed beside each callback. IoOperationBegin,
IoOperationComplete and IoOperationCancelled make the I/O operation events
(:mod:`timeline`); the other I/O records are kept as instants.
"""

from __future__ import annotations

import numpy as np
from numba import cfunc

from di.convert.otf2.records import (
    IO_ACQUIRE_LOCK,
    IO_BEGIN,
    IO_CANCELLED,
    IO_CHANGE_STATUS_FLAGS,
    IO_COMPLETE,
    IO_CREATE_HANDLE,
    IO_DELETE_FILE,
    IO_DESTROY_HANDLE,
    IO_DUPLICATE_HANDLE,
    IO_ISSUED,
    IO_RELEASE_LOCK,
    IO_SEEK,
    IO_TEST,
    IO_TRY_LOCK,
    _i64,
    _push,
    _sig,
    _u8,
    _u32,
    _u64,
)


@cfunc(_sig(_u32, _u8, _u32, _u64, _u64), cache=True)
def _io_begin(
    loc, time, pos, user, attrs, handle, mode, flags, nbytes, matching
):  # a=handle b=mode c=flags d=bytes requested e=matching id
    return _push(
        user,
        IO_BEGIN,
        np.int64(time),
        np.int64(handle),
        np.int64(mode),
        np.int64(flags),
        np.int64(nbytes),
        np.int64(matching),
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u64, _u64), cache=True)
def _io_complete(loc, time, pos, user, attrs, handle, nbytes, matching):  # a=handle d=bytes transferred e=matching id
    return _push(
        user, IO_COMPLETE, np.int64(time), np.int64(handle), 0, 0, np.int64(nbytes), np.int64(matching), np.int64(attrs)
    )


@cfunc(_sig(_u32, _u64), cache=True)
def _io_cancelled(loc, time, pos, user, attrs, handle, matching):  # a=handle e=matching id
    return _push(user, IO_CANCELLED, np.int64(time), np.int64(handle), 0, 0, 0, np.int64(matching), np.int64(attrs))


@cfunc(_sig(_u32, _u64), cache=True)
def _io_issued(loc, time, pos, user, attrs, handle, matching):  # a=handle b=matching id
    return _push(user, IO_ISSUED, np.int64(time), np.int64(handle), np.int64(matching), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u64), cache=True)
def _io_test(loc, time, pos, user, attrs, handle, matching):  # a=handle b=matching id
    return _push(user, IO_TEST, np.int64(time), np.int64(handle), np.int64(matching), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u8, _u32, _u32), cache=True)
def _io_create_handle(
    loc, time, pos, user, attrs, handle, mode, creation, status
):  # a=handle b=access mode c=creation flags d=status flags
    return _push(
        user,
        IO_CREATE_HANDLE,
        np.int64(time),
        np.int64(handle),
        np.int64(mode),
        np.int64(creation),
        np.int64(status),
        0,
        np.int64(attrs),
    )


@cfunc(_sig(_u32), cache=True)
def _io_destroy_handle(loc, time, pos, user, attrs, handle):  # a=handle
    return _push(user, IO_DESTROY_HANDLE, np.int64(time), np.int64(handle), 0, 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u32, _u32), cache=True)
def _io_duplicate_handle(loc, time, pos, user, attrs, old, new, status):  # a=old handle b=new handle c=status flags
    return _push(
        user, IO_DUPLICATE_HANDLE, np.int64(time), np.int64(old), np.int64(new), np.int64(status), 0, 0, np.int64(attrs)
    )


@cfunc(_sig(_u32, _i64, _u8, _u64), cache=True)
def _io_seek(
    loc, time, pos, user, attrs, handle, request, whence, result
):  # a=handle b=offset requested c=offset result d=whence
    return _push(
        user,
        IO_SEEK,
        np.int64(time),
        np.int64(handle),
        np.int64(request),
        np.int64(result),
        np.int64(whence),
        0,
        np.int64(attrs),
    )


@cfunc(_sig(_u32, _u32), cache=True)
def _io_change_status_flags(loc, time, pos, user, attrs, handle, status):  # a=handle b=status flags
    return _push(
        user, IO_CHANGE_STATUS_FLAGS, np.int64(time), np.int64(handle), np.int64(status), 0, 0, 0, np.int64(attrs)
    )


@cfunc(_sig(_u8, _u32), cache=True)
def _io_delete_file(loc, time, pos, user, attrs, paradigm, file):  # a=I/O paradigm b=file
    return _push(user, IO_DELETE_FILE, np.int64(time), np.int64(paradigm), np.int64(file), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u8), cache=True)
def _io_acquire_lock(loc, time, pos, user, attrs, handle, lock):  # a=handle b=lock type
    return _push(user, IO_ACQUIRE_LOCK, np.int64(time), np.int64(handle), np.int64(lock), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u8), cache=True)
def _io_release_lock(loc, time, pos, user, attrs, handle, lock):
    return _push(user, IO_RELEASE_LOCK, np.int64(time), np.int64(handle), np.int64(lock), 0, 0, 0, np.int64(attrs))


@cfunc(_sig(_u32, _u8), cache=True)
def _io_try_lock(loc, time, pos, user, attrs, handle, lock):
    return _push(user, IO_TRY_LOCK, np.int64(time), np.int64(handle), np.int64(lock), 0, 0, 0, np.int64(attrs))


IO_CALLBACKS = {
    "IoOperationBegin": _io_begin,
    "IoOperationComplete": _io_complete,
    "IoOperationCancelled": _io_cancelled,
    "IoOperationIssued": _io_issued,
    "IoOperationTest": _io_test,
    "IoCreateHandle": _io_create_handle,
    "IoDestroyHandle": _io_destroy_handle,
    "IoDuplicateHandle": _io_duplicate_handle,
    "IoSeek": _io_seek,
    "IoChangeStatusFlags": _io_change_status_flags,
    "IoDeleteFile": _io_delete_file,
    "IoAcquireLock": _io_acquire_lock,
    "IoReleaseLock": _io_release_lock,
    "IoTryLock": _io_try_lock,
}
"""OTF2 I/O record name -> the cfunc that stores it."""
