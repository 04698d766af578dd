"""Canonical ``io`` events -> OTF2 I/O operation records and the I/O definitions they need (writer side).

An ``io`` event gets an IoOperationBegin right after its Enter and an
IoOperationComplete (IoOperationCancelled when its args say ``cancelled``)
right before its Leave when its operation mode is known:

* args ``mode`` (``read``/``write``/``flush``: an I/O operation di's reader
  made from OTF2 records), or
* its name, for events that are not OTF2 regions (``src_cat`` without a
  ``/``, e.g. di's capture, ``posix_io``): ``read``, ``pread``, ``readv``,
  ``fread``, ``MPI_File_read*`` ... read; ``write`` ... write; ``fsync``,
  ``fdatasync``, ``fflush``, ``MPI_File_sync`` flush. Score-P's I/O regions
  are skipped: the operation records inside them are events of their own.

Fields: handle = one IoHandle per (file, paradigm); file = args ``file``,
else args ``handle``, else ``unknown``; paradigm = args ``paradigm``, else
from the name (``f*`` stdio calls ISOC, ``MPI_File_*`` MPI-IO, else POSIX);
bytes requested = args ``bytes_requested``, else ``bytes``; bytes
transferred = ``bytes`` (0 when null); operation flags = args
``operation_flags``; matching id = the event's row. Both records carry the
attribute ``di.io``, which tells di's reader that they describe the event
around them (no event of their own), so a round trip keeps the event set.

Definitions: one IoParadigm per paradigm, one IoRegularFile per file (scope:
the system tree root), one IoHandle per (file, paradigm), pre-created (no
IoCreateHandle record needed), READ_WRITE.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from di.convert.otf2 import emit

READ_NAMES = ("read", "pread", "pread64", "readv", "preadv", "preadv2", "fread", "fgets", "fscanf", "getline")
WRITE_NAMES = ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev2", "fwrite", "fputs", "fprintf")
FLUSH_NAMES = ("fsync", "fdatasync", "fflush", "sync", "syncfs", "msync")
MODES = ("read", "write", "flush")
"""OTF2_IoOperationMode 0, 1, 2."""
PARADIGM_NAMES = {"POSIX": "POSIX I/O", "ISOC": "ISO C I/O", "MPI-IO": "MPI I/O"}


@dataclass
class IoDefs:
    """The I/O definitions to write: (identification, name) per paradigm, file names, (file, paradigm) per handle."""

    paradigms: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    handles: list[tuple[int, int]] = field(default_factory=list)


def _mode_of_name(name: pl.Expr) -> pl.Expr:
    lower = name.str.to_lowercase()
    return (
        pl.when(
            lower.is_in(READ_NAMES) | lower.str.starts_with("mpi_file_read") | lower.str.starts_with("mpi_file_iread")
        )
        .then(0)
        .when(
            lower.is_in(WRITE_NAMES)
            | lower.str.starts_with("mpi_file_write")
            | lower.str.starts_with("mpi_file_iwrite")
        )
        .then(1)
        .when(lower.is_in(FLUSH_NAMES) | (lower == "mpi_file_sync"))
        .then(2)
    )


def _paradigm_of_name(name: pl.Expr) -> pl.Expr:
    return (
        pl.when(name.str.starts_with("MPI_File"))
        .then(pl.lit("MPI-IO"))
        .when(name.str.starts_with("f") & ~name.is_in(["fsync", "fdatasync"]))
        .then(pl.lit("ISOC"))
        .otherwise(pl.lit("POSIX"))
    )


def plan_io(trace: Any, strings: Any) -> tuple[np.ndarray, IoDefs]:
    """(attachment rows for :mod:`emit`, definitions) of the trace's I/O operations; strings are added to ``strings``."""
    ev = trace.events
    empty = np.zeros((0, emit.ATT_WIDTH), np.int64), IoDefs()
    if not ev.height:
        return empty
    from di.trace import CATS

    is_io = ev["cat"].to_physical().to_numpy() == CATS.index(
        "io"
    )  # one pass over the codes, no frame for traces without I/O
    if not is_io.any():
        return empty
    io = ev.with_row_index("row").filter(pl.Series(is_io))
    name = pl.col("name").cast(pl.String)
    src = pl.col("src_cat").cast(pl.String).fill_null("")
    arg = pl.col("args").str.json_path_match
    ops = io.select(
        "row",
        "bytes",
        pl.coalesce(
            arg("$.mode").replace_strict({m: i for i, m in enumerate(MODES)}, default=None, return_dtype=pl.Int64),
            pl.when(~src.str.contains("/", literal=True)).then(_mode_of_name(name)),
        ).alias("mode"),
        pl.coalesce(arg("$.file"), arg("$.handle"), pl.lit("unknown")).alias("file"),
        pl.coalesce(arg("$.paradigm"), _paradigm_of_name(name)).alias("paradigm"),
        pl.coalesce(arg("$.bytes_requested").cast(pl.Int64, strict=False), pl.col("bytes"), pl.lit(0)).alias(
            "requested"
        ),
        arg("$.operation_flags").cast(pl.Int64, strict=False).fill_null(0).alias("flags"),
        (arg("$.cancelled") == "true").fill_null(False).alias("cancelled"),
    ).filter(pl.col("mode").is_not_null())
    if not ops.height:
        return empty
    defs = IoDefs()
    paradigm_ids, paradigm_ref = np.unique(ops["paradigm"].to_numpy().astype(str), return_inverse=True)
    defs.paradigms = [(p, PARADIGM_NAMES.get(p, p)) for p in paradigm_ids.tolist()]
    file_names, file_ref = np.unique(ops["file"].to_numpy().astype(str), return_inverse=True)
    defs.files = file_names.tolist()
    pairs, handle = np.unique(np.column_stack([file_ref.ravel(), paradigm_ref.ravel()]), axis=0, return_inverse=True)
    defs.handles = [(int(f), int(p)) for f, p in pairs.tolist()]
    for s in [*defs.files, *(x for pair in defs.paradigms for x in pair)]:
        strings.ref(s)
    row = ops["row"].to_numpy().astype(np.int64)
    z = np.zeros(row.size, np.int64)
    h = handle.ravel().astype(np.int64)
    done = np.where(ops["cancelled"].to_numpy(), emit.ATT_IO_CANCELLED, emit.ATT_IO_COMPLETE)
    moved = ops["bytes"].fill_null(0).to_numpy().astype(np.int64)
    pad = np.zeros((row.size, 4), np.int64)
    begin = np.column_stack(
        [
            row,
            z,
            z + emit.ATT_IO_BEGIN,
            h,
            ops["mode"].to_numpy(),
            ops["flags"].to_numpy(),
            ops["requested"].to_numpy(),
            row,
            pad,
        ]
    )
    end = np.column_stack([row, z + 1, done, h, z, z, moved, row, pad])
    return np.concatenate([begin, end]).astype(np.int64), defs


