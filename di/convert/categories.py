"""From a profiler's own event categories to di's closed vocabulary (``di.trace.CATS``).

Kineto's categories are the reference: its source category (``kernel``,
``cuda_runtime``, ``cpu_op``, ...) and, where the category is not enough, the
name decide (NCCL kernels are ``nccl``, ``cudaDeviceSynchronize``-like runtime
calls are ``sync``, ``ProfilerStep#N`` is ``step``). The Chrome/Kineto and
Perfetto readers, the Chrome writer (for di's own files) and the Nsight
Systems reader use the same rules, so an event means the same whatever file
it came from.
"""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from di.trace import CATS

COMM_KERNEL = r"(?i)^(nccl|ncclDevKernel|rccl|hccl)|nccl"
SYNC_API = r"(?i)synchronize|StreamWaitEvent|EventQuery|StreamQuery|waitOnEvent"
COMM_CPU = r"^(record_param_comms|c10d::|nccl:|gloo:)"

SOURCE_CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "cuda_runtime": "cuda_api",
    "cuda_driver": "cuda_api",
    "cuda_sync": "sync",
    "cpu_op": "compute",
    "user_annotation": "user",
    "gpu_user_annotation": "user",
    "python_function": "python",
    "cpu_instant_event": "other",
    "Trace": "other",
    # Meta's MTIA accelerator: its runtime API and the device's command processor events
    "mtia_runtime": "cuda_api",
    "mtia_ccp_events": "kernel",
}
"""Kineto source categories that map to one canonical category whatever the name."""


_COMM_KERNEL, _SYNC_API, _COMM_CPU = re.compile(COMM_KERNEL), re.compile(SYNC_API), re.compile(COMM_CPU)
_WAIT = re.compile("(?i)wait")
_CATS = frozenset(CATS)


def canonical_cat_of(src_cat: str | None, name: str) -> str:
    """The canonical category of an event with source category ``src_cat`` and ``name``:
    the rules one event at a time, as they read (the readers run :func:`canonical_cats`
    over whole columns; a test holds the two equal)."""
    if src_cat == "kernel" and _COMM_KERNEL.search(name):
        return "nccl"
    if src_cat in ("cuda_runtime", "cuda_driver", "mtia_runtime") and _SYNC_API.search(name):
        return "sync"
    if src_cat == "mtia_ccp_events" and _WAIT.search(name):
        return "sync"
    if src_cat in ("cpu_op", "user_annotation") and _COMM_CPU.search(name):
        return "nccl"
    if src_cat == "user_annotation" and name.startswith("ProfilerStep#"):
        return "step"
    direct = SOURCE_CATEGORIES.get(src_cat) if src_cat is not None else None
    return direct or (src_cat if src_cat in _CATS else "other")


_NAME_RULES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("kernel",), COMM_KERNEL, "nccl"),
    (("cuda_runtime", "cuda_driver", "mtia_runtime"), SYNC_API, "sync"),
    (("mtia_ccp_events",), _WAIT.pattern, "sync"),
    (("cpu_op", "user_annotation"), COMM_CPU, "nccl"),
    (("user_annotation",), "^ProfilerStep#", "step"),
)
"""The rules that read the name, in :func:`canonical_cat_of`'s order (the first that holds wins): the source
categories they apply to, the name's regex, the canonical category."""


def canonical_cats(src_cat: pl.Series, name: pl.Series) -> pl.Series:
    """:func:`canonical_cat_of` per row, as the ``cat`` Enum. The rules run once per distinct (src_cat, name)
    pair (a trace's cost is its vocabulary's, not its length's), and each name rule's regex only on the names of
    its source categories: over the 115,000 distinct pairs of a trace of autotuned kernels, one regex pass over
    the kernels' names (12 ms) instead of four over all of them (38 ms)."""
    pairs = pl.DataFrame({"c": src_cat.cast(pl.String), "n": name.cast(pl.String).fill_null("")})
    distinct = pairs.unique(maintain_order=True)
    distinct = distinct.with_columns(
        canonical_cat_rows(distinct.get_column("c"), distinct.get_column("n")).alias("cat")
    )
    if distinct.height == pairs.height:
        return distinct.get_column("cat")
    return pairs.join(distinct, on=["c", "n"], how="left", nulls_equal=True, maintain_order="left").get_column("cat")


def canonical_cat_rows(src_cat: pl.Series, name: pl.Series) -> pl.Series:
    """The canonical category (the ``cat`` Enum) of each row of String ``src_cat`` (null: none) and ``name``, row
    by row (:func:`canonical_cats` for columns with repeated pairs)."""
    c = pl.col("c")
    base = pl.DataFrame({"c": src_cat}).select(
        pl.when(c.is_in(list(SOURCE_CATEGORIES)))
        .then(c.replace_strict(SOURCE_CATEGORIES, default=None, return_dtype=pl.String))
        .when(c.is_in(list(CATS)))
        .then(c)
        .otherwise(pl.lit("other"))
        .cast(pl.Enum(list(CATS)))
    )
    codes = base.to_series().to_physical().to_numpy().astype(np.int64)
    for cats, pattern, cat in reversed(_NAME_RULES):  # the first rule that holds is written last
        rows = np.flatnonzero(src_cat.is_in(list(cats)).fill_null(False).to_numpy())
        if rows.size:
            hit = name.gather(rows).str.contains(pattern).fill_null(False).to_numpy()
            codes[rows[hit]] = CATS.index(cat)
    return pl.Series(list(CATS), dtype=pl.Enum(list(CATS))).gather(codes)
