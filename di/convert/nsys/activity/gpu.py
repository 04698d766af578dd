"""GPU-stream records: the columns every CUPTI activity table shares, and the synchronisation records.

:func:`_gpu` reads a GPU table's start, end, device, stream, correlation id and
process (plus the caller's extra columns); :func:`_gpu_cols` turns them into
event-row columns on the ``gpu_stream`` timeline, a device-wide record
(``streamId`` :data:`NO_STREAM`) on stream -1. :func:`syncs` reads
CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (cat ``sync``, Kineto's names).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from di.convert.jsonstrings import json_strings
from di.convert.nsys.activity.rows import _enum_text, _nullable, base, frame, json_object, num
from di.convert.nsys.activity.tables import SYNC
from di.convert.nsys.report import Report, pid_of

__all__ = ["NO_STREAM", "SYNC_TYPES", "syncs"]

# CUPTI enum (cupti_activity.h; the export's ENUM_CUPTI_SYNC_TYPE holds the same)
SYNC_TYPES = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
NO_STREAM = 0xFFFFFFFF
"""streamId of a device-wide record (CUPTI's CUPTI_SYNCHRONIZATION_INVALID_VALUE); stored as stream -1, as Kineto does."""


def _gpu(report: Report, table: str, extra: dict[str, str | None]) -> dict[str, np.ndarray]:
    return report.ints(
        table,
        {
            "start": "start",
            "end": "end",
            "device": "deviceId",
            "stream": "streamId",
            "corr": "correlationId",
            "gpid": "globalPid",
            **extra,
        },
    )


def _gpu_cols(c: dict[str, np.ndarray]) -> dict[str, object]:
    stream = np.where(c["stream"] == NO_STREAM, -1, c["stream"])
    pid = pl.Series(pid_of(c["gpid"]))
    return {
        "kind": "gpu_stream",
        "pid": pid.set(pl.Series(c["gpid_null"]), None) if c["gpid_null"].any() else pid,
        "tid": None,
        "device": c["device"],
        "stream": stream,
        "start_ns": c["start"],
        "end_ns": c["end"],
        "corr": _nullable(c, "corr"),
    }


def _graph_node(c: dict[str, np.ndarray]) -> dict[str, pl.Series]:
    """``graph node`` (graphNodeId) of the GPU records a CUDA graph launched, when the table has any."""
    return {} if c["graph_node_null"].all() else {"graph node": num(c["graph_node"], c["graph_node_null"])}


def syncs(report: Report, dropped: Counter[str]) -> pl.DataFrame:
    c = _gpu(report, SYNC, {"type": "syncType", "event": "eventId"})
    n = c["start"].size
    name = _enum_text(c["type"], c["type_null"], SYNC_TYPES, "Unknown Sync").fill_null("Unknown Sync")
    args = json_object(
        {"cuda_sync_kind": json_strings(name), "event": num(c["event"], c["event_null"] | (c["event"] == NO_STREAM))}
    )
    return frame(n, base(n, **_gpu_cols(c), name=name, src_cat="cuda_sync", cat="sync", args=args))
