"""Kernels and whole CUDA graph launches -> event rows on their GPU stream.

CUPTI_ACTIVITY_KIND_KERNEL: named by the demangled name (else the short one),
cat ``nccl`` for NCCL kernels (:data:`di.convert.categories.COMM_KERNEL`), else
``kernel``; the short name, grid, block, registers, shared memory and, for a
graph's kernels, the graph and node ids go to ``args``.
CUPTI_ACTIVITY_KIND_GRAPH_TRACE (``--cuda-graph-trace=graph``): one ``kernel``
row per graph launch, ``CUDA graph ID``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from di.convert.categories import COMM_KERNEL
from di.convert.jsonstrings import json_strings
from di.convert.nsys.activity.gpu import _gpu, _gpu_cols, _graph_node
from di.convert.nsys.activity.rows import _flag, _names, base, frame, json_object, num
from di.convert.nsys.activity.tables import GRAPH_TRACE, KERNEL
from di.convert.nsys.report import Report

__all__ = ["graph_launches", "kernels"]


def _kernel_columns(report: Report) -> dict[str, np.ndarray]:
    """The KERNEL table's integer columns (shared memory: static + dynamic, where the table has them)."""
    have = set(report.columns(KERNEL))
    smem = " + ".join(f'coalesce("{c}", 0)' for c in ("staticSharedMemory", "dynamicSharedMemory") if c in have) or None
    return _gpu(
        report,
        KERNEL,
        {
            "demangled": "demangledName",
            "short": "shortName",
            "gx": "gridX",
            "gy": "gridY",
            "gz": "gridZ",
            "bx": "blockX",
            "by": "blockY",
            "bz": "blockZ",
            "regs": "registersPerThread",
            "smem": smem,
            "graph_node": "graphNodeId",
            "graph": "graphId",
        },
    )


def _dims(c: dict[str, np.ndarray], x: str, y: str, z: str) -> pl.Series:
    """``[x,y,z]`` JSON list texts of three integer columns."""
    dims = pl.concat_str(
        pl.lit("["),
        pl.lit(num(c[x])),
        pl.lit(","),
        pl.lit(num(c[y])),
        pl.lit(","),
        pl.lit(num(c[z])),
        pl.lit("]"),
    )
    return pl.select(dims).to_series()


def _kernel_args(c: dict[str, np.ndarray], short: pl.Series) -> pl.Series:
    fields = {
        "short_name": short,
        "grid": _dims(c, "gx", "gy", "gz"),
        "block": _dims(c, "bx", "by", "bz"),
        "registers per thread": num(c["regs"], c["regs_null"]),
        "shared memory": num(c["smem"], c["smem_null"]),
    }
    fields.update(_graph_node(c))
    if not c["graph_null"].all():
        fields["graph"] = num(c["graph"], c["graph_null"])
    return json_object(fields)


def kernels(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _kernel_columns(report)
    n = c["start"].size
    pos_short = report.positions(c["short"], c["short_null"])
    pos = report.positions(c["demangled"], c["demangled_null"]).fill_null(pos_short)
    name = report.derived("name", _names).gather(pos).fill_null("")
    short = report.derived("json", json_strings).gather(pos_short).fill_null("null")
    args = _kernel_args(c, short)
    cat = _flag(report, "nccl_kernel", COMM_KERNEL, pos, "nccl", "kernel")
    return frame(n, base(n, **_gpu_cols(c), name=name, src_cat="kernel", cat=cat, args=args))


def graph_launches(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    """Whole CUDA graph launches on their stream (``--cuda-graph-trace=graph``): cat kernel, linked to
    their cudaGraphLaunch by correlation id."""
    c = _gpu(report, GRAPH_TRACE, {"graph": "graphId", "exec": "graphExecId"})
    n = c["start"].size
    name = ("CUDA graph " + pl.Series(c["graph"]).cast(pl.String)).set(pl.Series(c["graph_null"]), "CUDA graph")
    args = json_object({"graph": num(c["graph"], c["graph_null"]), "graph exec": num(c["exec"], c["exec_null"])})
    return frame(n, base(n, **_gpu_cols(c), name=name, src_cat="cuda_graph", cat="kernel", args=args))
