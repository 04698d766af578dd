"""Ingest of the application layer: NVTX ranges and marks, ``di.region`` and ``di record --python``
calls (``KIND_USER`` records of the ``nvtx`` shard, :file:`shim/nvtx.c`) -> events.

Every record lands on the timeline of the thread that made it (the same ``loc`` as that
thread's MPI and I/O calls), on the job clock:

* NVTX push/pop ranges and ``di.region`` regions: one event per range, cat ``user``
  (``src_cat`` ``nvtx`` or ``di_region``); ranges still open at exit end there, with
  ``"unclosed": true`` in args;
* NVTX start/end ranges: the start and end records (possibly of two threads) paired by
  range id within the process; the event sits on the starting thread. A start without an
  end is dropped and counted;
* NVTX marks: instants, cat ``user``;
* Python calls: cat ``python`` (``src_cat`` ``python``), with file and line in args;
* ``nvtxNameOsThread``: the name of that thread's timeline (:func:`name_threads`).

``args`` carry what NVTX knows beyond the name: ``domain`` (absent for the default domain),
``category`` and its ``category_name`` (from ``nvtxNameCategory``), ``color`` (``#rrggbb``)
and ``payload``. Columnar: one pass of numpy/polars per job, no Python loop per record.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.capture import shard

USER_PUSH, USER_START, USER_END, USER_MARK, USER_REGION, USER_PYCALL, USER_CATEGORY, USER_THREAD = range(1, 9)
"""``op`` of KIND_USER records (``enum di_user_op`` in shim/nvtx.c)."""


def ns_times(cols: dict[str, np.ndarray]) -> np.ndarray:
    """Records whose times are CLOCK_MONOTONIC ns already (Python calls), not ticks."""
    return (cols["kind"] == shard.KIND_USER) & (cols["op"] == USER_PYCALL)


def _pair(cols: dict[str, np.ndarray], idx_start: np.ndarray, idx_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start records with an end of the same (process, range id): (their indices, end times)."""
    key_s = cols["source"][idx_start].astype(np.int64) << 40 | cols["req"][idx_start].astype(np.int64)
    key_e = cols["source"][idx_end].astype(np.int64) << 40 | cols["req"][idx_end].astype(np.int64)
    order = np.argsort(key_e, kind="stable")
    key_e, idx_end = key_e[order], idx_end[order]
    k = np.searchsorted(key_e, key_s)
    hit = (
        (k < key_e.size) & (key_e[np.minimum(k, max(key_e.size - 1, 0))] == key_s)
        if key_e.size
        else np.zeros(key_s.size, bool)
    )
    return idx_start[hit], cols["t0"][idx_end[k[hit]]]


def _category_names(cols: dict[str, np.ndarray], strings: Any, user: np.ndarray) -> pl.DataFrame:
    """(source, domain, category) -> category_name, from USER_CATEGORY records (the last naming wins)."""
    c = user[cols["op"][user] == USER_CATEGORY]
    return pl.DataFrame(
        {
            "source": cols["source"][c],
            "domain_id": cols["text2"][c],
            "category": cols["tag"][c],
            "category_name": strings.column(cols["text"][c], "category_name"),
        }
    ).unique(["source", "domain_id", "category"], keep="last")


