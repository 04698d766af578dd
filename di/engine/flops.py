"""Floating-point work of the matrix operators and the rate the GPU did it at, against the GPU's peak.

The input is the operators a framework recorded with their input shapes (PyTorch's profiler with
``record_shapes=True``: each ``cpu_op`` event's args carry ``Input Dims``, ``Input type`` and, since 2.1,
``Concrete Inputs``), the GPU kernels each one launched, and the GPU's name (Kineto's ``deviceProperties``, kept in
the source's ``info.devices``).

Definitions (times int64 ns, work int64 floating-point operations, a multiply-add is 2), the counts of
``torch.utils.flop_counter`` (so the figures match PyTorch's ``FlopCounterMode``):

- **Counted operators** (:data:`FAMILIES`): matrix products ``aten::mm`` (and fp8 ``aten::_scaled_mm``),
  ``aten::addmm``, ``aten::bmm``, ``aten::baddbmm`` (``2 m k n``, times the batch; the added term is not counted),
  convolutions ``aten::convolution`` (``2 N K C/g prod(out) prod(kernel)``, the output's size from the stride,
  padding and dilation of ``Concrete Inputs``) and ``aten::convolution_backward`` (the forward's count once per
  gradient ``output_mask`` asks for), and scaled-dot-product attention (flash, memory-efficient, cuDNN): forward
  ``2 b h s_q s_k (d + d_v)``, backward ``2 b h s_q s_k (3 d + 2 d_v)`` (the scores recomputed). Causal masking is
  not subtracted, as in PyTorch. A counted operator nested in another (a backend's ``aten::mm`` inside
  ``aten::addmm``) is counted once, as the outermost.
- **gpu_ns** of an operator: the summed durations of the kernels launched from inside it (their launch, see
  :mod:`di.engine.launches`, enclosed by it); **tflops** = flop / gpu_ns / 1000 (TFLOP/s while its kernels ran).
- **dtype**: of the first matrix input (``bf16``, ``fp16``, ``fp32``, ``fp64``, ``fp8``). **peak_tflops**: the GPU's
  dense (no sparsity) peak for it from :data:`PEAKS` (vendors' datasheets, boost clock); fp32 matrix products count
  against the fp32 peak (PyTorch leaves TF32 off for matmuls by default), fp32 convolutions against TF32 (cuDNN's
  default), ``peak_dtype`` says which. A user's own figures (:mod:`di.engine.gpu_specs`, the file ``DI_GPU_SPECS``
  names) come first. Null for a GPU in neither.
- **Roofline** (per operator and shape): ``bytes_per_call``: the elements of its tensor inputs and of its outputs
  (mm: ``m n``; attention: ``b h s_q d_v``; a backward: its gradients) times the dtype's size
  (:data:`ELEMENT_BYTES`): the least traffic to memory; **intensity** = flop / byte; **attainable_tflops** = min(peak,
  intensity x the GPU's bandwidth, :data:`BANDWIDTH`); ``bound``: ``memory`` where the bandwidth is the limit, else
  ``compute``; **of_attainable** = tflops / attainable_tflops, a small GEMM's honest score.
- **Per rank and device** (:func:`flop_rates`): ``flop`` and ``gpu_ns`` of the counted operators whose work is known
  (``unknown_calls``: those recorded without readable shapes); ``time_ns``: the rank's steps in the window summed
  (and only the operators in them counted) when it has steps, else the span of its GPU work (first start to last
  end); ``achieved_tflops`` = flop / gpu_ns / 1000, ``flop_rate_tflops`` = flop / time_ns / 1000, and
  **utilization** = flop_rate / the peak of the dtype with the most flop: the model FLOP utilization (MFU) where
  nothing is recomputed, the hardware's (HFU) with activation recomputation, whose operators run and count again.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from di.engine.gpu_specs import user_gpu
from di.engine.launches import launch_calls
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame
from di.nesting import enclosing_all, parent_rows

__all__ = [
    "BANDWIDTH",
    "ELEMENT_BYTES",
    "FAMILIES",
    "PEAKS",
    "device_bandwidth",
    "device_names",
    "device_peak",
    "flop_ops",
    "flop_rates",
    "flops_tables",
    "in_order",
    "operator_flops",
]

FAMILIES = {
    "aten::mm": "mm",
    "aten::_scaled_mm": "mm",
    "aten::addmm": "addmm",
    "aten::bmm": "bmm",
    "aten::baddbmm": "baddbmm",
    "aten::convolution": "conv",
    "aten::convolution_backward": "conv_backward",
    "aten::_scaled_dot_product_flash_attention": "sdpa",
    "aten::_scaled_dot_product_efficient_attention": "sdpa",
    "aten::_scaled_dot_product_cudnn_attention": "sdpa",
    "aten::_scaled_dot_product_flash_attention_backward": "sdpa_backward",
    "aten::_scaled_dot_product_efficient_attention_backward": "sdpa_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward": "sdpa_backward",
}
"""Counted operators (ATen's names) and their family: which inputs are the matrices and how the work is counted."""

_FIRST_MATRIX = {
    "mm": 0,
    "addmm": 1,
    "bmm": 0,
    "baddbmm": 1,
    "conv": 0,
    "conv_backward": 1,
    "sdpa": 0,
    "sdpa_backward": 1,
}
"""Position in ``Input Dims`` of the first matrix operand (for ``conv_backward``: the input; ``sdpa_backward``: q)."""

DTYPES = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "fp32", "double": "fp64"}
"""PyTorch's ``Input type`` texts of the floating-point types; ``c10::Float8_*`` are ``fp8``."""

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
ELEMENT_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}
"""Bytes per element of the dtypes whose traffic is counted."""

