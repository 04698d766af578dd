"""TrackDescriptors of a Perfetto trace -> di locations and series (for traces other tools wrote).

Each track that holds slices becomes one location: a thread track (or a track
under one) is a ``cpu_thread`` with the thread's pid/tid, any other an
``async`` timeline named after its track; the process comes from the nearest
process descriptor above it. Each track that holds counter values becomes a
series on one ``counter`` location per process (or one for tracks outside
any process), with the unit of its CounterDescriptor; values are multiplied
by its ``unit_multiplier`` and, for an incremental counter, summed in packet
order (as the trace processor does). Events on a uuid
without a descriptor go to a timeline named ``track <uuid>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from di.convert.perfetto import fields as F
from di.convert.perfetto.protobuf import as_int64, iter_fields


@dataclass
class Track:
    """One TrackDescriptor, as far as di uses it."""

    uuid: int
    parent: int = 0
    name: str | None = None
    pid: int | None = None
    process_name: str | None = None
    tid: int | None = None
    thread_name: str | None = None
    is_process: bool = False
    is_thread: bool = False
    unit: str | None = None
    incremental: bool = False
    multiplier: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def _text(v: int | bytes) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def parse_descriptor(data: bytes) -> Track:
    """A TrackDescriptor message; raises ValueError when malformed."""
    t = Track(uuid=0)
    for f, _, v in iter_fields(data):
        if f == F.TRACK_UUID:
            t.uuid = int(v)  # type: ignore[arg-type]
        elif f == F.TRACK_PARENT_UUID:
            t.parent = int(v)  # type: ignore[arg-type]
        elif f in (F.TRACK_NAME, F.TRACK_STATIC_NAME):
            t.name = _text(v)
        elif f == F.TRACK_PROCESS and isinstance(v, bytes):
            t.is_process = True
            for g, _, w in iter_fields(v):
                if g == F.PROCESS_PID:
                    t.pid = as_int64(int(w))  # type: ignore[arg-type]
                elif g == F.PROCESS_NAME:
                    t.process_name = _text(w)
        elif f == F.TRACK_THREAD and isinstance(v, bytes):
            _thread(t, v)
        elif f == F.TRACK_COUNTER and isinstance(v, bytes):
            t.unit = ""
            for g, _, w in iter_fields(v):
                if g == F.COUNTER_UNIT and int(w) in F.UNIT_NAMES:  # type: ignore[arg-type]
                    t.unit = t.unit or F.UNIT_NAMES[int(w)]  # type: ignore[arg-type]
                elif g == F.COUNTER_UNIT_NAME:
                    t.unit = _text(w)
                elif g == F.COUNTER_IS_INCREMENTAL:
                    t.incremental = bool(w)
                elif g == F.COUNTER_UNIT_MULTIPLIER and int(w) > 0:  # type: ignore[arg-type]
                    t.multiplier = int(w)  # type: ignore[arg-type]
    return t


def _thread(t: Track, data: bytes) -> Track:
    """``t`` as the thread a ThreadDescriptor message names."""
    t.is_thread = True
    for g, _, w in iter_fields(data):
        if g == F.THREAD_PID:
            t.pid = as_int64(int(w))  # type: ignore[arg-type]
        elif g == F.THREAD_TID:
            t.tid = as_int64(int(w))  # type: ignore[arg-type]
        elif g == F.THREAD_NAME:
            t.thread_name = _text(w)
    return t


def sequence_thread(data: bytes, key: int) -> Track:
    """The thread of a (deprecated) TracePacket.thread_descriptor, as a thread track with key ``key``."""
    return _thread(Track(uuid=key), data)


def _owner(t: Track, by_uuid: dict[int, Track], want: str) -> Track | None:
    """Nearest descriptor at or above ``t`` that is a thread (want="thread") or a process."""
    seen: set[int] = set()
    cur: Track | None = t
    while cur is not None and cur.uuid not in seen:
        seen.add(cur.uuid)
        if cur.is_thread if want == "thread" else cur.is_process:
            return cur
        cur = by_uuid.get(cur.parent) if cur.parent else None
    return None


def foreign_layout(
    descriptors: list[Track], slice_tracks: list[int], counter_tracks: list[int], rank: int, source: int
) -> tuple[pl.DataFrame, dict[int, int], pl.DataFrame, dict[int, int], pl.DataFrame]:
    """(locations, track uuid -> loc, series, track uuid -> series, per series: incremental, multiplier)
    for a trace without di's packet."""
    by_uuid = {t.uuid: t for t in descriptors}
    rows: list[dict[str, Any]] = []
    loc_of: dict[int, int] = {}
    for uuid in slice_tracks:
        t = by_uuid.get(uuid, Track(uuid=uuid, name=f"track {uuid}" if uuid else "default track"))
        thread = _owner(t, by_uuid, "thread")
        proc = _owner(t, by_uuid, "process")
        pid = thread.pid if thread is not None and thread.pid is not None else (proc.pid if proc is not None else None)
        name = (t.thread_name if t.is_thread else t.name) or (thread.thread_name if thread is not None else None)
        loc_of[uuid] = len(rows)
        rows.append(
            {
                "loc": len(rows),
                "rank": rank,
                "pid": pid,
                "tid": thread.tid if thread is not None else None,
                "kind": "cpu_thread" if thread is not None else "async",
                "name": name,
                "process": proc.process_name if proc is not None else None,
                "source": source,
            }
        )
    counter_loc: dict[int | None, int] = {}
    series_rows: list[dict[str, Any]] = []
    series_of: dict[int, int] = {}
    for uuid in counter_tracks:
        t = by_uuid.get(uuid, Track(uuid=uuid, name=f"counter {uuid}"))
        proc = _owner(t, by_uuid, "process")
        key = proc.uuid if proc is not None else None
        if key not in counter_loc:
            counter_loc[key] = len(rows)
            rows.append(
                {
                    "loc": len(rows),
                    "rank": rank,
                    "pid": proc.pid if proc is not None else None,
                    "tid": None,
                    "kind": "counter",
                    "name": "counters",
                    "process": proc.process_name if proc is not None else None,
                    "source": source,
                }
            )
        series_of[uuid] = len(series_rows)
        series_rows.append(
            {
                "series": len(series_rows),
                "loc": counter_loc[key],
                "name": t.name or f"counter {uuid}",
                "unit": t.unit or None,
            }
        )
    locations = pl.DataFrame(
        rows,
        schema={
            "loc": pl.UInt32,
            "rank": pl.Int32,
            "pid": pl.Int64,
            "tid": pl.Int64,
            "kind": pl.String,
            "name": pl.String,
            "process": pl.String,
            "source": pl.Int32,
        },
    )
    series = pl.DataFrame(
        series_rows, schema={"series": pl.UInt32, "loc": pl.UInt32, "name": pl.String, "unit": pl.String}
    )
    rules = pl.DataFrame(
        [(series_of[u], by_uuid[u].incremental, by_uuid[u].multiplier) for u in counter_tracks if u in by_uuid],
        schema={"series": pl.Int64, "incremental": pl.Boolean, "multiplier": pl.Int64},
        orient="row",
    )
    return locations, loc_of, series, series_of, rules
