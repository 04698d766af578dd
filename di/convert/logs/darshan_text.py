"""Darshan's text tools' output: ``darshan-dxt-parser`` (DXT segments) and ``darshan-parser`` (counters).

Binary ``.darshan`` logs are read by :mod:`.darshan` (PyDarshan), into the same names. What it maps to:

- the job header (``# start_time:``, ``# nprocs:``, ``# exe:``, ``# jobid:``) to
  ``info.darshan``; times are ``start_time`` (epoch seconds) plus the segment's seconds.
- each DXT segment (``X_POSIX``/``X_MPIIO rank write|read segment offset length start end``)
  to an ``io`` event ``write``/``read`` with ``bytes`` = length, on the rank's
  ``darshan X_POSIX``/``X_MPIIO`` timeline, with file, offset and segment in args (the
  file from its ``# DXT, file_id: .., file_name: ..`` block).
- ``darshan-parser`` counter rows (``module rank record counter value file mount fs``) to
  the ``io_files`` table: per module, rank (-1: shared) and file, the per-file I/O
  statistics that ``di record`` writes (:mod:`.darshan_counters`); ``darshan-parser --total``'s ``total_<COUNTER>: value``
  lines to ``info.darshan.totals``. ``--perf`` lines are not read (counted as unknown).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert.logs.build import Parts, keep_counted
from di.convert.logs.darshan_counters import COUNTER_MODULES, counter_number, file_stats
from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.text import ascii_mode

__all__ = ["SNIFF_RE", "parse_darshan_text"]

SNIFF_RE = r"^# darshan log version: \d"
DXT_RE = (
    r"^\s*(?P<module>X_POSIX|X_MPIIO)\s+(?P<rank>\d+)\s+(?P<op>write|read)\s+(?P<segment>\d+)\s+(?P<offset>-?\d+)\s+"
    r"(?P<length>\d+)\s+(?P<start>[\d.]+)\s+(?P<end>[\d.]+)"
)
COUNTER_FIELDS = ("module", "rank", "record", "counter", "value", "file", "mount")
"""A ``darshan-parser`` counter row: tab-separated, then the file system type."""
TOTAL_RE = r"^total_(?P<k>\w+):\s+(?P<v>\S+)\s*$"


def _counter_rows(lines: pl.DataFrame, capital: np.ndarray) -> tuple[pl.Series, pl.DataFrame]:
    """The counter rows: lines split at their tabs, kept where the module is a name, rank and record are integers and
    the row goes on past the file name. ``capital``: whether each line starts with a capital letter, as a module name
    does; only those lines are split. Returns the lines of all counter rows, and the counters of the modules whose
    counters are per-file statistics (:data:`~.darshan_counters.COUNTER_MODULES`; columns module, rank, file, counter,
    value)."""
    t = pl.col("text")
    split = lines.filter(pl.Series(capital)).select(
        # the last field is the rest of the line (the mount point and file system type): only whether it is there
        # is read, and a split into n fields costs less than an exact split at n - 1 tabs
        "line",
        t.str.splitn("\t", len(COUNTER_FIELDS)).struct.rename_fields(list(COUNTER_FIELDS)),
    )
    fields = split.unnest("text")
    modules = fields.select(pl.col("module").unique().drop_nulls())
    good = modules.filter(pl.col("module").str.contains(r"^[A-Z][A-Z0-9_-]*$")).get_column("module")
    rank = pl.col("rank").cast(pl.Int32, strict=False)
    ok = (
        (rank >= -1)  # -1: all ranks
        & pl.col("record").cast(pl.UInt64, strict=False).is_not_null()
        & pl.col("mount").is_not_null()
        & pl.col("counter").is_not_null()
        & pl.col("module").is_in(good.implode())
    )
    kinds = fields.select(ok.fill_null(False).alias("ok"), pl.col("module").is_in(COUNTER_MODULES).fill_null(False))
    ok, statistics = kinds.get_column("ok").to_numpy(), kinds.get_column("module").to_numpy()
    # the few columns of the statistics' rows only (a third of a log's rows, HDF5 and Lustre records being the others)
    counters = fields.filter(pl.Series(ok & statistics)).select("module", rank, "file", "counter", "value")
    return fields.get_column("line").filter(pl.Series(ok)), counters


HEADER_KEYS = ("start_time", "darshan log version", "exe", "jobid", "nprocs")
"""The header lines (``# key: value``) read into the source's info."""


def _header(lines: pl.DataFrame, key: str) -> str | None:
    v = lines.filter(pl.col("text").str.starts_with(f"# {key}: ")).head(1).get_column("text")
    return v[0].split(": ", 1)[1].strip() if v.len() else None


def parse_darshan_text(lines: pl.DataFrame) -> Parts:
    """darshan-parser / darshan-dxt-parser text as :class:`Parts` (see the module docstring)."""
    # each line's first three bytes (read from its string view, no pass over the text) pick the lines that may be
    # comments, header lines, counter rows, totals or DXT segments for the searches below; the lines' other columns
    # are not read (not carried through the filters)
    lines = lines.select("line", "text")
    length, (b0, b1, b2) = lead_bytes(lines.get_column("text"), 3)
    hash_space = (b0 == ord("#")) & (b1 == ord(" "))
    commented = lines.filter(pl.Series(b0 == ord("#")))
    if (
        not lines.filter(pl.Series(hash_space & (b2 == ord("d"))))
        .select(pl.col("text").str.contains(SNIFF_RE).any())
        .item()
    ):
        return Parts("darshan")
    header = _header_lines(lines, hash_space & np.isin(b2, [ord(key[0]) for key in HEADER_KEYS]))
    start_s, late_start = _start_time(header)
    t0_ns = start_s * 1_000_000_000 if start_s is not None else 0
    # a segment starts with white space or its module: lines starting with another printable ASCII character are not
    # searched
    maybe = ~((b0 >= ord("!")) & (b0 < 0x7F) & (b0 != ord("X"))) & (length > 0)
    dropped: dict[str, int] = {}
    segment_lines, dxt = _dxt_segments(lines, hash_space & (b2 == ord("D")), maybe, t0_ns, dropped)
    if late_start:
        dropped["a start_time beyond int64 ns (times left relative)"] = 1
    rows, files = _io_files(lines, (b0 >= ord("A")) & (b0 <= ord("Z")), dropped)
    tot = _totals(lines, (b0 == ord("t")) & (b1 == ord("o")) & (b2 == ord("t")))
    info: dict[str, Any] = {
        "darshan": {
            "totals": dict(tot.select("k", "v").iter_rows()),
            "version": _header(header, "darshan log version"),
            "exe": _header(header, "exe"),
            "jobid": _header(header, "jobid"),
            "nprocs": _header(header, "nprocs"),
            "start_time_s": start_s,
            "counters": rows.len(),
            "io_files": files.height,
            "time": "start_time_plus_seconds" if t0_ns else "seconds_from_start",
        }
    }
    claimed = pl.concat([segment_lines, rows, commented.get_column("line"), tot.get_column("line")])
    return Parts(
        "darshan",
        events=_io_events(dxt, t0_ns),
        claimed=claimed,
        dropped=dropped,
        info=info,
        epoch=bool(t0_ns),
        tables={"io_files": files},
    )


def _header_lines(lines: pl.DataFrame, maybe: np.ndarray) -> pl.DataFrame:
    """The header lines (``# key: value`` of :data:`HEADER_KEYS`) among ``maybe`` (the lines that start with ``# ``
    and a key's first letter)."""
    return lines.filter(pl.Series(maybe)).filter(
        pl.any_horizontal(pl.col("text").str.starts_with(f"# {key}: ") for key in HEADER_KEYS)
    )


def _start_time(header: pl.DataFrame) -> tuple[int | None, bool]:
    """The job's ``start_time`` (epoch seconds; None where there is none, it is no whole number, or its ns are
    beyond int64), and whether it was a whole number beyond int64 ns (garbled: times stay relative)."""
    start = _header(header, "start_time")
    digits = bool(start) and start.isascii() and start.isdigit()
    late_start = digits and (len(start) > 12 or int(start) * 1_000_000_000 >= 1 << 62)  # garbled: times stay relative
    return (int(start) if digits and not late_start else None), late_start


def _dxt_segments(
    lines: pl.DataFrame, dxt_heads: np.ndarray, maybe: np.ndarray, t0_ns: int, dropped: dict[str, int]
) -> tuple[pl.Series, pl.DataFrame]:
    """The lines of every DXT segment (loaded or dropped), and the segments whose numbers are readable and whose times
    (seconds after ``t0_ns``) fit int64 ns, each with its file and host; the others counted in ``dropped``.
    ``dxt_heads``: the lines that may be ``# DXT, `` lines; ``maybe``: those that may be segments."""
    t = pl.col("text")
    # a segment's file and host: those of the last ``# DXT, file_id`` / ``# DXT, rank`` line at or before it
    heads = (
        lines.filter(pl.Series(dxt_heads))
        .filter(t.str.starts_with("# DXT, "))
        .select(
            "line",
            t.str.extract(r"^# DXT, file_id: \d+, file_name: (.*)$").alias("file"),
            t.str.extract(r"^# DXT, rank: \d+, hostname: (\S+)").alias("host"),
        )
    )
    # a literal search leaves the regex the segments only
    dxt = lines.filter(pl.Series(maybe)).filter(t.str.contains_any(["X_POSIX", "X_MPIIO"]))
    dxt = (
        dxt.with_columns(t.str.extract_groups(ascii_mode(DXT_RE, dxt.get_column("text"))).alias("g"))
        .unnest("g")
        .drop_nulls("module")
    )
    for col in ("file", "host"):
        dxt = dxt.join_asof(heads.select("line", col).drop_nulls(col), on="line", strategy="backward")
    numbers = [pl.col(c).cast(pl.Int64, strict=False) for c in ("rank", "segment", "offset", "length")]
    numbers += [pl.col(c).cast(pl.Float64, strict=False) for c in ("start", "end")]
    dxt = dxt.with_columns(numbers)
    limit_s = ((1 << 63) - 1 - abs(t0_ns)) // 1_000_000_000  # seconds whose ns since the epoch fit an int64
    readable = pl.all_horizontal(pl.col(c).is_not_null() for c in ("rank", "segment", "offset", "length"))
    times = pl.col("start").is_between(-limit_s, limit_s) & pl.col("end").is_between(-limit_s, limit_s)
    sound = keep_counted(dxt, readable & times, dropped, "DXT segments with an unreadable number")
    return dxt.get_column("line"), sound  # recognised, loaded or dropped


def _io_events(dxt: pl.DataFrame, t0_ns: int) -> pl.DataFrame:
    """The DXT segments ``dxt`` as ``io`` events ``write``/``read`` on their rank's ``darshan <module>`` track, at
    ``t0_ns`` plus their seconds."""
    sec = lambda c: (pl.col(c) * 1e9).round().cast(pl.Int64) + t0_ns
    return dxt.select(
        "rank",
        "host",
        pl.lit(None, pl.Int64).alias("pid"),
        pl.format("darshan {}", "module").alias("track"),
        sec("start").alias("start_ns"),
        pl.max_horizontal(sec("start"), sec("end")).alias("end_ns"),
        pl.col("op").alias("name"),
        pl.lit("io").alias("cat"),
        pl.lit(False).alias("instant"),
        pl.col("length").alias("bytes"),
        pl.struct("file", "offset", "segment", "module").struct.json_encode().alias("args"),
    )


def _io_files(lines: pl.DataFrame, capital: np.ndarray, dropped: dict[str, int]) -> tuple[pl.Series, pl.DataFrame]:
    """The lines of the counter rows (:func:`_counter_rows`; ``capital``: the lines that start with a capital letter)
    and the ``io_files`` table of their statistics (:func:`~.darshan_counters.file_stats`); the counter values that
    are no number counted in ``dropped``."""
    rows, counters = _counter_rows(lines, capital)
    files = file_stats(counters)
    nan = counters.select(counter_number(pl.col("value")).is_null().sum()).item()
    if nan:
        dropped["counter values that are not numbers"] = nan
    return rows, files


def _totals(lines: pl.DataFrame, maybe: np.ndarray) -> pl.DataFrame:
    """``darshan-parser --total``'s lines (``line``, ``k``: the counter, ``v``: its value as Float64) among ``maybe``
    (the lines that start with ``tot``), those whose value is no number left out."""
    t = pl.col("text")
    return (
        lines.filter(pl.Series(maybe))
        .filter(t.str.starts_with("total_"))
        .with_columns(t.str.extract_groups(TOTAL_RE).alias("g"))
        .unnest("g")
        .drop_nulls("k")
        .with_columns(pl.col("v").cast(pl.Float64, strict=False))
        .drop_nulls("v")
    )
