"""Reading back what di's own Chrome writer stores under the top-level ``diTrace`` key.

The writer moves overlapping events to extra lanes (extra tids) and renumbers
pids per rank; ``diTrace.locations`` maps every emitted (pid, tid) back to
its location, ``diTrace.series`` every counter back to its series, and
``diTrace.meta.start_ns`` is the absolute ns of ``ts`` 0. With it, a trace
written by di reads back with the same locations, series and clock.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.chrome import scan as S
from di.convert.chrome.phases import LK_COUNTER, LK_THREAD

_LOC_COLS = ("loc", "rank", "host", "kind", "device", "stream", "name", "process", "sort_index", "source")


def info(top: dict[str, Any]) -> dict[str, Any] | None:
    """The diTrace object when the file has a well-formed one."""
    d = top.get("diTrace")
    if isinstance(d, dict) and d.get("schema_version") == 1 and isinstance(d.get("locations"), list):
        return d
    return None


def base_ns(d: dict[str, Any]) -> int:
    """Absolute ns of ts 0."""
    start = d.get("meta", {}).get("start_ns")
    return int(start) if isinstance(start, int) else 0


def remap_keys(keys: pl.DataFrame, d: dict[str, Any]) -> pl.DataFrame:
    """Timeline keys with ``loc`` replaced by the original location of their (pid, tid)."""
    tracks = pl.DataFrame(d["locations"]).select(
        pl.col("pid").cast(pl.Int64), pl.col("tid").cast(pl.Int64), pl.col("loc").cast(pl.UInt32).alias("_orig")
    )
    threads = keys.filter((pl.col("lkind") == LK_THREAD) & (pl.col("pid_k") == S.K_INT) & (pl.col("tid_k") == S.K_INT))
    mapped = keys.join(
        threads.join(tracks, on=["pid", "tid"]).select(phases_key() + ["_orig"]), on=phases_key(), how="left", nulls_equal=True
    )
    top = int(tracks.get_column("_orig").max() or 0) + 1
    fresh = pl.int_range(pl.len(), dtype=pl.UInt32) + top
    return mapped.with_columns(pl.coalesce("_orig", fresh).alias("loc")).drop("_orig")


def phases_key() -> list[str]:
    from di.convert.chrome.phases import KEY

    return list(KEY)


def locations(d: dict[str, Any], keys: pl.DataFrame, fallback: pl.DataFrame) -> pl.DataFrame:
    """The original locations, plus the fallback rows of timelines diTrace does not name (but not the
    per-process counter timelines of the series diTrace maps)."""
    rows = pl.DataFrame(d["locations"]).filter(pl.col("lane") == 0)
    known = rows.select(
        *[c for c in _LOC_COLS if c in rows.columns],
        pl.col("src_pid").alias("pid"),
        pl.col("src_tid").alias("tid"),
    ).unique("loc", keep="first")
    extra = fallback.join(known.select(pl.col("loc").cast(fallback.schema["loc"])), on="loc", how="anti")
    series_pids = [s["pid"] for s in d.get("series", [])]
    if series_pids:  # the counter processes of di's series: their samples go to the series' own locations
        anchors = keys.filter((pl.col("lkind") == LK_COUNTER) & pl.col("pid").is_in(series_pids))
        extra = extra.join(anchors.select(pl.col("loc").cast(fallback.schema["loc"])), on="loc", how="anti")
    out = pl.concat([known.cast({c: fallback.schema[c] for c in known.columns if c in fallback.schema}), extra], how="diagonal_relaxed")
    return out.sort("loc")


def series_map(d: dict[str, Any]) -> dict[tuple[int, str], tuple[int, str, str | None]]:
    """(pid, counter name as written) -> (loc, series name, unit)."""
    out = {}
    for s in d.get("series", []):
        out[(s["pid"], s["counter"])] = (s["loc"], s["name"], s.get("unit"))
    return out


def meta(d: dict[str, Any]) -> dict[str, Any]:
    """clock, sources and world size of the trace that was written."""
    m = d.get("meta", {})
    return {k: m[k] for k in ("clock", "sources", "world_size") if k in m}
