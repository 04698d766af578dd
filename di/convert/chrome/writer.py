"""Write a trace as Chrome Trace Event JSON (Perfetto UI, chrome://tracing).

Units: the model's int64 ns become the format's microseconds, relative to the
trace start ``t0`` = min(events.start_ns, samples.ts_ns). ``ts`` and ``dur``
are written as exact decimal text ``<us>.<nnn>`` built with integer arithmetic,
so every ns survives (``t0 + 123 ns`` -> ``0.123``).

File layout (one JSON object, one trace event per line)::

    {"diWriter":"di","traceEvents":[     "diWriter" first: the mark of a file di wrote, found in its head
    {"ph":"M",...}                       process/thread names and sort indices
    {"ph":"X","pid":..,"tid":..,"ts":..,"dur":..,"name":..,"cat":..,"args":{..}}
    {"ph":"i","s":"t",...}               instants (events.instant)
    {"ph":"C","pid":..,"name":"power [W]","ts":..,"args":{"power":310.5}}
    {"ph":"s",...} / {"ph":"f","bp":"e",...}   flows that bind_id cannot carry
    ],
    "displayTimeUnit":"ns",
    "diTrace":{"schema_version":1,"locations":[..],"series":[..],"meta":{..},
               "messages":{..},"collectives":{..},"categories":"...",
               "side_tables":{..}}}

* pids: one per (rank, process): GPU streams of one device form one process,
  CPU threads group by source pid; dense from 1, ordered by rank. tids are
  unique in the whole file and never equal a pid. Events that overlap without
  nesting go to extra lanes (:mod:`di.convert.lanes`), each its own tid.
* Events are written in row order, so the k-th X/i line is ``events`` row k.
* Flows: an X event that is the source of exactly one flow and/or the
  destination of exactly one flow carries ``bind_id`` + ``flow_out``/``flow_in``
  (flow v2; a chain shares one id; only when binders see the source first);
  every other flow becomes an ``s``/``f`` pair, each marker at the first time
  (``f`` not before ``s``) its event is the innermost open slice of its
  location (:func:`di.convert.lanes.innermost_points`). The event ending a
  flow (``f`` line, or the X line with ``flow_in``) carries
  ``"di_flow": {"kind", "id", "src_cat"}`` (absent keys = null).
* Messages are drawn as flows too (``di_flow`` kind ``message``).
* ``diTrace`` carries what Chrome events cannot: the ``messages`` and
  ``collectives`` tables (columns of values; event references are events
  rows, i.e. X/i lines in order), and ``categories``, each event's canonical
  category as one letter, when reading the written ``cat`` back would not give
  it (e.g. an MPI call whose ``cat`` is its source's ``mpi``) or the event has no
  source category (its letter upper case: the ``cat`` written is the canonical one), and ``side_tables``: comms, comm_links and
  io_files (:mod:`di.convert.side_tables`).
* Lines are assembled by one numba kernel (:mod:`di.convert.chrome.lines`) from
  byte fragments (names escaped once per distinct string with orjson), never a
  Python loop per event.

Modules: :mod:`~di.convert.chrome.tracks` (pids, tids, lanes),
:mod:`~di.convert.chrome.eventlines` (X/i), :mod:`~di.convert.chrome.counterlines` (C),
:mod:`~di.convert.chrome.flowlines` (bind_id, s/f), :mod:`~di.convert.chrome.writemeta`
(M lines, diTrace), :mod:`~di.convert.chrome.fragments` (the kernel's fragment pool);
this one orders them into the file.
"""

from __future__ import annotations

import gzip
import os
from typing import IO

import numpy as np
import polars as pl

from di.output import atomic_write
from di.convert.chrome.counterlines import counter_block
from di.convert.chrome.eventlines import event_block
from di.convert.chrome.flowlines import BIND_ID_BASE, bind_ids, bind_suffix, drawn_flows, flow_attrs, marker_times
from di.convert.chrome.flowlines import pair_block
from di.convert.chrome.fragments import Block, Pool, json_literals
from di.convert.chrome.lines import assemble, us_text
from di.convert.columns import utf8_buffers
from di.convert.chrome.tracks import event_rows, sorted_events, track_layout
from di.convert.chrome.writemeta import added_keys, di_trace, metadata_lines
from di.trace import Trace

__all__ = ["write_chrome", "us_text", "is_own_file", "BIND_ID_BASE"]

CHUNK_ROWS = 1 << 20
"""Rows assembled per block; bounds memory to about CHUNK_ROWS x line length."""
WRITER_KEY = b'{"diWriter":"di",'
"""The document's first member: how di recognises a Chrome JSON file it wrote (:func:`is_own_file`)."""
GZIP_LEVEL = 1
"""zlib level for .gz output: level 1 keeps gzip near the assembly speed."""


