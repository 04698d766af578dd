"""One CUPTI process's raw files and the record-level steps before its events are made.

A process that ran under ``di record --gpu`` leaves ``raw/cupti-HOST-PID.json`` (its header,
:data:`HEADER` names it), ``.bin`` (fixed-size :data:`di.capture.cupti_records.GPU_RECORD`
rows) and ``.str`` (its string table). :func:`read_process` reads them; :func:`pair_markers`
pairs NVTX start/end markers by id; :func:`devices_from_contexts` gives device-less records
(synchronizations) the device of their context.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from di.capture import shard
from di.capture.cupti_records import (
    GPU_RECORD,
    K_KERNEL,
    K_MARKER,
    K_MEMCPY,
    K_MEMSET,
    MARKER_END,
    MARKER_INSTANT,
    MARKER_START,
)

HEADER = re.compile(r"^cupti-(.+)-(\d+)\.json$")
KINETO_DIR = "kineto"


def read_process(raw: Path, header_path: Path) -> tuple[dict[str, Any], np.ndarray, dict[int, str]]:
    """One process's header, records and strings (a cut-short last record is ignored)."""
    header = json.loads(header_path.read_text())
    stem = header_path.with_suffix("")
    binp = stem.with_suffix(".bin")
    recs = (
        np.fromfile(binp, GPU_RECORD, count=binp.stat().st_size // GPU_RECORD.itemsize)
        if binp.is_file()
        else np.empty(0, GPU_RECORD)
    )
    return header, recs, shard.read_strings(stem.with_suffix(".str"))


def pair_markers(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """NVTX markers -> (records as events: start indices, end times, instant flags), dropped count.

    A range's start and end records share ``aux`` (the marker id); the name is on the start.
    """
    m = np.flatnonzero(recs["kind"] == K_MARKER)
    flags = recs["sub"][m].astype(np.int64)
    inst = m[(flags & MARKER_INSTANT) != 0]
    starts = m[(flags & MARKER_START) != 0]
    ends = m[(flags & MARKER_END) != 0]
    order = np.argsort(recs["aux"][ends], kind="stable")
    ends_sorted = ends[order]
    k = np.searchsorted(recs["aux"][ends_sorted], recs["aux"][starts])
    found = (
        (k < ends_sorted.size)
        & (recs["aux"][ends_sorted[np.minimum(k, max(ends_sorted.size - 1, 0))]] == recs["aux"][starts])
        if ends_sorted.size
        else np.zeros(starts.size, bool)
    )
    paired = starts[found]
    end_t = recs["t0"][ends_sorted[k[found]]]
    idx = np.concatenate([paired, inst])
    t1 = np.concatenate([end_t, recs["t0"][inst]])
    instant = np.concatenate([np.zeros(paired.size, bool), np.ones(inst.size, bool)])
    return idx, t1, instant, np.ones(idx.size, bool), int(starts.size - paired.size)


def devices_from_contexts(recs: np.ndarray) -> np.ndarray:
    """Each record's device, where a record without one (synchronization: device -1) takes the device
    of the kernels/copies of its context in the same process (0 when its context ran none)."""
    device = recs["device"].copy()
    unknown = device < 0
    if unknown.any():
        known = ~unknown & np.isin(recs["kind"], [K_KERNEL, K_MEMCPY, K_MEMSET])
        ctx, first = np.unique(recs["context"][known], return_index=True)
        dev = device[known][first]
        k = np.searchsorted(ctx, recs["context"][unknown])
        hit = (
            (k < ctx.size) & (ctx[np.minimum(k, max(ctx.size - 1, 0))] == recs["context"][unknown])
            if ctx.size
            else k < 0
        )
        device[unknown] = np.where(hit, dev[np.minimum(k, max(ctx.size - 1, 0))] if ctx.size else 0, 0)
    return device