_OPS = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "device_name": pl.String,
    "op": pl.String,
    "dtype": pl.String,
    "dims": pl.String,
    "calls": pl.Int64,
    "flop_per_call": pl.Int64,
    "flop": pl.Int64,
    "kernels": pl.Int64,
    "gpu_ns": pl.Int64,
    "tflops": pl.Float64,
    "peak_dtype": pl.String,
    "peak_tflops": pl.Float64,
    "of_peak": pl.Float64,
    "bytes_per_call": pl.Int64,
    "intensity": pl.Float64,
    "attainable_tflops": pl.Float64,
    "of_attainable": pl.Float64,
    "bound": pl.String,
}
_RATES = {
    "rank": pl.Int32,
    "device": pl.Int32,
    "device_name": pl.String,
    "step": pl.Int64,
    "calls": pl.Int64,
    "unknown_calls": pl.Int64,
    "flop": pl.Int64,
    "gpu_ns": pl.Int64,
    "time_ns": pl.Int64,
    "achieved_tflops": pl.Float64,
    "flop_rate_tflops": pl.Float64,
    "peak_dtype": pl.String,
    "peak_tflops": pl.Float64,
    "utilization": pl.Float64,
}
_DIMS_TEXT = r'"Input Dims"\s*:\s*(\[(?:\[[^\[\]]*\]|[^\[\]])*\])'
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_STRINGS = rf'\[(?:{_QUOTED}|[^\[\]"])*\]'
"""A JSON list of strings (which may hold brackets: ``"[1, 1]"``)."""
_TYPES_TEXT = r'"Input type"\s*:\s*(\[[^\[\]]*\])'
"""Type names hold no brackets (``c10::BFloat16``, ``Scalar``, ``GenericList``), so a plain list pattern finds them."""
_CONCRETE_TEXT = rf'"Concrete Inputs"\s*:\s*({_STRINGS})'
_SIZES = r"\s*(?:\d+\s*(?:,\s*\d+\s*)*)?"
_WHOLE_SIZES = rf"^\[\s*(?:\[{_SIZES}\]\s*(?:,\s*\[{_SIZES}\]\s*)*)?\]$"
"""An ``Input Dims`` text whose sizes are all whole numbers (lists of digit runs)."""


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


