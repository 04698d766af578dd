"""One CUPTI process's records -> an events-like frame (:func:`process_events`).

Kernels, memcpy, memset and synchronization records (``gpu``: true) and runtime/driver API
calls become one row each, NVTX ranges one row per start paired with its end and marks one
instant each (:func:`di.capture.gpu_ingest.records.pair_markers`). Per row: ``cat``
(:data:`CAT_OF`) and ``src_cat`` (:data:`SRC_CAT`) by record kind; ``name`` the record's
string (``Memcpy <kind>``, ``Memset`` and the sync type for those records); ``args`` as JSON
text: device, context, stream and correlation of GPU work (with grid and block of kernels,
the copy kind of copies, the sync type of synchronizations), the correlation id of API
calls, none for NVTX; ``corr`` null for 0; ``bytes`` for copies and memsets only. Times go
through the caller's ``to_job`` (CUPTI ns -> job-clock ns).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.capture.cupti_records import (
    COPY_KINDS,
    K_DRIVER,
    K_KERNEL,
    K_MARKER,
    K_MEMCPY,
    K_MEMSET,
    K_RUNTIME,
    K_SYNC,
    SYNC_TYPES,
)
from di.capture.gpu_ingest.records import devices_from_contexts, pair_markers

CAT_OF = {
    K_KERNEL: "kernel",
    K_MEMCPY: "memcpy",
    K_MEMSET: "memset",
    K_SYNC: "sync",
    K_RUNTIME: "cuda_api",
    K_DRIVER: "cuda_api",
    K_MARKER: "user",
}
SRC_CAT = {
    K_KERNEL: "cupti_kernel",
    K_MEMCPY: "cupti_memcpy",
    K_MEMSET: "cupti_memset",
    K_SYNC: "cupti_sync",
    K_RUNTIME: "cupti_runtime",
    K_DRIVER: "cupti_driver",
    K_MARKER: "nvtx",
}


def _event_records(recs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The records that become events (activities, then paired NVTX starts and marks), their end
    times and instant flags, and the number of NVTX range starts without an end."""
    kind = recs["kind"]
    act = np.flatnonzero(np.isin(kind, [K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC, K_RUNTIME, K_DRIVER]))
    midx, mend, minst, _, unpaired = pair_markers(recs)
    idx = np.concatenate([act, midx])
    t1 = np.concatenate([recs["t1"][act], mend])
    instant = np.concatenate([np.zeros(act.size, bool), minst])
    return recs[idx], t1, instant, unpaired


def _frame(r: np.ndarray, t1: np.ndarray, instant: np.ndarray, strings: dict[int, str], to_job: Any) -> pl.DataFrame:
    """The event records ``r`` as columns, with their names, copy kinds and sync types as text."""
    k = r["kind"].astype(np.int64)
    on_gpu = np.isin(k, [K_KERNEL, K_MEMCPY, K_MEMSET, K_SYNC])
    top = max(strings, default=0)
    names = pl.Series("name", [None, *[strings.get(i) for i in range(1, top + 1)], None], dtype=pl.String)
    name = names.gather(np.where((r["name"] > 0) & (r["name"] <= top), r["name"], top + 1).astype(np.int64))
    kind_text = (
        pl.Series([""] * 8).scatter([K_MEMCPY], ["memcpy"]).scatter([K_MEMSET], ["memset"]).scatter([K_SYNC], ["sync"])
    )
    copy = pl.Series("copy", [COPY_KINDS.get(i, "unknown") for i in range(256)]).gather(r["sub"].astype(np.int64))
    sync = pl.Series("sync", [SYNC_TYPES.get(i, "unknown") for i in range(256)]).gather(r["sub"].astype(np.int64))
    return pl.DataFrame(
        {
            "kind": k,
            "gpu": on_gpu,
            "device": r["device"],
            "stream": r["stream"],
            "context": r["context"],
            "tid": r["tid"],
            "start_ns": to_job(r["t0"]),
            "end_ns": to_job(t1),
            "corr": r["corr"],
            "bytes": r["bytes"],
            "instant": instant,
            "name": name,
            "copy": copy,
            "sync": sync,
            "kind_text": kind_text.gather(k),
            "gx": r["grid"][:, 0],
            "gy": r["grid"][:, 1],
            "gz": r["grid"][:, 2],
            "bx": r["block"][:, 0],
            "by": r["block"][:, 1],
            "bz": r["block"][:, 2],
        }
    )


