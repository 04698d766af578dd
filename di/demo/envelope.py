"""The fixed parts of a rank's Kineto document around its events: the header (schema version,
device properties, ``distributedInfo``), the metadata events (process and thread names, labels
and sort indices), the profiler's own span and instants, and the footer (``traceName``,
``baseTimeNanoseconds``), as text in Kineto's layout (:mod:`di.demo.render` puts the events between).
Times are integer ns on the document's clock, printed as microseconds with three decimals."""

from __future__ import annotations

import json
from typing import Any

from di.demo.plan import BASE_TIME_NS, COMPUTE_STREAM, DEVICE_SYNC_EVERY, GPUS_PER_NODE, NCCL_STREAM, NUM_SMS


def _fmt(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def header(r: int, ranks: int) -> str:
    devices = ",\n".join(
        f'    {{\n      "id": {d}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": '
        '85018279936,\n      "computeMajor": 9, "computeMinor": 0,\n      "maxThreadsPerBlock": '
        '1024, "maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, "warpSize": '
        f'32,\n      "sharedMemPerBlock": 49152, "numSms": {NUM_SMS}\n    , '
        '"regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, '
        '"sharedMemPerMultiprocessor": 233472\n    }'
        for d in range(min(ranks, GPUS_PER_NODE))
    )
    members = list(range(ranks))
    info = {
        "backend": "nccl",
        "rank": r,
        "world_size": ranks,
        "pg_count": 1,
        "pg_config": [
            {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": ranks, "ranks": members}
        ],
        "nccl_version": "2.21.5",
    }
    return (
        f'\n{{\n  "schemaVersion": 1,\n  "deviceProperties": [\n{devices}\n  ],\n'
        f'  "distributedInfo": {json.dumps(info)},\n  "traceEvents": [\n'
    )


def _meta(name: str, ts: str, pid: int | str, tid: int, key: str, value: Any) -> str:
    return (
        f'  {{\n    "name": "{name}", "ph": "M", "ts": {ts}, "pid": {json.dumps(pid)}, '
        f'"tid": {tid},\n    "args": {{\n      "{key}": {json.dumps(value)}\n    }}\n  }}'
    )


def metadata(pid: int, dev: int, ranks: int, start: int, steps: int) -> list[str]:
    """process/thread names, labels and sort indices, as Kineto lists them."""
    ts = _fmt(start + 28_362_646)
    out = [
        _meta("process_name", ts, pid, 0, "name", "python3.10"),
        _meta("process_labels", ts, pid, 0, "labels", "CPU"),
        _meta("process_sort_index", ts, pid, 0, "sort_index", pid),
    ]
    for d in range(min(ranks, GPUS_PER_NODE)):
        out += [
            _meta("process_name", ts, d, 0, "name", "python3.10"),
            _meta("process_labels", ts, d, 0, "labels", f"GPU {d}"),
            _meta("process_sort_index", ts, d, 0, "sort_index", 16_777_216 + d),
        ]
    threads = [(tid, f"stream {tid} ") for tid in (COMPUTE_STREAM, NCCL_STREAM)]
    if steps >= DEVICE_SYNC_EVERY:
        threads.insert(0, (-1, f"Device {dev}"))
    for tid, name in threads:
        out += [
            _meta("thread_name", ts, dev, tid, "name", name),
            _meta("thread_sort_index", ts, dev, tid, "sort_index", tid),
        ]
    out += [
        _meta("thread_name", ts, pid, pid, "name", f"thread {pid} (pt_main_thread)"),
        _meta("thread_sort_index", ts, pid, pid, "sort_index", pid),
    ]
    return out


def span(start: int, end: int) -> list[str]:
    """The profiler's own span and instants, with Kineto's string pids."""
    ts = _fmt(start)
    return [
        f'  {{\n    "ph": "X", "cat": "Trace", "ts": {ts}, "dur": {_fmt(end - start)},\n'
        '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        '    "args": {\n      "Op count": 0\n    }\n  }',
        _meta("process_sort_index", ts, "Spans", 0, "sort_index", 536_870_912).replace(
            f'"ts": {ts}, "pid"', f'"ts": {ts},\n    "pid"'
        ),
        '  {\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
        f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {ts}\n  }}',
        '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
        f'    "pid": "", "tid": "", "ts": {_fmt(end + 3_141)}\n  }}',
    ]


def footer(r: int) -> str:
    return (
        f'\n  ],\n  "traceName": "rank-{r}.pt.trace.json",\n  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {BASE_TIME_NS}\n}}'
    )
