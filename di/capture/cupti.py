"""CUPTI activity capture inside a Python program, through NVIDIA's ``cupti-python``.

``di record --gpu`` injects :mod:`di.capture.gpu_hook` (a ``sitecustomize``) so
that every Python process of the job calls :func:`start` at startup; in code,
``with di.capture.gpu(): ...`` (or ``di.capture.gpu().start()``) does the same.

What a process writes into ``$DI_CAPTURE_DIR`` (the recording's ``raw/``):

* ``cupti-HOST-PID.json``: header: pid, host, launcher rank, the clock pairs
  (CLOCK_REALTIME and CLOCK_MONOTONIC ns read together; once CUPTI runs, also
  CUPTI's timestamp and CLOCK_MONOTONIC), ``state``
  (``recording``, ``stopped``, ``unavailable``, ``yielded``), ``notes`` (why
  CUPTI is unavailable, e.g. no GPU/driver or another subscriber),
  ``kineto_traces`` (torch.profiler traces the program exported), ``records``
  and ``callback_cpu_ns`` (CPU time the buffer callback spent converting them);
* ``cupti-HOST-PID.bin``: fixed 96-byte records (:data:`GPU_RECORD`), appended
  per completed CUPTI buffer;
* ``cupti-HOST-PID.str``: the string table (kernel, API and NVTX names), in the
  shard string-table layout (u32 id, u32 byte length, UTF-8).

At start the capture asks CUPTI for OS thread ids (as di's shims record them)
and, unless already set, points ``NVTX_INJECTION64_PATH`` at the libcupti it
loaded: without it CUPTI records no NVTX ranges. Under ``di record`` it is already
set, to di's own NVTX library (:file:`shim/nvtx.c`), which records the ranges of every
process into the shards; CUPTI then sees no NVTX call, so no range is recorded twice.

Record times are CUPTI timestamps: ns on the host's CLOCK_REALTIME base; ingest
(:mod:`di.capture.gpu_ingest`) maps them to the job clock with the header's
CUPTI pair, else its CLOCK_REALTIME pair.
The buffer callback converts each completed buffer with
:func:`di.capture.cupti_records.to_records`; ingest is columnar.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from di.capture.cupti_records import (
    CUPTI_KINDS,
    GPU_RECORD,
    K_RUNTIME,
    KIND_NAMES,
    to_records,
)

BUFFER_BYTES = 8 << 20
CONFLICT_HINT = (
    "another CUPTI subscriber holds this process (torch.profiler, Nsight Systems or another tool): "
    "di records no CUPTI activity here and imports that tool's trace instead where it writes one"
)


class GpuCapture:
    """One process's CUPTI activity capture into a recording's raw folder (see the module docstring)."""

    def __init__(self, raw: str | Path) -> None:
        self.raw = Path(raw)
        host = socket.gethostname().replace("-", "_")
        self.stem = self.raw / f"cupti-{host}-{os.getpid()}"
        self.header: dict[str, Any] = {
            "format": "di-cupti",
            "version": 1,
            "host": host,
            "pid": os.getpid(),
            "record_bytes": GPU_RECORD.itemsize,
            "env_rank": _env_rank(),
            "clock": {
                "realtime_ns": time.clock_gettime_ns(time.CLOCK_REALTIME),
                "monotonic_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC),
            },
            "state": "starting",
            "notes": [],
            "kineto_traces": [],
            "records": 0,
            "callback_cpu_ns": 0,
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
        if os.environ.get("DI_CAPTURE_GPU") == "kineto":  # di record found no driver and says so once for the job
            self.header["state"] = "unavailable"
            self.write_header()
            return False
        try:
            from cupti import cupti
        except ImportError as exc:
            return self._unavailable(
                f"CUPTI capture skipped: cupti-python is not installed ({exc}); pip install 'deepintrospect[gpu]'"
            )
        except OSError as exc:  # the package is there, a library it links is not
            return self._unavailable(f"CUPTI capture skipped: no GPU/driver found ({exc})")
        try:
            cupti.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
            try:  # OS thread ids (gettid), as di's shims record them; the default is pthread_self cut to 32 bits
                cupti.set_thread_id_type(cupti.ActivityThreadIdType.SYSTEM)
            except Exception as exc:
                self.header["notes"].append(f"CUPTI thread ids are pthread ids, not OS thread ids ({exc})")
            unsupported = []
            for name, ours in CUPTI_KINDS.items():
                member = getattr(cupti.ActivityKind, name)
                try:
                    cupti.activity_enable(member)
                except NotImplementedError:  # the binding lacks this kind (cupti-python 12.x: RUNTIME)
                    unsupported.append(name)
                    continue
                self._kinds[int(member)] = ours
        except Exception as exc:  # cupti-python raises NotSupportedError (no driver) and cuptiError (CUPTI's status)
            return self._unavailable(refusal(cupti, exc))
        self._cupti = cupti
        self._read_cupti_clock()
        if unsupported:
            self.header["notes"].append(
                f"CUPTI capture without {', '.join(unsupported)} activity: this cupti-python "
                f"({_version()}) does not offer it"
            )
        self._inject_nvtx()
        self.header["state"] = "recording"
        self.write_header()
        return True

    def _read_cupti_clock(self) -> None:
        """CUPTI's own timestamp beside CLOCK_MONOTONIC, so ingest maps records without assuming that
        CUPTI counts on CLOCK_REALTIME's base (it does, as seen in CUPTI's samples' output)."""
        try:
            m0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            ts = int(self._cupti.get_timestamp())
            m1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        except Exception:  # noqa: BLE001  ingest falls back to the CLOCK_REALTIME pair
            return
        self.header["clock"].update(cupti_ns=ts, cupti_monotonic_ns=(m0 + m1) // 2)

    def _inject_nvtx(self) -> None:
        """Point NVTX at the libcupti this process loaded, so NVTX ranges become MARKER records (NVTX reads
        ``NVTX_INJECTION64_PATH`` at its first call, which comes after this startup hook)."""
        if os.environ.get("NVTX_INJECTION64_PATH"):
            return
        path = loaded_libcupti()
        if path:
            os.environ["NVTX_INJECTION64_PATH"] = path
        else:
            self.header["notes"].append(
                "NVTX ranges not recorded: the loaded libcupti was not found in /proc/self/maps"
            )

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
        try:
            self.append(to_records(activities, lambda k: self._kinds.get(k, 0), self._intern, self._api_name))
        except Exception as exc:  # raised into CUPTI's thread it would be lost: keep it in the header
            self.note(f"CUPTI buffer of {len(activities)} records not converted: {exc!r}")
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
                cupti.activity_flush_all(
                    1
                )  # 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED; completes buffers through our callback
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


def refusal(cupti: Any, exc: BaseException) -> str:
    """The note for a CUPTI call that failed at start, by what cupti-python raised."""
    kind = type(exc).__name__
    status = getattr(exc, "status", None)
    if kind == "NotSupportedError":  # cupti-python could not load libcuda: "CUDA driver is not found (...)"
        return f"CUPTI capture skipped: no GPU/driver found ({exc})"
    if kind == "FunctionNotFoundError":
        return (
            f"CUPTI capture skipped: the libcupti loaded lacks a function cupti-python {_version()} calls ({exc}); "
            "install the nvidia-cuda-cupti release that matches it"
        )
    if status is None:
        return f"CUPTI capture skipped: {kind}: {exc}"
    try:
        result = cupti.Result(status).name
    except ValueError:
        result = f"CUPTI status {status}"
    if result == "ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED":
        return f"CUPTI capture skipped: {CONFLICT_HINT} ({exc})"
    if result == "ERROR_NOT_INITIALIZED":
        return (
            f"CUPTI capture skipped: CUPTI could not initialize ({exc}): no usable GPU, or a driver older than "
            f"this CUPTI (driver for CUDA {driver_cuda_version()}, cupti-python {_version()})"
        )
    if "PRIVILEGES" in result:
        return f"CUPTI capture skipped: not permitted to trace this GPU ({exc})"
    return f"CUPTI capture skipped: CUPTI refused ({exc})"


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("cupti-python")
    except metadata.PackageNotFoundError:
        return "?"


def driver_cuda_version() -> str:
    """The CUDA version the loaded driver supports ("12.4"), or "?" when libcuda does not answer."""
    import ctypes

    try:
        value = ctypes.c_int(0)
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(value)) == 0:
            return f"{value.value // 1000}.{value.value % 1000 // 10}"
    except (OSError, AttributeError):
        pass
    return "?"


def loaded_libcupti(maps: str = "/proc/self/maps") -> str | None:
    """The path of the libcupti mapped into this process, if any."""
    try:
        with open(maps) as f:
            for line in f:
                path = line.rstrip("\n").partition("/")[2]
                if "/libcupti.so" in f"/{path}":
                    return "/" + path
    except OSError:
        pass
    return None


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
