"""API calls on their CPU thread: CUDA runtime and driver, CUDA graph definitions, OS runtime.

CUPTI_ACTIVITY_KIND_RUNTIME / _DRIVER: cat ``cuda_api`` (synchronising calls,
:data:`di.convert.categories.SYNC_API`: ``sync``), src_cat ``cuda_driver`` or
``cuda_runtime``, the correlation id that links a launch to its GPU records.
CUDA_GRAPH_EVENTS / CUDA_GRAPH_NODE_EVENTS: cat ``cuda_api``, the graph and node
ids in ``args``. OSRT_API: cat ``io`` for file and socket calls, else ``other``.
API names lose the ``_vNNNN`` version suffix, as ``nsys stats`` shows them.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from di.convert.categories import SYNC_API
from di.convert.jsonstrings import json_strings
from di.convert.nsys.activity.rows import _flag, _names, _nullable, base, frame, json_object, num, thread
from di.convert.nsys.activity.tables import DRIVER, GRAPH_NODES, GRAPHS, OSRT, RUNTIME
from di.convert.nsys.report import Report

__all__ = ["driver", "graph_nodes", "graphs", "osrt", "runtime"]

EVENT_CLASS_DRIVER = 1
"""ENUM_NSYS_EVENT_CLASS: TRACE_PROCESS_EVENT_CUDA_DRIVER (0 is the runtime)."""
IO_CALLS = (
    r"^(open|open64|openat|openat64|creat|close|read|pread|pread64|readv|preadv|write|pwrite|pwrite64|writev|pwritev|"
    r"lseek|lseek64|fsync|fdatasync|sync_file_range|fopen|fopen64|fdopen|freopen|fclose|fread|fwrite|fflush|fgets|fputs|"
    r"fseek|ftell|getc|putc|fgetc|fputc|unlink|rename|stat|fstat|lstat|mkdir|rmdir|socket|bind|connect|accept|accept4|"
    r"listen|send|sendto|sendmsg|recv|recvfrom|recvmsg|shutdown|aio_read|aio_write)$"
)
API_VERSION = r"_v\d+$"


def _api(report: Report, table: str, dropped: Counter[str]) -> pl.DataFrame:
    c = report.ints(
        table,
        {
            "start": "start",
            "end": "end",
            "gtid": "globalTid",
            "corr": "correlationId",
            "name": "nameId",
            "ret": "returnValue",
            "cls": "eventClass",
        },
    )
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = _api_names(report, pos)
    driver = (c["cls"] == EVENT_CLASS_DRIVER) & ~c["cls_null"] if table == RUNTIME else np.ones(n, np.bool_)
    src_cat = pl.Series(driver).replace_strict({True: "cuda_driver", False: "cuda_runtime"}, return_dtype=pl.String)
    cat = _flag(report, "sync_api", SYNC_API, pos, "sync", "cuda_api")
    args = json_object(
        {
            "function": report.derived("json", json_strings).gather(pos).fill_null("null"),
            "return value": num(c["ret"], c["ret_null"]),
        }
    )
    return frame(n, base(n, **thread(c), name=name, src_cat=src_cat, cat=cat, corr=_nullable(c, "corr"), args=args))


def runtime(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _api(report, RUNTIME, dropped)


def driver(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _api(report, DRIVER, dropped)


def osrt(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = report.ints(OSRT, {"start": "start", "end": "end", "gtid": "globalTid", "name": "nameId", "ret": "returnValue"})
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = report.derived("name", _names).gather(pos).fill_null("")
    cat = _flag(report, "io_call", IO_CALLS, pos, "io", "other")
    args = json_object({"return value": num(c["ret"], c["ret_null"])})
    return frame(n, base(n, **thread(c), name=name, src_cat="osrt", cat=cat, args=args))


def _api_names(report: Report, pos: pl.Series) -> pl.Series:
    """The API name at each string position (``nameId`` through ``StringIds``), version suffix removed."""
    return (
        report.derived("api_name", lambda v: v.str.replace(API_VERSION, "").cast(pl.Categorical))
        .gather(pos)
        .fill_null("")
    )


def _graph_definitions(report: Report, table: str, ids: dict[str, str]) -> pl.DataFrame:
    """CUDA graph and graph node definitions (creation, cloning, instantiation) on the thread that made them:
    cat cuda_api, the ids in args."""
    c = report.ints(table, {"start": "start", "end": "end", "gtid": "globalTid", "name": "nameId", **ids})
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = _api_names(report, pos)
    args = json_object({key.replace("_", " "): num(c[key], c[key + "_null"]) for key in ids})
    src_cat = "cuda_graph" if table == GRAPHS else "cuda_graph_node"
    return frame(n, base(n, **thread(c), name=name, src_cat=src_cat, cat="cuda_api", args=args))


def graphs(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _graph_definitions(
        report, GRAPHS, {"graph": "graphId", "original_graph": "originalGraphId", "graph_exec": "graphExecId"}
    )


def graph_nodes(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    return _graph_definitions(
        report, GRAPH_NODES, {"graph_node": "graphNodeId", "original_graph_node": "originalGraphNodeId"}
    )