def write_chrome(trace: Trace, path: str | os.PathLike[str], *, compress: bool | None = None) -> None:
    """Write ``trace`` as Chrome Trace Event JSON.

    Args:
        trace: the canonical trace (times int64 ns).
        path: output file; written to a temporary sibling and renamed into place.
        compress: gzip the output; ``None`` means gzip when ``path`` ends with ``.gz``.

    Raises:
        SchemaError: a row refers to a location, event or series that does not exist.
    """
    path = os.fspath(path)
    gz = path.endswith(".gz") if compress is None else compress
    with atomic_write(path) as raw:
        if gz:  # the gzip header names the target, not the staged file
            name = os.path.basename(path).removesuffix(".gz")
            with gzip.GzipFile(filename=name, fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) as f:
                _write(trace, f)
        else:
            _write(trace, raw)


def is_own_file(path: os.PathLike[str] | str) -> bool:
    """True when ``path`` is a Chrome JSON file di wrote (plain or gzip): it opens with :data:`WRITER_KEY`."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head[:2] == b"\x1f\x8b":
        import zlib

        head = zlib.decompressobj(31).decompress(head, len(WRITER_KEY))
    return head.startswith(WRITER_KEY)


class _Sink:
    """Writes comma-first lines (",\\n{...}"), dropping the comma before the first; keeps the kernel's buffer."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.first = True
        self.scratch: np.ndarray | None = None  # output buffer of the line kernel, reused across blocks

    def lines(self, buf: bytes | np.ndarray) -> None:
        view = memoryview(buf)
        if len(view) and self.first:
            view, self.first = view[1:], False
        self.f.write(view)


def _utf8(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes and int64 offsets (len + 1) of a String Series; null = empty."""
    return utf8_buffers(s)


def _emit(sink: _Sink, block: Block, pool: tuple[np.ndarray, np.ndarray]) -> None:
    """Assemble and write a block, CHUNK_ROWS rows at a time."""
    for a in range(0, block.rows, CHUNK_ROWS):
        b = min(block.rows, a + CHUNK_ROWS)
        text = _utf8(block.text[a:b]) if block.text is not None else None
        lines = assemble(block.ops, a, b, block.frag, block.times, block.ints, pool, text, sink.scratch)
        sink.scratch = lines.base if lines.base is not None else lines  # reuse: fresh pages cost more than assembly
        sink.lines(lines)


def _write(trace: Trace, f: IO[bytes]) -> None:
    ev, flows = trace.events, drawn_flows(trace.flows, trace.messages)
    starts = [s.min() for s in (ev.get_column("start_ns"), trace.samples.get_column("ts_ns")) if len(s)]
    t0 = int(min(starts)) if starts else 0  # type: ignore[call-overload]
    ordered, lanes = sorted_events(ev)
    layout = track_layout(trace.locations, ev.get_column("loc").to_numpy().astype(np.int64), lanes)
    start, end, instant = (ev.get_column(c).to_numpy() for c in ("start_ns", "end_ns", "instant"))
    src, dst = (event_rows(flows.get_column(c).to_numpy(), ev.height, f"flows.{c}") for c in ("src", "dst"))
    bind = bind_ids(src, dst, start, end, instant)
    src_cat = json_literals(flows.get_column("src_cat"))
    attrs = flow_attrs(flows, src_cat)
    pool = Pool()
    events = event_block(ev, layout, pool, bind_suffix(src, dst, bind, attrs, ev.height), t0)
    sf = np.flatnonzero(bind < 0)
    pairs = pair_block(flows, sf, layout, pool, attrs, src_cat, marker_times(ordered, src[sf], dst[sf]), t0)
    counters, series, nonfinite = counter_block(trace, layout, pool, t0)
    frozen = pool.freeze()
    sink = _Sink(f)
    f.write(WRITER_KEY + b'"traceEvents":[')
    sink.lines(metadata_lines(layout, {s["pid"] for s in series}))
    for block in (events, counters, pairs):
        _emit(sink, block, frozen)
    counts = {
        "events": ev.height,
        "flows": trace.flows.height,
        "samples": counters.rows,
        "nonfinite_samples_skipped": nonfinite,
    }
    added = added_keys(events.ints, events.keys, ev.get_column("args").is_null().to_numpy())
    f.write(b'\n],\n"displayTimeUnit":"ns",\n"diTrace":' + di_trace(trace, layout, series, t0, counts, added) + b"}\n")
