"""Chrome phases -> intervals: X, B/E, instants, async b/e/n, with drops counted.

Input: the scanner's columns (:class:`~di.convert.chrome.decode.Raw`), the
records' timestamps in int64 ns (:func:`timestamps`) and the rows that are
usable (:func:`usable`). Output: :class:`Intervals`, numpy columns of slices
and instants with a timeline key (``lkind``, ``pid_k``, ``pid``, ``tid_k``,
``tid``) that :mod:`di.convert.chrome.reader` turns into locations. Each
interval names the scanner row its other fields come from (for a pair, the
begin record), so nothing but those few columns is copied before the final
order is known.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.chrome import scan as S
from di.convert.chrome.decode import Raw
from di.convert.chrome.pairing import match_begin_end
from di.convert.columns import dense_row_ids, packed_key
from di.convert.provenance import BEGIN_WITHOUT_END, END_WITHOUT_BEGIN
from di.nesting import nesting_order

# timeline kinds before they become locations
LK_THREAD, LK_ASYNC, LK_MARKER, LK_COUNTER = 0, 1, 2, 3

SLICE = "X"
BEGIN_END = ("B", "E")
INSTANT = ("i", "I", "R")
ASYNC = ("b", "e", "n", "S", "F", "T", "p")
FLOW = ("s", "t", "f")
COUNTER = "C"
META = "M"
UNSUPPORTED = ("P", "O", "N", "D", "c", "V", "v", "(", ")")
KNOWN = (SLICE, COUNTER, META) + BEGIN_END + INSTANT + ASYNC + FLOW

_STATUS = {
    S.ST_BAD_TS: "ts is not a number",
    S.ST_BAD_DUR: "dur is not a number",
    S.ST_OVERFLOW: "ts or dur beyond int64 ns",
}

KEY = ["lkind", "pid_k", "pid", "tid_k", "tid"]


@dataclass
class Intervals:
    """Slices and instants as numpy columns, one entry each.

    ``row`` is the scanner row (file order) whose name, category, args, ids and
    flags the entry takes; ``start_ns``/``end_ns`` are int64 ns (equal for an
    instant); ``merged_at``/``merged_args`` give the entries whose args are the
    begin's and end's members merged (B/E and b/e pairs), which replace the
    begin's args; ``flags`` are the begin's, plus the end's collective bit.
    """

    row: np.ndarray
    lkind: np.ndarray
    pid_k: np.ndarray
    pid: np.ndarray
    tid_k: np.ndarray
    tid: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    instant: np.ndarray
    flags: np.ndarray
    merged_at: np.ndarray
    merged_args: pl.Series

    @property
    def size(self) -> int:
        """The number of entries."""
        return int(self.row.size)

    def key(self) -> np.ndarray:
        """The (k, n) int64 timeline key: equal keys are equal timelines, as with the five fields of :data:`KEY`
        apart. One word per entry when their ranges fit 63 bits (:func:`~di.convert.columns.packed_key`: a real
        trace's pids and tids do), else three: the small fields (``lkind``, ``pid_k``, ``tid_k``, one byte
        each) packed into one row, then ``pid`` and ``tid``."""
        packed = packed_key([self.lkind, self.pid_k, self.tid_k, self.pid, self.tid])
        if packed is not None:
            return packed
        small = packed_key([self.lkind, self.pid_k, self.tid_k])  # three bytes: always one word
        return np.vstack([small, self.pid.astype(np.int64, copy=False), self.tid.astype(np.int64, copy=False)])


def _intervals(
    raw: Raw,
    row: np.ndarray,
    lkind: int,
    start: np.ndarray,
    end: np.ndarray,
    instant: bool,
    *,
    pid_k: np.ndarray | None = None,
    pid: np.ndarray | None = None,
    tid_k: np.ndarray | None = None,
    tid: np.ndarray | None = None,
) -> Intervals:
    """Entries for the scanner ``row``s on timelines of kind ``lkind``, keyed by the
    records' own pid and tid unless given."""
    c = raw.cols
    n = row.size
    return Intervals(
        row=row,
        lkind=np.full(n, lkind, dtype=np.int8),
        pid_k=c["pid_k"][row] if pid_k is None else pid_k,
        pid=c["pid"][row] if pid is None else pid,
        tid_k=c["tid_k"][row] if tid_k is None else tid_k,
        tid=c["tid"][row] if tid is None else tid,
        start_ns=start,
        end_ns=end,
        instant=np.full(n, instant),
        flags=c["flags"][row],
        merged_at=np.zeros(0, dtype=np.int64),
        merged_args=pl.Series("args", [], dtype=pl.String),
    )


