"""What a log family found, and the trace made of it.

Each family parser returns :class:`Parts`: events (with an optional
collective's columns), counter samples, dropped lines per reason and source
info. :func:`build_trace` turns the parts of every family in one file into a
:class:`~di.trace.Trace`: one timeline per (rank, track), one counter timeline
per (rank, track) of samples, events sorted by (loc, start_ns, -end_ns), samples by (series, ts_ns) (each in file
order where both are equal), and the
``collectives`` rows pointing at their events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from di.convert.logs.ids import dense_ids
from di.convert.provenance import reader_meta
from di.schema import polars_schema
from di.trace import Trace

__all__ = ["EVENT_COLUMNS", "SAMPLE_COLUMNS", "Parts", "build_trace", "empty_events", "empty_samples", "line_instants"]

EVENT_COLUMNS: dict[str, Any] = {
    "rank": pl.Int64,
    "host": pl.String,
    "pid": pl.Int64,
    "track": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "name": pl.String,
    "cat": pl.String,
    "instant": pl.Boolean,
    "bytes": pl.Int64,
    "args": pl.String,
    # a collective's part (null on other events)
    "op": pl.String,
    "comm": pl.String,
    "seq": pl.Int64,
    "instance_key": pl.String,
    "root": pl.Int64,
    "dtype": pl.String,
    "group_size": pl.Int64,
}
SAMPLE_COLUMNS: dict[str, Any] = {
    "rank": pl.Int64,
    "host": pl.String,
    "track": pl.String,
    "series": pl.String,
    "unit": pl.String,
    "ts_ns": pl.Int64,
    "value": pl.Float64,
}


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_COLUMNS)


def empty_samples() -> pl.DataFrame:
    return pl.DataFrame(schema=SAMPLE_COLUMNS)


def line_instants(rows: pl.DataFrame, cat: str) -> pl.DataFrame:
    """Log lines as instants: ``rows``' ``rank``, ``name`` and ``line``, at their ``ts`` (ns), of category ``cat``,
    with the line's ``text`` (its first 2,000 characters) and number in args (``{"msg": ..., "line": ...}``)."""
    return rows.select(
        "rank",
        pl.col("ts").alias("start_ns"),
        pl.col("ts").alias("end_ns"),
        "name",
        pl.lit(cat).alias("cat"),
        pl.lit(True).alias("instant"),
        pl.struct(pl.col("text").str.slice(0, 2000).alias("msg"), "line").struct.json_encode().alias("args"),
        "line",
    )


def conform(df: pl.DataFrame, columns: dict[str, Any]) -> pl.DataFrame:
    """``df`` with exactly ``columns`` (missing ones null), in order and type."""
    return df.select([(pl.col(c) if c in df.columns else pl.lit(None)).cast(t).alias(c) for c, t in columns.items()])


@dataclass
class Parts:
    """What one family found in a log.

    Attributes:
        family: the family's name (``nccl``, ``training``, ``nvidia_smi``).
        events: rows of :data:`EVENT_COLUMNS` (missing columns are null).
        samples: rows of :data:`SAMPLE_COLUMNS`.
        claimed: line numbers this family understood (the others are counted as unknown).
        dropped: lines or records the family recognised but could not load, by reason.
        info: what the family knows about the run (versions, communicators...).
        epoch: True when times are ns since the Unix epoch; False when relative (line order or cumulative step time).
        tables: rows of other canonical tables (``comms``, ``comm_links``, ``jobs``) by table name.
    """

    family: str
    events: pl.DataFrame = field(default_factory=empty_events)
    samples: pl.DataFrame = field(default_factory=empty_samples)
    claimed: pl.Series = field(default_factory=lambda: pl.Series("line", [], dtype=pl.UInt32))
    dropped: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    epoch: bool = False
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)


def _json_values(value: Any) -> Any:
    """``value`` as JSON values (what ``json.loads(json.dumps(value, default=str))`` gives)."""
    return json.loads(json.dumps(value, default=str))


