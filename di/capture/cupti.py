"""CUPTI activity capture inside a Python program, through NVIDIA's ``cupti-python``.

``di record --gpu`` injects :mod:`di.capture.gpu_hook` (a ``sitecustomize``) so
that every Python process of the job calls :func:`start` at startup; in code,
``with di.capture.gpu(): ...`` (or ``di.capture.gpu().start()``) does the same.

What a process writes into ``$DI_CAPTURE_DIR`` (the recording's ``raw/``):

* ``cupti-HOST-PID.json``: header: pid, host, launcher rank, the clock pair
  (CLOCK_REALTIME and CLOCK_MONOTONIC ns read together), ``state``
  (``recording``, ``stopped``, ``unavailable``, ``yielded``), ``notes`` (why
  CUPTI is unavailable, e.g. no GPU/driver or another subscriber),
  ``kineto_traces`` (torch.profiler traces the program exported), ``records``
  and ``callback_cpu_ns`` (CPU time the buffer callback spent converting them);
* ``cupti-HOST-PID.bin``: fixed 96-byte records (:data:`GPU_RECORD`), appended
  per completed CUPTI buffer;
* ``cupti-HOST-PID.str``: the string table (kernel, API and NVTX names), in the
  shard string-table layout (u32 id, u32 byte length, UTF-8).

Record times are CUPTI timestamps: ns on the host's CLOCK_REALTIME base; ingest
(:mod:`di.capture.gpu_ingest`) maps them to the job clock with the header's pair.
CUPTI hands records to Python one object each (cupti-python has no bulk
accessor); the buffer callback converts them column by column with
``operator.attrgetter`` passes that run in C (:func:`to_records`), and ingest
is columnar.
"""

from __future__ import annotations

import itertools
import json
import operator
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

GPU_RECORD = np.dtype([
    ("kind", "u1"), ("sub", "u1"), ("pad", "<u2"), ("device", "<i4"), ("t0", "<i8"), ("t1", "<i8"),
    ("corr", "<i8"), ("stream", "<i8"), ("context", "<u4"), ("name", "<u4"), ("bytes", "<i8"),
    ("grid", "<i4", (3,)), ("block", "<i4", (3,)), ("tid", "<i8"), ("aux", "<i8"),
])
"""One GPU activity record (96 bytes, little-endian). ``sub``: copy kind (memcpy),
marker flags (NVTX), sync type (synchronization); ``aux``: NVTX marker id,
memset value, CUDA event id (sync); ``tid``: the calling thread (API, NVTX)."""

K_KERNEL, K_MEMCPY, K_MEMSET, K_RUNTIME, K_DRIVER, K_SYNC, K_MARKER = 1, 2, 3, 4, 5, 6, 7
KIND_NAMES = {K_KERNEL: "kernel", K_MEMCPY: "memcpy", K_MEMSET: "memset", K_RUNTIME: "runtime",
              K_DRIVER: "driver", K_SYNC: "sync", K_MARKER: "marker"}
CUPTI_KINDS = {  # cupti.ActivityKind member -> our kind
    "CONCURRENT_KERNEL": K_KERNEL, "MEMCPY": K_MEMCPY, "MEMSET": K_MEMSET, "RUNTIME": K_RUNTIME,
    "DRIVER": K_DRIVER, "SYNCHRONIZATION": K_SYNC, "MARKER": K_MARKER,
}
COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
              8: "DtoD", 9: "HtoH", 10: "PtoP"}
"""CUpti_ActivityMemcpyKind values."""
SYNC_TYPES = {0: "unknown", 1: "cudaEventSynchronize", 2: "cudaStreamWaitEvent", 3: "cudaStreamSynchronize",
              4: "cudaDeviceSynchronize", 5: "cudaContextSynchronize"}
