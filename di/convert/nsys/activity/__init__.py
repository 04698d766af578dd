"""Nsight Systems tables -> event rows (one polars frame per table, common columns).

| table | cat | timeline |
| --- | --- | --- |
| CUPTI_ACTIVITY_KIND_KERNEL | kernel (NCCL kernels: nccl); a graph's kernels keep graph and node ids in args | GPU stream |
| CUPTI_ACTIVITY_KIND_MEMCPY | memcpy, bytes, copy kind in the name and args (graph node too) | GPU stream |
| CUPTI_ACTIVITY_KIND_MEMSET | memset, bytes (graph node too) | GPU stream |
| CUPTI_ACTIVITY_KIND_SYNCHRONIZATION | sync (Kineto's names: Event Sync, Stream Sync, ...) | GPU stream (-1: device-wide) |
| CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER | cuda_api (synchronising calls: sync) | CPU thread |
| NVTX_EVENTS push/pop, start/end, marks | user, step (ProfilerStep#N, "step N", ...), nccl (domain NCCL) | CPU thread; start/end ranges an async track per process and domain |
| OSRT_API | io (file and socket calls), else other | CPU thread |
| CUPTI_ACTIVITY_KIND_GRAPH_TRACE | kernel: a whole CUDA graph launch, graph and exec ids in args | GPU stream |
| CUDA_GRAPH_EVENTS / CUDA_GRAPH_NODE_EVENTS | cuda_api: graph and node definitions, their ids in args | CPU thread |
| MPI_* (:mod:`.mpi`) | mpi_p2p, mpi_coll, other | CPU thread |

Every frame has: ``kind``, ``pid``, ``tid``, ``device``, ``stream``, ``start_ns``,
``end_ns`` (on the report's clock, ns), ``name``, ``src_cat``, ``cat``, ``corr``,
``bytes``, ``instant``, ``args`` (JSON text), ``domain``. API names lose the
``_vNNNN`` version suffix, as ``nsys stats`` shows them.

One module per concern: :mod:`.tables` (the table names), :mod:`.rows` (the
common columns and frame builders), :mod:`.gpu` (what GPU records share; the
synchronisations), :mod:`.kernels` (kernels, graph launches), :mod:`.memory`
(memcpy, memset), :mod:`.api` (runtime, driver, graph definitions, OS runtime)
and :mod:`.nvtx`; :func:`frames` runs the reader of each table present.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import polars as pl

from di.convert.nsys.activity.api import driver, graph_nodes, graphs, osrt, runtime
from di.convert.nsys.activity.gpu import syncs
from di.convert.nsys.activity.kernels import graph_launches, kernels
from di.convert.nsys.activity.memory import memcpys, memsets
from di.convert.nsys.activity.nvtx import nvtx
from di.convert.nsys.activity.tables import (
    DRIVER,
    GRAPH_NODES,
    GRAPH_TRACE,
    GRAPHS,
    KERNEL,
    MEMCPY,
    MEMSET,
    NVTX,
    OSRT,
    RUNTIME,
    SYNC,
    TABLES,
)
from di.convert.nsys.report import Report

# ``import X as X``: names read from this package elsewhere (the reader, :mod:`.mpi`), not by frames
from di.convert.nsys.activity.api import API_VERSION as API_VERSION
from di.convert.nsys.activity.api import EVENT_CLASS_DRIVER as EVENT_CLASS_DRIVER
from di.convert.nsys.activity.api import IO_CALLS as IO_CALLS
from di.convert.nsys.activity.gpu import NO_STREAM as NO_STREAM
from di.convert.nsys.activity.gpu import SYNC_TYPES as SYNC_TYPES
from di.convert.nsys.activity.memory import COPY_KINDS as COPY_KINDS
from di.convert.nsys.activity.memory import MEM_KINDS as MEM_KINDS
from di.convert.nsys.activity.nvtx import NVTX_DOMAIN as NVTX_DOMAIN
from di.convert.nsys.activity.nvtx import NVTX_MARK as NVTX_MARK
from di.convert.nsys.activity.nvtx import NVTX_MARKS as NVTX_MARKS
from di.convert.nsys.activity.nvtx import NVTX_PUSHPOP as NVTX_PUSHPOP
from di.convert.nsys.activity.nvtx import NVTX_PUSHPOPS as NVTX_PUSHPOPS
from di.convert.nsys.activity.nvtx import NVTX_STARTEND as NVTX_STARTEND
from di.convert.nsys.activity.nvtx import NVTX_STARTENDS as NVTX_STARTENDS
from di.convert.nsys.activity.nvtx import STEP_TEXT as STEP_TEXT
from di.convert.nsys.activity.nvtx import UNIT_SEPARATOR as UNIT_SEPARATOR
from di.convert.nsys.activity.rows import KIND as KIND
from di.convert.nsys.activity.rows import base as base
from di.convert.nsys.activity.rows import frame as frame
from di.convert.nsys.activity.rows import json_object as json_object
from di.convert.nsys.activity.rows import num as num
from di.convert.nsys.activity.rows import thread as thread

__all__ = ["KERNEL", "TABLES", "base", "frame", "frames", "json_object", "num", "thread"]

READERS: dict[str, Callable[[Report, Counter[str]], pl.DataFrame]] = {
    KERNEL: kernels,
    MEMCPY: memcpys,
    MEMSET: memsets,
    SYNC: syncs,
    RUNTIME: runtime,
    DRIVER: driver,
    NVTX: nvtx,
    OSRT: osrt,
    GRAPH_TRACE: graph_launches,
    GRAPHS: graphs,
    GRAPH_NODES: graph_nodes,
}
REQUIRED = {
    KERNEL: ("start", "end", "streamId"),
    MEMCPY: ("start", "end", "streamId"),
    MEMSET: ("start", "end", "streamId"),
    SYNC: ("start", "end", "streamId"),
    RUNTIME: ("start", "end", "globalTid"),
    DRIVER: ("start", "end", "globalTid"),
    NVTX: ("start",),
    OSRT: ("start", "end", "globalTid"),
    GRAPH_TRACE: ("start", "end", "streamId"),
    GRAPHS: ("start", "end", "globalTid"),
    GRAPH_NODES: ("start", "end", "globalTid"),
}
"""Columns without which a table cannot be placed on a timeline."""


def frames(report: Report, dropped: Counter[str], warnings: list[str]) -> tuple[list[pl.DataFrame], list[str]]:
    """One frame per table present; and the tables read."""
    out, read = [], []
    for table in TABLES:
        if table not in report.tables:
            continue
        lacking = [col for col in REQUIRED[table] if col not in report.columns(table)]
        if lacking:
            warnings.append(
                f"{report.path}: table {table} lacks {', '.join(lacking)} (an nsys version di has not seen): skipped"
            )
            continue
        out.append(READERS[table](report, dropped))
        read.append(table)
    return out, read
