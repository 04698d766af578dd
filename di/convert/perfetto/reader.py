"""Perfetto protobuf trace (TrackEvent) -> canonical Trace.

Pipeline: bytes (gzip accepted) -> :func:`~.decode.decode_packets` (numba)
-> slices paired per track (:mod:`.pairing`) -> tracks to locations -> events
sorted by (loc, start_ns, -end_ns, packet) and nested -> flows, counters.

A trace di wrote carries di's packet (:mod:`.ditrace`): locations, series and
the flow/message columns come back from it while the file is read, the flow
kind and table row from each flow id (:mod:`.flows`); its meta and collectives
after the reading, by :mod:`di.convert.restore` (as for every format), so the
trace reads back as it was written. Other producers' traces give slices (thread tracks and named
tracks, and the thread a sequence's deprecated ThreadDescriptor names for its
events without a track), instants, counters and flows (flow ids, chained as
Perfetto's trace processor chains them); their debug annotations become ``args``
(nested ones are written as null and counted), but integer ones named by the args key
of an optional events column ("External id", ...), which become that column
(:mod:`.annotations`); timestamps on other clocks
are converted by their ClockSnapshots (:mod:`.clocks`). Not read, and
counted: legacy (phase-based) events.

A plain file is memory-mapped, not copied, and the texts read (args, names)
are string views of its pages, as polars' memory-mapped IPC reads are: a file
replaced while the trace is in use (renamed over, as every di write and most
tools replace one) leaves the trace as it was read; truncating the file in
place under a trace still in use is not supported.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from di.convert import gunzip
from di.convert.columns import readonly
from di.inputsize import check_size
from di.convert.perfetto import ditrace
from di.convert.provenance import (
    END_WITHOUT_BEGIN,
    FLOW_WITHOUT_BOTH_ENDS,
    TRUNCATED_TAIL,
    reader_meta,
)
from di.convert.perfetto import fields as F
from di.convert.perfetto.annotations import annotation_columns, span_strings
from di.convert.perfetto.decode import ST_SYMBOLS_FULL, STAT_NAMES, count_packets, decode_packets, sequence_track
from di.convert.perfetto.origin import DiOrigin, ForeignOrigin, Origin, map_ids
from di.convert.perfetto.pairing import pair_slices
from di.convert.perfetto.sniff import first_field_ok
from di.convert.restore import restore, restore_meta
from di.convert.stringviews import nullable
from di.convert.perfetto.tracks import parse_descriptor, sequence_thread
from di.convert.symbols import FIRST_CAPACITY, grown_capacity, new_table
from di.errors import FormatError, SchemaError
from di.nesting import nest, nesting_order
from di.trace import CATS, Trace

__all__ = ["read_perfetto"]


NOT_PERFETTO = "no TracePacket found: not a Perfetto protobuf trace (or empty)"


def _bytes(path: Path, limit: int | None) -> tuple[np.ndarray, list[str]]:
    """The file's bytes (gunzipped), after its first bytes were checked: a file whose
    first field is no protobuf field is refused before the rest is read or inflated."""
    import mmap
    import os

    try:
        if not first_field_ok(gunzip.head(path, 16)):
            raise FormatError(path, NOT_PERFETTO)
        with open(path, "rb") as fh:
            if fh.read(2) == gunzip.GZIP_MAGIC:
                fh.seek(0)
                inflated, warnings = gunzip.gunzip(fh, path=path, limit=limit)
                return readonly(inflated), warnings  # read-only as the other two: the kernels compile once
            check_size(path, os.fstat(fh.fileno()).st_size, limit)
            fh.seek(0)
            try:  # the page cache's pages, not a copy in fresh memory (the texts read are views of them)
                return np.frombuffer(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), dtype=np.uint8), []
            except (OSError, ValueError):  # an empty file, a file system or special file without mmap
                pass
            data = fh.read() if limit is None else fh.read(limit + 1)  # a special file has no size to check first
            check_size(path, len(data), limit)
            return np.frombuffer(data, dtype=np.uint8), []
    except OSError as exc:
        raise FormatError(path, f"cannot read: {exc}") from None


def _strings(buf: np.ndarray, sym: Any) -> pl.Series:
    """The interned strings (names, categories, annotation names and strings) as a String Series."""
    count = int(sym[3][0])
    return span_strings(buf, sym[1][:count], sym[2][:count])


def _take(strings: pl.Series, ids: np.ndarray) -> pl.Series:
    """strings[ids], null where the id is -1."""
    return strings.gather(pl.Series(ids).replace(-1, None))


class Columns(NamedTuple):
    """The decoder's columns (:func:`~.decode.decode_packets`): per event, per flow id, per annotation, spans."""

    packet: np.ndarray
    ts: np.ndarray
    etype: np.ndarray
    track: np.ndarray
    name: np.ndarray
    cats: np.ndarray
    corr: np.ndarray
    has_corr: np.ndarray
    value: np.ndarray
    fl_id: np.ndarray
    fl_ev: np.ndarray
    fl_term: np.ndarray
    ann: np.ndarray
    ann_dbl: np.ndarray
    spans: np.ndarray


