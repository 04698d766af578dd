"""The work and memory traffic of one call of a counted operator, per operator family, as polars expressions over the
columns :func:`di.engine.flops.shapes.read_shapes` makes (``shape``, ``types``, ``concrete``), ``family`` and, for
:func:`call_bytes`, ``input_elements``.

Contract (the definitions are :mod:`di.engine.flops`'): :func:`call_flop` is ``torch.utils.flop_counter``'s count of
one call, int64; :func:`call_bytes` the least memory traffic of one call (its tensor inputs and outputs times the
dtype's size); :func:`matrix_dtype` the first matrix input's dtype and :func:`peak_dtype` the dtype whose peak the
call is held against. Each is null where a size or type it needs is missing, never an error.
"""

from __future__ import annotations

import polars as pl

from di.engine.flops.shapes import concrete_ints, dim, rank_of

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
ELEMENT_BYTES = {"fp8": 1, "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}
"""Bytes per element of the dtypes whose traffic is counted."""


def call_flop() -> pl.Expr:
    """The work of one call per family (see :mod:`di.engine.flops`), int64; null where a needed size is missing."""
    fam = pl.col("family")
    mm = 2 * dim(0, 0) * dim(0, 1) * dim(1, 1)
    addmm = 2 * dim(1, 0) * dim(1, 1) * dim(2, 1)
    bmm = 2 * dim(0, 0) * dim(0, 1) * dim(0, 2) * dim(1, 2)
    baddbmm = 2 * dim(1, 0) * dim(1, 1) * dim(1, 2) * dim(2, 2)

    def attention(q: int, k: int, v: int, backward: bool) -> pl.Expr:
        b, h, s_q, d = dim(q, 0), dim(q, 1), dim(q, 2), dim(q, 3)
        s_k, d_v = dim(k, 2), dim(v, 3)
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
    work = 2 * dim(x, 0) * dim(w, 0) * dim(w, 1)
    for i in range(_SPATIAL):
        has = rank_of(w) > 2 + i
        work = work * pl.when(has).then(dim(w, 2 + i) * out_spatial[i]).otherwise(1)
    return work


def _conv_forward() -> pl.Expr:
    """aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups): the
    output's spatial size from the concrete stride, padding and dilation; a transposed one counts over its input."""
    stride, pad, dil = concrete_ints(3), concrete_ints(4), concrete_ints(5)
    transposed = pl.col("concrete").list.get(6, null_on_oob=True) == "True"
    out = []
    for i in range(_SPATIAL):
        size, k = dim(0, 2 + i), dim(1, 2 + i)
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
    out = [pl.when(transposed).then(dim(1, 2 + i)).otherwise(dim(0, 2 + i)) for i in range(_SPATIAL)]
    return _conv_core(0, 2, out) * grads


def call_bytes() -> pl.Expr:
    """The least memory traffic of one call (see :mod:`di.engine.flops`): its tensor inputs
    (``input_elements``, :func:`~di.engine.flops.shapes.input_elements`) and outputs, in elements, times the dtype's
    size; null where a size or the dtype's size is unknown."""
    return (pl.col("input_elements") + _output_elements()) * pl.col("dtype").replace_strict(
        ELEMENT_BYTES, default=None, return_dtype=pl.Int64
    )


def _output_elements() -> pl.Expr:
    """The elements of one call's outputs per family (a backward's: its gradients); a convolution's from its work."""
    fam = pl.col("family")

    def size(arg: int) -> pl.Expr:
        return pl.col("shape").list.get(arg, null_on_oob=True).list.eval(pl.element().product()).list.first()

    kernel = pl.lit(1, pl.Int64)
    for i in range(_SPATIAL):
        kernel = kernel * pl.when(rank_of(1) > 2 + i).then(dim(1, 2 + i)).otherwise(1)
    return (
        pl.when(fam == "mm")
        .then(dim(0, 0) * dim(1, 1))
        .when(fam == "addmm")
        .then(dim(1, 0) * dim(2, 1))
        .when(fam == "bmm")
        .then(dim(0, 0) * dim(0, 1) * dim(1, 2))
        .when(fam == "baddbmm")
        .then(dim(1, 0) * dim(1, 1) * dim(2, 2))
        .when(fam == "sdpa")
        .then(dim(0, 0) * dim(0, 1) * dim(0, 2) * dim(2, 3))
        .when(fam == "sdpa_backward")
        .then(size(1) + size(2) + size(3))
        .when(fam == "conv")  # N K prod(out): the work over 2 C/g prod(kernel)
        .then(pl.col("flop") // (2 * dim(1, 1) * kernel))
        .when(fam == "conv_backward")
        .then(size(1) + size(2))
    )


def matrix_dtype() -> pl.Expr:
    """The first matrix input's dtype (:data:`DTYPES`; ``fp8`` for ``c10::Float8_*``), else its type text."""
    first = pl.col("family").replace_strict(_FIRST_MATRIX, return_dtype=pl.Int64)
    text = pl.col("types").list.get(first, null_on_oob=True)
    return pl.when(text.str.starts_with("c10::Float8")).then(pl.lit("fp8")).otherwise(text.replace(DTYPES))


def peak_dtype() -> pl.Expr:
    """The peak an operator's dtype is held against: fp32 convolutions run on TF32 (cuDNN's default)."""
    conv = pl.col("family").is_in(["conv", "conv_backward"])
    return pl.when(conv & (pl.col("dtype") == "fp32")).then(pl.lit("tf32")).otherwise(pl.col("dtype"))