def flop_ops(frame: EventFrame, launches: np.ndarray | None = None) -> pl.DataFrame:
    """One row per counted operator call in the window (outermost counted ones only, in no set order), with its work
    and kernels.

    Returns:
        row (event row), rank, device (GPU of its kernels, null without any), step, op, family, dtype, peak_dtype
        (the dtype whose peak it is held against), dims (the ``Input Dims`` text), flop (null where the shapes are missing or unreadable), bytes (the least memory
        traffic, see the module docstring), kernels, gpu_ns.
    """
    ev = frame.trace.events
    counted = ev.get_column("name").is_in(list(FAMILIES)).to_numpy() & ~frame.on_gpu
    if not (counted & frame.selected).any():
        return pl.DataFrame(schema=_OP_ROWS)
    parent = parent_rows(ev)
    outer = enclosing_all(parent, counted, outermost=True)  # per event its outermost counted ancestor
    rows = np.flatnonzero(counted & frame.selected & (outer[:-1] < 0))
    if not rows.size:
        return pl.DataFrame(schema=_OP_ROWS)
    launches = launch_calls(frame, copies=False) if launches is None else launches
    kernels = np.flatnonzero(frame.on_gpu & frame.selected & (launches >= 0) & _is_kernel(ev))
    kernel_count, gpu_ns, device = _kernel_work(frame, rows, kernels, outer[launches[kernels]])
    ops = pl.DataFrame(
        {
            "row": rows,
            "rank": frame.rank[rows].astype(np.int32),
            "step": frame.step[rows],
            "op": ev.get_column("name").gather(rows).cast(pl.String),
            "args": ev.get_column("args").gather(rows),
            "kernels": kernel_count,
            "gpu_ns": gpu_ns,
            "device": pl.Series(device, dtype=pl.Int32).scatter(np.flatnonzero(kernel_count == 0), None),
        }
    ).with_columns(pl.col("op").replace_strict(FAMILIES).alias("family"))
    conv = np.flatnonzero(ops.get_column("family").str.starts_with("conv").to_numpy())
    shaped = pl.concat([ops, _shapes(ops.get_column("args"), conv)], how="horizontal")
    known = shaped.get_column("shape").is_not_null()  # a trace without record_shapes: no work to count, cheaply
    counted_work = (
        shaped.filter(known)
        .with_columns(_flop().alias("flop"), _dtype().alias("dtype"))
        .with_columns(_bytes().alias("bytes"))
    )
    return (
        pl.concat([counted_work, shaped.filter(~known)], how="diagonal_relaxed")
        .with_columns(_peak_dtype().alias("peak_dtype"))
        .select(*(pl.col(c).cast(t) for c, t in _OP_ROWS.items()))
    )


