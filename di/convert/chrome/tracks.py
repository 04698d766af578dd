"""Where the Chrome writer puts every event: processes (pid), tracks (tid) and lanes.

* pids: one per (rank, process): GPU streams of one device form one process,
  CPU threads group by source pid; dense from 1, ordered by rank.
* tracks: one per (location, lane); tids are unique in the whole file, never
  equal a pid, and follow (pid, sort_index, loc, lane).
* lanes: events that overlap without nesting on one location go to extra lanes
  (:func:`di.convert.lanes.canonical_events`, run on the (loc, start, -end) order).

A row that refers to a location or event that does not exist raises
:class:`~di.errors.SchemaError` naming the table and row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.lanes import canonical_events, lanes_of_rows
from di.errors import SchemaError

__all__ = ["TrackLayout", "event_rows", "locate", "sorted_events", "track_layout"]


@dataclass(frozen=True)
class TrackLayout:
    """Where every track (location x lane) goes: pid/tid per track, track per event."""

    tracks: pl.DataFrame  # per track: loc, lane, pid, tid, thread_name, used, location columns
    procs: pl.DataFrame  # per process: pid, process_name, rank
    track_of_event: np.ndarray
    loc_row: np.ndarray  # locations.loc value -> row of the sorted locations table
    row_pid: np.ndarray  # row of the sorted locations table -> pid


def locate(lut: np.ndarray, values: np.ndarray, what: str) -> np.ndarray:
    """Row of each referenced id through ``lut`` (-1 = missing), or SchemaError."""
    rows = lut[np.clip(values, 0, len(lut) - 1)] if len(lut) else np.full(len(values), -1)
    bad = np.flatnonzero((rows < 0) | (values >= len(lut)) | (values < 0))
    if len(bad):
        raise SchemaError(f"{what} row {bad[0]}: refers to {values[bad[0]]}, which does not exist")
    return rows


def event_rows(rows: np.ndarray, n: int, what: str) -> np.ndarray:
    """``rows`` as int64 after checking that each is a row of events, or SchemaError."""
    bad = np.flatnonzero((rows < 0) | (rows >= n))
    if len(bad):
        raise SchemaError(f"{what} row {bad[0]}: event row {rows[bad[0]]} does not exist ({n} events)")
    return rows.astype(np.int64)


def _processes(locs: pl.DataFrame) -> pl.DataFrame:
    """locs with a ``pid`` column: one per (rank, GPU device) or (rank, source pid / process name)."""
    gpu = (pl.col("kind") == "gpu_stream") & (pl.col("device").is_not_null() | pl.col("src_pid").is_not_null())
    keys = ["rank", "_gpu", "_key", "_pname"]
    locs = locs.with_columns(
        _gpu=gpu,
        _key=pl.when(gpu).then(pl.coalesce(pl.col("device").cast(pl.Int64), "src_pid")).otherwise("src_pid"),
        _pname=pl.when(~gpu & pl.col("src_pid").is_null()).then(pl.col("process")),
    )
    procs = (
        locs.group_by(keys)
        .agg(pl.col("process").drop_nulls().first().alias("_proc"))
        .sort(keys, nulls_last=True)
        .with_row_index("_p", offset=1)
        .with_columns(
            process_name=pl.when("_gpu")
            .then(pl.format("rank {} / GPU {}", "rank", "_key"))
            .when(pl.col("_proc").is_not_null())
            .then(pl.format("rank {} / {}", "rank", "_proc"))
            .when(pl.col("_key").is_not_null())
            .then(pl.format("rank {} / pid {}", "rank", "_key"))
            .otherwise(pl.format("rank {}", "rank"))
        )
    )
    out = locs.join(procs.drop("_proc"), on=keys, how="left", nulls_equal=True, maintain_order="left")
    return out.drop("_gpu", "_key", "_pname").rename({"_p": "pid"})


def track_layout(locations: pl.DataFrame, ev_loc: np.ndarray, lane: np.ndarray) -> TrackLayout:
    """The pid and tid of every (location, lane) track and the track of every event row (``ev_loc``, ``lane``)."""
    locs = _processes(locations.sort("loc").rename({"pid": "src_pid", "tid": "src_tid"}))
    loc_ids = locs.get_column("loc").to_numpy().astype(np.int64)
    loc_row = np.full(int(loc_ids.max()) + 1 if len(loc_ids) else 0, -1, dtype=np.int64)
    loc_row[loc_ids] = np.arange(len(loc_ids))
    ev_row = locate(loc_row, ev_loc, "events")
    extra = np.zeros(len(loc_ids), dtype=np.int64)
    np.maximum.at(extra, ev_row[lane > 0], lane[lane > 0])
    width = extra + 1  # lanes per location
    base = np.cumsum(width) - width
    row_of_track = np.repeat(np.arange(len(loc_ids)), width)
    track_of_event = base[ev_row] + lane
    nproc = int(locs.get_column("pid").max() or 0)
    stream = pl.format("stream {}", "stream")
    tracks = (
        locs[row_of_track]
        .with_columns(
            lane=pl.Series(np.arange(len(row_of_track)) - np.repeat(base, width), dtype=pl.Int32),
            used=pl.Series(np.bincount(track_of_event, minlength=len(row_of_track)) > 0),
        )
        .with_columns(
            _base=pl.coalesce(
                "name",
                pl.when(pl.col("kind") == "gpu_stream").then(stream),
                pl.format("thread {}", "src_tid"),
                pl.format("loc {}", "loc"),
            ),
        )
        .with_columns(
            thread_name=pl.when(pl.col("lane") > 0)
            .then(pl.format("{} (lane {})", "_base", pl.col("lane") + 1))
            .otherwise("_base"),
        )
        .with_row_index("_track")
    )
    order = tracks.sort(["pid", "sort_index", "loc", "lane"], nulls_last=True).get_column("_track").to_numpy()
    tid = np.empty(len(order), dtype=np.int64)
    tid[order] = nproc + 1 + np.arange(len(order))
    tracks = tracks.with_columns(tid=pl.Series(tid)).drop("_base", "_track")
    procs = locs.select("pid", "process_name", "rank").unique("pid").sort("pid")
    return TrackLayout(tracks, procs, track_of_event, loc_row, locs.get_column("pid").to_numpy())


def sorted_events(ev: pl.DataFrame) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]:
    """loc, start_ns, end_ns in (loc, start, -end) order and that order (None: rows already are; an instant's end is
    its start, a model invariant), and the lane of each event row (:func:`di.convert.lanes.canonical_events`)."""
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    order, loc, start, end, lane = canonical_events(
        loc, ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
    )
    return (loc, start, end, order), lanes_of_rows(order, lane)
