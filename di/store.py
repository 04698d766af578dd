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
from di.convert.inputsize import check_size
from di.errors import FormatError, SchemaVersionError
from di.trace import Trace, refresh_meta

META = "meta.json"
META_SNIFF_BYTES = 16 << 20
"""The most bytes of a meta.json searched for di's format marker when telling whether a directory is a store."""


def is_store(path: Path) -> bool:
    """True when ``path`` is a directory holding a di meta.json."""
    meta = path / META
    if not meta.is_file():
        return False
    try:
        with open(meta, "rb") as fh:
            head = fh.read(4096)
            # di writes "format" first; any other writer's key order is checked in up to META_SNIFF_BYTES
            return b'"di-trace"' in head or b'"di-trace"' in head + fh.read(META_SNIFF_BYTES)
    except OSError:
        return False


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
    except (ValueError, UnicodeDecodeError) as exc:
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


def read_store(path: str | os.PathLike[str], *, max_input_bytes: int | None = None) -> Trace:
    """Load a ``.di`` store into memory.

    Args:
        path: the store directory.
        max_input_bytes: the most bytes the store may hold uncompressed (meta.json plus
            the tables' uncompressed sizes in their Parquet footers); None: no limit.

    Raises:
        FormatError: a table file is missing or unreadable.
        InputTooLargeError: the store holds more than ``max_input_bytes`` uncompressed.
        SchemaVersionError: see :func:`read_meta`.
    """
    store = Path(path)
    if max_input_bytes is not None:
        check_size(store / META, (store / META).stat().st_size if (store / META).is_file() else 0, max_input_bytes)
    meta = read_meta(store)
    files = {name: _table_path(store, name) for name in schema.TABLES}
    if max_input_bytes is not None:
        check_size(store, sum(_uncompressed_bytes(f) for f in files.values()), max_input_bytes, "holds tables of")
    tables = {}
    for name, file in files.items():
        try:
            tables[name] = pl.read_parquet(file)
        except Exception as exc:  # polars raises several error types for corrupt Parquet
            raise FormatError(file, f"unreadable Parquet ({type(exc).__name__}: {exc})") from None
    return Trace.build(meta=meta, **tables)


def _uncompressed_bytes(file: Path) -> int:
    """Uncompressed bytes of a Parquet file's row groups, from its footer (0 when the footer is unreadable:
    reading the table then says what is wrong)."""
    import pyarrow.parquet as pq

    try:
        md = pq.read_metadata(file)
    except Exception:  # pyarrow raises several error types for a corrupt footer
        return 0
    return sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))


def scan_store(path: str | os.PathLike[str]) -> dict[str, pl.LazyFrame]:
    """Lazy frames over each table of a store (nothing is read until collected)."""
    store = Path(path)
    read_meta(store)
    return {name: pl.scan_parquet(_table_path(store, name)) for name in schema.TABLES}