def _locations(ev: pl.DataFrame, sm: pl.DataFrame, source: int) -> pl.DataFrame:
    tracks = (
        pl.concat(
            [
                ev.select("rank", "host", "pid", "track", pl.lit("cpu_thread").alias("kind")),
                sm.select(
                    "rank", "host", pl.lit(None, pl.Int64).alias("pid"), "track", pl.lit("counter").alias("kind")
                ),
            ]
        )
        .unique(["rank", "track", "kind"], keep="first", maintain_order=True)
        .sort("rank", "kind", "track")
    )
    return tracks.with_row_index("loc").select(
        pl.col("loc").cast(pl.UInt32),
        "rank",
        "host",
        "pid",
        pl.lit(None, pl.Int64).alias("tid"),
        pl.when(pl.col("kind") == "cpu_thread").then(pl.lit("marker")).otherwise(pl.col("kind")).alias("kind"),
        pl.lit(None, pl.Int64).alias("device"),
        pl.lit(None, pl.Int64).alias("stream"),
        pl.col("track").alias("name"),
        pl.lit(None, pl.String).alias("process"),
        pl.lit(None, pl.Int64).alias("sort_index"),
        pl.lit(source, pl.Int64).alias("source"),
        "track",
        pl.col("kind").alias("_kind"),
    )


SERIES_KEY = ("rank", "track", "series", "unit")
"""What makes a series: its location (rank, track) with its name and unit."""