def _gpu_args() -> pl.Expr:
    """The args JSON of GPU work: device, context, stream and the kind's own fields (the correlation id is the
    ``corr`` column's, not repeated in a text that it would make distinct per record: :func:`di.schema.args_keys`)."""
    c = pl.col
    gpu_args = pl.concat_str(
        pl.lit('{"device":'),
        c("device").cast(pl.String),
        pl.lit(',"context":'),
        c("context").cast(pl.String),
        pl.lit(',"stream":'),
        c("stream").cast(pl.String),
    )
    extra = (
        pl.when(c("kind") == K_KERNEL)
        .then(
            pl.concat_str(
                pl.lit(',"grid":['),
                c("gx").cast(pl.String),
                pl.lit(","),
                c("gy").cast(pl.String),
                pl.lit(","),
                c("gz").cast(pl.String),
                pl.lit('],"block":['),
                c("bx").cast(pl.String),
                pl.lit(","),
                c("by").cast(pl.String),
                pl.lit(","),
                c("bz").cast(pl.String),
                pl.lit("]}"),
            )
        )
        .when(c("kind") == K_MEMCPY)
        .then(pl.concat_str(pl.lit(',"copy_kind":"'), c("copy"), pl.lit('"}')))
        .when(c("kind") == K_SYNC)
        .then(pl.concat_str(pl.lit(',"sync_type":"'), c("sync"), pl.lit('"}')))
        .otherwise(pl.lit("}"))
    )
    return pl.concat_str(gpu_args, extra)


def _with_names_and_args(df: pl.DataFrame, k: np.ndarray) -> pl.DataFrame:
    """``df`` with its final name, args, corr, bytes, cat and src_cat (``k``: its record kinds)."""
    c = pl.col
    return df.with_columns(
        name=pl.when(c("kind") == K_MEMCPY)
        .then(pl.concat_str(pl.lit("Memcpy "), c("copy")))
        .when(c("kind") == K_MEMSET)
        .then(pl.lit("Memset"))
        .when(c("kind") == K_SYNC)
        .then(c("sync"))
        .otherwise(c("name").fill_null("?")),
        # an API call's only member is its correlation id, in corr: an object of none left, as readers leave it
        args=pl.when(c("gpu")).then(_gpu_args()).when(c("kind") == K_MARKER).then(None).otherwise(pl.lit("{}")),
        corr=pl.when(c("corr") > 0).then(c("corr")),
        bytes=pl.when(c("kind").is_in([K_MEMCPY, K_MEMSET])).then(c("bytes")),
        cat=pl.Series([CAT_OF.get(i, "other") for i in range(8)]).gather(k),
        src_cat=pl.Series([SRC_CAT.get(i, "cupti") for i in range(8)]).gather(k),
    )


def process_events(recs: np.ndarray, strings: dict[int, str], to_job: Any) -> tuple[pl.DataFrame, int]:
    """One process's records -> an events-like frame (with ``tl``: the timeline key) and the
    number of NVTX range starts without an end (dropped)."""
    recs = recs.copy()
    recs["device"] = devices_from_contexts(recs)
    r, t1, instant, unpaired = _event_records(recs)
    df = _frame(r, t1, instant, strings, to_job)
    df = _with_names_and_args(df, r["kind"].astype(np.int64))
    return df.drop("copy", "sync", "kind_text", "gx", "gy", "gz", "bx", "by", "bz"), unpaired