class Slices(NamedTuple):
    """The slices paired from the events (:func:`~.pairing.pair_slices`)."""

    begin: np.ndarray
    end_ns: np.ndarray
    instant: np.ndarray
    slice_of: np.ndarray
    unclosed: int


def read_perfetto(
    path: str | Path,
    *,
    rank: int | None = None,
    rank_source: str = "single",
    source: int = 0,
    max_input_bytes: int | None = None,
    di_packet: bool = True,
) -> Trace:
    """Read one Perfetto protobuf trace (``.perfetto-trace``, ``.pftrace``, optionally gzipped).

    Args:
        path: the file.
        rank: rank of the timelines of a trace di did not write (di's own traces keep theirs).
        rank_source: where ``rank`` came from (recorded in meta sources).
        source: index of this file in the job's sources (locations.source).
        max_input_bytes: the most bytes read (decompressed); None: no limit
            (:mod:`di.inputsize`).
        di_packet: read di's own packet when the trace has one; a damaged one is ignored
            (the trace then reads as any other producer's) and said in the warnings.

    Raises:
        FormatError: the file holds no readable TracePacket.
        InputTooLargeError: the file is (or decompresses to) more than ``max_input_bytes``.
    """
    path = Path(path)
    again = {"rank": rank, "rank_source": rank_source, "source": source, "max_input_bytes": max_input_bytes}
    dropped: Counter[str] = Counter()
    buf, sym, cols = _decoded(path, max_input_bytes, dropped)
    descriptors, doc = _descriptors(buf, cols.spans, di_packet, dropped)
    if doc is not None and (why := ditrace.problem(doc)):
        return _without_di_packet(path, why, **again)
    complaints: list[str] = []  # what of di's packet meta does not fit the schema
    written = ditrace.written(doc, path, complaints)
    cols = cols._replace(ts=cols.ts + ditrace.offset_ns(doc))
    slices = _paired(cols, dropped)
    counters = np.flatnonzero(cols.etype == F.TYPE_COUNTER)
    origin = _origin(doc, descriptors, cols.track, slices.begin, counters, rank, source)
    events, slice_row = _slice_events(buf, sym, cols, slices, origin, dropped)
    flows, messages, unpaired = _flows(cols, slices.slice_of, slice_row, events, origin)
    events, flows, restored = restore(events, flows, written, ditrace.loaded_rows(doc, events.height), dropped)
    if unpaired:
        dropped[FLOW_WITHOUT_BOTH_ENDS] += unpaired
    samples, lost = _samples(counters, cols.ts, cols.track, cols.value, origin.series_of, origin.rules)
    if lost:
        dropped["counter values on tracks that are not counter series"] += lost
    meta = reader_meta(
        path, "perfetto", epoch=False, rank=rank or 0, rank_source=rank_source, events=events.height, dropped=dropped
    )
    meta["warnings"] += complaints
    trace = Trace.build(
        meta=restore_meta(meta, written),
        locations=origin.locations,
        events=events,
        flows=flows,
        messages=messages,
        collectives=restored.get("collectives"),
        series=origin.series,
        samples=samples,
        **(written.side_tables if written is not None else {}),
    )
    if doc is not None:  # di's packet passed its checks; what it restored must fit the events read
        try:
            trace.validate()
        except SchemaError as exc:
            return _without_di_packet(path, str(exc)[:200], **again)
    return trace


