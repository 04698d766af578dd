"""CUPTI activity records for tests, as cupti-python's buffer callback hands them out.

:func:`make_plain` builds them as plain objects with cupti-python's member names
(checked against cupti-python 12.8, 13.0 and 13.4); :func:`make_real`, where
cupti-python is installed, builds the package's own record classes (the newest
version of each among those its buffer callback creates, ``cupti.utils``) over
the C structs laid out in memory, as the callback wraps CUPTI's buffer.
Either goes through :func:`di.capture.cupti_records.to_records` like a real buffer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from di.capture import cupti_records as records

# CUpti_ActivityKind values
MEMCPY, MEMSET, KERNEL, DRIVER, RUNTIME, CONCURRENT_KERNEL, MARKER, SYNCHRONIZATION = 1, 2, 3, 4, 5, 10, 12, 38
KINDS = {
    MEMCPY: records.K_MEMCPY,
    MEMSET: records.K_MEMSET,
    DRIVER: records.K_DRIVER,
    RUNTIME: records.K_RUNTIME,
    CONCURRENT_KERNEL: records.K_KERNEL,
    MARKER: records.K_MARKER,
    SYNCHRONIZATION: records.K_SYNC,
}
API = {
    211: "cudaLaunchKernel_v7000",
    31: "cudaMemcpyAsync_v3020",
    46: "cudaMemsetAsync_v3020",
    165: "cudaDeviceSynchronize_v3020",
}
BASE = 1_790_000_000_000_000_000  # CUPTI timestamps: CLOCK_REALTIME-based ns
TID = 4_012_345  # an OS thread id (CUPTI's thread ids are uint32)
DEVICE, CONTEXT, STEPS = 1, 3, 3
NOT_APPLICABLE = 0xFFFFFFFF
CLASS_PREFIX = {
    CONCURRENT_KERNEL: "ActivityKernel",
    KERNEL: "ActivityKernel",
    MEMCPY: "ActivityMemcpy",
    MEMSET: "ActivityMemset",
    RUNTIME: "ActivityAPI",
    DRIVER: "ActivityAPI",
    SYNCHRONIZATION: "ActivitySynchronization",
    MARKER: "ActivityMarker",
}

Make = Callable[..., Any]


def make_plain(kind: int, thread: int | None = None, **members: Any) -> SimpleNamespace:
    if thread is not None:  # a marker's thread: objectId.pt.threadId
        members["object_id"] = SimpleNamespace(pt=SimpleNamespace(process_id=1, thread_id=thread))
    return SimpleNamespace(kind=kind, **members)


def delivered_class(kind: int) -> type:
    """cupti-python's class for a kind's records: the newest version its buffer callback builds."""
    from cupti import cupti, utils

    prefix = CLASS_PREFIX[kind]
    names = [n for n in dir(utils) if re.fullmatch(re.escape(prefix) + r"\d*", n)]
    return getattr(cupti, max(names, key=lambda n: int(n[len(prefix) :] or 0)))


def record_dtype(cls: type) -> Any:
    """The numpy dtype of a cupti-python record class: the C struct's layout (name: a char pointer)."""
    from cupti import cupti

    snake = cls.__name__[len("Activity") :].lower()
    for name in (f"activity_{snake}_dtype", f"c_upti_activity_{snake}_dtype"):  # 13.x, 12.x spelling
        if hasattr(cupti, name):
            return getattr(cupti, name)
    raise LookupError(f"cupti-python has no dtype for {cls.__name__}")


_KEEP: list[Any] = []  # the memory the records point into, alive as long as the test process


def make_real(kind: int, thread: int | None = None, **members: Any) -> Any:
    """A cupti-python record over a C struct in memory, as its buffer callback makes them over CUPTI's
    buffer: the struct is filled by field name (a field the struct lacks raises), then read back
    through the class's members by the code under test."""
    import ctypes

    import numpy as np

    cls = delivered_class(kind)
    data = np.zeros(1, record_dtype(cls))
    data["kind"] = kind
    for name, value in members.items():
        if name == "name":
            if value is not None:
                text = ctypes.create_string_buffer(value.encode())
                _KEEP.append(text)
                data["name"] = ctypes.addressof(text)
        else:
            data[name] = value
    if thread is not None:
        data["object_kind"] = 2  # CUPTI_ACTIVITY_OBJECT_THREAD
        if data.dtype["object_id"].names:
            data["object_id"]["pt"]["thread_id"] = thread
        else:  # cupti-python 12.x: the union as 3 uint32, pt = (processId, threadId)
            data["object_id"][0, 1] = thread
    _KEEP.append(data)
    return cls.from_data(data)


def activity(make: Make) -> list[Any]:
    """Per step: an NVTX range around launch + kernel, memcpy HtoD, memset and a stream sync; then a
    device sync, an NVTX mark, and one record of the deprecated KERNEL kind (not enabled: skipped)."""
    recs = []
    t = BASE
    on = {"device_id": DEVICE, "context_id": CONTEXT}
    for s in range(STEPS):
        c = 100 + 10 * s
        recs += [
            make(MARKER, thread=TID, flags_=records.MARKER_START, timestamp=t, id=s + 1, name=f"step {s}"),
            make(RUNTIME, start=t + 1_000, end=t + 6_000, correlation_id=c, cbid=211, thread_id=TID),
            make(
                CONCURRENT_KERNEL,
                start=t + 8_000,
                end=t + 58_000,
                correlation_id=c,
                **on,
                stream_id=7,
                name="ampere_sgemm_128x64_nn",
                grid_x=64,
                grid_y=2,
                grid_z=1,
                block_x=256,
                block_y=1,
                block_z=1,
            ),
            make(RUNTIME, start=t + 7_000, end=t + 9_000, correlation_id=c + 1, cbid=31, thread_id=TID),
            make(
                MEMCPY,
                start=t + 60_000,
                end=t + 70_000,
                correlation_id=c + 1,
                **on,
                stream_id=7,
                bytes=1 << 20,
                copy_kind=1,
            ),
            make(RUNTIME, start=t + 9_500, end=t + 10_000, correlation_id=c + 2, cbid=46, thread_id=TID),
            make(
                MEMSET, start=t + 71_000, end=t + 72_000, correlation_id=c + 2, **on, stream_id=8, bytes=4096, value=0
            ),
            make(
                SYNCHRONIZATION,
                start=t + 11_000,
                end=t + 72_500,
                correlation_id=c + 3,
                context_id=CONTEXT,
                stream_id=7,
                type=3,
                cuda_event_id=NOT_APPLICABLE,
            ),
            make(MARKER, thread=TID, flags_=records.MARKER_END, timestamp=t + 73_000, id=s + 1, name=None),
        ]
        t += 100_000
    recs += [
        make(RUNTIME, start=t - 20_000, end=t - 2_000, correlation_id=900, cbid=165, thread_id=TID),
        make(
            SYNCHRONIZATION,
            start=t - 19_000,
            end=t - 3_000,
            correlation_id=900,
            context_id=CONTEXT,
            stream_id=NOT_APPLICABLE,
            type=4,
            cuda_event_id=NOT_APPLICABLE,
        ),
        make(MARKER, thread=TID, flags_=records.MARKER_INSTANT, timestamp=t, id=99, name="done"),
        make(KERNEL, start=t, end=t + 1),
    ]
    return recs
