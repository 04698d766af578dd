"""Matrix work (matrix products, convolutions, attention) and the rate the GPUs did it at, against their peak.

Numbers are the engine's (:mod:`di.engine.flops`, where the roofline's terms are defined): work in TFLOP (10**12 floating-point operations, a multiply-add
is 2), rates in TFLOP/s, times in ms with the exact ns in ``data-v``, as ``di analyze --json`` reports them under
``ranks[].flops`` and ``flops_ops``.
"""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from di.viewers.report.page import Cell, Section, ms, num, pct, table
from di.viewers.terminal import dims_label, op_label, shapeless_text, tflops_text

LOW_UTILIZATION = 0.2
"""A hint for a GPU whose matrix work runs at under this share of its peak over the steps."""
LOW_OP_SHARE = 0.2
"""Operators under this share of the peak while their kernels run are named in that hint (the one with the most
GPU time)."""
SLOW_RANK_RATIO = 0.8
"""A hint when a rank runs an operator of the same shape at under this share of the fastest rank's rate."""
MIN_SHARE_OF_TIME = 0.05
"""Operators with less than this share of their GPU's counted kernel time are not named in hints."""
FP32_SHARE = 0.5
"""A hint when this share of a GPU's matrix work or more runs in fp32 on a GPU with faster tensor-core types."""
OPS_SHOWN = 25
"""Operator rows per rank (the most GPU time first); all are in ``di analyze --csv``."""


def tflop(flop: int | None) -> Cell:
    """A work cell: shown in TFLOP, exact operations in data-v."""
    return Cell("—", None) if flop is None else Cell(f"{flop / 1e12:,.4g}", int(flop))


def rate(value: float | None) -> Cell:
    """A TFLOP/s cell."""
    return Cell(tflops_text(value), value)


_TITLE = "Matrix work against the GPU's peak"
_NOTE = (
    '<p class="note">Counted: matrix products, convolutions and scaled-dot-product attention, from the shapes '
    "the profiler recorded (PyTorch's FlopCounterMode counts; a multiply-add is 2). achieved: their work over "
    "the time their kernels ran; rate: over the steps (or the GPU's span without steps); utilization: rate / the "
    "GPU's dense peak for the dtype doing most of the work (the model FLOP utilization, MFU, when nothing is "
    "recomputed).</p>"
)


def panel(ctx) -> Section | None:  # noqa: ANN001
    rates = ctx.result.flops
    if rates is None or not rates.height:
        return None
    ops = ctx.result.flops_ops if ctx.result.flops_ops is not None else pl.DataFrame()
    whole = rates.filter(pl.col("step").is_null())
    if rates.get_column("flop").null_count() == rates.height:  # a profile without record_shapes
        note = f'<p class="note">{html.escape(shapeless_text(int(whole.get_column("calls").sum())))}</p>'
        return Section("flops", _TITLE, note)
    body = _NOTE + _rates_table(whole)
    steps = rates.filter(pl.col("step").is_not_null())
    if steps.height:
        body += "<h3>Per step</h3>" + _steps_table(steps)
    if ops.height:
        body += "<h3>Operators by kernel time (one row per input shape)</h3>" + _ops_table(ops)
    return Section("flops", _TITLE, body, hints=_hints(whole, ops))


def _rates_table(whole: pl.DataFrame) -> str:
    """The whole window's rates, one row per rank and GPU."""
    return table(
        "flops",
        [
            "rank",
            "gpu",
            "device",
            "calls",
            "unknown work",
            "TFLOP",
            "kernel time (ms)",
            "time (ms)",
            "achieved TFLOP/s",
            "rate TFLOP/s",
            "peak TFLOP/s",
            "peak dtype",
            "utilization",
        ],
        [
            (
                r["rank"],
                r["device"],
                r["device_name"] or "—",
                num(r["calls"]),
                num(r["unknown_calls"]),
                tflop(r["flop"]),
                ms(r["gpu_ns"]),
                ms(r["time_ns"]),
                rate(r["achieved_tflops"]),
                rate(r["flop_rate_tflops"]),
                rate(r["peak_tflops"]),
                r["peak_dtype"] or "—",
                pct(r["utilization"]),
            )
            for r in whole.iter_rows(named=True)
        ],
    )


