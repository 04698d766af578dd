"""CUPTI activity records (cupti-python objects) -> fixed-size GPU records, column by column.

The buffer-completed callback of :mod:`di.capture.cupti` hands every buffer's
records to :func:`to_records`; :mod:`di.capture.gpu_ingest` reads the rows back.
CUPTI hands records to Python one object each (cupti-python has no bulk
accessor), so each kind's members are collected with ``operator.attrgetter``
passes that run in C, and numpy converts them.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from di.convert.cupti_enums import MEMCPY_KINDS

GPU_RECORD = np.dtype(
    [
        ("kind", "u1"),
        ("sub", "u1"),
        ("pad", "<u2"),
        ("device", "<i4"),
        ("t0", "<i8"),
        ("t1", "<i8"),
        ("corr", "<i8"),
        ("stream", "<i8"),
        ("context", "<u4"),
        ("name", "<u4"),
        ("bytes", "<i8"),
        ("grid", "<i4", (3,)),
        ("block", "<i4", (3,)),
        ("tid", "<i8"),
        ("aux", "<i8"),
    ]
)
"""One GPU activity record (96 bytes, little-endian). ``sub``: copy kind (memcpy),
marker flags (NVTX), sync type (synchronization); ``aux``: NVTX marker id,
memset value, CUDA event id (sync); ``tid``: the calling thread (API, NVTX)."""

K_KERNEL, K_MEMCPY, K_MEMSET, K_RUNTIME, K_DRIVER, K_SYNC, K_MARKER = 1, 2, 3, 4, 5, 6, 7
KIND_NAMES = {
    K_KERNEL: "kernel",
    K_MEMCPY: "memcpy",
    K_MEMSET: "memset",
    K_RUNTIME: "runtime",
    K_DRIVER: "driver",
    K_SYNC: "sync",
    K_MARKER: "marker",
}
CUPTI_KINDS = {  # cupti.ActivityKind member -> our kind
    "CONCURRENT_KERNEL": K_KERNEL,
    "MEMCPY": K_MEMCPY,
    "MEMSET": K_MEMSET,
    "RUNTIME": K_RUNTIME,
    "DRIVER": K_DRIVER,
    "SYNCHRONIZATION": K_SYNC,
    "MARKER": K_MARKER,
}
COPY_KINDS = {0: "unknown", **MEMCPY_KINDS}
"""CUpti_ActivityMemcpyKind values."""
SYNC_TYPES = {
    0: "unknown",
    1: "cudaEventSynchronize",
    2: "cudaStreamWaitEvent",
    3: "cudaStreamSynchronize",
    4: "cudaDeviceSynchronize",
}
"""CUpti_ActivitySynchronizationType values (4 is CONTEXT_SYNCHRONIZE: cudaDeviceSynchronize, cuCtxSynchronize)."""
NOT_APPLICABLE = 0xFFFFFFFF
"""CUPTI_SYNCHRONIZATION_INVALID_VALUE: a synchronization record's stream or event that does not apply."""
NO_DIMS = (0, 0, 0)
MARKER_INSTANT, MARKER_START, MARKER_END = 1, 2, 4  # CUpti_ActivityFlag marker bits


def _field(rec: Any, *names: str, default: Any = 0) -> Any:
    """A record member by its cupti-python (snake_case) or C (camelCase) name."""
    for name in names:
        value = getattr(rec, name, None)
        if value is not None:
            return value
    return default


MARKER_THREAD_OFFSET = 28
"""Byte offset of objectId.pt.threadId in CUpti_ActivityMarker2 (kind, flags, timestamp, id, objectKind,
then the objectId union at 24 whose pt member is processId, threadId)."""


def _thread_of(rec: Any) -> int:
    """A marker's thread id (CUpti_ActivityObjectKindId.pt.threadId). cupti-python 12.x gives no
    ``object_id`` (None): there it is read from the record's struct at its ``ptr``."""
    obj = _field(rec, "object_id", "objectId", default=None)
    pt = _field(obj, "pt", default=None) if obj is not None else None
    if pt is not None:
        return int(_field(pt, "thread_id", "threadId"))
    ptr = getattr(rec, "ptr", None)
    if isinstance(ptr, int) and ptr:
        import ctypes

        return ctypes.c_uint32.from_address(ptr + MARKER_THREAD_OFFSET).value
    return int(_field(rec, "thread_id", "threadId"))


