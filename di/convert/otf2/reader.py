"""OTF2 archive (Score-P, di's own writer) -> canonical Trace.

Pipeline: :mod:`archive` (anchor, definitions, per-location records through
numba cfunc callbacks) -> :mod:`timeline` (regions, instants, RMA copies) ->
:mod:`events` (names, categories, nesting, args) -> :mod:`matching`
(messages, collectives) and :mod:`metrics` (series, samples).

Times: OTF2 ticks (clock offsets applied by the OTF2 library) become int64 ns
``(t - global_offset) * 1e9 / timer_resolution`` with exact integer
arithmetic (floor); when the ClockProperties carry a realtime timestamp (ns
since the epoch at ``global_offset``) it is added and the clock domain is
``unix_epoch``, else ``relative``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di import schema
from di.inputsize import check_size
from di.convert.otf2 import archive, clib, events, matching, metrics
from di.convert.otf2.records import (
    ATTRIBUTE,
    COLL_END,
    METRIC,
    METRIC_VALUE,
    MPI_IRECV,
    MPI_ISEND,
    MPI_RECV,
    MPI_SEND,
)
from di.convert.otf2.timeline import (
    Builder,
    COUNT_NAMES,
)
from di.convert.otf2.definitions import Definitions, read_definitions
from di.convert.otf2.recordrows import RecordRows
from di.convert.otf2.sideprops import read_side_tables
from di.convert.otf2.ditrace import Own, read_own
from di.convert.restore import restore_meta
from di.convert import provenance as P
from di.convert.provenance import reader_meta
from di.trace import Trace

__all__ = ["read_otf2"]

NS_PER_S = 1_000_000_000


def ticks_to_ns(ticks: np.ndarray, defs: Definitions) -> np.ndarray:
    """int64 ns of OTF2 ticks (see the module docstring)."""
    d = ticks.astype(np.int64) - np.int64(defs.global_offset)
    res = defs.timer_resolution
    if res == NS_PER_S:
        ns = d
    elif res < 2**63 // NS_PER_S:
        q, r = np.divmod(d, np.int64(res))
        ns = q * NS_PER_S + (r * NS_PER_S) // res
    else:
        ns = np.floor(d.astype(np.float64) * (NS_PER_S / res)).astype(np.int64)
    return ns + np.int64(defs.realtime_ns or 0)


def read_otf2(
    path: str | Path,
    *,
    rank: int | None = None,
    rank_source: str = "metadata",
    source: int = 0,
    max_input_bytes: int | None = None,
) -> Trace:
    """Read an OTF2 archive into a Trace.

    Args:
        path: the anchor file (any name) or a directory holding exactly one.
        rank, rank_source: unused; ranks come from the archive's definitions.
        source: index of this archive in the job's sources (locations.source).
        max_input_bytes: the most bytes the archive's files may hold together; None: no
            limit (:mod:`di.inputsize`).

    Raises:
        FormatError: not an OTF2 archive, or one the OTF2 library cannot open.
        InputTooLargeError: the archive's files hold more than ``max_input_bytes``.
    """
    anchor = archive.find_anchor(Path(path))
    files = archive.archive_bytes(anchor)
    check_size(anchor, files, max_input_bytes, "is an archive of")
    with clib.collected_errors():  # di words what it could not read; the library's own prints would bury it
        reader = archive.open_reader(anchor)
        try:
            defs = read_definitions(reader)
            side_warnings: list[str] = []
            side = read_side_tables(reader, side_warnings)
            own = read_own(reader, [loc["ref"] for loc in defs.locations], side_warnings)
            # every record takes at least one byte of its event file: a definition claiming more sizes nothing
            expected = min(sum(loc["records"] for loc in defs.locations), files)
            largest = min(max((loc["records"] for loc in defs.locations), default=0), files)
            fold = next((ref for ref, (name, _) in defs.attributes.items() if name == events.IO_ATTRIBUTE), -1)
            on_enter = sum(name in events.ENTER_ATTRIBUTES for name, _ in defs.attributes.values())
            room = archive.rows_per_record(on_enter)
            builder = Builder(min(int(expected * room), files), fold)
            recs = archive.read_records(
                reader,
                [loc["ref"] for loc in defs.locations],
                anchor,
                expected_records=largest,  # a location at a time: the buffer is reused
                room=room,
                consume=builder.add,
                time_window=(defs.global_offset, defs.global_offset + defs.trace_length),
                io_records=bool(defs.io_handles or defs.io_files),
            )
            builder.finish()
        finally:
            reader.close()
    return _assemble(anchor, defs, recs, builder, source, side, side_warnings, own)


def _assemble(
    anchor: Path,
    defs: Definitions,
    recs: archive.Records,
    tl: Builder,
    source: int,
    side: dict[str, pl.DataFrame],
    side_warnings: list[str],
    own: Own | None,
) -> Trace:
    """The trace of what was read; ``side``: comms, comm_links, io_files (:mod:`di.convert.otf2.sideprops`);
    ``own``: di's property, whose locations replace the archive's (records go to the trace's loc of their
    location)."""
    dropped: Counter[str] = Counter(recs.dropped)
    warnings = [*recs.warnings, *side_warnings]
    for name, n in zip(COUNT_NAMES, tl.counts.tolist()):
        if n:
            dropped[name] += n
    built = tl.events()
    if own is None:
        gpu = np.array([loc["kind"] == "gpu_stream" for loc in defs.locations], dtype=bool)
    else:  # the lanes of one location become one again (flow sources stay (OTF2 location, ordinal) in tl)
        built, gpu = (own.loc_of[tl.ev_loc], *built[1:]), own.is_gpu()
    ev, order = events.events_frame(
        built, (defs.global_offset, defs.timer_resolution, defs.realtime_ns or 0), defs.regions, gpu
    )
    rec = _record_rows(recs, tl, order, defs, own)
    mpi = (MPI_SEND, MPI_ISEND, MPI_RECV, MPI_IRECV, COLL_END)
    outside = int((rec.of_kind(*mpi) & (rec.event < 0)).sum()) if rec.count(*mpi) else 0
    if outside:
        dropped["MPI records outside any region"] += outside
    messages, unmatched = matching.messages(rec, defs.comms)
    for k, v in unmatched.items():
        dropped[k] += v
    collectives = matching.collectives(rec, defs.comms, defs.attributes, defs.strings)
    ev = ev.with_columns(
        events.args_column(ev.height, rec, tl, order, defs),
        pl.repeat(None, ev.height, dtype=pl.Int64, eager=True).alias("corr"),
    )
    ev = events.own_columns(ev, rec, defs)
    flows, lost = events.flows_frame(rec, tl, order, defs)
    if lost:
        dropped[P.FLOW_END_WITHOUT_START] += lost
    locations, counter_loc = _locations(defs, rec, source) if own is None else _own_locations(own, rec)
    series, samples, unknown_metric = metrics.series_samples(rec, defs.metrics, counter_loc)
    if own is not None:
        series, samples = own.renumber(series, samples, warnings)
    if unknown_metric:
        dropped["metric values of an undefined metric"] += unknown_metric
    backwards = ev.get_column("end_ns") < ev.get_column("start_ns")  # damaged timestamps: a Leave before its Enter
    if backwards.any():
        dropped[P.END_BEFORE_START_REPAIRED] += int(backwards.sum())
        ev = ev.with_columns(pl.when(backwards).then(pl.col("start_ns")).otherwise(pl.col("end_ns")).alias("end_ns"))
    handled = int(recs.bounds[-1]) - rec.count(ATTRIBUTE, METRIC_VALUE)
    if recs.records_read > handled:
        dropped[P.UNSUPPORTED_RECORD] += recs.records_read - handled
    meta = _meta(anchor, defs, recs, ev.height, dropped, warnings)
    if own is not None:
        meta = restore_meta(meta, own.written)
    return Trace.build(
        meta=meta,
        locations=locations,
        events=ev.select(*schema.polars_schema("events"), *(c for c in schema.optional_schema("events") if c in ev)),
        messages=messages,
        collectives=collectives,
        flows=flows,
        series=series if series.height else None,
        samples=samples if samples.height else None,
        **side,
    )


def _record_rows(
    recs: archive.Records, tl: Builder, order: np.ndarray | None, defs: Definitions, own: Own | None
) -> RecordRows:
    """The records other than Enter/Leave (their events are built already), see :mod:`recordrows`; ``loc``: the
    position of their location in the definitions, or with ``own`` the trace's loc."""
    sub = [tl.rec[:, q] for q in range(tl.rec.shape[1])]  # views: the builder keeps each field in a contiguous column
    ranks = np.array([loc["rank"] for loc in defs.locations], dtype=np.int32)
    rec_row = np.ascontiguousarray(tl.rec_row)

    def loc(rows: np.ndarray | None) -> np.ndarray:
        at = np.searchsorted(recs.bounds, rec_row if rows is None else rec_row[rows], side="right") - 1
        return at if own is None else own.loc_of[at]

    def rank(rows: np.ndarray | None) -> np.ndarray:
        at = loc(rows)
        return (ranks if own is None else own.rank_of())[at] if at.size else np.zeros(0, np.int32)

    def ts_ns(rows: np.ndarray | None) -> np.ndarray:
        return ticks_to_ns(sub[1] if rows is None else sub[1][rows], defs)

    given = dict(zip(("kind", "a", "b", "c", "d", "e"), (sub[0], *sub[2:7])))
    return RecordRows.lazy(
        {
            **given,
            "event": events.rows_of(order, tl.rec_owner),
            "row": rec_row,
            "after": np.ascontiguousarray(tl.rec_after),
            "head": np.ascontiguousarray(tl.rec_head),
        },
        {"loc": loc, "rank": rank, "ts_ns": ts_ns},
    )