def concat(parts: list[Intervals]) -> Intervals:
    """The entries of ``parts`` one after another."""
    offsets = np.cumsum([0] + [p.size for p in parts])
    fields = ("row", "lkind", "pid_k", "pid", "tid_k", "tid", "start_ns", "end_ns", "instant", "flags")
    return Intervals(
        **{f: np.concatenate([getattr(p, f) for p in parts]) for f in fields},
        merged_at=np.concatenate([p.merged_at + o for p, o in zip(parts, offsets)]),
        merged_args=pl.concat([p.merged_args for p in parts]),
    )


def timestamps(raw: Raw, base_ns: int) -> np.ndarray:
    """Each record's ``ts`` in int64 ns plus ``base_ns`` (0 where it has none): the scanner's
    ``ts`` column itself, changed in place (a new column of every record costs its fresh memory)."""
    ts = raw.cols["ts"]
    if base_ns:
        ts += np.int64(base_ns)
        ts[(raw.cols["flags"] & S.F_TS) == 0] = 0  # the scanner left 0 there
    return ts


_COUNT_BLOCK = 1 << 16


def phase_counts(raw: Raw) -> np.ndarray:
    """The records of each phase byte (256 counts, sound records or not): what :func:`usable` and :func:`found`
    read, counted once, a block of :data:`_COUNT_BLOCK` records at a time (``np.bincount`` makes an int64 copy of
    the bytes it counts: 9.6 MB of fresh memory for 1.2 M records, 6-10 ms, where blocks take 3)."""
    code = raw.cols["ph"]
    counts = np.zeros(256, dtype=np.int64)
    for at in range(0, code.size, _COUNT_BLOCK):
        counts += np.bincount(code[at : at + _COUNT_BLOCK], minlength=256)
    return counts


def usable(raw: Raw, dropped: Counter[str], counts: np.ndarray | None = None) -> np.ndarray:
    """Records with a sound status, a phase di loads and a ``ts`` (M records need
    none); every other record is counted in ``dropped`` with its reason. ``counts``: :func:`phase_counts`,
    when the caller has them."""
    c = raw.cols
    status = c["status"]
    sound = status == S.ST_OK
    if not sound.all():
        for code, k in enumerate(np.bincount(status)):
            if code != S.ST_OK and k:
                dropped[_STATUS[code]] += int(k)
    code = c["ph"]
    every = phase_counts(raw) if counts is None else counts
    for ch, k in enumerate(every if sound.all() else np.bincount(code[sound], minlength=256)):
        ph = chr(ch) if ch else ""
        if not k or ph in KNOWN:
            continue
        if ch == 0:
            dropped["event without 'ph'"] += int(k)
        elif ph in UNSUPPORTED:
            dropped[f"unsupported phase {ph!r}"] += int(k)
        else:
            dropped[f"unknown phase {ph!r}"] += int(k)
    known = np.zeros(256, dtype=bool)
    known[[ord(p) for p in KNOWN]] = True
    # where every phase byte present is known, so is each record's (no table lookup per record)
    known_code = known[code] if (every[~known] > 0).any() else True
    has_ts = (c["flags"] & S.F_TS) != 0
    is_meta = code == ord(META)
    no_ts = sound & known_code & ~has_ts & ~is_meta
    if no_ts.any():
        for ch, k in enumerate(np.bincount(code[no_ts])):
            if k:
                dropped[f"{chr(ch)!r} event without ts"] += int(k)
    return sound & known_code & (has_ts | is_meta)


