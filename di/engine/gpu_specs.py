"""GPUs' peaks that a user names, for a GPU not in :mod:`di.engine.flops`' tables or one whose clocks, power cap or
MIG slice make its datasheet peak the wrong yardstick.

The environment variable :data:`ENV` names a JSON file holding a list of objects::

    [{"name": "RTX 4090", "peak_tflops": {"bf16": 165.2, "fp16": 165.2, "fp32": 82.6}, "bandwidth_tbps": 1.008},
     {"name": "H100", "peak_tflops": {"bf16": 700.0}}]

- ``name``: a regular expression searched, without regard to case, in the GPU name the trace records (Kineto's
  ``deviceProperties``); the first entry that matches a GPU is its own, before di's tables;
- ``peak_tflops``: dense TFLOP/s per dtype (:data:`DTYPES`); a dtype the entry leaves out keeps di's table value;
- ``bandwidth_tbps`` (optional): peak memory bandwidth in TB/s (10**12 bytes per second), the roofline's slope.

Every command reads it (``di analyze``, ``report``, ``diff``, ``dashboard``, each process under ``mpiexec``); a
file that is missing or malformed is an error naming the file and what is wrong, never silently a datasheet peak.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from di.errors import FormatError

__all__ = ["DTYPES", "ENV", "UserGpu", "fingerprint", "user_gpu", "user_gpus"]

ENV = "DI_GPU_SPECS"
"""The environment variable naming the JSON file of a user's GPUs."""
DTYPES = ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64")
"""The dtypes a peak may be given for (those of :data:`di.engine.flops.PEAKS`)."""


class UserGpu(NamedTuple):
    """One entry of the file: its pattern, its peaks (TFLOP/s by dtype) and its bandwidth (TB/s, None: not given)."""

    pattern: str
    peak_tflops: dict[str, float]
    bandwidth_tbps: float | None


_LOADED: dict[tuple[str, int, int], tuple[UserGpu, ...]] = {}
"""The entries read, by (path, mtime, size): the file is read once per change, not per lookup."""


def user_gpus() -> tuple[UserGpu, ...]:
    """The entries of the file :data:`ENV` names (none when it is unset or empty).

    Raises:
        FormatError: the file cannot be read, is not JSON, or an entry is malformed (naming the entry and field).
    """
    path = os.environ.get(ENV, "").strip()
    if not path:
        return ()
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if key not in _LOADED:
            _LOADED.clear()
            _LOADED[key] = _parse(Path(path), Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise FormatError(path, f"cannot read the GPU specs that {ENV} names ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise FormatError(path, f"the GPU specs that {ENV} names are not UTF-8 text") from None
    return _LOADED[key]


def _parse(path: Path, text: str) -> tuple[UserGpu, ...]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise FormatError(path, f"not valid JSON ({exc})") from None
    if not isinstance(doc, list):
        raise FormatError(path, 'expected a JSON list of {"name": ..., "peak_tflops": {...}} objects')
    return tuple(_entry(path, i, item) for i, item in enumerate(doc))


def _entry(path: Path, i: int, item: Any) -> UserGpu:
    where = f"entry {i}"
    if not isinstance(item, dict):
        raise FormatError(path, f"{where} is not an object")
    unknown = set(item) - {"name", "peak_tflops", "bandwidth_tbps"}
    if unknown:
        raise FormatError(path, f"{where} has unknown fields {sorted(unknown)} (name, peak_tflops, bandwidth_tbps)")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError(path, f"{where}: 'name' must be a non-empty text (a pattern of the GPU's name)")
    try:
        re.compile(name)
    except re.error as exc:
        raise FormatError(path, f"{where}: 'name' {name!r} is not a regular expression ({exc})") from None
    peaks = item.get("peak_tflops", {})
    if not isinstance(peaks, dict) or not all(isinstance(k, str) for k in peaks):
        raise FormatError(path, f"{where} ({name}): 'peak_tflops' must be an object of dtype: TFLOP/s")
    bad = sorted(set(peaks) - set(DTYPES))
    if bad:
        raise FormatError(path, f"{where} ({name}): unknown dtypes {bad} in 'peak_tflops' (known: {', '.join(DTYPES)})")
    for dtype, value in peaks.items():
        if not _positive(value):
            raise FormatError(path, f"{where} ({name}): peak_tflops.{dtype} must be a positive number, not {value!r}")
    bandwidth = item.get("bandwidth_tbps")
    if bandwidth is not None and not _positive(bandwidth):
        raise FormatError(path, f"{where} ({name}): 'bandwidth_tbps' must be a positive number, not {bandwidth!r}")
    if not peaks and bandwidth is None:
        raise FormatError(path, f"{where} ({name}) gives neither 'peak_tflops' nor 'bandwidth_tbps'")
    return UserGpu(name, {k: float(v) for k, v in peaks.items()}, None if bandwidth is None else float(bandwidth))


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and value != float("inf")


def user_gpu(name: str | None) -> UserGpu | None:
    """The first entry whose pattern is found in the GPU named ``name`` (case-insensitive); None when none is."""
    if name is None:
        return None
    for gpu in user_gpus():
        if re.search(gpu.pattern, name, re.IGNORECASE):
            return gpu
    return None


def fingerprint() -> str | None:
    """What identifies the user's figures in force (the file's path, modification time and size; None when
    :data:`ENV` is unset): a cache of results that used them is stale when it changes."""
    path = os.environ.get(ENV, "").strip()
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} (unreadable)"
    return f"{os.path.abspath(path)} {st.st_mtime_ns} {st.st_size}"
