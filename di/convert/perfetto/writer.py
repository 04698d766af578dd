"""Write a trace as a Perfetto protobuf trace (TrackEvent), ``.perfetto-trace`` / ``.pftrace``.

File layout (a ``Trace`` message: TracePackets, each field 1 of the file):

1. sequence 1: di's own packet (:mod:`di.convert.perfetto.ditrace`: locations,
   series, flow attributes, meta), then the TrackDescriptors
   (:mod:`di.convert.perfetto.layout`);
2. one sequence per event track: slices, instants, flow ids
   (:mod:`di.convert.perfetto.encode`, :mod:`di.convert.perfetto.flows`);
3. one sequence per counter series: TYPE_COUNTER events with double values.

Per event: name and category interned; ``src_cat`` as a second category;
``corr`` as the TrackEvent's ``correlation_id``; ``args`` as the debug
annotation ``args`` holding the JSON text (legacy_json_value); ``bytes`` as the
integer debug annotation ``bytes``; each optional column lifted out of ``args``
(:data:`~di.convert.perfetto.encode.LIFTED`: ``ext_id``, ``seq``, ...) that the
trace has as the integer debug annotation named by its args key ("External id",
...), on the events where it is not null. Times: packet timestamps are the model's
int64 ns, shifted by ``offset_ns`` (stored in di's packet) only when some
time is negative. Non-finite counter values are written as they are.
"""

from __future__ import annotations

import os
from typing import IO

import numpy as np
import polars as pl

from di.convert.columns import readonly, text_spans, with_values
from di.convert.lanes import canonical_events
from di.convert.perfetto import ditrace, encode
from di.convert.perfetto.flows import flow_marks
from di.convert.perfetto.layout import build_layout, descriptor_packets
from di.convert.intcolumns import int_columns
from di.convert.perfetto.strings import event_strings
from di.output import atomic_write
from di.trace import Trace

__all__ = ["write_perfetto", "is_own_file"]

BUFFER_BYTES = 4 << 20
"""Output written per kernel call (one write each); bounds memory beyond the trace's own columns. 4 MiB: a 16 MiB buffer
wrote as fast and was 3,000 more first touches of a page (0.01-0.02 s of system time here)."""
DESCRIPTOR_SEQUENCE = 1


