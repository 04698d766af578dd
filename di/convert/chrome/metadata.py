"""Chrome M (metadata) and C (counter) records -> locations, series and samples.

Counter values: each numeric top-level member of a C event's args is one
series named ``"<name>"`` when the key is ``"value"`` or equals the name, else
``"<name> <key>"``; a C event with an ``id`` is the counter ``"<name> <id>"``
(the spec names counters by name and id); a trailing ``" [unit]"`` in that
name is the unit.
Timestamps are int64 ns.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import polars as pl

from di.convert.chrome import scan as S
from di.convert.chrome.members import numeric_members
from di.convert.chrome.phases import LK_ASYNC, LK_COUNTER, LK_MARKER

_KINDS = {LK_ASYNC: "async", LK_MARKER: "marker", LK_COUNTER: "counter"}


def _m_records(meta_rows: pl.DataFrame, syms: pl.Series) -> list[tuple[str, tuple[Any, ...], Any]]:
    """(metadata name, (pid_k, pid, tid_k, tid), args dict) per M record."""
    out = []
    for row in meta_rows.select("name", "pid_k", "pid", "tid_k", "tid", "args").iter_rows():
        try:
            args = orjson.loads(row[5]) if row[5] else {}
        except orjson.JSONDecodeError:
            args = {}
        out.append((syms[row[0]] if row[0] >= 0 else "", row[1:5], args))
    return out


def apply_metadata(
    keys: pl.DataFrame, meta_rows: pl.DataFrame, syms: pl.Series, rank: int, source: int
) -> pl.DataFrame:
    """The locations table of one file: kinds, ids, names and sort order. Symbols are read one by one (a few per
    location and M record): the whole table as a list took 18 ms for a trace of 115,000 kernel names."""
    proc_name: dict[tuple[Any, ...], str] = {}
    thread_name: dict[tuple[Any, ...], str] = {}
    proc_sort: dict[tuple[Any, ...], int] = {}
    thread_sort: dict[tuple[Any, ...], int] = {}
    for name, (pk, p, tk, t), args in _m_records(meta_rows, syms):
        value = args.get("name") if isinstance(args, dict) else None
        if name == "process_name" and isinstance(value, str):
            proc_name[(pk, p)] = value
        elif name == "thread_name" and isinstance(value, str):
            thread_name[(pk, p, tk, t)] = value
        elif name in ("process_sort_index", "thread_sort_index") and isinstance(args.get("sort_index"), int):
            (proc_sort if name[0] == "p" else thread_sort)[(pk, p) if name[0] == "p" else (pk, p, tk, t)] = args[
                "sort_index"
            ]
    rows = []
    for loc, lkind, pk, p, tk, t, gpu in keys.select("loc", "lkind", "pid_k", "pid", "tid_k", "tid", "gpu").iter_rows():
        kind = _KINDS.get(lkind, "gpu_stream" if gpu else "cpu_thread")
        pid = p if pk == S.K_INT else None
        tid = t if tk == S.K_INT and lkind != LK_ASYNC else None
        process = proc_name.get((pk, p)) or (syms[p] if pk == S.K_STR else None)
        name = thread_name.get((pk, p, tk, t))
        if lkind == LK_ASYNC:
            name = syms[t] if t >= 0 else "async"
        elif lkind == LK_MARKER:
            name = "global markers" if pk == 0 else "process markers"
        elif name is None and tk == S.K_STR:
            name = syms[t]
        elif name is None and gpu:
            name = f"stream {t}"
        rows.append(
            {
                "loc": loc,
                "rank": rank,
                "pid": pid,
                "tid": tid,
                "kind": kind,
                "device": _int32(pid) if kind == "gpu_stream" else None,
                "stream": tid if kind == "gpu_stream" else None,
                "name": name,
                "process": process,
                "sort_index": _int32(thread_sort.get((pk, p, tk, t), proc_sort.get((pk, p)))),
                "source": source,
            }
        )
    schema = {
        "loc": pl.UInt32,
        "rank": pl.Int32,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "kind": pl.String,
        "device": pl.Int32,
        "stream": pl.Int64,
        "name": pl.String,
        "process": pl.String,
        "sort_index": pl.Int32,
        "source": pl.Int32,
    }
    return pl.DataFrame(rows, schema=schema)


def _int32(v: int | None) -> int | None:
    """``v`` when it fits the Int32 column, else None (a sort index or device id no real file has)."""
    return v if v is not None and -(2**31) <= v < 2**31 else None


def counters(
    rows: pl.DataFrame,
    keys: pl.DataFrame,
    syms: pl.Series,
    dropped: Counter[str],
    known: dict[tuple[int, str], tuple[int, str, str | None]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(series, samples) from C records; non-numeric values dropped and counted.

    ``known`` maps (pid, counter name) to (loc, series name, unit) for files
    that say so themselves (di's own writer)."""
    if not rows.height:
        return pl.DataFrame(), pl.DataFrame()
    anchors = keys.filter(pl.col("lkind") == LK_COUNTER).select("pid_k", "pid", "loc")
    members = numeric_members(rows.get_column("args"))
    bad = members.filter(pl.col("value").is_null()).height
    if bad:
        dropped["counter value not representable as float64"] += bad
    members = members.filter(pl.col("value").is_not_null())
    empty = rows.height - members.get_column("row").n_unique()
    if empty:
        dropped["counter event without numeric value"] += empty
    pairs = (
        rows.with_row_index("row")
        .with_columns(pl.col("row").cast(pl.Int64))
        .join(members, on="row", how="inner", maintain_order="right")
        .join(anchors, on=["pid_k", "pid"], how="left", nulls_equal=True, maintain_order="left")
    )
    names = syms.gather(pairs.get_column("name").cast(pl.Int64).replace(-1, syms.len() - 1))
    ids = (
        pl.when(pl.col("id_k") == S.K_INT)
        .then(pl.col("id").cast(pl.String))
        .when(pl.col("id_k") == S.K_STR)
        .then(pl.col("id_text"))
        .otherwise(None)
    )
    id_text = syms.gather(pairs.get_column("id").clip(0, syms.len() - 1).cast(pl.Int64)).alias("id_text")
    pairs = (
        pairs.with_columns(names.alias("cname"), id_text)
        .with_columns(
            pl.when(ids.is_null()).then(pl.col("cname")).otherwise(pl.col("cname") + " " + ids).alias("cname")
        )
        .with_columns(
            pl.when((pl.col("key") == "value") | (pl.col("key") == pl.col("cname")))
            .then(pl.col("cname"))
            .otherwise(pl.col("cname") + " " + pl.col("key"))
            .alias("full")
        )
        .with_columns(
            pl.col("full").str.extract(r"^(.*) \[([^\]]+)\]$", 1).fill_null(pl.col("full")).alias("sname"),
            pl.col("full").str.extract(r"^(.*) \[([^\]]+)\]$", 2).alias("unit"),
        )
    )
    if known:
        table = pl.DataFrame(
            [(p, c, loc, name, unit) for (p, c), (loc, name, unit) in known.items()],
            schema={
                "pid": pl.Int64,
                "cname": pl.String,
                "k_loc": pairs.schema["loc"],
                "k_name": pl.String,
                "k_unit": pl.String,
            },
            orient="row",
        )
        pairs = pairs.join(table, on=["pid", "cname"], how="left").with_columns(
            pl.coalesce("k_loc", "loc").alias("loc"),
            pl.coalesce("k_name", "sname").alias("sname"),
            pl.when(pl.col("k_loc").is_not_null()).then(pl.col("k_unit")).otherwise(pl.col("unit")).alias("unit"),
        )
    series = pairs.unique(["loc", "full"], keep="first", maintain_order=True).select("loc", "sname", "unit", "full")
    series = series.with_row_index("series").with_columns(pl.col("series").cast(pl.UInt32))
    samples = pairs.join(series.select("loc", "full", "series"), on=["loc", "full"]).select(
        "series", pl.col("ts").alias("ts_ns"), "value"
    )
    return series.select("series", "loc", pl.col("sname").alias("name"), "unit"), samples.sort(["series", "ts_ns"])