_COMMON = {"t0": ("start",), "t1": ("end",), "corr": ("correlation_id", "correlationId")}
_IN_CONTEXT = {**_COMMON, "context": ("context_id", "contextId"), "stream": ("stream_id", "streamId")}
_ON_DEVICE = {**_IN_CONTEXT, "device": ("device_id", "deviceId")}
MEMBERS: dict[int, dict[str, tuple[str, ...]]] = {
    K_KERNEL: {
        **_ON_DEVICE,
        "name": ("name",),
        "gx": ("grid_x", "gridX"),
        "gy": ("grid_y", "gridY"),
        "gz": ("grid_z", "gridZ"),
        "bx": ("block_x", "blockX"),
        "by": ("block_y", "blockY"),
        "bz": ("block_z", "blockZ"),
    },
    K_MEMCPY: {**_ON_DEVICE, "bytes": ("bytes",), "sub": ("copy_kind", "copyKind")},
    K_MEMSET: {**_ON_DEVICE, "bytes": ("bytes",), "aux": ("value",)},
    K_RUNTIME: {**_COMMON, "cbid": ("cbid",), "tid": ("thread_id", "threadId")},
    K_DRIVER: {**_COMMON, "cbid": ("cbid",), "tid": ("thread_id", "threadId")},
    K_SYNC: {**_IN_CONTEXT, "sub": ("type",), "aux": ("cuda_event_id", "cudaEventId")},
}
"""Per kind: GPU_RECORD column (or grid/block part, name, cbid) -> the activity record's member, by
cupti-python (snake_case) or C (camelCase) name. Checked against cupti-python 12.8 and 13.4: kernels
are ActivityKernel9/13, memcpy ActivityMemcpy6/7, memset ActivityMemset4/5, API calls ActivityAPI
(thread_id: uint32), synchronization ActivitySynchronization2 (no device_id: ingest takes the device
from the context's other records), markers ActivityMarker2 (flags_, object_id.pt.thread_id; no
correlation id)."""
MISSING = {"stream": -1, "name": None, "device": -1}  # a member a record class lacks: this value (else 0)


TEXT_MEMBERS = ("name", "cbid")  # turned into string ids, not numbers


def _columns(kind: int, objs: Sequence[Any]) -> tuple[dict[str, np.ndarray], dict[str, list[Any]]]:
    """One kind's records -> (numeric members as int64 columns, name-like members as lists): one
    attrgetter call per record, flattened into one ``numpy.fromiter``, all run by C."""
    first = objs[0]
    present = {
        f: next((n for n in names if getattr(first, n, None) is not None), None) for f, names in MEMBERS[kind].items()
    }
    nums = [f for f, n in present.items() if n and f not in TEXT_MEMBERS]
    getter = operator.attrgetter(*(present[f] for f in nums))
    flat = itertools.chain.from_iterable(map(getter, objs)) if len(nums) > 1 else map(getter, objs)
    table = np.fromiter(flat, np.int64, len(objs) * len(nums)).reshape(len(objs), len(nums))
    cols = {f: table[:, i] for i, f in enumerate(nums)}
    cols.update(
        {
            f: np.full(len(objs), MISSING.get(f, 0), np.int64)
            for f, n in present.items()
            if not n and f not in TEXT_MEMBERS
        }
    )
    texts = {
        f: list(map(operator.attrgetter(n), objs)) if n else [MISSING.get(f)] * len(objs)
        for f, n in present.items()
        if f in TEXT_MEMBERS
    }
    return cols, texts


def _ids(values: list[Any], id_of: Callable[[Any], int]) -> np.ndarray:
    """Per-record string ids, computing id_of once per distinct value."""
    lut = {v: id_of(v) for v in dict.fromkeys(values)}
    return np.fromiter(map(lut.__getitem__, values), np.int64, len(values))


