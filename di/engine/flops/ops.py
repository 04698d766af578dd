"""The counted operator calls of a window, one row each, with their work and the kernels they launched.

Contract: :func:`flop_ops` keeps the outermost counted operator of a nest only (a backend's ``aten::mm`` inside
``aten::addmm`` is counted as the addmm), reads each call's shapes once, and gives each call the kernels whose launch it
encloses (:mod:`di.engine.launches`); it never mutates the trace. Its rows come in no set order.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine.flops.formulas import FAMILIES, call_bytes, call_flop, matrix_dtype, peak_dtype
from di.engine.flops.shapes import input_elements, read_shapes
from di.engine.launches import launch_calls
from di.engine.window import EventFrame
from di.nesting import enclosing_all, parent_rows

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


def flop_ops(frame: EventFrame, launches: np.ndarray | None = None) -> pl.DataFrame:
    """One row per counted operator call in the window (outermost counted ones only, in no set order), with its work
    and kernels.

    Returns:
        row (event row), rank, device (GPU of its kernels, null without any), step, op, family, dtype, peak_dtype
        (the dtype whose peak it is held against), dims (the ``Input Dims`` text), flop (null where the shapes are missing or unreadable), bytes (the least memory
        traffic, see :mod:`di.engine.flops`), kernels, gpu_ns.
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
    return _with_work(_calls(frame, rows, kernel_count, gpu_ns, device))


def _calls(
    frame: EventFrame, rows: np.ndarray, kernel_count: np.ndarray, gpu_ns: np.ndarray, device: np.ndarray
) -> pl.DataFrame:
    """The calls at event ``rows`` with their kernels, args text and family (work not read yet)."""
    ev = frame.trace.events
    return pl.DataFrame(
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


def _with_work(ops: pl.DataFrame) -> pl.DataFrame:
    """``ops`` with their shapes read and their work, traffic and dtypes counted, in the columns of :data:`_OP_ROWS`."""
    conv = np.flatnonzero(ops.get_column("family").str.starts_with("conv").to_numpy())
    shaped = pl.concat([ops, read_shapes(ops.get_column("args"), conv)], how="horizontal")
    known = shaped.get_column("shape").is_not_null()  # a trace without record_shapes: no work to count, cheaply
    counted_work = (
        shaped.filter(known)
        .with_columns(call_flop().alias("flop"), matrix_dtype().alias("dtype"))
        .with_columns(input_elements(shaped.get_column("shape").filter(known)))
        .with_columns(call_bytes().alias("bytes"))
    )
    return (
        pl.concat([counted_work, shaped.filter(~known)], how="diagonal_relaxed")
        .with_columns(peak_dtype().alias("peak_dtype"))
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


def _is_kernel(ev: pl.DataFrame) -> np.ndarray:
    return (ev.get_column("cat") == "kernel").to_numpy()