def _decoded(path: Path, max_input_bytes: int | None, dropped: Counter[str]) -> tuple[np.ndarray, Any, Columns]:
    """The file's bytes, its symbol table and its decoded columns; counts in ``dropped`` what was lost
    (the unreadable rest of the file, the decoder's stats)."""
    buf, gz_warnings = _bytes(path, max_input_bytes)
    n_packets, readable = count_packets(buf)
    if n_packets == 0:
        raise FormatError(path, NOT_PERFETTO)
    for w in gz_warnings:
        dropped[f"the rest of the file: {w}"] += 1
    if readable < len(buf):
        dropped[TRUNCATED_TAIL] += len(buf) - int(readable)
    capacity = FIRST_CAPACITY
    while True:  # a table full inside a packet means: decode again with bigger ones (rare: they grow between packets)
        sym = new_table(capacity)
        stats = np.zeros(len(STAT_NAMES) + 1, dtype=np.int64)
        *decoded, sym = decode_packets(buf, n_packets, sym, stats)
        if not stats[ST_SYMBOLS_FULL]:
            break
        capacity = grown_capacity(sym[1].size)
    for k, v in zip(STAT_NAMES, stats.tolist()):
        if v:
            dropped[k] += v
    return buf, sym, Columns(*decoded)


def _descriptors(
    buf: np.ndarray, spans: np.ndarray, di_packet: bool, dropped: Counter[str]
) -> tuple[list[Any], dict[str, Any] | None]:
    """The track (and sequence thread) descriptors of the spans, and di's packet (None: none, or not read)."""
    descriptors, doc = [], None
    for kind, a, b, seq in spans.tolist():
        data = buf[a:b].tobytes()
        if kind == 1:
            doc = (ditrace.parse(data) if di_packet else None) or doc
            continue
        try:
            descriptors.append(parse_descriptor(data) if kind == 0 else sequence_thread(data, sequence_track(seq)))
        except ValueError:
            dropped["malformed track descriptors"] += 1
    return descriptors, doc


def _paired(cols: Columns, dropped: Counter[str]) -> Slices:
    """The slice events paired per track, in (track, ts, packet) order; ends without a begin counted."""
    track, ts, etype, packet = cols.track, cols.ts, cols.etype, cols.packet
    is_slice = np.flatnonzero(etype != F.TYPE_COUNTER)
    on, at = (track, ts) if is_slice.size == ts.size else (track[is_slice], ts[is_slice])
    # the events come in packet order: when (track, ts) ascend already (di writes each track's events in time
    # order), so does (track, ts, packet)
    if not ((on[1:] > on[:-1]) | ((on[1:] == on[:-1]) & (at[1:] >= at[:-1]))).all():
        is_slice = is_slice[np.lexsort((packet[is_slice], at, on))]
    order = is_slice
    last_ns = int(ts.max()) if len(ts) else 0
    begin, end_ns, instant, slice_of, unmatched, unclosed = pair_slices(track, ts, etype, order, last_ns)
    if unmatched:
        dropped[f"slice {END_WITHOUT_BEGIN}"] += int(unmatched)
    return Slices(begin, end_ns, instant, slice_of, unclosed)


def _origin(
    doc: dict[str, Any] | None,
    descriptors: list[Any],
    track: np.ndarray,
    begin: np.ndarray,
    counters: np.ndarray,
    rank: int | None,
    source: int,
) -> Origin:
    """Where locations, series and flows come from: di's packet, or the descriptors of another producer."""
    if doc is not None:
        return DiOrigin(doc)
    return ForeignOrigin(
        descriptors,
        sorted(set(track[begin].tolist())),
        sorted(set(track[counters].tolist())),
        rank if rank is not None else 0,
        source,
    )


def _slice_events(
    buf: np.ndarray, sym: Any, cols: Columns, slices: Slices, origin: Origin, dropped: Counter[str]
) -> tuple[pl.DataFrame, np.ndarray]:
    """The events table (with args, depth and parent) and each slice's row in it (-1: dropped); counts the
    slices on no location, nested annotations and slices still open at the end."""
    strings = _strings(buf, sym)
    ev, slice_row, lost = _events(cols, slices, strings, origin)
    if lost:
        dropped["slices on tracks di's packet does not name"] += lost
    args, nbytes, lifted, nested = annotation_columns(
        cols.ann, cols.ann_dbl, buf, strings, slices.slice_of, slice_row, ev.height, own=origin.own_annotations
    )
    if nested:
        dropped["nested debug annotations (written as null)"] += nested
    ev = ev.with_columns(args=args, bytes=nbytes, **lifted)
    events = _nested(ev)
    if slices.unclosed:
        dropped["slices still open at the end of the trace (ended at the last timestamp)"] += int(slices.unclosed)
    return events, slice_row