def _fill(
    out: np.ndarray, kind: int, objs: Sequence[Any], intern: Callable[[str], int], api_name: Callable[[int, int], str]
) -> None:
    """Write one kind's records (non-marker) into ``out`` (rows of GPU_RECORD, kind set)."""
    col, texts = _columns(kind, objs)
    out["kind"] = kind
    for f in ("t0", "t1", "corr", "device", "context", "stream", "bytes", "sub", "aux", "tid"):
        if f in col:
            out[f] = col[f]
    if kind == K_SYNC:  # no device member (ingest finds it from the context); a context-wide one has no stream
        out["device"] = -1
        out["stream"][out["stream"] == NOT_APPLICABLE] = -1
    if kind == K_KERNEL:
        out["name"] = _ids(texts["name"], lambda n: intern(str(n) if n else "?"))
        out["grid"] = np.stack([col["gx"], col["gy"], col["gz"]], axis=1)
        out["block"] = np.stack([col["bx"], col["by"], col["bz"]], axis=1)
    elif kind in (K_RUNTIME, K_DRIVER):
        out["name"] = _ids(texts["cbid"], lambda cbid: intern(api_name(kind, int(cbid))))


def _markers(activities: Iterable[Any], intern: Callable[[str], int]) -> np.ndarray:
    """NVTX marker records (rare: one per range end), one Python step each."""
    out = []
    for a in activities:
        t = int(_field(a, "timestamp"))
        name = _field(a, "name", default=None)
        out.append(
            (
                K_MARKER,
                int(_field(a, "flags_", "flags")) & 0xFF,
                0,
                0,
                t,
                t,
                0,
                0,
                0,
                intern(name) if name else 0,
                0,
                NO_DIMS,
                NO_DIMS,
                _thread_of(a),
                int(_field(a, "id")),
            )
        )
    return np.array(out, GPU_RECORD) if out else np.empty(0, GPU_RECORD)


def to_records(
    activities: Iterable[Any],
    kind_of: Callable[[int], int],
    intern: Callable[[str], int],
    api_name: Callable[[int, int], str],
) -> np.ndarray:
    """CUPTI activity records -> :data:`GPU_RECORD` rows, grouped by our kind (ascending) and in buffer
    order within a kind (records of other kinds are skipped; ingest sorts by time anyway).

    Columnar: per kind, one ``operator.attrgetter`` pass (C, no Python bytecode per record)
    collects the members and numpy converts them; names are interned once per distinct value.
    NVTX markers, a few per step, take one Python step each.

    Args:
        activities: cupti-python activity objects (or anything with the documented members).
        kind_of: CUPTI ActivityKind value -> our kind (0: skip).
        intern: a name -> its string id (ids from 1).
        api_name: (our kind, callback id) -> the runtime/driver function's name.
    """
    if not isinstance(activities, list):
        activities = list(activities)
    if not activities:
        return np.empty(0, GPU_RECORD)
    cupti_kinds = np.fromiter(map(_KIND, activities), np.int64, len(activities))
    present = np.flatnonzero(np.bincount(cupti_kinds))  # CUPTI kinds are small integers
    lut = np.zeros(present[-1] + 1, np.int64)
    lut[present] = [kind_of(int(k)) for k in present]
    ours = lut[cupti_kinds]
    parts = []
    for kind in sorted(set(lut[present].tolist()) - {0}):
        idx = np.flatnonzero(ours == kind)
        objs = activities if idx.size == len(activities) else _pick(activities, idx)
        if kind == K_MARKER:
            parts.append(_markers(objs, intern))
        else:
            parts.append(np.zeros(idx.size, GPU_RECORD))
            _fill(parts[-1], kind, objs, intern, api_name)
    return np.concatenate(parts) if parts else np.empty(0, GPU_RECORD)


def _pick(items: list[Any], idx: np.ndarray) -> tuple[Any, ...]:
    """items[i] for i in idx, gathered by C."""
    picked = operator.itemgetter(*idx.tolist())(items)
    return picked if idx.size > 1 else (picked,)


_KIND = operator.attrgetter("kind")
