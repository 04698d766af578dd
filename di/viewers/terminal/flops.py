"""The matrix-work section: each GPU's matmul, conv and attention work against its peak, then the operators by GPU
time; and the operator and input-shape labels the report uses too.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.viewers.rows_shown import unusual_rank_rows
from di.viewers.terminal.tables import RANKS_SHOWN, pct_text, print_table, short_name, tflops_text

FLOP_OPS_SHOWN = 8
"""Rows of the operator table per rank (all are in ``--csv``/``--json``)."""
OP_LABELS = (
    ("aten::_scaled_dot_product_flash_attention", "sdpa flash"),
    ("aten::_scaled_dot_product_efficient_attention", "sdpa mem-eff"),
    ("aten::_scaled_dot_product_cudnn_attention", "sdpa cudnn"),
    ("aten::convolution_backward", "conv backward"),
    ("aten::convolution", "conv"),
    ("aten::", ""),
)
"""Short names of the counted operators (a prefix and what it becomes; ``_backward`` is kept as `` backward``)."""


def op_label(op: str) -> str:
    """``aten::_scaled_dot_product_flash_attention_backward`` as ``sdpa flash backward``, ``aten::addmm`` as
    ``addmm``."""
    for prefix, short in OP_LABELS:
        if op.startswith(prefix):
            rest = op.removeprefix(prefix)
            return (short + rest.replace("_backward", " backward")).strip() if short else rest
    return op


def dims_label(dims: str | None) -> str:
    """An ``Input Dims`` text as its tensors' shapes (``[[512],[141,512],[512,512],[],[]]`` as
    ``512 141x512 512x512``); the text itself where it is not such a list."""
    import json

    try:
        shapes = json.loads(dims) if dims else None
        return " ".join("x".join(str(int(d)) for d in shape) for shape in shapes if shape)
    except (ValueError, TypeError):
        return dims or "—"


def shapeless_text(calls: int) -> str:
    """What a trace whose matrix operators have no recorded shapes says about them."""
    return (
        f"{calls:,} matrix-operator calls (matmul, conv, attention) were recorded without their input shapes; "
        "PyTorch's profiler with record_shapes=True records them, and di then counts their work against the GPU's peak."
    )


def render_flops(result: Analysis, console: Any) -> None:
    """Each GPU's matrix-operator work against its peak, and the operators by GPU time (traces with shapes); of more
    than :data:`RANKS_SHOWN` ranks, those whose rates are least like the median rank's."""
    from rich.table import Table

    rates = result.flops
    if rates is None or not rates.height:
        return
    if rates.get_column("flop").null_count() == rates.height:  # a profile without record_shapes: nothing to count
        calls = rates.filter(pl.col("step").is_null()).get_column("calls").sum()
        console.print(f"Matrix work: {shapeless_text(calls)}")
        return
    speeds = [pl.col("achieved_tflops", "flop_rate_tflops", "utilization")]
    rule = "whose rates are least like the median rank's"
    whole, more = unusual_rank_rows(rates.filter(pl.col("step").is_null()), speeds, RANKS_SHOWN, rule)
    ranks = whole.get_column("rank").unique().to_list()
    t = Table(
        title=f"Matrix work (matmul, conv, attention; TFLOP/s{more})",
        caption="achieved: while their kernels ran; rate: over the steps (or the GPU's span); util: rate / the "
        "GPU's dense peak (MFU when nothing is recomputed)",
    )
    for c in ("rank", "gpu", "calls", "TFLOP", "achieved", "rate", "peak", "util"):
        t.add_column(c, justify="right")
    for r in whole.iter_rows(named=True):
        peak = "—" if r["peak_tflops"] is None else f"{tflops_text(r['peak_tflops'])} {r['peak_dtype']}"
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            f"{r['calls']:,}" + (f" ({r['unknown_calls']:,} ?)" if r["unknown_calls"] else ""),
            "—" if r["flop"] is None else f"{r['flop'] / 1e12:.3g}",
            tflops_text(r["achieved_tflops"]),
            tflops_text(r["flop_rate_tflops"]),
            peak,
            pct_text(r["utilization"]),
        )
    print_table(console, t)
    ops = result.flops_ops
    if ops is None or not ops.height:
        return
    o = Table(
        title="Matrix operators by GPU time (per input shape)",
        caption="% roof: of the roofline, min(peak, flop per byte x the GPU's bandwidth); m: memory-bound",
    )
    for c in ("rank", "operator", "dtype", "calls", "GPU ms", "TFLOP/s", "% roof", "input shapes"):
        o.add_column(c, justify="left" if c in ("operator", "input shapes", "dtype") else "right")
    ops = ops.filter(pl.col("rank").is_in(ranks))
    shown = ops.filter(pl.int_range(pl.len()).over("rank") < FLOP_OPS_SHOWN)
    for r in shown.iter_rows(named=True):
        o.add_row(
            str(r["rank"]),
            short_name(op_label(r["op"]), 20),
            r["dtype"] or "—",
            f"{r['calls']:,}",
            f"{r['gpu_ns'] / 1e6:.3f}",
            tflops_text(r["tflops"]),
            pct_text(r["of_attainable"]) + ("m" if r["bound"] == "memory" else ""),
            short_name(dims_label(r["dims"]), 22),
        )
    print_table(console, o)