"""CUpti_ActivitySynchronizationType values."""
NO_DIMS = (0, 0, 0)
MARKER_INSTANT, MARKER_START, MARKER_END = 1, 2, 4  # CUpti_ActivityFlag marker bits
BUFFER_BYTES = 8 << 20
CONFLICT_HINT = ("another CUPTI subscriber holds this process (torch.profiler, Nsight Systems or another tool): "
                 "di records no CUPTI activity here and imports that tool's trace instead where it writes one")


def _field(rec: Any, *names: str, default: Any = 0) -> Any:
    """A record member by its cupti-python (snake_case) or C (camelCase) name."""
    for name in names:
        value = getattr(rec, name, None)
        if value is not None:
            return value
    return default


def _thread_of(rec: Any) -> int:
    """A marker's thread id (CUpti_ActivityObjectKindId.pt.threadId), or its threadId member."""
    obj = _field(rec, "object_id", "objectId", default=None)
    pt = _field(obj, "pt", default=None) if obj is not None else None
    if pt is not None:
        return int(_field(pt, "thread_id", "threadId"))
    return int(_field(rec, "thread_id", "threadId"))


_COMMON = {"t0": ("start",), "t1": ("end",), "corr": ("correlation_id", "correlationId")}
_ON_DEVICE = {**_COMMON, "device": ("device_id", "deviceId"), "context": ("context_id", "contextId"),
              "stream": ("stream_id", "streamId")}
MEMBERS: dict[int, dict[str, tuple[str, ...]]] = {
    K_KERNEL: {**_ON_DEVICE, "name": ("name",), "gx": ("grid_x", "gridX"), "gy": ("grid_y", "gridY"),
               "gz": ("grid_z", "gridZ"), "bx": ("block_x", "blockX"), "by": ("block_y", "blockY"),
               "bz": ("block_z", "blockZ")},
    K_MEMCPY: {**_ON_DEVICE, "bytes": ("bytes",), "sub": ("copy_kind", "copyKind")},
    K_MEMSET: {**_ON_DEVICE, "bytes": ("bytes",), "aux": ("value",)},
    K_RUNTIME: {**_COMMON, "cbid": ("cbid",), "tid": ("thread_id", "threadId")},
    K_DRIVER: {**_COMMON, "cbid": ("cbid",), "tid": ("thread_id", "threadId")},
    K_SYNC: {**_ON_DEVICE, "sub": ("type",), "aux": ("cuda_event_id", "cudaEventId")},
}
"""Per kind: GPU_RECORD column (or grid/block part, name, cbid) -> the activity record's member, by
cupti-python (snake_case) or C (camelCase) name."""
MISSING = {"stream": -1, "name": None}  # a member a record class lacks: this value (else 0)


TEXT_MEMBERS = ("name", "cbid")  # turned into string ids, not numbers


def _columns(kind: int, objs: Sequence[Any]) -> tuple[dict[str, np.ndarray], dict[str, list[Any]]]:
    """One kind's records -> (numeric members as int64 columns, name-like members as lists): one
    attrgetter call per record, flattened into one ``numpy.fromiter``, all run by C."""
    first = objs[0]
    present = {f: next((n for n in names if getattr(first, n, None) is not None), None) for f, names in MEMBERS[kind].items()}
    nums = [f for f, n in present.items() if n and f not in TEXT_MEMBERS]
    getter = operator.attrgetter(*(present[f] for f in nums))
    flat = itertools.chain.from_iterable(map(getter, objs)) if len(nums) > 1 else map(getter, objs)
    table = np.fromiter(flat, np.int64, len(objs) * len(nums)).reshape(len(objs), len(nums))
    cols = {f: table[:, i] for i, f in enumerate(nums)}
    cols.update({f: np.full(len(objs), MISSING.get(f, 0), np.int64) for f, n in present.items() if not n and f not in TEXT_MEMBERS})
    texts = {f: list(map(operator.attrgetter(n), objs)) if n else [MISSING.get(f)] * len(objs)
             for f, n in present.items() if f in TEXT_MEMBERS}
    return cols, texts


