"""The ``.di`` store: a directory with one zstd Parquet file per table and meta.json.

Layout::

    NAME.di/
      meta.json            schema version, clock, sources, drops (schemas/trace/v1/meta.schema.json)
      locations.parquet    one file per table of di.schema.TABLES
      events.parquet
      ...

A store is written into a temporary sibling directory and renamed into place,
so a crash never leaves a half-written store under the final name.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from di import schema
from di.errors import FormatError, SchemaVersionError
from di.trace import Trace, conform, refresh_meta

META = "meta.json"


def is_store(path: Path) -> bool:
    """True when ``path`` is a directory holding a di meta.json."""
    meta = path / META
    if not meta.is_file():
        return False
    try:
        with open(meta, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    # di writes "format" first; any other writer's key order is checked in full
    return b'"di-trace"' in head or b'"di-trace"' in meta.read_bytes()


def write_store(trace: Trace, path: str | os.PathLike[str], *, compression_level: int = 3) -> None:
    """Validate ``trace`` and write it as a ``.di`` store (replacing one that exists).

    Raises:
        SchemaError: the trace does not match the schema.
    """
    target = Path(path)
    trace = trace.with_meta(refresh_meta(trace))
    trace.validate()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, df in trace.tables().items():
            df.write_parquet(tmp / f"{name}.parquet", compression="zstd", compression_level=compression_level)
        (tmp / META).write_text(json.dumps(trace.meta, indent=1) + "\n")
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and version-check a store's meta.json.

    Raises:
        FormatError: meta.json is missing or not JSON.
        SchemaVersionError: the store's schema version is not this di's.
    """
    store = Path(path)
    try:
        meta = json.loads((store / META).read_text())
    except FileNotFoundError:
        raise FormatError(store, f"not a di store: {META} is missing") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise FormatError(store / META, f"not valid JSON ({exc})") from None
    version = meta.get("schema_version") if isinstance(meta, dict) else None
    if not isinstance(version, int):
        raise FormatError(store / META, "has no integer 'schema_version'")
    if version != schema.SCHEMA_VERSION:
        newer = "a newer" if version > schema.SCHEMA_VERSION else "an older"
        raise SchemaVersionError(
            f"{store}: store has trace schema v{version}, written by {newer} di "
            f"({meta.get('di_version', 'unknown version')}); this di reads v{schema.SCHEMA_VERSION}. "
            f"Re-create it from the original trace with `di convert`."
        )
    return meta


def _table_path(store: Path, name: str) -> Path:
    file = store / f"{name}.parquet"
    if not file.is_file():
        raise FormatError(store, f"table file {file.name} is missing")
    return file


def read_store(path: str | os.PathLike[str]) -> Trace:
    """Load a ``.di`` store into memory.

    Raises:
        FormatError: a table file is missing or unreadable, or the store does not match the
            schema (a column of another type, a row reference out of range, a meta.json field
            of the wrong type): it was not written by di, or was damaged since.
        SchemaVersionError: see :func:`read_meta`.
    """
    from di.errors import SchemaError

    store = Path(path)
    meta = read_meta(store)
    tables = {}
    for name in schema.TABLES:
        file = _table_path(store, name)
        try:
            tables[name] = conform(name, pl.read_parquet(file, use_pyarrow=True))  # pyarrow raises on corrupt files where polars panics
        except pl.exceptions.PolarsError as exc:  # corrupt Parquet, or a column that does not cast to the schema's type
            raise FormatError(file, f"unreadable Parquet or not table {name!r} ({type(exc).__name__}: {_first_line(exc)})") from None
        except (Exception, pl.exceptions.PanicException) as exc:  # polars panics (a BaseException) on some corrupt files
            raise FormatError(file, f"unreadable Parquet ({type(exc).__name__}: {_first_line(exc)})") from None
    try:
        for name, df in tables.items():  # first the columns, which building the trace relies on (a start_ns all null)
            schema.validate_table(name, df)
        trace = Trace.build(meta=meta, **tables)
        trace.validate()
    except SchemaError as exc:
        text = str(exc)
        table = next((t for t in schema.TABLES if text.startswith(f"table {t!r}")), None)
        where = store / f"{table}.parquet" if table else store / META if text.startswith("meta.json") else store
        raise FormatError(where, f"does not match the trace schema: {text}") from None
    return trace


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def scan_store(path: str | os.PathLike[str]) -> dict[str, pl.LazyFrame]:
    """Lazy frames over each table of a store (nothing is read until collected)."""
    store = Path(path)
    read_meta(store)
    return {name: pl.scan_parquet(_table_path(store, name)) for name in schema.TABLES}