def write_io_definitions(o: Any, g: Any, defs: IoDefs, s: Any) -> None:
    """IoParadigm, IoRegularFile, IoHandle (+ its pre-created state) definitions through the global definition writer ``g``."""
    for ref, (ident, name) in enumerate(defs.paradigms):
        o.GlobalDefWriter_WriteIoParadigm(
            g,
            ref,
            s(ident),
            s(name),
            o.IO_PARADIGM_CLASS_PARALLEL if ident == "MPI-IO" else o.IO_PARADIGM_CLASS_SERIAL,
            o.IO_PARADIGM_FLAG_OS if ident == "POSIX" else o.IO_PARADIGM_FLAG_NONE,
            [],
            [],
            [],
        )
    for ref, name in enumerate(defs.files):
        o.GlobalDefWriter_WriteIoRegularFile(g, ref, s(name), 0)
    for ref, (file, paradigm) in enumerate(defs.handles):
        o.GlobalDefWriter_WriteIoHandle(
            g,
            ref,
            s(defs.files[file]),
            file,
            paradigm,
            o.IO_HANDLE_FLAG_PRE_CREATED,
            o.UNDEFINED_COMM,
            o.UNDEFINED_IO_HANDLE,
        )
        o.GlobalDefWriter_WriteIoPreCreatedHandleState(g, ref, o.IO_ACCESS_MODE_READ_WRITE, o.IO_STATUS_FLAG_NONE)