def _series_codes(sm: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The first sample of each distinct :data:`SERIES_KEY` of ``sm`` (rank, host, track, series, unit), in the order
    first seen, and each sample's row in it (its series, from 0).

    The keys are hashed once to one integer per row (``hash_rows``: a quarter of a struct's hash), so that the later
    steps (locations, the series table) run over the distinct rows only: a join of every sample on four string
    columns cost 6-10 times more. Each row's key is then compared with its series' (null equal to null); where a
    hash collision makes them differ, the strings are joined instead."""
    ids, firsts = dense_ids(sm.select(SERIES_KEY).hash_rows())
    code = ids.cast(pl.Int64).alias("series")
    columns = ["rank", "host", "track", "series", "unit"]
    distinct = sm.select(columns)[firsts]
    same = sm.select(
        pl.all_horizontal(pl.col(c).eq_missing(distinct.get_column(c).gather(code)) for c in SERIES_KEY)
    ).to_series()
    if not same.all():  # a hash collision: the exact join of the strings
        keyed = sm.select(columns).with_row_index("row")
        firsts = keyed.unique(list(SERIES_KEY), keep="first", maintain_order=True)
        distinct = firsts.drop("row")
        code = (
            keyed.join(firsts.with_row_index("code"), on=list(SERIES_KEY), how="left", nulls_equal=True)
            .sort("row")
            .get_column("code")
            .cast(pl.Int64)
            .alias("series")
        )
    return distinct, code


def _sorted_samples(samples: pl.DataFrame) -> pl.DataFrame:
    """``samples`` (series, ts_ns, value) sorted by series then ts_ns, samples of the same both in file order: two
    stable sorts of one integer column each (a sort on both columns at once cost 3-5 times more), the first left out
    where the times are in order already (a log's samples mostly are)."""
    ts = samples.get_column("ts_ns")
    by_time = samples if ts.is_sorted() and not ts.null_count() else samples.sort("ts_ns", maintain_order=True)
    return by_time.sort("series", maintain_order=True)


def keep_counted(df: pl.DataFrame, keep: pl.Expr, dropped: dict[str, int], reason: str) -> pl.DataFrame:
    """The rows of ``df`` where ``keep`` holds (a null does not); how many others there were is added to
    ``dropped[reason]`` (a parser's rows that a garbled line would have made wrong, or stopped the load)."""
    mask = df.select(keep).to_series()
    if mask.sum() == df.height:  # all kept (most frames): no copy of every column
        return df
    kept = df.filter(mask)
    dropped[reason] = dropped.get(reason, 0) + df.height - kept.height
    return kept


def _fit_int32(df: pl.DataFrame, table: str, dropped: dict[str, int]) -> pl.DataFrame:
    """``df`` (rows of the canonical ``table``) without the rows whose value in a column the schema makes int32 is
    outside int32 (a garbled rank or channel), counted in ``dropped``."""
    narrow = [c for c, t in polars_schema(table).items() if t == pl.Int32 and c in df.columns]
    if not narrow or not df.height:
        return df
    fits = pl.all_horizontal(pl.col(c).is_between(-(2**31), MAX_RANK) | pl.col(c).is_null() for c in narrow)
    return keep_counted(df, fits, dropped, f"{table} rows with a number beyond int32")


MAX_RANK = 2**31 - 1
"""The largest rank a trace holds (its rank columns are int32); a log's rows of other ranks are dropped and counted."""


def build_trace(
    path: Path,
    parts: list[Parts],
    *,
    rank: int,
    rank_source: str,
    source: int,
    fmt: str,
    unknown: dict[str, int],
    garbled: dict[str, int],
) -> Trace:
    """The trace of one log file from its families' parts (see the module docstring)."""
    ev, sm, bad_ranks = _ranked_rows(parts, rank)
    distinct, code = _series_codes(sm)
    locs = _locations(ev, distinct, source)
    keys = locs.select("loc", "rank", "track", "_kind")
    ev = _placed_events(ev, keys)
    events = _events(ev)
    dropped = _dropped(parts, unknown, bad_ranks)
    other = _other_tables(parts, dropped)
    meta = _meta(
        path, parts, fmt=fmt, rank=rank, rank_source=rank_source, events=events.height, dropped=dropped, garbled=garbled
    )
    return Trace.build(
        meta=meta,
        **other,
        locations=locs.drop("track", "_kind"),
        events=events,
        collectives=_collectives(ev),
        series=_series(distinct, keys),
        samples=_sorted_samples(sm.select(code.alias("series"), "ts_ns", "value").drop_nulls("value")),
    )


def _ranked_rows(parts: list[Parts], rank: int) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """The events and samples of every part (in :data:`EVENT_COLUMNS`, :data:`SAMPLE_COLUMNS`), a null rank read as
    ``rank``, without the rows of a rank outside 0..:data:`MAX_RANK`; and how many of those there were, by reason."""
    ev = pl.concat([conform(p.events, EVENT_COLUMNS) for p in parts]) if parts else empty_events()
    sm = pl.concat([conform(p.samples, SAMPLE_COLUMNS) for p in parts]) if parts else empty_samples()
    ev = ev.with_columns(pl.col("rank").fill_null(rank))
    sm = sm.with_columns(pl.col("rank").fill_null(rank))
    # a garbled rank (a number cut or run together) would stop the trace's int32 rank column
    fits, bad_ranks = pl.col("rank").is_between(0, MAX_RANK), dict[str, int]()
    ev = keep_counted(ev, fits, bad_ranks, f"events with a rank outside 0..{MAX_RANK}")
    sm = keep_counted(sm, fits, bad_ranks, f"samples with a rank outside 0..{MAX_RANK}")
    return ev, sm, bad_ranks


def _placed_events(ev: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """``ev`` with each event's ``loc`` (its (rank, track)'s marker timeline in ``keys``), sorted by (loc, start_ns,
    -end_ns) in file order where those are equal, and its ``row`` in that order."""
    return (
        ev.join(keys.filter(pl.col("_kind") == "cpu_thread").drop("_kind"), on=["rank", "track"], how="left")
        .sort("loc", "start_ns", pl.col("end_ns") * -1, maintain_order=True)
        .with_row_index("row")
    )


def _events(ev: pl.DataFrame) -> pl.DataFrame:
    """The ``events`` table of the placed events ``ev`` (:func:`_placed_events`)."""
    return ev.select(
        "loc",
        "start_ns",
        "end_ns",
        "name",
        "cat",
        pl.lit(None, pl.String).alias("src_cat"),
        pl.lit(0, pl.Int32).alias("depth"),
        pl.lit(None, pl.Int64).alias("parent"),
        pl.lit(None, pl.Int64).alias("corr"),
        "bytes",
        "instant",
        "args",
    )


def _collectives(ev: pl.DataFrame) -> pl.DataFrame:
    """The ``collectives`` table of the placed events ``ev`` (:func:`_placed_events`) that have an ``op``: each
    pointing at its event's row, instances numbered from 0 by ``instance_key``."""
    coll = ev.filter(pl.col("op").is_not_null())
    return coll.select(
        pl.col("instance_key").rank("dense").cast(pl.Int64).alias("instance") - 1,
        pl.col("row").cast(pl.Int64).alias("event"),
        "rank",
        "comm",
        "seq",
        "op",
        "root",
        "bytes",
        "dtype",
        "group_size",
        pl.lit(None, pl.String).alias("group_ranks"),
    )


def _series(distinct: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The ``series`` table: one per distinct series (:func:`_series_codes`), on its (rank, track)'s counter timeline
    in ``keys``."""
    return (
        distinct.select("rank", "track", pl.col("series").alias("name"), "unit")
        .with_row_index("series")
        .join(
            keys.filter(pl.col("_kind") == "counter").drop("_kind"),
            on=["rank", "track"],
            how="left",
            maintain_order="left",
        )
        .select(pl.col("series").cast(pl.Int64), "loc", "name", "unit")
    )


def _dropped(parts: list[Parts], unknown: dict[str, int], bad_ranks: dict[str, int]) -> dict[str, int]:
    """What was dropped, by reason: each family's drops (``family: reason``), the ``unknown`` lines where there are
    any, then the rows of ranks out of range."""
    dropped: dict[str, int] = {}
    for p in parts:
        for k, n in p.dropped.items():
            dropped[f"{p.family}: {k}"] = dropped.get(f"{p.family}: {k}", 0) + n
    dropped.update({k: n for k, n in unknown.items() if n})
    dropped.update(bad_ranks)
    return dropped


def _other_tables(parts: list[Parts], dropped: dict[str, int]) -> dict[str, pl.DataFrame]:
    """The parts' other canonical tables by name (in name order), each part's rows concatenated; rows with a number
    beyond int32 are left out and counted in ``dropped``."""
    return {
        name: _fit_int32(
            pl.concat([p.tables[name] for p in parts if name in p.tables], how="diagonal_relaxed"), name, dropped
        )
        for name in sorted({n for p in parts for n in p.tables})
    }


def _meta(
    path: Path,
    parts: list[Parts],
    *,
    fmt: str,
    rank: int,
    rank_source: str,
    events: int,
    dropped: dict[str, int],
    garbled: dict[str, int],
) -> dict[str, Any]:
    """The trace's meta: the clock is the epoch where every family that found something has epoch times; the
    families' info and the garbled lines as the source's info; a warning per reason of garbled lines, and one where
    the times are relative."""
    timed = [p.epoch for p in parts if p.events.height or p.samples.height]
    epoch = bool(timed) and all(timed)
    info: dict[str, Any] = {"families": [p.family for p in parts if p.events.height or p.samples.height or p.info]}
    for p in parts:
        info.update(p.info)
    if garbled:
        info["garbled_lines"] = dict(garbled)
    warnings = [f"{path}: {k} ({n}), kept" for k, n in sorted(garbled.items())]
    if timed and not epoch:
        warnings.append(f"{path}: no absolute timestamps in this log: times are relative (see sources[].info.time)")
    return reader_meta(
        path,
        fmt,
        epoch=epoch,
        rank=rank,
        rank_source=rank_source,
        events=events,
        dropped=dropped,
        info=_json_values(info),
        warnings=warnings,
    )
