"""The two result tables of the analysis: per operator, dtype and shape (:func:`operator_flops`, with its roofline) and
per rank and GPU, optionally per step (:func:`flop_rates`), both from the calls of :func:`di.engine.flops.ops.flop_ops`.

Contract: each returns a polars DataFrame with exactly the columns and dtypes of :data:`_OPS` / :data:`_RATES`, empty
with that schema when there is nothing to count, in the order :func:`in_order` gives; the definitions of every column
are :mod:`di.engine.flops`'.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.flops.devices import device_bandwidth, with_peaks
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame

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
        with_peaks(grouped)
        .with_columns(_tflops("flop", "gpu_ns").alias("tflops"))
        .with_columns((pl.col("tflops") / pl.col("peak_tflops")).alias("of_peak"))
        .pipe(_roofline)
        .select(*(pl.col(c).cast(t) for c, t in _OPS.items()))
        .pipe(_ops_in_order)
    )


def _roofline(ops: pl.DataFrame) -> pl.DataFrame:
    """intensity, attainable_tflops, of_attainable and bound of each row (see :mod:`di.engine.flops`)."""
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


def _tflops(flop: str, ns: str) -> pl.Expr:
    return pl.when(pl.col(ns) > 0).then(pl.col(flop) / pl.col(ns) / 1000.0)


def flop_rates(frame: EventFrame, ops: pl.DataFrame, names: pl.DataFrame, *, per_step: bool = False) -> pl.DataFrame:
    """Per rank and GPU (and step with ``per_step``, step null for the window): the counted operators' calls (and
    those whose work could not be read), flop, gpu_ns, time_ns, achieved and overall TFLOP/s and the utilization of
    the peak of the dtype with the most flop (see :mod:`di.engine.flops`)."""
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
        .pipe(with_peaks)
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
