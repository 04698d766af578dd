"""Reading capture shards: the raw files the C shims write under ``RUN.di/raw/``.

Per process and shim (``LIB`` = ``mpi``, ``io``, ``nccl`` or ``nccl_plugin``) there is a header
``LIB-HOST-PID.json`` (schemas/capture/v1/shard-header.schema.json), a string
table ``LIB-HOST-PID.str`` and one record file per thread ``LIB-HOST-PID-TID.bin``
of fixed 64-byte records (:data:`RECORD`): a staging area (header
``staging_records``), then the appended records; read here with one
``numpy.fromfile`` each, no Python loop per record. Record fields by kind (mapped to the job clock at ingest):

======== ====================================================================
kind     fields
======== ====================================================================
CALL     op, t0..t1, comm (job-wide id), peer (comm rank; root for
         collectives; status source for receives), tag, bytes, req (request
         id of a nonblocking post), aux (requests handled)
REQ_DONE a request finished inside the next CALL of the same thread: req, peer
         = status source, tag = status tag, bytes = received bytes, aux = 1
         for a receive request, 2 for the receive half of a Sendrecv (req 0)
REQ_START a persistent request started inside the next CALL (MPI_Start/Startall) of
         the same thread: peer, tag, comm, bytes as its *_init gave them, req (a new
         request id, completed by a later REQ_DONE), aux = 1 send, 2 receive
COMM     comm (id), peer (my rank in it), tag (size), req (parent comm id),
         aux2 (string id of the member world ranks, "0,2,4")
CLOCK    t0 (local time of the measurement), bytes (local clock minus rank
         0's clock, ns), aux2 (round trip of the fastest ping-pong, ns), tag
         (0 at MPI_Init, 1 at MPI_Finalize)
IO       op, t0..t1, comm (string id of the file name, 0 unknown), aux (fd),
         bytes (returned count; -1 on error), aux2 (file offset or -1)
TICKS    t0 (ticks), t1 (CLOCK_MONOTONIC ns at the same moment): calibration
USER     (lib ``nvtx``, :mod:`di.capture.user_events`) op (shim/nvtx.c ``di_user_op``), t0..t1,
         comm (message string id), aux2 (domain string id; Python calls: file), tag
         (category; Python calls: line), aux (ARGB colour), peer (colour type), req
         (start/end range id; push ranges: 1 when still open at exit), bytes (payload)
NCCL     (lib ``nccl``, kind CALL) op, t0..t1 (enqueue), comm (NCCL communicator id,
         bit 62), peer (root or peer), bytes, aux (ncclDataType_t), aux2
         (datatype size), tag (count); kind COMM: peer (my rank), tag (size)
======== ====================================================================

Times are ticks (header ``clock.ticks``: ``tsc`` or ``ns``) except in CLOCK and
the ns side of TICKS records, which are CLOCK_MONOTONIC ns.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from di.errors import FormatError

SHIM_DIR = Path(__file__).resolve().parent / "shim"
SHARD_VERSION = 1

RECORD = np.dtype(
    [
        ("kind", "<u2"),
        ("op", "<u2"),
        ("peer", "<i4"),
        ("t0", "<i8"),
        ("t1", "<i8"),
        ("bytes", "<i8"),
        ("comm", "<u8"),
        ("tag", "<i4"),
        ("aux", "<i4"),
        ("req", "<u8"),
        ("aux2", "<i8"),
    ]
)
"""One shard record (64 bytes, little-endian), as ``di_rec`` in shim/shard.h."""

KIND_CALL, KIND_REQ_DONE, KIND_COMM, KIND_CLOCK, KIND_IO, KIND_TICKS, KIND_NCCL_WORK = 1, 2, 3, 4, 5, 6, 7
KIND_REQ_START, KIND_USER = 8, 9
LIBS = "mpi|io|nccl|nccl_plugin|nvtx"  # nccl: the LD_PRELOAD shim; nccl_plugin: the NCCL profiler plugin; nvtx: shim/nvtx.c
HEADER = re.compile(rf"^({LIBS})-(.+)-(\d+)\.json$")
THREAD = re.compile(rf"^({LIBS})-(.+)-(\d+)-(\d+)\.bin$")


def raw_fingerprint(raw: Path) -> dict[str, int]:
    """What raw/ holds, cheaply: its files' count, total size and latest mtime (ns); hidden
    temporary files left out. A trace notes it (meta.json ``capture.raw_files``) to tell later
    whether the shards changed since (:mod:`di.capture.recover`)."""
    files = size = latest = 0
    with os.scandir(raw) as entries:
        for e in entries:
            if e.name.startswith(".") or not e.is_file(follow_symlinks=False):
                continue
            st = e.stat(follow_symlinks=False)
            files, size, latest = files + 1, size + st.st_size, max(latest, st.st_mtime_ns)
    return {"files": files, "bytes": size, "mtime_ns": latest}


@cache
def op_names() -> tuple[str, ...]:
    """Operation names by op id, read from shim/ops.h (the one list C and Python share)."""
    text = (SHIM_DIR / "ops.h").read_text()
    body = text[text.index("#define DI_OPS(X)") : text.index("#define DI_OP_ENUM")]
    return tuple(re.findall(r"X\((\w+)\)", body))


@dataclass
class ProcessShard:
    """What one shim wrote for one process."""

    lib: str
    host: str
    pid: int
    header: dict[str, Any]
    strings: dict[int, str]
    threads: dict[int, np.ndarray] = field(default_factory=dict)
    """tid -> complete records in file order."""
    incomplete: int = 0
    """Records whose slot was never completely written (kind 0 before the last record)."""

    @property
    def key(self) -> tuple[str, int]:
        return (self.host, self.pid)


@cache
def header_schema(name: str = "shard-header") -> dict[str, Any]:
    """A capture JSON Schema (``shard-header`` or ``samples-header``) of this shard version."""
    here = Path(__file__).resolve().parents[1]
    for root in (here / "_schemas", here.parent / "schemas"):
        path = root / "capture" / f"v{SHARD_VERSION}" / f"{name}.schema.json"
        if path.is_file():
            return json.loads(path.read_text())
    raise FormatError(here, f"the capture {name} schema is not installed with di")


def read_header(path: Path, schema: str = "shard-header") -> dict[str, Any]:
    """Read and check one shard (or samples) header.

    Raises:
        FormatError: not JSON, another shard version, or not matching the schema.
    """
    import jsonschema

    try:
        header = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FormatError(path, f"unreadable shard header ({exc})") from None
    if isinstance(header, dict) and header.get("version") not in (None, SHARD_VERSION):
        raise FormatError(path, f"shard format version {header.get('version')}; this di reads version {SHARD_VERSION}")
    try:
        jsonschema.validate(header, header_schema(schema))
    except jsonschema.ValidationError as exc:
        raise FormatError(path, f"shard header: {exc.message}") from None
    return header


def read_strings(path: Path) -> dict[int, str]:
    """The string table: id -> text. A record cut short at the end is ignored."""
    strings: dict[int, str] = {}
    if not path.is_file():
        return strings
    data = path.read_bytes()
    pos = 0
    while pos + 8 <= len(data):
        sid, length = np.frombuffer(data, "<u4", 2, pos)
        end = pos + 8 + int(length)
        if end > len(data):
            break
        strings[int(sid)] = data[pos + 8 : end].decode("utf-8", "replace")
        pos = end
    return strings


def read_records(path: Path, staging: int = 0) -> tuple[np.ndarray, int]:
    """A thread file's complete records, and how many slots before the last one are empty.

    ``staging``: the header's ``staging_records`` (0 for files without a staging area):
    the file starts with slot 0 (``t0`` = records appended so far) and that many
    staging slots, then the appended records (see shim/shard.h).
    """
    usable = path.stat().st_size // RECORD.itemsize
    if not staging:
        recs = np.fromfile(path, dtype=RECORD, count=usable)
    elif usable < staging + 1:
        return np.empty(0, RECORD), 0
    else:
        with open(path, "rb") as f:
            head = np.fromfile(f, dtype=RECORD, count=staging + 1)
            appended = usable - staging - 1
            skip = min(
                max(appended - int(head["t0"][0]), 0), staging
            )  # staged slots already appended (kill mid-append)
            staged = head[1 + skip :]
            recs = np.empty(appended + staged.size, RECORD)  # appended, then staged: read in place, no second copy
            f.readinto(recs[:appended].view(np.uint8))
            recs[appended:] = staged
    kind = recs["kind"]
    used = int(np.flatnonzero(kind)[-1]) + 1 if kind.any() else 0  # the zero tail is unused file space
    recs = recs[:used]
    holes = used - int(np.count_nonzero(kind[:used]))
    return (recs[recs["kind"] != 0] if holes else recs), holes


def read_raw(raw: Path) -> tuple[list[ProcessShard], dict[str, int]]:
    """Every process shard under ``raw``; dropped files counted by reason.

    Thread files without a header (a process killed before writing one, or a
    forked child that never reached MPI_Init) are counted, not loaded.
    """
    procs: dict[tuple[str, str, int], ProcessShard] = {}
    dropped: dict[str, int] = {}
    for path in sorted(raw.iterdir()):
        m = HEADER.match(path.name)
        if m:
            lib, host, pid = m[1], m[2], int(m[3])
            procs[(lib, host, pid)] = ProcessShard(
                lib, host, pid, read_header(path), read_strings(raw / f"{lib}-{host}-{pid}.str")
            )
    for path in sorted(raw.iterdir()):
        m = THREAD.match(path.name)
        if not m:
            continue
        proc = procs.get((m[1], m[2], int(m[3])))
        recs, incomplete = read_records(path, int(proc.header.get("staging_records", 0)) if proc else 0)
        if proc is None:
            if recs.size:
                dropped["records of processes without a header"] = dropped.get(
                    "records of processes without a header", 0
                ) + int(recs.size)
            continue
        proc.incomplete += incomplete
        if recs.size:
            proc.threads[int(m[4])] = recs
    return list(procs.values()), dropped