def _steps_table(steps: pl.DataFrame) -> str:
    """The rates per rank, GPU and step."""
    return table(
        "flops_steps",
        ["rank", "gpu", "step", "TFLOP", "time (ms)", "rate TFLOP/s", "utilization"],
        [
            (
                r["rank"],
                r["device"],
                r["step"],
                tflop(r["flop"]),
                ms(r["time_ns"]),
                rate(r["flop_rate_tflops"]),
                pct(r["utilization"]),
            )
            for r in steps.iter_rows(named=True)
        ],
    )


def _ops_table(ops: pl.DataFrame) -> str:
    """The first :data:`OPS_SHOWN` operator rows of each rank (the engine's order: the most GPU time first)."""
    shown = ops.filter(pl.int_range(pl.len()).over("rank") < OPS_SHOWN)
    return table(
        "flops_ops",
        [
            "rank",
            "gpu",
            "operator",
            "dtype",
            "input shapes",
            "calls",
            "TFLOP per call",
            "kernel time (ms)",
            "TFLOP/s",
            "of peak",
            "flop per byte",
            "bound",
            "of roofline",
        ],
        [
            (
                r["rank"],
                num(r["device"]),
                r["op"],
                r["dtype"] or "—",
                dims_label(r["dims"]),
                num(r["calls"]),
                tflop(r["flop_per_call"]),
                ms(r["gpu_ns"]),
                rate(r["tflops"]),
                pct(r["of_peak"]),
                num(r["intensity"], "{:,.1f}"),
                r["bound"] or "—",
                pct(r["of_attainable"]),
            )
            for r in shown.iter_rows(named=True)
        ],
    )


def _hints(whole: pl.DataFrame, ops: pl.DataFrame) -> list[str]:
    out = _peak_unknown_hints(whole)
    known = _known_ops(ops)
    for r in whole.iter_rows(named=True):
        if r["utilization"] is None or r["utilization"] >= LOW_UTILIZATION:
            continue
        out.append(_low_utilization_hint(r, known))
    if known.height:
        out += _fp32_hints(known)
        out += _slow_ranks(known)
    return out


def _peak_unknown_hints(whole: pl.DataFrame) -> list[str]:
    """GPUs without a known peak, and a trace that does not name its GPU."""
    out: list[str] = []
    unknown = sorted({r["device_name"] for r in whole.iter_rows(named=True) if r["peak_tflops"] is None} - {None})
    if unknown:
        out.append(
            f"No peak is known for {', '.join(unknown)}: the rates are shown without a utilization "
            "(di.engine.flops.PEAKS lists the GPUs it knows). Name its peaks in a JSON file and set DI_GPU_SPECS to "
            'it: [{"name": "RTX 4090", "peak_tflops": {"bf16": 165.2}, "bandwidth_tbps": 1.008}].'
        )
    if whole.get_column("device_name").null_count():
        out.append("The trace does not name its GPU (Kineto writes it in deviceProperties): no peak to compare with.")
    return out


def _known_ops(ops: pl.DataFrame) -> pl.DataFrame:
    """The operator rows with known work on a GPU, with ``time_share``: their share of their GPU's counted kernel
    time."""
    known = ops.filter(pl.col("flop").is_not_null() & pl.col("device").is_not_null())
    if known.height:
        known = known.with_columns(
            (pl.col("gpu_ns") / pl.col("gpu_ns").sum().over("rank", "device")).alias("time_share")
        )
    return known


