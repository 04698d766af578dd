"""Integer columns of a SQLite query as numpy arrays, without a Python object per value.

Python's ``sqlite3`` builds a tuple and an int object per row and value;
that, not SQLite, bounds how fast a report loads (measured in
``bench/nsys_read.py``). Here one numba loop steps the statement and copies
``sqlite3_column_int64`` of each column into int64 arrays, calling the
SQLite C library by address (the one Python's ``_sqlite3`` links, else the
system's ``libsqlite3``), so the kernel stays cacheable. Where the library
cannot be reached, :func:`int_columns` falls back to ``fetchall``.

A NULL value reads as 0 and sets its place in the returned null mask.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sqlite3
from pathlib import Path

import numba
import numpy as np

from di.convert.ccall import ccall_i64

__all__ = ["int_columns", "native_available"]

SQLITE_ROW, SQLITE_DONE, SQLITE_NULL = 100, 101, 5
SQLITE_OPEN_READONLY, SQLITE_OPEN_URI = 0x1, 0x40


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    """The SQLite C library (None: not reachable)."""
    candidates: list[str] = []
    try:
        import _sqlite3

        candidates.append(_sqlite3.__file__)  # dlsym searches the module and the libraries it links
    except ImportError:  # pragma: no cover - Python without sqlite3
        pass
    found = ctypes.util.find_library("sqlite3")
    if found:
        candidates.append(found)
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
            for sym in (
                "sqlite3_open_v2",
                "sqlite3_prepare_v2",
                "sqlite3_step",
                "sqlite3_column_int64",
                "sqlite3_column_type",
                "sqlite3_finalize",
                "sqlite3_close_v2",
                "sqlite3_errmsg",
            ):
                getattr(lib, sym)
        except (OSError, AttributeError):
            continue
        lib.sqlite3_open_v2.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_char_p]
        lib.sqlite3_prepare_v2.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_void_p,
        ]
        lib.sqlite3_finalize.argtypes = [ctypes.c_void_p]
        lib.sqlite3_close_v2.argtypes = [ctypes.c_void_p]
        lib.sqlite3_errmsg.argtypes = [ctypes.c_void_p]
        lib.sqlite3_errmsg.restype = ctypes.c_char_p
        return lib
    return None


def native_available() -> bool:
    """True when the C library is reachable (the fast path is used)."""
    return _library() is not None


def _address(lib: ctypes.CDLL, symbol: str) -> int:
    return ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value or 0


@numba.njit(cache=True)
def _step_rows(stmt, fns, nullable, out, null):  # pragma: no cover - compiled
    """Step ``stmt`` into ``out`` (rows x columns); a column's NULLs are looked for only where
    ``nullable`` (a NOT NULL column is read without the type check); returns (rows read, last step code)."""
    step, col_int64, col_type = fns[0], fns[1], fns[2]
    n, k = out.shape
    i = 0
    while i < n:
        rc = ccall_i64(step, (stmt,)) & 0xFF
        if rc != SQLITE_ROW:
            return i, rc
        for j in range(k):
            value = ccall_i64(col_int64, (stmt, j))
            # a NULL reads as 0, so only a 0 of a nullable column asks for the value's type
            if value == 0 and nullable[j] and (ccall_i64(col_type, (stmt, j)) & 0xFF) == SQLITE_NULL:
                null[i, j] = True
            else:
                out[i, j] = value
        i += 1
    rc = ccall_i64(step, (stmt,)) & 0xFF
    return i, rc


def _native(path: Path, sql: str, n_rows: int, nullable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lib = _library()
    assert lib is not None
    db, stmt = ctypes.c_void_p(), ctypes.c_void_p()
    uri = "file:" + str(path.resolve()).replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    rc = lib.sqlite3_open_v2(uri.encode(), ctypes.byref(db), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, None)
    try:
        if rc != 0:
            raise sqlite3.DatabaseError(f"cannot open: SQLite error {rc}")
        if lib.sqlite3_prepare_v2(db, sql.encode(), -1, ctypes.byref(stmt), None) != 0:
            raise sqlite3.DatabaseError((lib.sqlite3_errmsg(db) or b"?").decode("utf-8", "replace"))
        out = np.zeros((n_rows, nullable.size), dtype=np.int64)
        null = np.zeros((n_rows, nullable.size), dtype=np.bool_)
        fns = np.array(
            [_address(lib, s) for s in ("sqlite3_step", "sqlite3_column_int64", "sqlite3_column_type")], dtype=np.int64
        )
        got, code = _step_rows(stmt.value or 0, fns, nullable, out, null)
        if code not in (SQLITE_ROW, SQLITE_DONE):
            raise sqlite3.DatabaseError((lib.sqlite3_errmsg(db) or b"?").decode("utf-8", "replace"))
        return out[:got], null[:got]
    finally:
        if stmt.value:
            lib.sqlite3_finalize(stmt)
        lib.sqlite3_close_v2(db)


def _fetchall(con: sqlite3.Connection, sql: str, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    rows = con.execute(sql).fetchall()
    if not rows:
        return np.zeros((0, n_cols), np.int64), np.zeros((0, n_cols), np.bool_)
    obj = np.array(rows, dtype=object).reshape(len(rows), n_cols)
    null = obj == None
    obj[null] = 0
    return obj.astype(np.int64), null


def int_columns(
    con: sqlite3.Connection,
    path: Path,
    table: str,
    exprs: list[str],
    *,
    native: bool = True,
    not_null: list[bool] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``SELECT exprs FROM table`` (in rowid order) as int64 values and a null mask, rows x len(exprs).
    ``not_null``: the expressions that cannot be NULL (NOT NULL columns), read without a type check.

    Raises:
        sqlite3.DatabaseError: the database is corrupt or the query fails.
    """
    sql = f'SELECT {", ".join(exprs)} FROM "{table}"'
    if native and _library() is not None:
        n_rows = int(con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        nullable = np.array([not x for x in not_null] if not_null else [True] * len(exprs), dtype=np.bool_)
        return _native(path, sql, n_rows, nullable)
    # sqlite3_column_int64 converts text and real values as CAST(... AS INTEGER) does; fetchall is told to
    sql = f'SELECT {", ".join(f"CAST({e} AS INTEGER)" for e in exprs)} FROM "{table}"'
    return _fetchall(con, sql, len(exprs))