def _flows(
    cols: Columns, slice_of: np.ndarray, slice_row: np.ndarray, events: pl.DataFrame, origin: Origin
) -> tuple[pl.DataFrame, pl.DataFrame | None, int]:
    """Flows and messages from the flow ids, each bound to the row of its event's slice (-1: none); the count
    of flows without both ends."""
    fl_ev = cols.fl_ev
    mark_slice = slice_of[fl_ev] if len(fl_ev) else np.zeros(0, np.int64)
    mark_row = (
        np.where(mark_slice >= 0, slice_row[np.maximum(mark_slice, 0)], -1)
        if len(slice_row)
        else np.full(len(mark_slice), -1, np.int64)
    )  # flow marks but no slice to bind them to
    order_marks = np.lexsort((cols.packet[fl_ev], cols.ts[fl_ev])) if len(fl_ev) else np.zeros(0, np.int64)
    return origin.flows(cols.fl_id, mark_row, cols.fl_term, order_marks, events.get_column("start_ns").to_numpy())


def _without_di_packet(path: Path, why: str, **kw: Any) -> Trace:
    """The trace read as any producer's, with a warning that di's packet was damaged."""
    trace = read_perfetto(path, di_packet=False, **kw)
    warning = f"{path}: di's packet ignored ({why}); read as a trace of another producer"
    return trace.with_meta({**trace.meta, "warnings": [*trace.meta.get("warnings", []), warning]})


def _events(cols: Columns, slices: Slices, strings: pl.Series, origin: Origin) -> tuple[pl.DataFrame, np.ndarray, int]:
    """Slice rows sorted (loc, start, -end, packet); and each slice's row (-1: dropped), dropped count."""
    begin, end_ns, instant = slices.begin, slices.end_ns, slices.instant
    start_ns, packet = cols.ts[begin], cols.packet[begin]
    loc = map_ids(cols.track[begin], origin.loc_of)
    kept = np.flatnonzero(loc >= 0)
    if kept.size == begin.size:
        perm = nesting_order(loc, start_ns, end_ns, packet)
    else:
        perm = kept[nesting_order(loc[kept], start_ns[kept], end_ns[kept], packet[kept])]
    row = np.full(len(begin), -1, dtype=np.int64)
    row[perm] = np.arange(perm.size)
    if perm.size < begin.size or not (perm[1:] > perm[:-1]).all():  # the columns made in the table's order
        begin, end_ns, instant, start_ns, loc = begin[perm], end_ns[perm], instant[perm], start_ns[perm], loc[perm]
    names = _take(strings, cols.name[begin]).fill_null("")
    cat0, cat1 = cols.cats
    cat, src_cat = origin.categories(_take(strings, cat0[begin]), _take(strings, cat1[begin]), names)
    df = pl.DataFrame(
        {
            "loc": loc,
            "start_ns": start_ns,
            "end_ns": end_ns,
            "name": names,
            "cat": cat.cast(pl.String).fill_null("other").cast(pl.Enum(list(CATS)), strict=False).fill_null("other"),
            "src_cat": src_cat,
            "corr": nullable(cols.corr[begin], cols.has_corr[begin].view(np.bool_), "corr"),
            "instant": instant.view(np.bool_),
        }
    )
    return df, row, len(row) - perm.size


def _nested(ev: pl.DataFrame) -> pl.DataFrame:
    depth, parent = nest(
        ev.get_column("loc").to_numpy().astype(np.int64),
        ev.get_column("start_ns").to_numpy(),
        ev.get_column("end_ns").to_numpy(),
    )
    return ev.with_columns(pl.Series("depth", depth), pl.Series("parent", parent).replace(-1, None))


def _samples(
    counters: np.ndarray,
    ts: np.ndarray,
    track: np.ndarray,
    value: np.ndarray,
    series_of: dict[int, int],
    rules: pl.DataFrame | None,
) -> tuple[pl.DataFrame, int]:
    """Samples in packet order per series; ``rules`` (other producers): unit multiplier, incremental sums."""
    sid = map_ids(track[counters], series_of)
    ok = sid >= 0
    df = pl.DataFrame({"series": sid[ok], "ts_ns": ts[counters][ok], "value": value[counters][ok]})
    if (
        rules is not None
        and rules.height
        and (rules.get_column("incremental").any() or (rules.get_column("multiplier") != 1).any())
    ):
        df = (
            df.join(rules, on="series", how="left", maintain_order="left")
            .with_columns(
                value=pl.col("value") * pl.col("multiplier").fill_null(1),
            )
            .with_columns(
                value=pl.when(pl.col("incremental")).then(pl.col("value").cum_sum().over("series")).otherwise("value"),
            )
            .drop("incremental", "multiplier")
        )
    return df.sort("series", maintain_order=True), int((~ok).sum())
