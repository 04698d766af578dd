"""An open Nsight Systems SQLite export: tables and columns found by name, strings, metadata.

The export's schema changes between nsys versions (tables come and go,
columns are added; the export metadata table is ``META_DATA_EXPORT`` in newer
versions, ``EXPORT_META_DATA`` in older ones), so nothing here assumes a
column exists: :meth:`Report.columns` says which do, and callers ask only for
those. ``globalTid`` packs the process id in bits 24..47 and the thread id in
bits 0..23 (Nsight Systems' "Serialized GlobalId").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from di.convert.nsys.scan import int_columns
from di.errors import FormatError

__all__ = ["SQLITE_MAGIC", "Report", "one_line", "open_report", "pid_of", "tid_of"]

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html)."""

NSYS_MARKERS = (
    "StringIds",
    "TARGET_INFO_SESSION_START_TIME",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS",
    "OSRT_API",
)
"""Tables of which at least one (besides StringIds, which every export has) marks an nsys export."""


def pid_of(global_id: np.ndarray) -> np.ndarray:
    """Process id of serialized GlobalIds (globalTid / globalPid): bits 24..47."""
    return (global_id >> 24) & 0xFFFFFF


def tid_of(global_tid: np.ndarray) -> np.ndarray:
    """Thread id of serialized globalTids: bits 0..23."""
    return global_tid & 0xFFFFFF


class Report:
    """A read-only connection to one export, with its table and column names."""

    def __init__(self, path: Path, con: sqlite3.Connection, native: bool = True) -> None:
        self.path = path
        self.con = con
        self.native = native
        rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        self.tables = frozenset(r[0] for r in rows)
        self._columns: dict[str, tuple[str, ...]] = {}
        self._not_null: dict[str, frozenset[str]] = {}
        self._strings: tuple[np.ndarray, pl.Series] | None = None
        self._derived: dict[str, pl.Series] = {}

    def columns(self, table: str) -> tuple[str, ...]:
        """Column names of ``table`` (empty when it is absent)."""
        if table not in self.tables:
            return ()
        if table not in self._columns:
            info = self.con.execute(f'PRAGMA table_info("{table}")').fetchall()
            self._columns[table] = tuple(r[1] for r in info)
            self._not_null[table] = frozenset(r[1] for r in info if r[3])
        return self._columns[table]

    def ints(self, table: str, wanted: dict[str, str | None]) -> dict[str, np.ndarray]:
        """Integer columns of ``table`` by name: ``wanted`` maps an output name to a column
        (or an SQL expression over columns known to exist); a column the table lacks, or
        None, gives a column of nulls. Each output comes with ``NAME_null`` (bool mask)."""
        have = set(self.columns(table))
        exprs, names, not_null = [], [], []
        for out, col in wanted.items():
            if col is not None and (col in have or not col.isidentifier()):
                exprs.append(col if not col.isidentifier() else f'"{col}"')
                names.append(out)
                not_null.append(col in self._not_null.get(table, ()))
        n = None
        result: dict[str, np.ndarray] = {}
        if exprs:
            values, null = int_columns(self.con, self.path, table, exprs, native=self.native, not_null=not_null)
            n = values.shape[0]
            for j, out in enumerate(names):
                result[out], result[out + "_null"] = values[:, j], null[:, j]
        if n is None:
            n = int(self.con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        for out in wanted:
            if out not in result:
                result[out], result[out + "_null"] = np.zeros(n, np.int64), np.ones(n, np.bool_)
        return result

    def strings(self) -> tuple[np.ndarray, pl.Series]:
        """``StringIds``: ids (sorted) and their values."""
        if self._strings is None:
            rows = (
                self.con.execute(
                    "SELECT CAST(id AS INTEGER) AS i, CAST(value AS TEXT) FROM StringIds WHERE id IS NOT NULL ORDER BY i"
                ).fetchall()
                if "StringIds" in self.tables
                else []
            )
            self._strings = (
                np.array([r[0] for r in rows], dtype=np.int64),
                pl.Series([r[1] for r in rows], dtype=pl.String),
            )
        return self._strings

    def positions(self, ids: np.ndarray, null: np.ndarray | None = None) -> pl.Series:
        """Positions in :meth:`strings` of ``ids`` (null where ``null`` or an id is not in StringIds)."""
        known, _ = self.strings()
        if not known.size:
            return pl.Series([], dtype=pl.Int64).extend_constant(None, ids.size)
        at = np.minimum(np.searchsorted(known, ids), known.size - 1)
        ok = known[at] == ids
        if null is not None:
            ok &= ~null
        pos = pl.Series(at)
        return pos if ok.all() else pos.set(pl.Series(~ok), None)

    def text(self, ids: np.ndarray, null: np.ndarray | None = None) -> pl.Series:
        """Strings of ``ids`` (null where ``null`` or an id is not in StringIds)."""
        return self.derived("text", lambda v: v).gather(self.positions(ids, null))

    def derived(self, key: str, fn: Callable[[pl.Series], pl.Series]) -> pl.Series:
        """``fn`` of every string of StringIds, computed once per report (per string, not per event)."""
        if key not in self._derived:
            self._derived[key] = fn(self.strings()[1])
        return self._derived[key]

    def pairs(self, table: str, key: str, value: str) -> list[tuple[str, str]]:
        """(key, value) rows of a name/value metadata table, [] when it or a column is absent."""
        if key not in self.columns(table) or value not in self.columns(table):
            return []
        return [
            (str(k), "" if v is None else str(v))
            for k, v in self.con.execute(f'SELECT "{key}", "{value}" FROM "{table}"')
        ]

    def scalar(self, sql: str) -> object:
        row = self.con.execute(sql).fetchone()
        return row[0] if row else None


def one_line(exc: BaseException) -> str:
    """An exception's text on one line (SQLite quotes damaged schema text, newlines included)."""
    return " ".join(str(exc).split())


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def open_report(path: Path, *, native: bool = True) -> Report:
    """Open ``path`` read-only and check that it is an nsys export.

    Raises:
        FormatError: not an SQLite file, corrupt, or an SQLite file that is no nsys export.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise FormatError(path, f"cannot read: {exc}") from None
    if not head.startswith(SQLITE_MAGIC):
        raise FormatError(path, "not an SQLite database (an nsys report must be exported: nsys export --type sqlite)")
    uri = "file:" + str(path.resolve()).replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
        con.text_factory = _text  # a corrupt page may hold bytes that are no UTF-8
        report = Report(path, con, native)
    except (sqlite3.Error, UnicodeDecodeError) as exc:
        raise FormatError(path, f"corrupt SQLite database ({one_line(exc)})") from None
    if "StringIds" not in report.tables or not report.tables.intersection(NSYS_MARKERS[1:]):
        con.close()
        raise FormatError(
            path,
            "an SQLite database but not an Nsight Systems export (no StringIds / TARGET_INFO / "
            "CUPTI / NVTX / OSRT tables)",
        )
    return report