def found(raw: Raw, ok: np.ndarray, counts: np.ndarray | None = None) -> set[str]:
    """The phases (1-char strings) of the usable records ``ok``; ``counts``: :func:`phase_counts`, read when every
    record is usable."""
    if not ok.all():
        counts = np.bincount(raw.cols["ph"][ok], minlength=256)
    elif counts is None:
        counts = phase_counts(raw)
    codes = np.flatnonzero(counts)
    return {chr(c) for c in codes if c}


def rows_of(raw: Raw, ok: np.ndarray, *phases: str, counts: np.ndarray | None = None) -> np.ndarray:
    """The usable records (scanner rows, in file order) whose phase is one of ``phases``; ``counts``
    (:func:`phase_counts`): none looked for when the file has no record of those phases."""
    if counts is not None and not any(counts[ord(p)] for p in phases):
        return np.zeros(0, dtype=np.int64)
    code = raw.cols["ph"]
    hit = code == ord(phases[0])
    for p in phases[1:]:
        hit |= code == ord(p)
    return np.flatnonzero(hit & ok)


def records(raw: Raw, rows: np.ndarray, ts: np.ndarray, columns: list[str]) -> pl.DataFrame:
    """Scanner fields of ``rows`` as a frame: ``ts`` in ns (null where absent),
    ``idx`` the row itself, ``ph_code`` the phase byte, ``args``/``di_flow`` texts,
    ``corr``/``bytes`` null where absent, other names as the scanner has them."""
    c = raw.cols
    out: dict[str, pl.Series | np.ndarray] = {}
    lifted = raw.lifted_series(rows) if {"corr", "bytes"} & set(columns) else {}
    for name in columns:
        if name == "ts":
            out[name] = pl.Series(name, ts[rows]).set(pl.Series((c["flags"][rows] & S.F_TS) == 0), None)
        elif name == "idx":
            out[name] = rows.astype(np.int64)
        elif name == "ph_code":
            out[name] = c["ph"][rows]
        elif name == "args":
            out[name] = args_as_written(raw, rows)
        elif name == "di_flow":
            out[name] = (
                raw.di_flow.gather(rows)
                if raw.di_flow is not None
                else pl.Series(name, [None] * rows.size, dtype=pl.String)
            )
        elif name in ("corr", "bytes"):
            out[name] = lifted[name]
        else:
            out[name] = c[name][rows]
    return pl.DataFrame(out)


def slices(raw: Raw, ts: np.ndarray, ok: np.ndarray, dropped: Counter[str]) -> Intervals:
    """X events as intervals; negative or missing dur, and ends beyond int64 ns, dropped and counted."""
    c = raw.cols
    row = rows_of(raw, ok, SLICE)
    start, dur = ts[row], c["dur"][row]
    no_dur = (c["flags"][row] & S.F_DUR) == 0
    negative = ~no_dur & (dur < 0)
    end = dur  # start + dur, in place: with dur >= 0 it wrapped past int64 exactly when it came out below start
    end += start
    wraps = ~no_dur & ~negative & (end < start)
    for bad, what in (
        (no_dur, "X event without dur"),
        (negative, "X event with negative dur"),
        (wraps, "ts or dur beyond int64 ns"),
    ):
        k = int(np.count_nonzero(bad))
        if k:
            dropped[what] += k
    good = ~(no_dur | negative | wraps)
    if not good.all():
        row, start, end = row[good], start[good], end[good]
    return _intervals(raw, row, LK_THREAD, start, end, False)


