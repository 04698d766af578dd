"""GPU memory operations: CUPTI_ACTIVITY_KIND_MEMCPY and _MEMSET -> event rows on their GPU stream.

A copy is named ``Memcpy KIND (SRC -> DST)`` (``Memcpy KIND`` without the
memory kinds), a memset ``Memset (MEM)``; both carry ``bytes``, their kinds as
text in ``args`` and, for records a CUDA graph launched, the graph node.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from di.convert.cupti_enums import MEMCPY_KINDS
from di.convert.jsonstrings import json_strings
from di.convert.nsys.activity.gpu import _gpu, _gpu_cols, _graph_node
from di.convert.nsys.activity.rows import _enum_text, _nullable, base, frame, json_object, num
from di.convert.nsys.activity.tables import MEMCPY, MEMSET
from di.convert.nsys.report import Report

__all__ = ["COPY_KINDS", "MEM_KINDS", "memcpys", "memsets"]

# CUPTI enums (cupti_activity.h; the export's ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND hold the same)
COPY_KINDS = {0: "Unknown", **MEMCPY_KINDS}
MEM_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
    7: "Unknown",
}


def memcpys(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(
        report,
        MEMCPY,
        {"bytes": "bytes", "kind": "copyKind", "src": "srcKind", "dst": "dstKind", "graph_node": "graphNodeId"},
    )
    n = c["start"].size
    kind = _enum_text(c["kind"], c["kind_null"], COPY_KINDS)
    src, dst = _enum_text(c["src"], c["src_null"], MEM_KINDS), _enum_text(c["dst"], c["dst_null"], MEM_KINDS)
    df = pl.DataFrame({"k": kind.fill_null("Unknown"), "s": src, "d": dst})
    name = df.select(
        pl.when(pl.col("s").is_not_null() & pl.col("d").is_not_null())
        .then(pl.format("Memcpy {} ({} -> {})", "k", "s", "d"))
        .otherwise(pl.format("Memcpy {}", "k"))
    ).to_series()
    args = json_object(
        {
            "copy kind": json_strings(kind),
            "src kind": json_strings(src),
            "dst kind": json_strings(dst),
            **_graph_node(c),
        }
    )
    return frame(
        n,
        base(n, **_gpu_cols(c), name=name, src_cat="gpu_memcpy", cat="memcpy", bytes=_nullable(c, "bytes"), args=args),
    )


def memsets(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, MEMSET, {"bytes": "bytes", "value": "value", "mem": "memKind", "graph_node": "graphNodeId"})
    n = c["start"].size
    mem = _enum_text(c["mem"], c["mem_null"], MEM_KINDS)
    name = (
        pl.DataFrame({"m": mem})
        .select(pl.when(pl.col("m").is_not_null()).then(pl.format("Memset ({})", "m")).otherwise(pl.lit("Memset")))
        .to_series()
    )
    args = json_object({"value": num(c["value"], c["value_null"]), "mem kind": json_strings(mem), **_graph_node(c)})
    return frame(
        n,
        base(n, **_gpu_cols(c), name=name, src_cat="gpu_memset", cat="memset", bytes=_nullable(c, "bytes"), args=args),
    )