def _locations(defs: Definitions, rec: RecordRows, source: int) -> tuple[pl.DataFrame, dict[int, int]]:
    """The locations table, plus a counter timeline per thread that recorded metrics."""
    rows = [
        {k: loc[k] for k in ("rank", "host", "pid", "tid", "kind", "device", "stream", "name", "process", "sort_index")}
        for loc in defs.locations
    ]
    counter_loc: dict[int, int] = {}
    with_metrics = np.unique(rec.take(rec.of_kind(METRIC)).loc).tolist()
    for i in with_metrics:
        if rows[i]["kind"] == "counter":
            counter_loc[i] = i
        else:
            counter_loc[i] = len(rows)
            rows.append(
                {**rows[i], "kind": "counter", "name": f"{rows[i]['name']} metrics", "device": None, "stream": None}
            )
    df = (
        pl.DataFrame(rows, infer_schema_length=None)
        .with_row_index("loc")
        .with_columns(pl.lit(source, pl.Int32).alias("source"))
    )
    return df, counter_loc


def _own_locations(own: Own, rec: RecordRows) -> tuple[pl.DataFrame, dict[int, int]]:
    """The locations di wrote; the metrics of each are its own series' (each series is on its loc again)."""
    with_metrics = np.unique(rec.take(rec.of_kind(METRIC)).loc).tolist()
    return own.locations, {i: i for i in with_metrics}


def _meta(
    anchor: Path, defs: Definitions, recs: archive.Records, n: int, dropped: Counter[str], warnings: list[str]
) -> dict[str, Any]:
    ranks = sorted({loc["rank"] for loc in defs.locations})
    info = {
        "timer_resolution": defs.timer_resolution,
        "global_offset": defs.global_offset,
        "records": recs.records_read,
        "locations": len(defs.locations),
    }
    return reader_meta(
        anchor,
        "otf2",
        epoch=bool(defs.realtime_ns),
        sync="otf2_clock_offsets",
        rank=ranks[0] if ranks else 0,
        rank_source="metadata",
        events=n,
        dropped=dropped,
        info=info,
        warnings=warnings,
        world_size=len(ranks) or None,
    )
