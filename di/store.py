"""The ``.di`` store: a directory with one zstd Parquet file per table and meta.json.

Each table is written by pyarrow's Parquet writer (:func:`_write_parquet`): int64 columns (times, ids) as
``DELTA_BINARY_PACKED``, text columns dictionary-encoded (names, categories, the args texts), the narrower
integers and booleans plain (their dictionary cost more to build than it saved: depth and loc 0.02 s together),
and min/max statistics on the numeric columns that every row has (times, locations, depths: what a range query
filters on). Columns that hold no null are REQUIRED, with no definition levels to make and read
(:func:`required_columns`). A data page holds up to 100,000 rows, not pyarrow's 20,000 (:data:`PAGE_ROWS`), and
zstd runs at level 1 on the text columns and at its fast level -1 on the others (:data:`COMPRESSION_LEVEL`,
:data:`NUMBERS_LEVEL`). Any Parquet reader reads these (polars, pyarrow,
DuckDB, Spark). On a real-shaped 1.2 M-event Kineto profile (bench/realshape.py) this writes the events table in
0.16-0.17 CPU-s (0.18 before its columns without nulls were REQUIRED) where polars' own writer (plain int64 pages,
statistics of every column) took 0.39, into 6.7 MB
instead of 18.2, and polars reads it back in 0.06 CPU-s instead of 0.085. Min/max of the args texts cost 0.03 s,
and of Kineto's ids (most rows null) 0.012 s, and help no query. An empty table's file is the same bytes each
time: made once per process and written as they are.

Layout::

    NAME.di/
      meta.json            schema version, clock, sources, drops (schemas/trace/v1/meta.schema.json)
      locations.parquet    one file per table of di.schema.TABLES
      events.parquet
      ...

A store is written into a hidden sibling folder and swapped with the old one in
one step (:mod:`di.output`), so a killed or failed write leaves the old store or
the new one, complete; a folder that is not di's is never replaced.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from di import schema
from di.inputsize import check_size
from di.errors import FormatError, SchemaVersionError
from di.trace import Trace, conform, refresh_meta

if TYPE_CHECKING:
    import pyarrow as pa

META = "meta.json"
COMPRESSION_LEVEL = 1
"""zstd level of the text columns (names, categories, args): on a real-shaped 1.2 M-event trace
(bench/realshape.py) level 1 writes in 0.65-0.8x the CPU time of level 3 and the files are as small; where the args
texts stay distinct (900,000 of them, 140 MB), level -1 saved 3 ms of their 131 and wrote 8.5 MB instead of 7.2.
Storing each text as a shared template plus its digit runs was measured and not kept: the split (a numba pass over
every byte) cost 0.47 CPU-s, more than the compression it saves, and reading back rebuilds the same bytes."""
NUMBERS_LEVEL = -1
"""zstd level of the other columns, zstd's first fast level: most of their bytes are delta-packed times, which no
level compresses much. The whole ``.di`` write of the real-shaped trace, 16 interleaved runs, best (median) in ms:
level 1 235.6 (242.0) for a 6.84 MB store, -1 231.6 (239.4) for 6.76 MB (both with :data:`PAGE_ROWS`; pyarrow's
20,000-row pages and level 1 throughout, before: 248.7 (256.1), 7.14 MB). lz4 for these columns wrote 13 ms
faster than level 1 and 1.2 MB larger (pages of 1 Mi rows, 20 interleaved runs)."""
PAGE_ROWS = 100_000
"""The most rows of a data page (pyarrow's ``max_rows_per_page``; its default of 20,000 rows ends a page of a
sparse id column at a few KB, and each page is a zstd frame and a page header of its own). The whole ``.di`` write
of the real-shaped trace (the numbers at level -1), best of 6 (median) in ms, its store's MB and the write's peak
RSS over the trace's:
20,000 rows 245-256 (250-266), 7.04 MB, +38 MB; 50,000 226-240 (230-243), 6.88 MB, +48 MB; 100,000 228-232
(233-235), 6.76 MB, +50 MB; 1 Mi rows 241 (258), 6.88 MB, +82 MB (pyarrow holds a page's values until it ends).
A page still ends at pyarrow's 1 MiB of encoded values."""
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


def is_own_folder(path: Path) -> bool:
    """True when the folder ``path`` is di's to replace: a store, or a recording
    (``raw/run.json`` written by ``di record``) whose store is not written yet."""
    return is_store(path) or (path / "raw" / "run.json").is_file()


def write_store(
    trace: Trace,
    path: str | os.PathLike[str],
    *,
    compression_level: int = COMPRESSION_LEVEL,
    keep: tuple[str, ...] = (),
    extra: dict[str, pl.DataFrame] | None = None,
    partitioned: bool = False,
    ranks_per_group: int | None = None,
) -> None:
    """Validate ``trace`` and write it as a ``.di`` store, replacing one that di wrote.

    The store is written into a hidden sibling folder that is swapped with the
    old one in one step (:mod:`di.output`), so a killed or failed write leaves
    the old store, complete.

    Args:
        trace: the trace to write.
        path: the store folder.
        compression_level: zstd level of the text columns (the others: :data:`NUMBERS_LEVEL`).
        keep: entries of the existing store to carry over unchanged (a recording's ``raw/``).
        extra: more tables to write beside the schema's (``NAME.parquet``), such as
            a recording's per-file I/O statistics.
        partitioned: write the tables split by rank group (:mod:`di.store_partition`).
        ranks_per_group: ranks per group of the partitioned form (default: see
            :func:`di.store_partition.rank_groups`).

    Raises:
        SchemaError: the trace does not match the schema.
        OutputError: ``path`` exists and is not a di store, or is a recording and ``keep``
            does not keep its ``raw/`` shards.
        OSError: the file system refused (full disk, permission, read-only).
    """
    from di.output import atomic_dir, claim

    target = claim(path, ours=is_own_folder, what="a trace store")
    if "raw" not in keep and (target / "raw").is_dir():
        from di.errors import OutputError

        raise OutputError(
            target,
            "is a di recording: its raw/ capture shards cannot be made again, so only "
            "`di record --ingest` rewrites it; choose another output path",
        )
    trace = trace.with_meta(refresh_meta(trace))
    trace.validate()
    meta = {k: v for k, v in trace.meta.items() if k != "partitions"}  # the layout is this write's, never inherited
    with atomic_dir(target, keep=keep) as tmp:
        tables = {**trace.tables(), **(extra or {})}
        if partitioned:  # the rank-partitioned form: one file per table and rank group
            from di.store_partition import PARTITIONED, write_tables

            def write(name: str, df: pl.DataFrame, file: Path) -> None:
                whole = name not in PARTITIONED
                _write_parquet(df, file, compression_level, required_columns(name, df, whole=whole))

            meta = {**meta, "partitions": write_tables(trace.tables(), tmp, write, ranks_per_group=ranks_per_group)}
            tables = dict(extra or {})
        for name, df in tables.items():
            _write_parquet(df, tmp / f"{name}.parquet", compression_level, required_columns(name, df, whole=True))
        (tmp / META).write_text(json.dumps(meta, indent=1) + "\n")


def required_columns(table: str, df: pl.DataFrame, *, whole: bool) -> frozenset[str]:
    """The columns of ``df`` (rows of the table ``table``) that its Parquet file declares REQUIRED: those the
    table's schema declares non-nullable and, where ``whole`` (the table is this one file, not one of a partitioned
    store's, whose files should agree), every other that holds no null.

    A REQUIRED column has no definition levels (one a row, made and run-length encoded by the writer, read by every
    reader): on the real-shaped 1.2 M-event profile (bench/realshape.py) its events table wrote in about 0.165 CPU-s
    instead of 0.185, the args texts' column the largest share (see :data:`PAGE_ROWS` for how it was measured)."""
    if whole and df.height:
        named: frozenset[str] = frozenset(df.columns)
    else:
        named = schema.non_nullable_columns(table) if table in schema.TABLES else frozenset()
    # a null where the schema allows none (a trace not validated) leaves its column OPTIONAL: pyarrow refuses to write
    # a null into a REQUIRED column
    return frozenset(c for c in df.columns if c in named and not df.get_column(c).null_count())


def _write_parquet(df: pl.DataFrame, file: Path, level: int, required: frozenset[str] = frozenset()) -> None:
    """Write ``df`` as one Parquet file, zstd at ``level``, encoded as the module docstring says, the ``required``
    columns (which hold no null) declared REQUIRED (:func:`required_columns`), the others OPTIONAL.

    Raises:
        OSError: the file system refused, with its errno (pyarrow words a full disk as an ``OSError`` whose
            errno may be unset; the free space tells).
    """
    import pyarrow.parquet as pq

    try:
        if df.height:
            pq.write_table(_arrow_table(df, required), file, **parquet_options(df, level))
        else:
            file.write_bytes(_empty_file(tuple(df.schema.items()), level, required))
    except OSError as exc:
        if exc.errno is not None:
            raise
        code = errno.ENOSPC if _nearly_full(file.parent) else errno.EIO
        raise OSError(code, os.strerror(code), str(file)) from None


@cache
def _empty_file(columns: tuple[tuple[str, pl.DataType], ...], level: int, required: frozenset[str]) -> bytes:
    """The Parquet file of a table with these columns (name, dtype) and no rows, as :func:`_write_parquet` writes it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df = pl.DataFrame(schema=dict(columns))
    sink = pa.BufferOutputStream()
    pq.write_table(_arrow_table(df, required), sink, **parquet_options(df, level))
    return sink.getvalue().to_pybytes()


def parquet_options(df: pl.DataFrame, level: int) -> dict[str, Any]:
    """The keywords of ``pyarrow.parquet.write_table`` that write ``df`` as the module docstring says."""
    delta = {name: "DELTA_BINARY_PACKED" for name, dtype in df.schema.items() if dtype == pl.Int64}
    texts = [
        name for name, dtype in df.schema.items() if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum)
    ]
    every_row = [
        name for name, dtype in df.schema.items() if dtype.is_numeric() and not df.get_column(name).null_count()
    ]
    options = {
        "compression": "zstd",
        "compression_level": {name: level if name in texts else NUMBERS_LEVEL for name in df.columns},
        "use_dictionary": texts,
        "column_encoding": delta or None,
        "write_statistics": every_row,
    }
    if _has_page_rows():
        options["max_rows_per_page"] = PAGE_ROWS
    return options


@cache
def _has_page_rows() -> bool:
    """Whether this pyarrow's writer takes ``max_rows_per_page`` (older ones have no such option)."""
    import inspect

    import pyarrow.parquet as pq

    return "max_rows_per_page" in inspect.signature(pq.ParquetWriter.__init__).parameters


def _arrow_table(df: pl.DataFrame, required: frozenset[str] = frozenset()) -> "pa.Table":
    """``df`` as pyarrow takes it without copying text: String columns as Arrow string views (polars' own layout;
    converting them to plain strings copied the 114 MB of args texts of a real-shaped profile), Categorical and
    Enum columns with plain-string dictionaries (pyarrow's writer takes no dictionary of views; each distinct text
    is in it once); the ``required`` columns' fields not nullable."""
    import pyarrow as pa

    coded = [name for name, dtype in df.schema.items() if dtype == pl.Categorical or isinstance(dtype, pl.Enum)]
    table = df.drop(coded).to_arrow(compat_level=pl.CompatLevel.newest())
    columns = dict(zip(table.column_names, table.columns))
    fields = {f.name: f for f in table.schema}
    if coded:
        own = {name: array for name in coded if (array := _categorical_array(df.get_column(name))) is not None}
        rest = [name for name in coded if name not in own]
        dictionaries = df.select(rest).to_arrow(compat_level=pl.CompatLevel.oldest())
        columns |= dict(zip(rest, dictionaries.columns)) | own
        fields |= {f.name: f for f in dictionaries.schema}
        # with polars' own field metadata, which tells its reader the dictionary is a Categorical's (read back without
        # it, each row's text was hashed again: 0.09 CPU-s instead of 0.06 for that profile's events)
        fields |= {f.name: pa.field(f.name, own[f.name].type, metadata=f.metadata) for f in _arrow_fields(df, own)}
    schema = pa.schema([fields[name].with_nullable(name not in required) for name in df.columns])
    return pa.table([columns[name] for name in df.columns], schema=schema)


def _arrow_fields(df: pl.DataFrame, columns: Iterable[str]) -> "pa.Schema":
    """The fields polars gives those ``columns`` of ``df`` when converting them to plain-string dictionaries (no row
    converted)."""
    return df.select(list(columns)).head(0).to_arrow(compat_level=pl.CompatLevel.oldest()).schema


def _categorical_array(s: pl.Series) -> "pa.DictionaryArray | None":
    """A Categorical column without nulls as an Arrow dictionary array over the categories it uses, from its
    physical codes: for the 1.2 M names of a real-shaped profile, and for its categories, 3.2-4.4 ms a column where
    polars' own conversion took 6.3-7.4. None for another column, or for one whose codes spread far beyond its rows
    (the categories of a process are shared by all its columns)."""
    import numpy as np
    import pyarrow as pa

    if s.dtype != pl.Categorical or not s.len() or s.null_count():
        return None
    codes = s.to_physical().to_numpy()
    top = int(codes.max()) + 1
    if top > 4 * codes.size + 1024:
        return None
    present = np.zeros(top, dtype=np.bool_)
    present[codes] = True
    used = np.flatnonzero(present).astype(np.uint32)
    if used.size < top:  # the codes renumbered 0..used-1, in the order of the codes
        index = np.zeros(top, dtype=np.uint32)
        index[used] = np.arange(used.size, dtype=np.uint32)
        codes = index.take(codes)
    values = pl.Series(used).cat.to(s.dtype).cast(pl.String).to_arrow(compat_level=pl.CompatLevel.oldest())
    # from the buffer, not pa.array(codes): pyarrow's conversion of a numpy array imports pandas where it is installed
    # (0.28 CPU-s on the first save of a process)
    indices = pa.Array.from_buffers(pa.uint32(), codes.size, [None, pa.py_buffer(np.ascontiguousarray(codes))])
    return pa.DictionaryArray.from_arrays(indices, values)


def _nearly_full(folder: Path) -> bool:
    """True when the file system of ``folder`` has under 1 MiB left for this user."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 1 << 20


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


OPTIONAL_TABLES = ("comms", "comm_links", "io_files", "jobs")
"""Tables added after schema v1's first stores: a store without their files has none of their rows."""


def _table_path(store: Path, name: str) -> Path | None:
    file = store / f"{name}.parquet"
    if not file.is_file() and name in OPTIONAL_TABLES:
        return None
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
        FormatError: a table file is missing or unreadable, or the store does not match the
            schema (a column of another type, a row reference out of range, a meta.json field
            of the wrong type): it was not written by di, or was damaged since.
        InputTooLargeError: the store holds more than ``max_input_bytes`` uncompressed.
        SchemaVersionError: see :func:`read_meta`.
    """
    from di.errors import SchemaError

    store = Path(path)
    if max_input_bytes is not None:
        check_size(store / META, (store / META).stat().st_size if (store / META).is_file() else 0, max_input_bytes)
    meta = read_meta(store)
    from di.store_partition import is_partitioned

    if is_partitioned(meta):  # the rank-partitioned form (di.store_partition)
        from di.store_partition import read_tables, uncompressed_files

        if max_input_bytes is not None:
            size = sum(_uncompressed_bytes(f) for f in uncompressed_files(store, meta))
            check_size(store, size, max_input_bytes, "holds tables of")
        files: dict[str, Path] = {}
        parts = read_tables(store, meta, _read_checked)
    else:
        files = {name: file for name in schema.TABLES if (file := _table_path(store, name)) is not None}
        parts = {}
    if files and max_input_bytes is not None:
        check_size(store, sum(_uncompressed_bytes(f) for f in files.values()), max_input_bytes, "holds tables of")
    tables = {}
    for name in schema.TABLES:
        if name not in parts and name not in files:  # an optional table this store does not have
            continue
        file = files.get(name, store)
        try:
            tables[name] = conform(name, parts[name] if parts else _read_parquet(file))
        except pl.exceptions.PolarsError as exc:  # corrupt Parquet, or a column that does not cast to the schema's type
            raise FormatError(
                file, f"unreadable Parquet or not table {name!r} ({type(exc).__name__}: {_first_line(exc)})"
            ) from None
        except (
            Exception,
            pl.exceptions.PanicException,
        ) as exc:  # polars panics (a BaseException) on some corrupt files
            raise FormatError(file, f"unreadable Parquet ({type(exc).__name__}: {_first_line(exc)})") from None
    try:
        for name, df in tables.items():  # first the columns, which building the trace relies on (a start_ns all null)
            schema.validate_table(name, df)
        trace = Trace.build(meta=meta, **tables)
        trace.validate(tables=False)  # the tables checked just above
    except SchemaError as exc:
        text = str(exc)
        table = next((t for t in schema.TABLES if text.startswith(f"table {t!r}")), None)
        where = store / f"{table}.parquet" if table else store / META if text.startswith("meta.json") else store
        raise FormatError(where, f"does not match the trace schema: {text}") from None
    return trace


def _read_checked(file: Path | list[Path]) -> pl.DataFrame:
    """One Parquet file, or several of one table's columns into one frame (in order), or FormatError naming the
    file that cannot be read."""
    if isinstance(file, list):
        try:
            return _read_parquet(file)
        except (Exception, pl.exceptions.PanicException):  # one by one, to name the file that fails
            from di.merge import stack

            return stack([_read_checked(f) for f in file], rechunk=False)
    try:
        return _read_parquet(file)
    except (Exception, pl.exceptions.PanicException) as exc:
        raise FormatError(file, f"unreadable Parquet ({type(exc).__name__}: {_first_line(exc)})") from None


def _read_parquet(file: Path | list[Path]) -> pl.DataFrame:
    """polars' reader (2-4x less CPU than pyarrow's) of a file, or of several of one table; what it cannot read,
    on which polars may panic and print a Rust backtrace to the process's stderr, is read again by pyarrow, whose
    error names what is wrong: the backtrace never reaches the user's terminal."""
    try:
        with _stderr_silenced():
            return pl.read_parquet(file)
    except (Exception, pl.exceptions.PanicException):
        return pl.read_parquet(file, use_pyarrow=True)


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 points to /dev/null inside the block (a Rust panic hook writes there directly)."""
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


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
    from di.store_partition import is_partitioned, scan_tables

    store = Path(path)
    meta = read_meta(store)
    if is_partitioned(meta):
        return scan_tables(store, meta)
    return {
        name: pl.scan_parquet(file) if (file := _table_path(store, name)) is not None else conform(name, None).lazy()
        for name in schema.TABLES
    }