def _pair(
    raw: Raw,
    ts: np.ndarray,
    row: np.ndarray,
    key_rows: np.ndarray,
    is_begin: np.ndarray,
    dropped: Counter[str],
    what: str,
) -> tuple[np.ndarray, np.ndarray]:
    """The records ``row`` paired LIFO per key (the columns of ``key_rows``, one per
    record) in (ts, file) order: (begin rows, end rows), unpaired ones counted.
    ``is_begin`` is indexed by scanner row."""
    key, _ = dense_row_ids(key_rows)
    order = nesting_order(key, ts[row], np.zeros(row.size, dtype=np.int64), row)
    b, e, lone_b, lone_e = match_begin_end(key[order], is_begin[row[order]])
    if lone_b.size:
        dropped[f"{what} {BEGIN_WITHOUT_END}"] += int(lone_b.size)
    if lone_e.size:
        dropped[f"{what} {END_WITHOUT_BEGIN}"] += int(lone_e.size)
    return row[order[b]], row[order[e]]


def _paired(raw: Raw, ts: np.ndarray, begins: np.ndarray, ends: np.ndarray, lkind: int, **key: np.ndarray) -> Intervals:
    """Intervals from the begin's fields to the end's ts; args merged (on a repeated
    key the end's value comes last, which JSON readers take), the lifted members of
    the end that its begin lacks in the begin's columns (:func:`_lifted_from_ends`)."""
    _lifted_from_ends(raw, begins, ends)
    out = _intervals(raw, begins, lkind, ts[begins], ts[ends], False, **key)
    out.flags = out.flags | (raw.cols["flags"][ends] & S.F_COLL)
    out.merged_at = np.arange(begins.size, dtype=np.int64)
    out.merged_args = _merged_objects(raw.args_of(begins), args_as_written(raw, ends))
    return out


def _lifted_from_ends(raw: Raw, begins: np.ndarray, ends: np.ndarray) -> None:
    """Each lifted member (``correlation``, ``bytes``, Kineto's ids) that an end record has and its begin lacks
    moves to the begin's scanner row, whose fields the pair's event takes; one both have stays the end's, put
    back in the text that joins the begin's args (:func:`args_as_written`). The values, packed per record, are packed
    again for the pairs whose members move (:meth:`Raw.set_lifted`)."""
    c = raw.cols
    bb, eb = c["lifted"][begins], c["lifted"][ends]
    move = eb & ~bb
    pairs = np.flatnonzero(move)
    if pairs.size:
        b, e, move = begins[pairs], ends[pairs], move[pairs]
        values_b, values_e = (np.stack(list(raw.lifted(r, S.LIFTED).values()), axis=1) for r in (b, e))
        moved = ((move[:, None] >> np.arange(len(S.LIFTED), dtype=np.uint8)) & 1).astype(bool)
        raw.set_lifted(  # both sides in one repack: the packed values are copied once
            np.concatenate([b, e]),
            np.concatenate([bb[pairs] | move, eb[pairs] & ~move]),
            np.concatenate([np.where(moved, values_e, values_b), values_e]),
        )


def args_as_written(raw: Raw, rows: np.ndarray) -> pl.Series:
    """The args texts of scanner ``rows`` with the members the scanner lifted out put back, first: for the
    records whose args are read as text (counter values, metadata, an end record's args merged into its
    begin's), where no column takes them."""
    c, args = raw.cols, raw.args_of(rows)
    held = {column: (key, has) for column, key in S.args_keys() if (has := S.lifted(c, column, rows)).any()}
    values = raw.lifted(rows, tuple(held))
    parts = []
    for column, (key, has) in held.items():
        text = pl.Series(values[column]).cast(pl.String)
        parts.append(('"' + key + '":' + text).set(pl.Series(~has), None))
    if not parts:
        return args
    members = pl.select(pl.concat_str(parts, separator=",", ignore_nulls=True)).to_series()
    frame = pl.DataFrame({"a": args, "m": members})
    a, m = pl.col("a"), pl.col("m")
    return frame.select(
        pl.when(m.is_null() | (m == ""))
        .then(a)
        .when(a.is_null() | (a == "{}"))
        .then("{" + m + "}")
        .otherwise("{" + m + "," + a.str.slice(1))
        .alias("args")
    ).to_series()


