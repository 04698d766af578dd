"""Where every event and counter goes in a Perfetto trace: processes, tracks, uuids.

* One process per rank, ``pid`` = 1 + the rank's position among the ranks
  (unique across the job), named ``rank R``.
* CPU threads: a thread track (ThreadDescriptor) under their rank's process,
  ``tid`` unique in the whole file and never equal to a pid; the location's
  name, else ``thread <source tid>``.
* GPU streams: a named track under the rank's process, ``rank R / GPU D / stream S``.
* Other timelines (async, marker, counter): a named track under the process.
* Lanes (:mod:`di.convert.lanes`): events that overlap without nesting go to
  extra tracks with the same name, so the UI shows them together: for a CPU
  thread a child track of its thread track, else a sibling under the process.
* Counter series: a counter track under the process of its location, with the
  series' unit.

Track uuids are dense from 1: processes, then event tracks (location, lane),
then series. Each event track and each series has its own packet sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.columns import run_starts
from di.convert.perfetto import fields as F
from di.convert.perfetto.protobuf import field_len, field_str, field_varint
from di.errors import SchemaError

UNIT_ENUMS = {"bytes": F.UNIT_SIZE_BYTES, "B": F.UNIT_SIZE_BYTES, "ns": F.UNIT_TIME_NS, "count": F.UNIT_COUNT}
"""di unit text -> CounterDescriptor.Unit; other units are written as unit_name."""


@dataclass(frozen=True)
class Layout:
    """Tracks of one trace.

    Attributes:
        tracks: per event track: uuid, loc, lane, pid, tid (null for non-thread tracks), name, parent uuid, thread flag.
        processes: per rank: uuid, pid, rank, name.
        series: per series: uuid, series, loc, name, unit, parent uuid.
        track_events: int64 events per event track (row of ``tracks``).
        emit: the events (positions in the order given) grouped by track, in order within each: the events of
            track t are ``emit[sum(track_events[:t]):][:track_events[t]]``.
    """

    tracks: pl.DataFrame
    processes: pl.DataFrame
    series: pl.DataFrame
    track_events: np.ndarray
    emit: np.ndarray


def _loc_rows(locations: pl.DataFrame, loc: np.ndarray, what: str, rows_of: np.ndarray | None = None) -> np.ndarray:
    """Row of ``locations`` (sorted by loc) of each ``loc``; an unknown one is an error naming the ``what`` row
    (``rows_of[i]`` when given: the row of entry i)."""
    ids = locations.get_column("loc").to_numpy().astype(np.int64)
    lut = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    rows = lut[np.clip(loc, 0, max(len(lut) - 1, 0))] if len(lut) else np.full(len(loc), -1)
    bad = np.flatnonzero((rows < 0) | (loc >= len(lut)) | (loc < 0))
    if len(bad):
        at = bad[0] if rows_of is None else rows_of[bad[0]]
        raise SchemaError(f"{what} row {at}: refers to location {loc[bad[0]]}, which does not exist")
    return rows


def build_layout(locations: pl.DataFrame, ev_loc: np.ndarray, lane: np.ndarray, series: pl.DataFrame) -> Layout:
    """Tracks for events at locations ``ev_loc`` (sorted, as in the (loc, start, -end) order) on lanes ``lane``, and
    for ``series``. Per event only the tracks' events are counted and, when a location has lanes, the events
    grouped by track: the rest is per run of a location."""
    locs = locations.sort("loc")
    run = run_starts(ev_loc)
    length = np.diff(np.r_[run, len(ev_loc)])
    row = _loc_rows(locs, ev_loc[run], "events", run)
    width = np.ones(locs.height, dtype=np.int64)
    lanes = len(lane) > 0 and int(lane.max()) > 0
    if lanes:
        np.maximum.at(width, row, np.maximum.reduceat(lane, run).astype(np.int64) + 1)
    base = np.cumsum(width) - width
    track_events = np.zeros(int(width.sum()), np.int64)
    if lanes:
        track_of_event = np.repeat(base[row], length) + lane
        track_events += np.bincount(track_of_event, minlength=track_events.size)
        emit = np.argsort(track_of_event, kind="stable")
    else:  # each location's run is its one track's events, in order
        np.add.at(track_events, base[row], length)
        emit = np.arange(len(ev_loc), dtype=np.int64)
    used = track_events > 0

    ranks = locs.get_column("rank").unique().sort()
    processes = (
        pl.DataFrame({"rank": ranks})
        .with_row_index("uuid", offset=1)
        .with_columns(
            pid=pl.col("uuid").cast(pl.Int64),
            name=pl.format("rank {}", "rank"),
        )
    )
    nproc = processes.height
    stream = (
        pl.when(pl.col("device").is_not_null())
        .then(pl.format("rank {} / GPU {} / stream {}", "rank", "device", "stream"))
        .otherwise(pl.format("rank {} / stream {}", "rank", "stream"))
    )
    named = pl.coalesce(
        pl.when(pl.col("kind") == "gpu_stream").then(stream),
        "name",
        pl.when(pl.col("kind") == "cpu_thread").then(pl.format("thread {}", "tid")),
        pl.format("{} {}", pl.col("kind").cast(pl.String), "loc"),
    )
    rows = np.repeat(np.arange(locs.height), width)
    tracks = (
        locs[rows]
        .select("loc", "rank", pl.col("kind").cast(pl.String), track_name=named)
        .with_columns(
            lane=pl.Series(np.arange(len(rows)) - np.repeat(base, width), dtype=pl.Int32), used=pl.Series(used)
        )
        .with_row_index("track")
        .join(
            processes.select("rank", pl.col("uuid").alias("proc_uuid"), "pid"),
            on="rank",
            how="left",
            maintain_order="left",
        )
        .with_columns(uuid=pl.col("track").cast(pl.Int64) + nproc + 1, thread=pl.col("kind") == "cpu_thread")
    )
    thread_tracks = tracks.filter(pl.col("thread") & (pl.col("lane") == 0))
    tid = pl.DataFrame(
        {"loc": thread_tracks.get_column("loc"), "tid": np.arange(thread_tracks.height, dtype=np.int64) + nproc + 1}
    )
    lane0 = tracks.filter(pl.col("lane") == 0).select("loc", pl.col("uuid").alias("lane0_uuid"))
    tracks = tracks.join(tid, on="loc", how="left", maintain_order="left").join(
        lane0, on="loc", how="left", maintain_order="left"
    )
    tracks = tracks.with_columns(
        parent_uuid=pl.when(pl.col("thread") & (pl.col("lane") > 0)).then("lane0_uuid").otherwise("proc_uuid"),
        tid=pl.when(pl.col("lane") == 0).then("tid"),
    ).drop("lane0_uuid")

    first_series_uuid = nproc + tracks.height + 1
    ser = series.sort("series").join(locs.select("loc", "rank"), on="loc", how="left", maintain_order="left")
    if ser.get_column("rank").null_count():
        bad = ser.filter(pl.col("rank").is_null()).row(0, named=True)
        raise SchemaError(f"series {bad['series']}: refers to location {bad['loc']}, which does not exist")
    ser = ser.with_row_index("uuid", offset=first_series_uuid).join(
        processes.select("rank", pl.col("uuid").alias("parent_uuid")), on="rank", how="left", maintain_order="left"
    )
    return Layout(tracks, processes, ser, track_events, emit)


def descriptor_packets(layout: Layout, sequence_id: int, used_only: bool = True) -> bytes:
    """TracePackets with the TrackDescriptors of the processes, the used event tracks and every series."""
    out = bytearray()

    def packet(descriptor: bytes) -> None:
        body = field_varint(F.PACKET_SEQUENCE_ID, sequence_id) + field_len(F.PACKET_TRACK_DESCRIPTOR, descriptor)
        out.extend(field_len(F.TRACE_PACKET, body))

    tracks = layout.tracks.filter("used") if used_only else layout.tracks
    ranks_used = set(tracks.get_column("rank").to_list()) | set(layout.series.get_column("rank").to_list())
    for p in layout.processes.iter_rows(named=True):
        if p["rank"] in ranks_used:
            proc = field_varint(F.PROCESS_PID, p["pid"]) + field_str(F.PROCESS_NAME, p["name"])
            packet(field_varint(F.TRACK_UUID, p["uuid"]) + field_len(F.TRACK_PROCESS, proc))
    for t in tracks.iter_rows(named=True):
        head = field_varint(F.TRACK_UUID, t["uuid"]) + field_varint(F.TRACK_PARENT_UUID, t["parent_uuid"])
        if t["thread"] and t["lane"] == 0:
            thread = (
                field_varint(F.THREAD_PID, t["pid"])
                + field_varint(F.THREAD_TID, t["tid"])
                + field_str(F.THREAD_NAME, t["track_name"])
            )
            packet(head + field_len(F.TRACK_THREAD, thread))
        else:
            packet(head + field_str(F.TRACK_NAME, t["track_name"]))
    for s in layout.series.iter_rows(named=True):
        unit = s["unit"]
        counter = b""
        if unit in UNIT_ENUMS:
            counter += field_varint(F.COUNTER_UNIT, UNIT_ENUMS[unit])
        elif unit:
            counter += field_str(F.COUNTER_UNIT_NAME, unit)
        head = field_varint(F.TRACK_UUID, s["uuid"]) + field_varint(F.TRACK_PARENT_UUID, s["parent_uuid"])
        packet(head + field_str(F.TRACK_NAME, s["name"]) + field_len(F.TRACK_COUNTER, counter))
    return bytes(out)
