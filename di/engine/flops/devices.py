"""The GPUs of a trace and their figures: the names the sources recorded, each name's dense peak TFLOP/s per dtype and
its memory bandwidth, the user's figures (:mod:`di.engine.gpu_specs`) before the tables here.

Contract: :func:`device_names` reads only the trace's metadata; :func:`device_peak` and :func:`device_bandwidth`
return None for a GPU or dtype neither the user nor :data:`PEAKS` / :data:`BANDWIDTH` knows; :func:`with_peaks`
adds ``peak_tflops`` to a table with ``device_name`` and ``peak_dtype``, looking each distinct pair up once.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from di.engine.gpu_specs import user_gpu
from di.engine.window import EventFrame

PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    # (pattern of the device name, dense TFLOP/s per dtype); the first pattern that matches wins
    (r"H100.*NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}),
    (r"H100.*PCIe", {"fp64": 51.2, "fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0}),
    (r"H200.*NVL", {"fp64": 60.0, "fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}),
    (r"GH200|H100|H200", {"fp64": 66.9, "fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}),
    (r"A100", {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    (r"\bA30\b", {"fp64": 10.3, "fp32": 10.3, "tf32": 82.0, "bf16": 165.0, "fp16": 165.0}),
    (r"\bA40\b", {"fp32": 37.4, "tf32": 74.8, "bf16": 149.7, "fp16": 149.7}),
    (r"\bT4\b", {"fp32": 8.1, "fp16": 65.0}),
    (r"V100S", {"fp64": 8.2, "fp32": 16.4, "fp16": 130.0}),
    (r"V100.*PCIE", {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0}),
    (r"V100", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}),
    (r"L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0}),
    (r"L40\b", {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05, "fp8": 362.0}),
    (r"\bL4\b", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5}),
    (r"\bA10\b", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    (r"B200", {"tf32": 1100.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0}),
    (r"MI300X|MI325X", {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}),
    (r"MI250X", {"fp64": 95.7, "fp32": 95.7, "bf16": 383.0, "fp16": 383.0}),
    (r"MI210", {"fp64": 45.3, "fp32": 45.3, "bf16": 181.0, "fp16": 181.0}),
    (r"MI250\b", {"fp64": 90.5, "fp32": 90.5, "bf16": 362.1, "fp16": 362.1}),
)
"""Dense peak TFLOP/s of GPUs by name (NVIDIA's and AMD's datasheets, boost clock, matrix/tensor cores where the
dtype uses them, no sparsity)."""
BANDWIDTH: tuple[tuple[str, float], ...] = (
    (r"H100.*NVL", 3.9),
    (r"H100.*PCIe", 2.0),
    (r"H200", 4.8),
    (r"GH200", 4.0),
    (r"H100", 3.35),
    (r"A100.*80GB", 2.039),
    (r"A100", 1.555),
    (r"\bA30\b", 0.933),
    (r"\bA40\b", 0.696),
    (r"\bT4\b", 0.32),
    (r"V100S", 1.134),
    (r"V100", 0.9),
    (r"L40S|L40\b", 0.864),
    (r"\bL4\b", 0.3),
    (r"\bA10\b", 0.6),
    (r"B200", 8.0),
    (r"MI325X", 6.0),
    (r"MI300X", 5.3),
    (r"MI250", 3.2),
    (r"MI210", 1.6),
)
"""Peak memory bandwidth in TB/s (10**12 bytes per second) of GPUs by name (datasheets); the first match wins."""


def device_names(frame: EventFrame) -> pl.DataFrame:
    """rank, device (GPU id), device_name: the names the sources recorded for their GPUs (Kineto's
    ``deviceProperties``), for the GPUs that have timelines in the trace."""
    rows = []
    for source in frame.trace.meta.get("sources", []):
        for dev in (source.get("info") or {}).get("devices", []):
            if isinstance(source.get("rank"), int):
                rows.append((source["rank"], dev["id"], dev["name"]))
    names = pl.DataFrame(rows, schema={"rank": pl.Int32, "device": pl.Int32, "device_name": pl.String}, orient="row")
    return names.unique(["rank", "device"], keep="first", maintain_order=True)


def device_peak(name: str | None, dtype: str | None) -> float | None:
    """Dense peak TFLOP/s of the GPU named ``name`` for ``dtype``: the user's (:mod:`di.engine.gpu_specs`), else
    :data:`PEAKS`'; None when unknown."""
    if dtype is None:
        return None
    mine = user_gpu(name)
    if mine is not None and dtype in mine.peak_tflops:
        return mine.peak_tflops[dtype]
    peaks = _first_match(PEAKS, name)
    return None if peaks is None else peaks.get(dtype)


def device_bandwidth(name: str | None) -> float | None:
    """Peak memory bandwidth (TB/s) of the GPU named ``name``: the user's (:mod:`di.engine.gpu_specs`), else
    :data:`BANDWIDTH`'s; None when unknown."""
    mine = user_gpu(name)
    if mine is not None and mine.bandwidth_tbps is not None:
        return mine.bandwidth_tbps
    return _first_match(BANDWIDTH, name)


def _first_match(table: tuple[tuple[str, Any], ...], name: str | None) -> Any:
    """The value of the first pattern of ``table`` found in ``name`` (case-insensitive), None when none is."""
    if name is not None:
        for pattern, value in table:
            if re.search(pattern, name, re.IGNORECASE):
                return value
    return None


def with_peaks(frame: pl.DataFrame) -> pl.DataFrame:
    """``peak_tflops`` of each row's (device_name, peak_dtype), looked up once per distinct pair."""
    pairs = frame.select("device_name", "peak_dtype").unique()
    peaks = pairs.with_columns(
        pl.Series(
            "peak_tflops",
            [device_peak(n, d) for n, d in pairs.iter_rows()],
            pl.Float64,
        )
    )
    return frame.join(peaks, on=["device_name", "peak_dtype"], how="left", nulls_equal=True)