def write_perfetto(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` as a Perfetto protobuf trace.

    Args:
        trace: the canonical trace (times int64 ns).
        path: output file; written to a temporary sibling and renamed into place.

    Raises:
        SchemaError: a row refers to a location, event or series that does not exist.
    """
    with atomic_write(path) as f:
        _write(trace, f)


def is_own_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a Perfetto trace di wrote: its first packet carries di's
    ``{"format":"di-perfetto"`` document (:mod:`di.convert.perfetto.ditrace`)."""
    with open(path, "rb") as fh:
        return b'{"format":"di-perfetto"' in fh.read(64)


class _Output:
    """The file's bytes on their way out: the kernels fill ``buf`` from ``used`` on, :meth:`flush` writes them."""

    def __init__(self, f: IO[bytes], size: int) -> None:
        f.flush()
        self.fd = f.fileno()
        self.buf = np.empty(size, dtype=np.uint8)
        self.used = 0

    def room(self, need: int) -> None:
        """Make room for ``need`` more bytes: write out what the buffer holds, or take a larger one."""
        self.flush()
        if self.buf.shape[0] < need:
            self.buf = np.empty(max(2 * self.buf.shape[0], 2 * need), dtype=np.uint8)

    def put(self, data: bytes) -> None:
        self.room(len(data))
        self.buf[: len(data)] = np.frombuffer(data, np.uint8)
        self.used = len(data)

    def flush(self) -> None:
        """Write what the buffer holds."""
        view, done = memoryview(self.buf)[: self.used], 0
        while done < self.used:
            done += os.write(self.fd, view[done:])
        self.used = 0


def _write(trace: Trace, f: IO[bytes]) -> None:
    ev = trace.events
    # an instant's end is its start (a model invariant)
    order, loc, start, end, lane = canonical_events(
        *(ev.get_column(c).to_numpy() for c in ("loc", "start_ns", "end_ns"))
    )
    ev = ev if order is None else ev[order]
    row_of = None
    if order is not None:
        row_of = np.empty(len(order), dtype=np.int64)
        row_of[order] = np.arange(len(order))
    layout = build_layout(trace.locations, loc, lane, trace.series)
    samples = trace.samples
    times = [a.min() for a in (start, samples.get_column("ts_ns").to_numpy()) if len(a)]
    offset = min(0, int(min(times))) if times else 0
    instant = ev.get_column("instant").to_numpy()
    marks = flow_marks(trace.flows, trace.messages, trace.collectives, start, end, instant, row_of)
    out = _Output(f, BUFFER_BYTES)
    out.put(ditrace.packet(trace, layout, marks, offset, row_of, DESCRIPTOR_SEQUENCE))
    out.put(descriptor_packets(layout, DESCRIPTOR_SEQUENCE))
    _events(out, ev, layout, marks, start, end, offset, instant)
    _counters(out, samples, layout, offset, DESCRIPTOR_SEQUENCE + 1 + layout.tracks.height)
    out.flush()


def _events(
    out: _Output,
    ev: pl.DataFrame,
    layout,
    marks,
    start: np.ndarray,
    end: np.ndarray,
    offset: int,
    instant: np.ndarray,
) -> None:
    """Write the event packets of every used track (start/end: ns in canonical order, written less ``offset``)."""
    n = ev.height
    strings, string_bytes, name_of, src_of, code_row = event_strings(ev)
    args_column = ev.get_column("args")
    flags = ev.get_column("cat").to_physical().to_numpy() << np.uint8(encode.CAT_SHIFT)
    flags |= instant
    if args_column.has_nulls():
        flags |= args_column.is_null().to_numpy() * np.uint8(encode.FLAG_ARGS_NULL)
    args, args_start, args_end = text_spans(args_column)

    columns = {
        encode.E_START: start - offset if offset else start,
        encode.E_END: end - offset if offset else end,
        encode.E_ARGS_START: args_start,
        encode.E_ARGS_END: args_end,
    }
    events = tuple(readonly(np.ascontiguousarray(columns[r], dtype=np.int64)) for r in range(len(encode.EVENT_ROWS)))
    ints, valid, int_cols = _int_columns(ev)

    tracks_df = layout.tracks
    counts, emit = layout.track_events, readonly(layout.emit)
    used = np.flatnonzero(counts)
    tracks = np.zeros((len(encode.TRACK_ROWS), len(used) + 1), dtype=np.int64)
    np.cumsum(counts[used], out=tracks[encode.TRK_PTR, 1:])
    tracks[encode.TRK_SEQ, :-1] = DESCRIPTOR_SEQUENCE + 1 + used
    tracks[encode.TRK_UUID, :-1] = tracks_df.get_column("uuid").to_numpy()[used]

    state = np.zeros(encode.STATE_SLOTS, dtype=np.int64)
    stack = np.empty(max(n, 1), dtype=np.int64)
    args = readonly(args)
    while state[encode.S_TRACK] < len(used):
        end = encode.encode_events(
            state,
            stack,
            out.buf,
            np.int64(out.used),
            tracks,
            emit,
            events,
            ints,
            valid,
            int_cols,
            name_of,
            src_of,
            code_row,
            readonly(flags.astype(np.uint8, copy=False)),
            args,
            strings,
            string_bytes,
            marks.ptr,
            marks.fid,
            marks.bits,
        )
        if end == out.used:  # the next event's packets do not fit in what is left of the buffer
            out.room(int(state[encode.S_NEED]))
        else:
            out.used = int(end)
            out.flush()


def _int_columns(ev: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's nullable integer columns (:mod:`di.convert.intcolumns`): ``corr``, ``bytes``, then each
    column of :data:`~di.convert.perfetto.encode.LIFTED` that ``ev`` has with some value, with the ``strings`` row
    of each lifted one's annotation name (row :data:`~di.convert.perfetto.encode.INT_NAME`)."""
    names = [col for col, _ in encode.LIFTED]
    lifted = with_values(ev, names)
    ints, valid, cols = int_columns([ev.get_column(col) for col in ("corr", "bytes", *lifted)])
    name_row = np.array([-1, -1, *(encode.STR_LIFTED + names.index(col) for col in lifted)], dtype=np.int64)
    return ints, valid, readonly(np.vstack([cols, name_row]))


def _counters(out: _Output, samples: pl.DataFrame, layout, offset: int, first_seq: int) -> None:
    series = layout.series
    ids = series.get_column("series").to_numpy().astype(np.int64)
    lut = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    sid = samples.get_column("series").to_numpy().astype(np.int64)
    row = lut[np.clip(sid, 0, max(len(lut) - 1, 0))] if len(lut) else np.full(len(sid), -1)
    bad = np.flatnonzero((row < 0) | (sid >= len(lut)))
    if len(bad):
        from di.errors import SchemaError

        raise SchemaError(f"samples row {bad[0]}: refers to series {sid[bad[0]]}, which does not exist")
    counts = np.bincount(row, minlength=len(ids))
    used = np.flatnonzero(counts)
    order = np.argsort(row, kind="stable")
    ptr = np.zeros(len(used) + 1, dtype=np.int64)
    np.cumsum(counts[used], out=ptr[1:])
    ts = samples.get_column("ts_ns").to_numpy() - offset
    bits = readonly(np.ascontiguousarray(samples.get_column("value").to_numpy(), dtype=np.float64).view(np.uint64))
    state = np.zeros(encode.STATE_SLOTS, dtype=np.int64)
    uuid = series.get_column("uuid").to_numpy().astype(np.int64)[used]
    while state[encode.S_TRACK] < len(used):
        end = encode.encode_counters(
            state, out.buf, np.int64(out.used), ptr, order, first_seq + used.astype(np.int64), uuid, ts, bits
        )
        if end == out.used:
            out.room(encode.SLACK)
        else:
            out.used = int(end)
            out.flush()
