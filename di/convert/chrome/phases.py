"""Chrome phases -> intervals: X, B/E, instants, async b/e/n, with drops counted.

Input: the scanner's columns as one polars frame (see :func:`frame`). Output:
one frame of intervals and instants with a timeline key
(``lkind``, ``pid_k``, ``pid``, ``tid_k``, ``tid``) that
:mod:`di.convert.chrome.reader` turns into locations. Times are int64 ns.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from di.convert.chrome import scan as S
from di.convert.chrome.decode import Raw
from di.convert.chrome.pairing import match_begin_end

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

_STATUS = {S.ST_BAD_TS: "ts is not a number", S.ST_BAD_DUR: "dur is not a number", S.ST_OVERFLOW: "ts or dur beyond int64 ns"}

KEY = ["lkind", "pid_k", "pid", "tid_k", "tid"]
OUT = KEY + ["start_ns", "end_ns", "name", "cat", "corr", "bytes", "instant", "args", "idx", "flags", "bind_k", "bind", "di_flow"]
# the columns X slices read (selected before their filter copies them)
_SLICE_IN = ["ph_code", "ts", "dur", "pid_k", "pid", "tid_k", "tid", "name", "cat", "corr", "bytes", "args", "idx", "flags",
             "bind_k", "bind", "di_flow"]


def is_phase(*phases: str) -> pl.Expr:
    """Records whose phase is one of ``phases`` (on the byte code: cheaper than the string)."""
    return pl.col("ph_code").is_in([ord(p) for p in phases])


def frame(raw: Raw, base_ns: int) -> pl.DataFrame:
    """The scanner columns as a frame; ``ts`` shifted by ``base_ns``; the phase as
    its byte code ``ph_code``."""
    c = raw.cols
    df = pl.DataFrame({
        "idx": np.arange(raw.n, dtype=np.int64),
        "ph_code": c["ph"],
        "ts": c["ts"], "dur": c["dur"], "name": c["name"], "cat": c["cat"],
        "pid_k": c["pid_k"], "pid": c["pid"], "tid_k": c["tid_k"], "tid": c["tid"],
        "id_k": c["id_k"], "id": c["id"], "bind_k": c["bind_k"], "bind": c["bind"],
        "flags": c["flags"], "scope": c["scope"], "bp": c["bp"],
        "corr": c["corr"], "bytes": c["bytes"], "status": c["status"],
    }).with_columns(raw.args, raw.di_flow if raw.di_flow is not None else pl.lit(None, dtype=pl.String).alias("di_flow"))
    return df.with_columns(
        pl.when((pl.col("flags") & S.F_TS) != 0).then(pl.col("ts") + base_ns).otherwise(None).alias("ts"),
        pl.when((pl.col("flags") & S.F_DUR) != 0).then(pl.col("dur")).otherwise(None).alias("dur"),
        pl.when((pl.col("flags") & S.F_CORR) != 0).then(pl.col("corr")).otherwise(None).alias("corr"),
        pl.when((pl.col("flags") & S.F_BYTES) != 0).then(pl.col("bytes")).otherwise(None).alias("bytes"),
    )


def count_unusable(df: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    """Drop records with a bad status or a phase di does not load; count each reason."""
    status = df.get_column("status").to_numpy()
    sound = status == S.ST_OK
    if not sound.all():
        for code, k in enumerate(np.bincount(status)):
            if code != S.ST_OK and k:
                dropped[_STATUS[code]] += int(k)
    code = df.get_column("ph_code").to_numpy()
    for c, k in enumerate(np.bincount(code[sound], minlength=256)):
        ph = chr(c) if c else ""
        if not k or ph in KNOWN:
            continue
        if c == 0:
            dropped["event without 'ph'"] += int(k)
        elif ph in UNSUPPORTED:
            dropped[f"unsupported phase {ph!r}"] += int(k)
        else:
            dropped[f"unknown phase {ph!r}"] += int(k)
    known = np.zeros(256, dtype=bool)
    known[[ord(p) for p in KNOWN]] = True
    known_code = known[code]
    has_ts = df.get_column("ts").is_not_null().to_numpy()
    is_meta = code == ord(META)
    no_ts = sound & known_code & ~has_ts & ~is_meta
    if no_ts.any():
        for c, k in enumerate(np.bincount(code[no_ts])):
            if k:
                dropped[f"{chr(c)!r} event without ts"] += int(k)
    usable = sound & known_code & (has_ts | is_meta)
    return df if usable.all() else df.filter(pl.Series(usable))


def _thread_key(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(pl.lit(LK_THREAD, dtype=pl.Int8).alias("lkind"))


def found(df: pl.DataFrame) -> set[str]:
    """The phases (1-char strings) that occur in the scanner frame."""
    codes = np.flatnonzero(np.bincount(df.get_column("ph_code").to_numpy(), minlength=256))
    return {chr(c) for c in codes if c}


def slices(df: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    """X events as intervals; negative or missing dur, and ends beyond int64 ns, dropped and counted."""
    dur = pl.col("dur")
    wraps = pl.col("ts") > pl.lit(2**63 - 1, dtype=pl.Int64) - dur
    x = df.select(*_SLICE_IN).filter(is_phase(SLICE)).with_columns(
        (pl.when(dur.is_null()).then(1).when(dur < 0).then(2).when(wraps).then(3).otherwise(0)).cast(pl.Int8).alias("_bad")
    )
    bad = np.bincount(x.get_column("_bad").to_numpy(), minlength=4)
    for code, what in ((1, "X event without dur"), (2, "X event with negative dur"), (3, "ts or dur beyond int64 ns")):
        if bad[code]:
            dropped[what] += int(bad[code])
    if bad[1:].any():
        x = x.filter(pl.col("_bad") == 0)
    x = x.with_columns(pl.col("ts").alias("start_ns"), (pl.col("ts") + dur).alias("end_ns"), pl.lit(False).alias("instant"))
    return _thread_key(x).select(OUT)


def _pair(records: pl.DataFrame, key: pl.Expr, begin: str, dropped: Counter[str], what: str) -> pl.DataFrame:
    """Pair begin/end records LIFO per key; the begin record's fields are kept and
    the end record's args merged into its args (on a repeated key the end's value
    comes last, which JSON readers take)."""
    records = records.with_columns(key.alias("_key")).sort(["_key", "ts", "idx"])
    is_begin = records.get_column("ph_code").to_numpy() == ord(begin)
    keys = records.get_column("_key").to_numpy()
    b, e, lone_b, lone_e = match_begin_end(keys, is_begin)
    if lone_b.size:
        dropped[f"{what} begin without end"] += int(lone_b.size)
    if lone_e.size:
        dropped[f"{what} end without begin"] += int(lone_e.size)
    begins = records[b]
    ends = records[e]
    return begins.with_columns(
        pl.col("ts").alias("start_ns"),
        ends.get_column("ts").alias("end_ns"),
        _merged_objects(pl.col("args"), pl.lit(ends.get_column("args"))).alias("args"),
        pl.col("flags") | (ends.get_column("flags") & S.F_COLL),
        pl.lit(False).alias("instant"),
    )


def _merged_objects(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """The members of two minified JSON object texts in one object (null when both are)."""
    empty_a = a.is_null() | (a == "{}")
    empty_b = b.is_null() | (b == "{}")
    return (
        pl.when(empty_b).then(a)
        .when(empty_a).then(b)
        .otherwise(a.str.slice(0, a.str.len_chars() - 1) + "," + b.str.slice(1))
    )


def begin_end(df: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    """B/E pairs on each thread, matched LIFO in time order."""
    be = df.filter(is_phase(*BEGIN_END))
    if not be.height:
        return _thread_key(be.with_columns(start_ns=pl.col("ts"), end_ns=pl.col("ts"), instant=pl.lit(False))).select(OUT)
    key = pl.struct("pid_k", "pid", "tid_k", "tid").rank("dense").cast(pl.Int64)
    return _thread_key(_pair(be, key, "B", dropped, "B/E")).select(OUT)


def instants(df: pl.DataFrame) -> pl.DataFrame:
    """i/I/R instants: thread scope on the thread, process scope on a per-pid marker
    timeline, global scope on one marker timeline."""
    ins = df.filter(is_phase(*INSTANT))
    scope = pl.col("scope")
    return ins.with_columns(
        pl.when(scope.is_in([ord("p"), ord("g")])).then(pl.lit(LK_MARKER)).otherwise(pl.lit(LK_THREAD)).cast(pl.Int8).alias("lkind"),
        pl.when(scope == ord("g")).then(0).otherwise(pl.col("pid_k")).cast(pl.UInt8).alias("pid_k"),
        pl.when(scope == ord("g")).then(0).otherwise(pl.col("pid")).alias("pid"),
        pl.when(scope.is_in([ord("p"), ord("g")])).then(0).otherwise(pl.col("tid_k")).cast(pl.UInt8).alias("tid_k"),
        pl.when(scope.is_in([ord("p"), ord("g")])).then(0).otherwise(pl.col("tid")).alias("tid"),
        pl.col("ts").alias("start_ns"),
        pl.col("ts").alias("end_ns"),
        pl.lit(True).alias("instant"),
    ).select(OUT)


def async_events(df: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    """Async b/e pairs (matched by pid, cat, id and name) and n instants, one
    async timeline per (pid, cat). Legacy S/F pair like b/e, T/p are instants."""
    a = df.filter(is_phase(*ASYNC)).with_columns(
        pl.col("ph_code").replace({ord("S"): ord("b"), ord("F"): ord("e"), ord("T"): ord("n"), ord("p"): ord("n")}),
        pl.lit(LK_ASYNC, dtype=pl.Int8).alias("lkind"),
        pl.lit(S.K_STR, dtype=pl.UInt8).alias("tid_k"),
        pl.col("cat").cast(pl.Int64).alias("tid"),
    )
    pairs = a.filter(is_phase("b", "e"))
    key = pl.struct("pid_k", "pid", "cat", "id_k", "id", "name").rank("dense").cast(pl.Int64)
    paired = _pair(pairs, key, "b", dropped, "async b/e").select(OUT) if pairs.height else None
    marks = a.filter(is_phase("n")).with_columns(
        pl.col("ts").alias("start_ns"), pl.col("ts").alias("end_ns"), pl.lit(True).alias("instant")
    ).select(OUT)
    return pl.concat([f for f in (paired, marks) if f is not None], how="vertical_relaxed")


def counter_anchor(counter_rows: pl.DataFrame) -> pl.DataFrame:
    """One pseudo-record per counter process, so counters get a timeline (never an event)."""
    return (
        counter_rows.with_columns(
            pl.lit(LK_COUNTER, dtype=pl.Int8).alias("lkind"),
            pl.lit(0, dtype=pl.UInt8).alias("tid_k"),
            pl.lit(0, dtype=pl.Int64).alias("tid"),
            pl.col("ts").alias("start_ns"),
            pl.col("ts").alias("end_ns"),
            pl.lit(True).alias("instant"),
        )
        .unique(subset=["pid_k", "pid"], keep="first", maintain_order=True)
        .select(OUT)
    )