def _kernel_work(
    frame: EventFrame, rows: np.ndarray, kernels: np.ndarray, owner: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per operator of ``rows`` (sorted): its kernels (those whose launch ``owner`` is it), their summed durations
    (int64 ns) and their smallest GPU id (-1 without kernels), with numpy's scatter-adds, not a group-by and join."""
    at = np.searchsorted(rows, owner)
    mine = (owner >= 0) & (at < rows.size)
    mine[mine] = rows[at[mine]] == owner[mine]  # an owner outside the window is no row of the table
    at, kernels = at[mine], kernels[mine]
    count = np.bincount(at, minlength=rows.size).astype(np.int64)
    gpu_ns = np.zeros(rows.size, np.int64)
    np.add.at(gpu_ns, at, (frame.end_ns - frame.start_ns)[kernels])
    device = np.full(rows.size, np.iinfo(np.int32).max, np.int64)
    np.minimum.at(device, at, frame.device[kernels])
    return count, gpu_ns, np.where(count > 0, device, -1).astype(np.int32)


_OP_ROWS = {
    "row": pl.Int64,
    "rank": pl.Int32,
    "device": pl.Int32,
    "step": pl.Int64,
    "op": pl.String,
    "family": pl.String,
    "dtype": pl.String,
    "peak_dtype": pl.String,
    "dims": pl.String,
    "flop": pl.Int64,
    "bytes": pl.Int64,
    "kernels": pl.Int64,
    "gpu_ns": pl.Int64,
}


def _is_kernel(ev: pl.DataFrame) -> np.ndarray:
    return (ev.get_column("cat") == "kernel").to_numpy()


def _shapes(args: pl.Series, concrete_rows: np.ndarray | None = None) -> pl.DataFrame:
    """shape (``Input Dims``: list of int lists), types (``Input type``), concrete (``Concrete Inputs``: lists of
    text) and dims (the ``Input Dims`` text) of the counted operators' args, each field's JSON cut out of the texts
    by a pattern (1.5x faster than polars' JSON parse of the texts, and the same on a text that is not JSON: a cut
    line). A shape is null unless every size is a whole number: never a float's or a quoted size's digits.
    ``Concrete Inputs`` are read for ``concrete_rows`` only (the convolutions': no other family reads them)."""
    dims = args.str.extract(_DIMS_TEXT)
    inner = r"\[[^\[\]]*\]"
    shape = dims.str.extract_all(inner).list.eval(
        pl.element().str.extract_all(r"\d+").list.eval(pl.element().cast(pl.Int64))
    )
    if concrete_rows is None:
        concrete = _strings(args, _CONCRETE_TEXT).alias("concrete")
    else:  # polars cannot scatter into a list column: the rows read are joined back by position
        read = pl.DataFrame({"i": concrete_rows, "concrete": _strings(args.gather(concrete_rows), _CONCRETE_TEXT)})
        at = pl.DataFrame({"i": np.arange(args.len(), dtype=concrete_rows.dtype)})
        concrete = at.join(read, on="i", how="left", maintain_order="left").get_column("concrete")
    frame = pl.DataFrame({"dims": dims, "shape": shape, "concrete": concrete})
    return frame.select(
        pl.when(pl.col("dims").str.contains(_WHOLE_SIZES)).then(pl.col("shape")).alias("shape"),
        _strings(args, _TYPES_TEXT).alias("types"),
        "concrete",
        "dims",
    )


def _strings(args: pl.Series, pattern: str) -> pl.Series:
    """The JSON list of strings after a key (``pattern``), as a list of its texts (escapes kept as written)."""
    quoted = args.str.extract(pattern).str.extract_all(_QUOTED)
    return quoted.list.eval(pl.element().str.strip_prefix('"').str.strip_suffix('"'))


def _dim(arg: int, axis: int) -> pl.Expr:
    """Size ``axis`` (negative: from the end) of input ``arg`` (null where the input has no such axis)."""
    return pl.col("shape").list.get(arg, null_on_oob=True).list.get(axis, null_on_oob=True)


def _rank_of(arg: int) -> pl.Expr:
    return pl.col("shape").list.get(arg, null_on_oob=True).list.len()


def _concrete_ints(pos: int) -> pl.Expr:
    """``Concrete Inputs[pos]`` read as a list of ints (``[1, 1]``), null where absent or not a list (its digit runs
    taken, so a damaged text gives nulls, never an error)."""
    text = pl.col("concrete").list.get(pos, null_on_oob=True)
    ints = text.str.extract_all(r"-?\d+").list.eval(pl.element().cast(pl.Int64, strict=False))
    return pl.when(text.str.starts_with("[")).then(ints)


def _flop() -> pl.Expr:
    """The work of one call per family (see the module docstring), int64; null where a needed size is missing."""
    fam = pl.col("family")
    mm = 2 * _dim(0, 0) * _dim(0, 1) * _dim(1, 1)
    addmm = 2 * _dim(1, 0) * _dim(1, 1) * _dim(2, 1)
    bmm = 2 * _dim(0, 0) * _dim(0, 1) * _dim(0, 2) * _dim(1, 2)
    baddbmm = 2 * _dim(1, 0) * _dim(1, 1) * _dim(1, 2) * _dim(2, 2)

    def attention(q: int, k: int, v: int, backward: bool) -> pl.Expr:
        b, h, s_q, d = _dim(q, 0), _dim(q, 1), _dim(q, 2), _dim(q, 3)
        s_k, d_v = _dim(k, 2), _dim(v, 3)
        return 2 * b * h * s_q * s_k * ((3 * d + 2 * d_v) if backward else (d + d_v))

    return (
        pl.when(fam == "mm")
        .then(mm)
        .when(fam == "addmm")
        .then(addmm)
        .when(fam == "bmm")
        .then(bmm)
        .when(fam == "baddbmm")
        .then(baddbmm)
        .when(fam == "sdpa")
        .then(attention(0, 1, 2, False))
        .when(fam == "sdpa_backward")
        .then(attention(1, 2, 3, True))
        .when(fam == "conv")
        .then(_conv_forward())
        .when(fam == "conv_backward")
        .then(_conv_backward())
    )


_SPATIAL = 3
"""Spatial axes a convolution may have (1d, 2d, 3d)."""


def _conv_core(x: int, w: int, out_spatial: list[pl.Expr]) -> pl.Expr:
    """``2 N K C/g prod(kernel) prod(conv_shape)`` with the weight's ``[K, C/g, *kernel]`` at input ``w``."""
    work = 2 * _dim(x, 0) * _dim(w, 0) * _dim(w, 1)
    for i in range(_SPATIAL):
        has = _rank_of(w) > 2 + i
        work = work * pl.when(has).then(_dim(w, 2 + i) * out_spatial[i]).otherwise(1)
    return work


def _conv_forward() -> pl.Expr:
    """aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups): the
    output's spatial size from the concrete stride, padding and dilation; a transposed one counts over its input."""
    stride, pad, dil = _concrete_ints(3), _concrete_ints(4), _concrete_ints(5)
    transposed = pl.col("concrete").list.get(6, null_on_oob=True) == "True"
    out = []
    for i in range(_SPATIAL):
        size, k = _dim(0, 2 + i), _dim(1, 2 + i)
        s, p, d = (v.list.get(i, null_on_oob=True) for v in (stride, pad, dil))
        out.append(pl.when(transposed).then(size).otherwise((size + 2 * p - d * (k - 1) - 1) // s + 1))
    return _conv_core(0, 1, out)


def _conv_backward() -> pl.Expr:
    """aten::convolution_backward(grad_output, input, weight, ..., transposed (7), ..., output_mask (10)): the
    forward's work (over grad_output's spatial size, or the input's for a transposed one) once per gradient asked
    for; both input and weight gradients when the mask is not recorded."""
    transposed = pl.col("concrete").list.get(7, null_on_oob=True) == "True"
    mask = pl.col("concrete").list.get(10, null_on_oob=True)
    asked = mask.str.extract_all("True|False").list.head(2).list.eval(pl.element() == "True").list.sum()
    grads = pl.when(mask.str.starts_with("[")).then(asked).otherwise(2)
    out = [pl.when(transposed).then(_dim(1, 2 + i)).otherwise(_dim(0, 2 + i)) for i in range(_SPATIAL)]
    return _conv_core(0, 2, out) * grads


def _bytes() -> pl.Expr:
    """The least memory traffic of one call (see the module docstring): its tensor inputs and outputs, in elements,
    times the dtype's size; null where a size or the dtype's size is unknown."""
    fam = pl.col("family")
    non_empty = pl.element().filter(pl.element().list.len() > 0)
    inputs = pl.col("shape").list.eval(non_empty.list.eval(pl.element().product()).list.first()).list.sum()

    def size(arg: int) -> pl.Expr:
        return pl.col("shape").list.get(arg, null_on_oob=True).list.eval(pl.element().product()).list.first()

    kernel = pl.lit(1, pl.Int64)
    for i in range(_SPATIAL):
        kernel = kernel * pl.when(_rank_of(1) > 2 + i).then(_dim(1, 2 + i)).otherwise(1)
    outputs = (
        pl.when(fam == "mm")
        .then(_dim(0, 0) * _dim(1, 1))
        .when(fam == "addmm")
        .then(_dim(1, 0) * _dim(2, 1))
        .when(fam == "bmm")
        .then(_dim(0, 0) * _dim(0, 1) * _dim(1, 2))
        .when(fam == "baddbmm")
        .then(_dim(1, 0) * _dim(1, 1) * _dim(2, 2))
        .when(fam == "sdpa")
        .then(_dim(0, 0) * _dim(0, 1) * _dim(0, 2) * _dim(2, 3))
        .when(fam == "sdpa_backward")
        .then(size(1) + size(2) + size(3))
        .when(fam == "conv")  # N K prod(out): the work over 2 C/g prod(kernel)
        .then(pl.col("flop") // (2 * _dim(1, 1) * kernel))
        .when(fam == "conv_backward")
        .then(size(1) + size(2))
    )
    return (inputs + outputs) * pl.col("dtype").replace_strict(ELEMENT_BYTES, default=None, return_dtype=pl.Int64)


def _dtype() -> pl.Expr:
    """The first matrix input's dtype (:data:`DTYPES`; ``fp8`` for ``c10::Float8_*``), else its type text."""
    first = pl.col("family").replace_strict(_FIRST_MATRIX, return_dtype=pl.Int64)
    text = pl.col("types").list.get(first, null_on_oob=True)
    return pl.when(text.str.starts_with("c10::Float8")).then(pl.lit("fp8")).otherwise(text.replace(DTYPES))


def _peak_dtype() -> pl.Expr:
    """The peak an operator's dtype is held against: fp32 convolutions run on TF32 (cuDNN's default)."""
    conv = pl.col("family").is_in(["conv", "conv_backward"])
    return pl.when(conv & (pl.col("dtype") == "fp32")).then(pl.lit("tf32")).otherwise(pl.col("dtype"))


def operator_flops(ops: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    """Per rank, GPU, operator, dtype and shape (``Input Dims``): calls, flop, kernels, gpu_ns, tflops, and the
    peak of the GPU for the dtype; sorted by rank and gpu_ns (largest first)."""
    if not ops.height:
        return pl.DataFrame(schema=_OPS)
    grouped = (
        ops.rename({"flop": "flop_per_call"})  # the same shape may differ in stride: one row per work per call
        .rename({"bytes": "bytes_per_call"})
        .group_by("rank", "device", "op", "dtype", "dims", "flop_per_call", "bytes_per_call", "peak_dtype")
        .agg(pl.len().cast(pl.Int64).alias("calls"), pl.col("kernels").sum(), pl.col("gpu_ns").sum())
        .with_columns((pl.col("flop_per_call") * pl.col("calls")).alias("flop"))
        .join(names, on=["rank", "device"], how="left")
    )
    return (
        _with_peaks(grouped)
        .with_columns(_tflops("flop", "gpu_ns").alias("tflops"))
        .with_columns((pl.col("tflops") / pl.col("peak_tflops")).alias("of_peak"))
        .pipe(_roofline)
        .select(*(pl.col(c).cast(t) for c, t in _OPS.items()))
        .pipe(_ops_in_order)
    )


def _roofline(ops: pl.DataFrame) -> pl.DataFrame:
    """intensity, attainable_tflops, of_attainable and bound of each row (see the module docstring)."""
    names = ops.select("device_name").unique()
    bandwidth = names.with_columns(
        pl.Series("bandwidth", [device_bandwidth(n) for (n,) in names.iter_rows()], pl.Float64)
    )
    memory_limit = pl.col("intensity") * pl.col("bandwidth")
    return (
        ops.join(bandwidth, on="device_name", how="left", nulls_equal=True)
        .with_columns((pl.col("flop_per_call") / pl.col("bytes_per_call")).alias("intensity"))
        .with_columns(
            pl.min_horizontal(pl.col("peak_tflops"), memory_limit).alias("attainable_tflops"),
            pl.when(memory_limit < pl.col("peak_tflops"))
            .then(pl.lit("memory"))
            .when(memory_limit.is_not_null() & pl.col("peak_tflops").is_not_null())
            .then(pl.lit("compute"))
            .alias("bound"),
        )
        .with_columns(
            pl.when(pl.col("bound").is_not_null())
            .then(pl.col("tflops") / pl.col("attainable_tflops"))
            .alias("of_attainable"),
            pl.when(pl.col("bound").is_not_null()).then(pl.col("attainable_tflops")).alias("attainable_tflops"),
        )
    )


_OPS_ORDER = ["rank", "gpu_ns", "flop", "device", "op", "dtype", "dims"]


def _ops_in_order(ops: pl.DataFrame) -> pl.DataFrame:
    return ops.sort(_OPS_ORDER, descending=[c in ("gpu_ns", "flop") for c in _OPS_ORDER], nulls_last=True)


def in_order(rates: pl.DataFrame | None, ops: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both tables of :func:`flops_tables` in their order (the parts of several processes put together), empty
    where None."""
    rates = pl.DataFrame(schema=_RATES) if rates is None else rates.sort(["rank", "device", "step"], nulls_last=False)
    return rates, _ops_in_order(pl.DataFrame(schema=_OPS) if ops is None else ops)


def _with_peaks(frame: pl.DataFrame) -> pl.DataFrame:
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


def _tflops(flop: str, ns: str) -> pl.Expr:
    return pl.when(pl.col(ns) > 0).then(pl.col(flop) / pl.col(ns) / 1000.0)


def flop_rates(frame: EventFrame, ops: pl.DataFrame, names: pl.DataFrame, *, per_step: bool = False) -> pl.DataFrame:
    """Per rank and GPU (and step with ``per_step``, step null for the window): the counted operators' calls (and
    those whose work could not be read), flop, gpu_ns, time_ns, achieved and overall TFLOP/s and the utilization of
    the peak of the dtype with the most flop (see the module docstring)."""
    ops = ops.filter(pl.col("device").is_not_null())
    if not ops.height:
        return pl.DataFrame(schema=_RATES)
    keys = ["rank", "device"]
    stepped_ranks = frame.steps.get_column("rank").unique().cast(pl.Int32)
    in_time = ~pl.col("rank").is_in(stepped_ranks.implode()) | (pl.col("step") != NO_STEP)
    out = [
        _rates(ops.filter(in_time), keys, _window_times(frame, ops)).with_columns(pl.lit(None, pl.Int64).alias("step"))
    ]
    if per_step:
        stepped = ops.filter(pl.col("step") != NO_STEP)
        steps = frame.steps.select(
            pl.col("rank").cast(pl.Int32), "step", (pl.col("end_ns") - pl.col("start_ns")).alias("time_ns")
        )
        out.append(_rates(stepped, [*keys, "step"], steps))
    return (
        pl.concat(out, how="diagonal_relaxed")
        .join(names, on=["rank", "device"], how="left")
        .pipe(_with_peaks)
        .with_columns(
            _tflops("flop", "gpu_ns").alias("achieved_tflops"), _tflops("flop", "time_ns").alias("flop_rate_tflops")
        )
        .with_columns((pl.col("flop_rate_tflops") / pl.col("peak_tflops")).alias("utilization"))
        .sort(["rank", "device", "step"], nulls_last=False)
        .select(*(pl.col(c).cast(t) for c, t in _RATES.items()))
    )


def _rates(ops: pl.DataFrame, keys: list[str], times: pl.DataFrame) -> pl.DataFrame:
    top = (  # the dtype doing most of the work names the peak
        ops.group_by(*keys, "peak_dtype")
        .agg(pl.col("flop").sum())
        .sort([*keys, "flop", "peak_dtype"], descending=[*(False for _ in keys), True, False])
        .group_by(keys, maintain_order=True)
        .agg(pl.col("peak_dtype").first())
    )
    sums = ops.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("calls"),
        pl.col("flop").null_count().cast(pl.Int64).alias("unknown_calls"),
        pl.when(pl.col("flop").count() > 0).then(pl.col("flop").sum()).alias("flop"),  # null: no work known
        pl.col("gpu_ns").filter(pl.col("flop").is_not_null()).sum(),
    )
    on = [k for k in keys if k != "device"]
    return sums.join(top, on=keys, how="left").join(times, on=on, how="left")


def _window_times(frame: EventFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """rank, time_ns of the window: its steps summed where the rank has steps, else the span of its GPU work."""
    summed = frame.steps.group_by(pl.col("rank").cast(pl.Int32)).agg((pl.col("end_ns") - pl.col("start_ns")).sum())
    summed = summed.rename({"end_ns": "time_ns"})
    ranks = ops.select("rank").unique()
    spans = _device_spans(frame)
    return (
        ranks.join(summed, on="rank", how="left")
        .join(spans, on="rank", how="left")
        .select("rank", pl.coalesce("time_ns", "span_ns").alias("time_ns"))
    )


def _device_spans(frame: EventFrame) -> pl.DataFrame:
    """rank, span_ns: first start to last end of the rank's GPU work in the window (all its GPUs)."""
    on = np.flatnonzero(frame.on_gpu & frame.selected & (frame.end_ns > frame.start_ns))
    return (
        pl.DataFrame({"rank": frame.rank[on].astype(np.int32), "s": frame.start_ns[on], "e": frame.end_ns[on]})
        .group_by("rank")
        .agg((pl.col("e").max() - pl.col("s").min()).alias("span_ns"))
    )


def flops_tables(frame: EventFrame, per_step: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(:func:`flop_rates`, :func:`operator_flops`) of the window."""
    ops = flop_ops(frame)
    names = device_names(frame)
    return flop_rates(frame, ops, names, per_step=per_step), operator_flops(ops, names)