def user_events(cols: dict[str, np.ndarray], strings: Any, warnings: list[str]) -> pl.DataFrame | None:
    """The events of KIND_USER records: record, loc, start_ns, end_ns, name, cat, src_cat, instant, args;
    None when there are none."""
    from di.trace import CATS

    user = np.flatnonzero(cols["kind"] == shard.KIND_USER)
    if not user.size:
        return None
    op = cols["op"][user]
    whole = user[np.isin(op, [USER_PUSH, USER_REGION, USER_PYCALL, USER_MARK])]
    started, ends = _pair(cols, user[op == USER_START], user[op == USER_END])
    unpaired = int(np.count_nonzero(op == USER_START)) - started.size
    if unpaired:
        warnings.append(f"{unpaired} NVTX start/end ranges without an end dropped")
    idx = np.concatenate([whole, started])
    end = np.concatenate([cols["t1"][whole], ends])
    op = cols["op"][idx]
    src = np.select([op == USER_PYCALL, op == USER_REGION], [2, 1], 0)
    color = np.where(cols["peer"][idx] == 1, cols["aux"][idx].astype(np.int64) & 0xFFFFFF, -1)
    palette, color_of = np.unique(color, return_inverse=True)  # colours are few: one string each
    color_text = pl.Series("color", [f"#{c:06x}" if c >= 0 else None for c in palette.tolist()], dtype=pl.String)
    df = pl.DataFrame(
        {
            "record": idx,
            "loc": cols["loc"][idx],
            "start_ns": cols["t0"][idx],
            "end_ns": end,
            "name": strings.column(cols["text"][idx], "name"),
            "cat": pl.Series("cat", np.where(op == USER_PYCALL, "python", "user"), dtype=pl.Enum(list(CATS))),
            "src_cat": pl.Series("src_cat", ["nvtx", "di_region", "python"], dtype=pl.Categorical).gather(src),
            "instant": op == USER_MARK,
            "pycall": op == USER_PYCALL,
            "source": cols["source"][idx],
            "domain_id": cols["text2"][idx],
            "category": cols["tag"][idx],
            "color": color_text.gather(color_of.astype(np.int64)),
            "payload": cols["bytes"][idx],
            "unclosed": (cols["req"][idx] == 1) & np.isin(op, [USER_PUSH, USER_REGION]),
        }
    )
    names = _category_names(cols, strings, user)
    df = df.join(names, on=["source", "domain_id", "category"], how="left", maintain_order="left")
    domain = strings.column(df.get_column("domain_id").to_numpy(), "domain")
    nvtx_args = (
        pl.struct(
            pl.when(pl.col("domain").is_not_null()).then(pl.col("domain")).alias("domain"),
            pl.when(pl.col("category") != 0).then(pl.col("category")).alias("category"),
            pl.col("category_name"),
            pl.col("color"),
            pl.when(pl.col("payload") != 0).then(pl.col("payload")).alias("payload"),
            pl.when(pl.col("unclosed")).then(True).alias("unclosed"),
        )
        .struct.json_encode()
        .str.replace_all(r',?"\w+":null', "")
        .str.replace(r"^\{,", "{")
    )
    py_args = pl.struct(pl.col("domain").alias("file"), pl.col("category").alias("line")).struct.json_encode()
    df = df.with_columns(domain=domain).with_columns(args=pl.when(pl.col("pycall")).then(py_args).otherwise(nvtx_args))
    df = df.with_columns(args=pl.when(pl.col("args") != "{}").then(pl.col("args")))
    return df.select(
        "record", "loc", "start_ns", "end_ns", pl.col("name").cast(pl.Categorical), "cat", "src_cat", "instant", "args"
    )


def name_threads(locations: pl.DataFrame, cols: dict[str, np.ndarray], strings: Any) -> pl.DataFrame:
    """Thread timelines renamed as ``nvtxNameOsThread`` named them (the last naming wins)."""
    t = (
        np.flatnonzero((cols["kind"] == shard.KIND_USER) & (cols["op"] == USER_THREAD))
        if cols
        else np.empty(0, np.int64)
    )
    if not t.size or not locations.height:
        return locations
    names = (
        pl.DataFrame(
            {
                "source": cols["source"][t],
                "tid": cols["peer"][t].astype(np.int64),
                "nvtx_name": strings.column(cols["text"][t], "nvtx_name"),
            }
        )
        .unique(["source", "tid"], keep="last")
        .cast({"source": locations.schema["source"], "tid": locations.schema["tid"]})
    )
    return (
        locations.join(names, on=["source", "tid"], how="left", maintain_order="left")
        .with_columns(name=pl.coalesce("nvtx_name", "name"))
        .drop("nvtx_name")
    )