def _low_utilization_hint(r: dict[str, Any], known: pl.DataFrame) -> str:
    """A GPU (whole-window row ``r``) under :data:`LOW_UTILIZATION`: whether its matrix kernels are slow or the time
    goes elsewhere, and its slowest operator with much of the time."""
    text = (
        f"Rank {r['rank']} GPU {r['device']} does its matrix work at {100 * r['utilization']:.1f}% of its "
        f"{r['peak_dtype']} peak over the steps"
    )
    busy = None if r["achieved_tflops"] is None else r["achieved_tflops"] / r["peak_tflops"]
    if busy is not None and busy >= LOW_UTILIZATION:
        text += (
            f"; its matrix kernels run at {100 * busy:.0f}% while they run, so the time goes elsewhere: other "
            "kernels, copies and idle gaps (see the breakdown and GPU idle)"
        )
    slow = known.filter(
        (pl.col("rank") == r["rank"])
        & (pl.col("device") == r["device"])
        & (pl.col("of_peak") < LOW_OP_SHARE)
        & (pl.col("time_share") >= MIN_SHARE_OF_TIME)
    )
    if slow.height:
        text += _slow_op_text(slow.row(0, named=True))
    return text + "."


def _slow_op_text(s: dict[str, Any]) -> str:
    """The part of a low-utilization hint naming operator row ``s`` and why it is slow: memory-bound, or too little
    work per kernel."""
    text = (
        f"; {op_label(s['op'])} on {dims_label(s['dims'])} holds {100 * s['time_share']:.0f}% of the matrix "
        f"kernels' time at {100 * s['of_peak']:.1f}% of peak: "
    )
    per_kernel_us = s["gpu_ns"] / max(s["kernels"], 1) / 1e3
    if s["of_attainable"] is not None and s["of_attainable"] >= LOW_OP_SHARE:
        text += (
            f"at {s['intensity']:.0f} flop per byte it is memory-bound (its roofline is "
            f"{tflops_text(s['attainable_tflops'])} TFLOP/s): fuse it with its neighbours (torch.compile) "
            "or batch more so each byte moved does more work"
        )
    else:
        roof = "" if s["of_attainable"] is None else f", {100 * s['of_attainable']:.1f}% of its roofline"
        text += (
            f"{per_kernel_us:.1f} us per kernel{roof}: too little work per kernel to fill the GPU (batch "
            "more, fuse with torch.compile, capture the step in a CUDA graph)"
        )
    return text


def _fp32_hints(known: pl.DataFrame) -> list[str]:
    """GPUs that do :data:`FP32_SHARE` or more of their matrix work in fp32."""
    fp32 = known.group_by("rank", "device").agg(
        (pl.col("flop").filter(pl.col("dtype") == "fp32").sum() / pl.col("flop").sum()).alias("fp32_share")
    )
    return [
        f"Rank {r['rank']} GPU {r['device']}: {100 * r['fp32_share']:.0f}% of the matrix work runs in fp32; "
        "bf16 autocast (torch.autocast('cuda', torch.bfloat16)) or TF32 matmuls "
        "(torch.backends.cuda.matmul.allow_tf32 = True) run it on the tensor cores."
        for r in fp32.filter(pl.col("fp32_share") >= FP32_SHARE).sort("rank", "device").iter_rows(named=True)
    ]


def _slow_ranks(known: pl.DataFrame) -> list[str]:
    """The same operator and shape run much slower on one rank than on the fastest: a slow GPU or one shared."""
    if known.get_column("rank").n_unique() < 2:
        return []
    best = known.group_by("op", "dtype", "dims", "flop_per_call").agg(
        pl.col("tflops").max().alias("best"),
        pl.col("rank").sort_by("tflops", descending=True).first().alias("best_rank"),
    )
    slow = (
        known.join(best, on=["op", "dtype", "dims", "flop_per_call"], nulls_equal=True)
        .filter((pl.col("tflops") < SLOW_RANK_RATIO * pl.col("best")) & (pl.col("time_share") >= MIN_SHARE_OF_TIME))
        .sort("gpu_ns", descending=True)
        .unique("rank", keep="first", maintain_order=True)
        .sort("rank")
    )
    return [
        f"Rank {r['rank']} runs {op_label(r['op'])} on {dims_label(r['dims'])} at {tflops_text(r['tflops'])} TFLOP/s "
        f"against {tflops_text(r['best'])} on rank {r['best_rank']} (same shapes): a slower GPU (clocks, power, "
        "heat: see GPU clocks) or one shared with other work."
        for r in slow.iter_rows(named=True)
    ]