def _ids(values: list[Any], id_of: Callable[[Any], int]) -> np.ndarray:
    """Per-record string ids, computing id_of once per distinct value."""
    lut = {v: id_of(v) for v in dict.fromkeys(values)}
    return np.fromiter(map(lut.__getitem__, values), np.int64, len(values))


def _fill(out: np.ndarray, kind: int, objs: Sequence[Any], intern: Callable[[str], int],
          api_name: Callable[[int, int], str]) -> None:
    """Write one kind's records (non-marker) into ``out`` (rows of GPU_RECORD, kind set)."""
    col, texts = _columns(kind, objs)
    out["kind"] = kind
    for f in ("t0", "t1", "corr", "device", "context", "stream", "bytes", "sub", "aux", "tid"):
        if f in col:
            out[f] = col[f]
    if kind == K_KERNEL:
        out["name"] = _ids(texts["name"], lambda n: intern(str(n) if n is not None else "?"))
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
        out.append((K_MARKER, int(_field(a, "flags")) & 0xFF, 0, 0, t, t, int(_field(a, "correlation_id", "correlationId")),
                    0, 0, intern(name) if name else 0, 0, NO_DIMS, NO_DIMS, _thread_of(a), int(_field(a, "id"))))
    return np.array(out, GPU_RECORD) if out else np.empty(0, GPU_RECORD)


def to_records(activities: Iterable[Any], kind_of: Callable[[int], int], intern: Callable[[str], int],
               api_name: Callable[[int, int], str]) -> np.ndarray:
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