def _merged_objects(a: pl.Series, b: pl.Series) -> pl.Series:
    """The members of two minified JSON object texts in one object (null when both are)."""
    frame = pl.DataFrame({"a": a, "b": b})
    x, y = pl.col("a"), pl.col("b")
    return frame.select(
        pl.when(y.is_null() | (y == "{}"))
        .then(x)
        .when(x.is_null() | (x == "{}"))
        .then(y)
        .otherwise(x.str.slice(0, x.str.len_chars() - 1) + "," + y.str.slice(1))
        .alias("args")
    ).to_series()


def begin_end(raw: Raw, ts: np.ndarray, ok: np.ndarray, dropped: Counter[str]) -> Intervals:
    """B/E pairs on each thread, matched LIFO in time order."""
    c = raw.cols
    row = rows_of(raw, ok, *BEGIN_END)
    key = np.stack([c["pid_k"][row], c["pid"][row], c["tid_k"][row], c["tid"][row]]).astype(np.int64)
    begins, ends = _pair(raw, ts, row, key, c["ph"] == ord("B"), dropped, "B/E")
    return _paired(raw, ts, begins, ends, LK_THREAD)


def instants(raw: Raw, ts: np.ndarray, ok: np.ndarray) -> Intervals:
    """i/I/R instants: thread scope on the thread, process scope on a per-pid marker
    timeline, global scope on one marker timeline."""
    c = raw.cols
    row = rows_of(raw, ok, *INSTANT)
    scope = c["scope"][row]
    glob = scope == ord("g")
    marker = glob | (scope == ord("p"))
    out = _intervals(
        raw,
        row,
        LK_THREAD,
        ts[row],
        ts[row],
        True,
        pid_k=np.where(glob, 0, c["pid_k"][row]).astype(np.uint8),
        pid=np.where(glob, 0, c["pid"][row]),
        tid_k=np.where(marker, 0, c["tid_k"][row]).astype(np.uint8),
        tid=np.where(marker, 0, c["tid"][row]),
    )
    out.lkind[marker] = LK_MARKER
    return out


def async_events(raw: Raw, ts: np.ndarray, ok: np.ndarray, dropped: Counter[str]) -> Intervals:
    """Async b/e pairs (matched by pid, cat, id and name) and n instants, one
    async timeline per (pid, cat). Legacy S/F pair like b/e, T/p are instants."""
    c = raw.cols
    code = c["ph"]
    pairs = rows_of(raw, ok, "b", "e", "S", "F")
    key = np.stack([c[f][pairs] for f in ("pid_k", "pid", "cat", "id_k", "id", "name")]).astype(np.int64)
    begins, ends = _pair(raw, ts, pairs, key, (code == ord("b")) | (code == ord("S")), dropped, "async b/e")
    marks = rows_of(raw, ok, "n", "T", "p")
    return concat(
        [
            _paired(raw, ts, begins, ends, LK_ASYNC, **_async_key(raw, begins)),
            _intervals(raw, marks, LK_ASYNC, ts[marks], ts[marks], True, **_async_key(raw, marks)),
        ]
    )


def _async_key(raw: Raw, row: np.ndarray) -> dict[str, np.ndarray]:
    """The async timeline's thread part: the category's symbol id."""
    return {"tid_k": np.full(row.size, S.K_STR, dtype=np.uint8), "tid": raw.cols["cat"][row].astype(np.int64)}


def counter_anchors(raw: Raw, ts: np.ndarray, ok: np.ndarray) -> Intervals:
    """One pseudo-record per counter process (its first C record), so counters get a
    timeline (never an event)."""
    c = raw.cols
    row = rows_of(raw, ok, COUNTER)
    _, first = dense_row_ids(np.stack([c["pid_k"][row], c["pid"][row]]).astype(np.int64))
    row = row[first]
    n = row.size
    return _intervals(
        raw, row, LK_COUNTER, ts[row], ts[row], True, tid_k=np.zeros(n, dtype=np.uint8), tid=np.zeros(n, dtype=np.int64)
    )
