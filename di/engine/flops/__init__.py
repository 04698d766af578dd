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

The package: :mod:`~di.engine.flops.devices` (GPU names, peaks, bandwidth), :mod:`~di.engine.flops.shapes` (the
recorded inputs read out of the args), :mod:`~di.engine.flops.formulas` (the work and traffic per operator family),
:mod:`~di.engine.flops.ops` (the counted calls) and :mod:`~di.engine.flops.tables` (the result tables).
"""

from __future__ import annotations

import polars as pl

from di.engine.flops.devices import BANDWIDTH, PEAKS, device_bandwidth, device_names, device_peak
from di.engine.flops.formulas import DTYPES as DTYPES
from di.engine.flops.formulas import ELEMENT_BYTES, FAMILIES
from di.engine.flops.ops import flop_ops
from di.engine.flops.shapes import read_shapes as _shapes  # noqa: F401  (tests read the args through it)
from di.engine.flops.tables import flop_rates, in_order, operator_flops
from di.engine.window import EventFrame

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


def flops_tables(frame: EventFrame, per_step: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(:func:`flop_rates`, :func:`operator_flops`) of the window."""
    ops = flop_ops(frame)
    names = device_names(frame)
    return flop_rates(frame, ops, names, per_step=per_step), operator_flops(ops, names)