class GpuCapture:
    """One process's CUPTI activity capture into a recording's raw folder (see the module docstring)."""

    def __init__(self, raw: str | Path) -> None:
        self.raw = Path(raw)
        host = socket.gethostname().replace("-", "_")
        self.stem = self.raw / f"cupti-{host}-{os.getpid()}"
        self.header: dict[str, Any] = {
            "format": "di-cupti", "version": 1, "host": host, "pid": os.getpid(), "record_bytes": GPU_RECORD.itemsize,
            "env_rank": _env_rank(), "clock": {"realtime_ns": time.clock_gettime_ns(time.CLOCK_REALTIME),
                                              "monotonic_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC)},
            "state": "starting", "notes": [], "kineto_traces": [], "records": 0, "callback_cpu_ns": 0,
        }
        self._strings: dict[str, int] = {}
        self._lock = threading.Lock()
        self._cupti: Any = None
        self._kinds: dict[int, int] = {}
        self._api_names: dict[tuple[int, int], str] = {}

    # -- header and files --
    def write_header(self) -> None:
        tmp = self.stem.with_name(f".{self.stem.name}.json.tmp")
        tmp.write_text(json.dumps(self.header))
        tmp.replace(self.stem.with_suffix(".json"))

    def note(self, text: str) -> None:
        """Say something about this process's capture once, in the header (ingest warns with it)."""
        if text not in self.header["notes"]:
            self.header["notes"].append(text)
            self.write_header()

    def add_kineto_trace(self, path: str | os.PathLike[str]) -> None:
        """Remember a torch.profiler trace this process exported (merged at ingest)."""
        text = str(Path(path).resolve())
        if text not in self.header["kineto_traces"]:
            self.header["kineto_traces"].append(text)
            self.write_header()

    def _intern(self, name: str) -> int:
        sid = self._strings.get(name)
        if sid is None:
            sid = self._strings[name] = len(self._strings) + 1
            data = name.encode("utf-8", "replace")
            with open(self.stem.with_suffix(".str"), "ab") as f:
                f.write(np.array([sid, len(data)], "<u4").tobytes() + data)
        return sid

    def append(self, recs: np.ndarray) -> None:
        """Append records to the .bin file (one write per buffer)."""
        if recs.size:
            with self._lock, open(self.stem.with_suffix(".bin"), "ab") as f:
                f.write(recs.tobytes())
                self.header["records"] += int(recs.size)

    # -- CUPTI --
    def start(self) -> bool:
        """Enable CUPTI activity; False (said once in the header) when there is no GPU, driver or
        cupti-python, or another subscriber holds CUPTI. Never raises for those."""
        self.raw.mkdir(parents=True, exist_ok=True)
        try:
            from cupti import cupti
        except ImportError as exc:
            return self._unavailable(f"CUPTI capture skipped: cupti-python is not installed ({exc}); pip install cupti-python")
        except OSError as exc:  # the package is there, libcupti or the driver is not
            return self._unavailable(f"CUPTI capture skipped: no GPU/driver found ({exc})")
        self._cupti = cupti
        try:
            cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
            for name, ours in CUPTI_KINDS.items():
                member = getattr(cupti.ActivityKind, name)
                cupti.activity_enable(member)
                self._kinds[int(member)] = ours
        except Exception as exc:  # cupti.cuptiError; its class name varies between releases
            text = str(exc)
            if "SUBSCRIBER" in text.upper() or "MULTIPLE" in text.upper():
                return self._unavailable(f"CUPTI capture skipped: {CONFLICT_HINT} ({text})")
            return self._unavailable(f"CUPTI capture skipped: no GPU/driver found or CUPTI refused ({text})")
        self.header["state"] = "recording"
        self.write_header()
        return True

    def _unavailable(self, why: str) -> bool:
        self._cupti = None  # nothing to flush or disable at stop
        self.header["state"] = "unavailable"
        self.header["notes"].append(why)
        self.write_header()
        return False

    def _buffer_requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0  # size, max records (0: as many as fit)

    def _buffer_completed(self, activities: list[Any]) -> None:
        t0 = time.thread_time_ns()
        self.append(to_records(activities, lambda k: self._kinds.get(k, 0), self._intern, self._api_name))
        self.header["callback_cpu_ns"] += time.thread_time_ns() - t0

    def _api_name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        if key not in self._api_names:
            cupti = self._cupti
            domain = cupti.CallbackDomain.RUNTIME_API if kind == K_RUNTIME else cupti.CallbackDomain.DRIVER_API
            try:
                self._api_names[key] = str(cupti.get_callback_name(domain, cbid))
            except Exception:  # an id this CUPTI cannot name
                self._api_names[key] = f"{KIND_NAMES[kind]} api {cbid}"
        return self._api_names[key]

    def stop(self, state: str = "stopped") -> None:
        """Flush every buffer and disable collection (idempotent)."""
        cupti = self._cupti
        if cupti is not None:
            try:
                cupti.activity_flush_all(1)  # 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED; completes buffers through our callback
                for member in self._kinds:
                    cupti.activity_disable(member)
                if state == "yielded" and hasattr(cupti, "finalize"):
                    cupti.finalize()  # let the next subscriber (torch.profiler) attach
            except Exception as exc:
                self.header["notes"].append(f"CUPTI flush at exit failed: {exc!r}")
            self._cupti = None
            self.header["state"] = state
            self.write_header()

    def __enter__(self) -> GpuCapture:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _env_rank() -> int:
    for name in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"):
        value = os.environ.get(name, "")
        if value.lstrip("-").isdigit():
            return int(value)
    return -1


_current: GpuCapture | None = None


def current() -> GpuCapture | None:
    """This process's capture, if one was made."""
    return _current


def gpu(raw: str | Path | None = None) -> GpuCapture:
    """This process's GPU capture into ``raw`` (default ``$DI_CAPTURE_DIR``, else ``./di-gpu-raw``).

    Use as ``with di.capture.gpu(): ...`` or call ``.start()`` / ``.stop()``;
    ``di ingest``-ready files land in ``raw`` (see the module docstring).
    """
    global _current
    if _current is None:
        _current = GpuCapture(raw or os.environ.get("DI_CAPTURE_DIR") or "di-gpu-raw")
    return _current
