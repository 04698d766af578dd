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
  it (e.g. an MPI call whose ``cat`` is its source's ``mpi``), and ``side_tables``: comms, comm_links and
  io_files (:mod:`di.convert.side_tables`).
* Lines are assembled by one numba kernel (:mod:`di.convert.chrome.lines`) from
  byte fragments (names escaped once per distinct string with orjson), never a
  Python loop per event.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
import orjson
import polars as pl

from di.output import atomic_write
from di.convert.chrome.lines import ARGS, CONST, FRAG, NO_TIME, TEXT, TIME, assemble, us_text
from di.convert import side_tables
from di.convert.columns import utf8_buffers
from di.convert.lanes import NO_POINT, assign_lanes, innermost_points, is_sorted
from di.errors import SchemaError
from di.trace import Trace

__all__ = ["write_chrome", "us_text", "is_own_file"]

CHUNK_ROWS = 1 << 20
"""Rows assembled per block; bounds memory to about CHUNK_ROWS x line length."""
BIND_ID_BASE = 1 << 32
"""First flow-v2 bind_id: Perfetto numbers s/f flows 0, 1, ... (uint32) in the same id space."""
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


class _Pool:
    """Byte fragments the line kernel copies by id; strings are added in bulk."""

    def __init__(self) -> None:
        self.parts: list[pl.Series] = []
        self.size = 0

    def add(self, texts: pl.Series | list[str]) -> int:
        """Register fragments; returns the id of the first."""
        s = texts if isinstance(texts, pl.Series) else pl.Series(texts, dtype=pl.String)
        base, self.size = self.size, self.size + len(s)
        self.parts.append(s.cast(pl.String).rename(""))
        return base

    def freeze(self) -> tuple[np.ndarray, np.ndarray]:
        return _utf8(pl.concat(self.parts) if self.parts else pl.Series([], dtype=pl.String))


def _utf8(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes and int64 offsets (len + 1) of a String Series; null = empty."""
    return utf8_buffers(s)


def _dense_codes(s: pl.Series) -> tuple[np.ndarray, list[str]]:
    """Row -> index into the distinct non-null values of ``s`` (-1 for null), and those values."""
    if not (s.dtype == pl.Categorical or isinstance(s.dtype, pl.Enum)):
        s = s.cast(pl.String).cast(pl.Categorical)
    uniq = s.drop_nulls().unique()
    ids = uniq.to_physical().cast(pl.Int64).to_numpy()
    size = int(ids.max()) + 2 if len(ids) else 1
    lut = np.full(size, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    codes = lut[s.to_physical().cast(pl.Int64).fill_null(size - 1).to_numpy()]
    return codes, uniq.cast(pl.String).to_list()


def _json(value: Any) -> str:
    """JSON text by orjson, with DEL escaped too: Perfetto's tokenizer rejects raw control characters in strings."""
    return orjson.dumps(value).decode().replace("\x7f", "\\u007f")


def _json_literals(s: pl.Series) -> pl.Series:
    """Each value as a JSON string literal (escaped once per distinct value); null stays null."""
    codes, values = _dense_codes(s)
    if not values:
        return pl.Series([None] * len(s), dtype=pl.String)
    lits = pl.Series([_json(v) for v in values], dtype=pl.String)
    return lits.gather(pl.Series(codes).replace(-1, None))


@dataclass(frozen=True)
class _Layout:
    """Where every track (location x lane) goes: pid/tid per track, track per event."""

    tracks: pl.DataFrame  # per track: loc, lane, pid, tid, thread_name, used, location columns
    procs: pl.DataFrame  # per process: pid, process_name, rank
    track_of_event: np.ndarray
    loc_row: np.ndarray  # locations.loc value -> row of the sorted locations table
    row_pid: np.ndarray  # row of the sorted locations table -> pid


def _locate(lut: np.ndarray, values: np.ndarray, what: str) -> np.ndarray:
    """Row of each referenced id through ``lut`` (-1 = missing), or SchemaError."""
    rows = lut[np.clip(values, 0, len(lut) - 1)] if len(lut) else np.full(len(values), -1)
    bad = np.flatnonzero((rows < 0) | (values >= len(lut)) | (values < 0))
    if len(bad):
        raise SchemaError(f"{what} row {bad[0]}: refers to {values[bad[0]]}, which does not exist")
    return rows


def _event_rows(rows: np.ndarray, n: int, what: str) -> np.ndarray:
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


def _layout(locations: pl.DataFrame, ev_loc: np.ndarray, lane: np.ndarray) -> _Layout:
    locs = _processes(locations.sort("loc").rename({"pid": "src_pid", "tid": "src_tid"}))
    loc_ids = locs.get_column("loc").to_numpy().astype(np.int64)
    loc_row = np.full(int(loc_ids.max()) + 1 if len(loc_ids) else 0, -1, dtype=np.int64)
    loc_row[loc_ids] = np.arange(len(loc_ids))
    ev_row = _locate(loc_row, ev_loc, "events")
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
    return _Layout(tracks, procs, track_of_event, loc_row, locs.get_column("pid").to_numpy())


def _sorted_events(ev: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """loc, start_ns, end_ns (instants: = start) in (loc, start, -end) order, and that order (None: rows already are)."""
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    start = ev.get_column("start_ns").to_numpy()
    end = np.where(ev.get_column("instant").to_numpy(), start, ev.get_column("end_ns").to_numpy())
    if is_sorted(loc, start, end):
        return loc, start, end, None
    order = np.lexsort((-end, start, loc))
    return loc[order], start[order], end[order], order


def _event_lanes(loc: np.ndarray, start: np.ndarray, end: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """Lane per event row (:func:`assign_lanes` on the sorted view, mapped back to rows)."""
    lanes = assign_lanes(loc, start, end)
    if order is None:
        return lanes
    out = np.empty_like(lanes)
    out[order] = lanes
    return out


def _marker_times(
    sorted_events: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], src: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ns of the ``s`` and ``f`` marker of each flow: where its event is the innermost one, ``f`` not before ``s``."""
    loc, start, end, order = sorted_events
    if order is not None:
        where = np.empty_like(order)
        where[order] = np.arange(len(order))
        src, dst = where[src], where[dst]

    def point(rows: np.ndarray, lower: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        t = innermost_points(loc, start, end, rows, lower)
        return np.where(t == NO_POINT, fallback, t)

    s_ts = point(src, start[src], start[src])
    f_ts = point(dst, np.maximum(start[dst], s_ts), point(dst, start[dst], start[dst]))
    return s_ts, f_ts


@dataclass(frozen=True)
class _Block:
    """Lines to assemble: a template, column-major fragment ids (int32), times (ns), integers, and text per row."""

    rows: int
    ops: list[tuple[int, int]]
    frag: np.ndarray
    times: np.ndarray
    ints: np.ndarray
    text: pl.Series | None = None


def _emit(sink: _Sink, block: _Block, pool: tuple[np.ndarray, np.ndarray]) -> None:
    """Assemble and write a block, CHUNK_ROWS rows at a time."""
    for a in range(0, block.rows, CHUNK_ROWS):
        b = min(block.rows, a + CHUNK_ROWS)
        text = _utf8(block.text[a:b]) if block.text is not None else None
        lines = assemble(block.ops, a, b, block.frag, block.times, block.ints, pool, text, sink.scratch)
        sink.scratch = lines.base if lines.base is not None else lines  # reuse: fresh pages cost more than assembly
        sink.lines(lines)


def _args_columns(ev: pl.DataFrame, ints: np.ndarray) -> pl.Series:
    """events.args; fills ``ints`` (2, n) with the corr / bytes values to add to them (NO_TIME: none to add)."""
    args = ev.get_column("args")
    if args.str.contains("[\r\n]").any():  # raw CR/LF can only be whitespace in valid JSON: keep one event per line
        args = args.str.replace_all("[\r\n]", " ")

    for row, (column, key) in enumerate((("corr", "correlation"), ("bytes", "bytes"))):
        values = ev.get_column(column)
        ints[row] = NO_TIME if values.null_count() == len(values) else values.fill_null(NO_TIME).to_numpy()
        if values.null_count() < len(values):
            ints[row, args.str.contains(f'"{key}"\\s*:').fill_null(False).to_numpy()] = NO_TIME
    return args


def _bind_ids(src: np.ndarray, dst: np.ndarray, start: np.ndarray, end: np.ndarray, instant: np.ndarray) -> np.ndarray:
    """Flow-v2 bind_id per flow (-1: written as an s/f pair); a chain of bound flows shares its first flow's id.

    Binders see events in time order, so the source must come first: an earlier start, or the same start
    with an earlier row and at least the same duration (Perfetto puts longer slices first at equal ts).
    """
    n, m = len(start), len(src)
    out_deg, in_deg = np.bincount(src, minlength=n), np.bincount(dst, minlength=n)
    tie = (start[src] == start[dst]) & (src < dst) & (end[src] - start[src] >= end[dst] - start[dst])
    first = (start[src] < start[dst]) | tie
    ok = (out_deg[src] == 1) & (in_deg[dst] == 1) & ~instant[src] & ~instant[dst] & first
    into = np.full(n, -1, dtype=np.int64)
    into[dst[ok]] = np.flatnonzero(ok)
    root = np.arange(m)
    link = ok & (into[src] >= 0)
    root[link] = into[src][link]
    while len(root) and not np.array_equal(nxt := root[root], root):  # pointer jumping to the chain's first flow
        root = nxt
    return np.where(ok, BIND_ID_BASE + root, -1)


def _flow_attrs(flows: pl.DataFrame, src_cat: pl.Series) -> pl.Series:
    """The ``di_flow`` object text of each flow: kind, and id / src_cat (JSON literals) when not null."""
    return (
        flows.with_columns(_sc=src_cat)
        .select(
            pl.concat_str(
                [
                    pl.lit('{"kind":"'),
                    pl.col("kind").cast(pl.String),
                    pl.lit('"'),
                    pl.lit(',"id":') + pl.col("id").cast(pl.String),
                    pl.lit(',"src_cat":') + pl.col("_sc"),
                    pl.lit("}"),
                ],
                ignore_nulls=True,
            )
        )
        .to_series()
    )


def _bind_suffix(
    src: np.ndarray, dst: np.ndarray, bind: np.ndarray, attrs: pl.Series, n: int
) -> tuple[np.ndarray, pl.Series]:
    """Event rows carrying a bind_id, and the text appended to their X line."""
    ok = np.flatnonzero(bind >= 0)
    ev_bind = np.full(n, -1, dtype=np.int64)
    ev_bind[src[ok]] = bind[ok]
    ev_bind[dst[ok]] = bind[ok]
    inflow = np.full(n, -1, dtype=np.int64)
    inflow[dst[ok]] = ok
    out = np.zeros(n, dtype=bool)
    out[src[ok]] = True
    rows = np.flatnonzero(ev_bind >= 0)
    df = pl.DataFrame({"b": ev_bind[rows], "i": inflow[rows], "o": out[rows]})
    df = df.with_columns(a=attrs.gather(df.get_column("i").replace(-1, None)) if len(attrs) else None)
    suffix = df.select(
        pl.concat_str(
            [
                pl.lit(',"bind_id":'),
                pl.col("b").cast(pl.String),
                pl.when(pl.col("i") >= 0).then(pl.lit(',"flow_in":true')),
                pl.when("o").then(pl.lit(',"flow_out":true')),
                pl.lit(',"di_flow":') + pl.col("a"),
            ],
            ignore_nulls=True,
        )
    ).to_series()
    return rows, suffix


def _event_block(
    ev: pl.DataFrame, layout: _Layout, pool: _Pool, suffix: tuple[np.ndarray, pl.Series], t0: int
) -> _Block:
    """X / i lines of every event, in row order."""
    n = ev.height
    start, end = ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
    inst = ev.get_column("instant").to_numpy()
    dur_id = pool.add([',"dur":'])
    args_id = pool.add([',"args":', '"correlation":', '"bytes":'])
    pid_tid = [
        pl.lit(',"pid":'),
        pl.col("pid").cast(pl.String),
        pl.lit(',"tid":'),
        pl.col("tid").cast(pl.String),
        pl.lit(',"ts":'),
    ]
    x_base = pool.add(layout.tracks.select(pl.concat_str([pl.lit('{"ph":"X"'), *pid_tid])).to_series())
    i_base = pool.add(layout.tracks.select(pl.concat_str([pl.lit('{"ph":"i","s":"t"'), *pid_tid])).to_series())
    names, name_values = _dense_codes(ev.get_column("name"))
    name_base = pool.add([',"name":' + _json(v) for v in name_values])
    cats, cat_values = _dense_codes(ev.get_column("cat"))
    src_cats, src_values = _dense_codes(ev.get_column("src_cat"))
    cat_base = pool.add([',"cat":' + _json(v) for v in cat_values + src_values])
    ints = np.empty((2, n), dtype=np.int64)
    args = _args_columns(ev, ints)
    rows, text = suffix
    frag = np.empty((5, n), dtype=np.int32)
    frag[0] = np.where(inst, i_base, x_base) + layout.track_of_event
    frag[1] = np.where(inst, -1, dur_id)
    frag[2] = name_base + names
    frag[3] = cat_base + np.where(src_cats >= 0, len(cat_values) + src_cats, cats)
    frag[4] = -1
    frag[4, rows] = pool.add(text) + np.arange(len(rows))
    times = np.empty((2, n), dtype=np.int64)
    np.subtract(start, t0, out=times[0])
    np.subtract(end, start, out=times[1])
    times[1, inst] = NO_TIME
    ops = [(FRAG, 0), (TIME, 0), (FRAG, 1), (TIME, 1), (FRAG, 2), (FRAG, 3), (ARGS, args_id), (FRAG, 4)]
    return _Block(n, ops + [(CONST, pool.add(["}"]))], frag, times, ints, args)


def _pair_block(
    flows: pl.DataFrame,
    sf: np.ndarray,
    layout: _Layout,
    pool: _Pool,
    attrs: pl.Series,
    src_cat: pl.Series,
    markers: tuple[np.ndarray, np.ndarray],
    t0: int,
) -> _Block:
    """``s`` and ``f`` lines of the flows in ``sf`` (ids 1, 2, ...) at the marker times (ns) given for them."""
    src = flows.get_column("src").to_numpy()[sf]
    dst = flows.get_column("dst").to_numpy()[sf]
    pid, tid = layout.tracks.get_column("pid").to_numpy(), layout.tracks.get_column("tid").to_numpy()
    ts, td = layout.track_of_event[src], layout.track_of_event[dst]
    sub = (
        flows[sf]
        .with_columns(
            _id=pl.Series(np.arange(1, len(sf) + 1)),
            _ps=pid[ts],
            _ts=tid[ts],
            _pd=pid[td],
            _td=tid[td],
            _a=attrs.gather(sf),
            _cat=src_cat.gather(sf),
        )
        .with_columns(_cat=pl.coalesce("_cat", pl.format('"{}"', "kind")))
    )

    def head(ph: str, p: str, t: str, extra: list[pl.Expr]) -> pl.Series:
        return sub.select(
            pl.concat_str(
                [
                    pl.lit('{"ph":"' + ph + '","id":'),
                    pl.col("_id").cast(pl.String),
                    pl.lit(',"pid":'),
                    pl.col(p).cast(pl.String),
                    pl.lit(',"tid":'),
                    pl.col(t).cast(pl.String),
                    pl.lit(',"name":"'),
                    pl.col("kind").cast(pl.String),
                    pl.lit('","cat":'),
                    pl.col("_cat"),
                    *extra,
                    pl.lit(',"ts":'),
                ]
            )
        ).to_series()

    s_base = pool.add(head("s", "_ps", "_ts", []))
    f_base = pool.add(head("f", "_pd", "_td", [pl.lit(',"bp":"e","di_flow":'), pl.col("_a")]))
    k = np.arange(len(sf))
    frag = np.concatenate([s_base + k, f_base + k]).astype(np.int32)[None, :]
    times = (np.concatenate(markers) - t0)[None, :]
    return _Block(
        2 * len(sf), [(FRAG, 0), (TIME, 0), (CONST, pool.add(["}"]))], frag, times, np.zeros((0, 2 * len(sf)), np.int64)
    )


def _counter_block(trace: Trace, layout: _Layout, pool: _Pool, t0: int) -> tuple[_Block, list[dict[str, Any]], int]:
    """C lines of every finite sample; the series table for diTrace; the number of non-finite samples skipped."""
    series = trace.series.sort("series")
    ids = series.get_column("series").to_numpy().astype(np.int64)
    pids = layout.row_pid[_locate(layout.loc_row, series.get_column("loc").to_numpy().astype(np.int64), "series")]
    info, heads, tails, taken = [], [], [], set()
    for row, pid in zip(series.select("series", "loc", "name", "unit").iter_rows(named=True), pids.tolist()):
        counter = f"{row['name']} [{row['unit']}]" if row["unit"] else row["name"]
        if (pid, counter) in taken:
            counter = f"{counter} #{row['series']}"
        taken.add((pid, counter))
        info.append({**row, "pid": pid, "counter": counter, "key": row["name"]})
        heads.append(f'{{"ph":"C","pid":{pid},"name":{_json(counter)},"ts":')
        tails.append(f',"args":{{{_json(row["name"])}:')
    lut = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=np.int64)
    lut[ids] = np.arange(len(ids))
    samples = trace.samples
    srow = _locate(lut, samples.get_column("series").to_numpy().astype(np.int64), "samples")
    finite = np.isfinite(samples.get_column("value").to_numpy())
    keep = np.flatnonzero(finite)
    frag = np.stack([pool.add(heads) + srow[keep], pool.add(tails) + srow[keep]]).astype(np.int32)
    times = (samples.get_column("ts_ns").to_numpy()[keep] - t0)[None, :]
    text = samples.get_column("value").filter(pl.Series(finite)).cast(pl.String)
    ops = [(FRAG, 0), (TIME, 0), (FRAG, 1), (TEXT, 0), (CONST, pool.add(["}}"]))]
    return _Block(len(keep), ops, frag, times, np.zeros((0, len(keep)), np.int64), text), info, len(finite) - len(keep)


def _metadata_lines(layout: _Layout, counter_pids: set[int]) -> bytes:
    """M lines: names and sort indices of the processes and tracks that hold data."""
    tracks = layout.tracks.filter("used")
    used = set(tracks.get_column("pid").to_list()) | counter_pids
    lines = []
    for p in layout.procs.filter(pl.col("pid").is_in(sorted(used))).iter_rows(named=True):
        lines.append({"ph": "M", "pid": p["pid"], "name": "process_name", "args": {"name": p["process_name"]}})
        lines.append({"ph": "M", "pid": p["pid"], "name": "process_sort_index", "args": {"sort_index": p["pid"]}})
    for t in tracks.select("pid", "tid", "thread_name").iter_rows(named=True):
        lines.append(
            {"ph": "M", "pid": t["pid"], "tid": t["tid"], "name": "thread_name", "args": {"name": t["thread_name"]}}
        )
        lines.append(
            {"ph": "M", "pid": t["pid"], "tid": t["tid"], "name": "thread_sort_index", "args": {"sort_index": t["tid"]}}
        )
    return "".join(",\n" + _json(line) for line in lines).encode()


def _di_trace(trace: Trace, layout: _Layout, series: list[dict[str, Any]], t0: int, counts: dict[str, int]) -> bytes:
    """The diTrace object: every emitted (pid, tid) with its location and lane, series, meta."""
    locations = layout.tracks.select(
        "pid",
        "tid",
        "loc",
        "lane",
        "rank",
        pl.col("kind").cast(pl.String),
        "device",
        "stream",
        "name",
        "process",
        "host",
        "src_pid",
        "src_tid",
        "sort_index",
        "source",
    ).to_dicts()
    meta = trace.meta
    di_meta = {
        "clock": meta.get("clock"),
        "sources": meta.get("sources", []),
        "world_size": meta.get("world_size"),
        "start_ns": t0,
    }
    tables = {
        name: _columns(getattr(trace, name)) for name in ("messages", "collectives") if getattr(trace, name).height
    }
    cats = _categories(trace.events)
    side = side_tables.encode_all(trace, "Chrome JSON")
    if side:
        tables[side_tables.KEY] = side
    return _json(
        {
            "schema_version": 1,
            "locations": locations,
            "series": series,
            "meta": di_meta,
            **counts,
            **tables,
            **({"categories": cats} if cats else {}),
        }
    ).encode()


def _columns(table: pl.DataFrame) -> dict[str, list[Any]]:
    """A table as {column: values}, for diTrace (Chrome JSON has no place for messages and collectives)."""
    return {c: table.get_column(c).to_list() for c in table.columns}


def _categories(ev: pl.DataFrame) -> str | None:
    """Each event's canonical ``cat``, one letter per events row ('a' + its index in
    the vocabulary), when reading the written ``cat`` (``src_cat``, else ``cat``)
    and name back would give another category for some event; else None."""
    from di.convert.categories import canonical_cats

    if not ev.height:
        return None
    written = ev.select(pl.coalesce(pl.col("src_cat").cast(pl.String), pl.col("cat").cast(pl.String))).to_series()
    codes = ev.get_column("cat").to_physical().to_numpy()
    if (canonical_cats(written, ev.get_column("name")).to_physical().to_numpy() == codes).all():
        return None
    return (codes.astype(np.uint8) + ord("a")).tobytes().decode("ascii")


def _drawn_flows(flows: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """The flows to write: the trace's, then one per message (send -> recv, kind
    ``message``), so that viewers draw MPI messages as arrows. The reader takes
    these back out: messages come from diTrace."""
    if not messages.height:
        return flows
    cols = {"src": pl.Int64, "dst": pl.Int64, "kind": pl.String, "id": pl.Int64, "src_cat": pl.String}
    drawn = messages.select(
        pl.col("send").alias("src"),
        pl.col("recv").alias("dst"),
        pl.lit("message").alias("kind"),
        pl.lit(None).alias("id"),
        pl.lit(None).alias("src_cat"),
    )
    return pl.concat([flows.select(list(cols)).cast(cols), drawn.cast(cols)])


def _write(trace: Trace, f: IO[bytes]) -> None:
    ev, flows = trace.events, _drawn_flows(trace.flows, trace.messages)
    starts = [s.min() for s in (ev.get_column("start_ns"), trace.samples.get_column("ts_ns")) if len(s)]
    t0 = int(min(starts)) if starts else 0  # type: ignore[call-overload]
    ordered = _sorted_events(ev)
    layout = _layout(trace.locations, ev.get_column("loc").to_numpy().astype(np.int64), _event_lanes(*ordered))
    start, end, instant = (ev.get_column(c).to_numpy() for c in ("start_ns", "end_ns", "instant"))
    src, dst = (_event_rows(flows.get_column(c).to_numpy(), ev.height, f"flows.{c}") for c in ("src", "dst"))
    bind = _bind_ids(src, dst, start, end, instant)
    src_cat = _json_literals(flows.get_column("src_cat"))
    attrs = _flow_attrs(flows, src_cat)
    pool = _Pool()
    events = _event_block(ev, layout, pool, _bind_suffix(src, dst, bind, attrs, ev.height), t0)
    sf = np.flatnonzero(bind < 0)
    pairs = _pair_block(flows, sf, layout, pool, attrs, src_cat, _marker_times(ordered, src[sf], dst[sf]), t0)
    counters, series, nonfinite = _counter_block(trace, layout, pool, t0)
    frozen = pool.freeze()
    sink = _Sink(f)
    f.write(WRITER_KEY + b'"traceEvents":[')
    sink.lines(_metadata_lines(layout, {s["pid"] for s in series}))
    for block in (events, counters, pairs):
        _emit(sink, block, frozen)
    counts = {
        "events": ev.height,
        "flows": trace.flows.height,
        "samples": counters.rows,
        "nonfinite_samples_skipped": nonfinite,
    }
    f.write(b'\n],\n"displayTimeUnit":"ns",\n"diTrace":' + _di_trace(trace, layout, series, t0, counts) + b"}\n")
