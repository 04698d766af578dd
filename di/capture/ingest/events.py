"""The ``events`` table of a recorded job: its MPI, NCCL, I/O and user calls.

:func:`build_events` makes one event per CALL and IO record and adds the user events
(:func:`di.capture.user_events.user_events`):

* ``name`` is the op's name, ``cat`` from it (:func:`op_tables`: ``nccl``, ``io``,
  ``other`` for MPI's setup calls, ``mpi_coll`` for communicator calls, barriers and
  collectives, else ``mpi_p2p``), ``src_cat`` ``mpi``, ``posix_io`` or ``nccl``;
* ``bytes`` is null for calls that move no payload of their own (:data:`NO_PAYLOAD`);
* ``args``: MPI calls' world peer, tag and communicator name; I/O calls' file, fd and offset;
* events are sorted by (loc, start, longest first) and nested (``depth``, ``parent``).

It also returns each record's event row (-1 for none) and the I/O events for the
per-file statistics.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.capture import shard, user_events
from di.capture.ingest.strings import StringTable

MPI_OTHER = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Comm_free"}
NO_PAYLOAD = (
    "MPI_Init",
    "MPI_Finalize",
    "MPI_Wait",
    "MPI_Test",
    "MPI_Request_free",
    "MPI_Comm_",
    "MPI_Barrier",
    "MPI_Ibarrier",
    "MPI_Probe",
    "MPI_Iprobe",
    "MPI_Mprobe",
    "MPI_Improbe",
    "MPI_Start",
    "MPI_Send_init",
    "MPI_Ssend_init",
    "MPI_Bsend_init",
    "MPI_Rsend_init",
    "MPI_Recv_init",
)
"""Calls that move no payload of their own: their events carry no bytes."""


def op_tables() -> tuple[np.ndarray, np.ndarray]:
    """op id -> event name, op id -> cat."""
    from di.capture.matching import COLLECTIVE_OPS, base_name

    names = shard.op_names()
    cats = []
    for name in names:
        if name.startswith("nccl"):
            cats.append("nccl")
        elif not name.startswith("MPI_"):
            cats.append("io")
        elif name in MPI_OTHER:
            cats.append("other")
        elif (
            name.startswith("MPI_Comm_")
            or name.startswith("MPI_Barrier")
            or name.startswith("MPI_Ibarrier")
            or base_name(name) in COLLECTIVE_OPS
        ):
            cats.append("mpi_coll")
        else:
            cats.append("mpi_p2p")
    return np.array(names, dtype=object), np.array(cats, dtype=object)


def no_payload() -> np.ndarray:
    """op id -> whether the call moves no payload of its own (:data:`NO_PAYLOAD`)."""
    return np.array([n.startswith(NO_PAYLOAD) for n in shard.op_names()])


def _call_events(cols: dict[str, np.ndarray], comms: Any, strings: StringTable) -> pl.DataFrame:
    """One row per CALL and IO record, in record order, with the columns its args are made of."""
    names, cats = op_tables()
    ev = np.flatnonzero((cols["kind"] == shard.KIND_CALL) | (cols["kind"] == shard.KIND_IO))
    op = cols["op"][ev]
    is_io = cols["kind"][ev] == shard.KIND_IO
    world_peer = comms.world_peer(cols["comm"][ev], cols["peer"][ev])
    comm_name = comms.names(cols["comm"][ev], "comm")
    from di.trace import CATS

    name_lut = pl.Series("name", list(names), dtype=pl.Enum(list(dict.fromkeys(names))))
    cat_lut = pl.Series("cat", list(cats), dtype=pl.Enum(list(CATS)))
    nbytes = np.where(no_payload()[op] & ~is_io, -1, cols["bytes"][ev])
    return pl.DataFrame(
        {
            "record": ev,
            "loc": cols["loc"][ev],
            "start_ns": cols["t0"][ev],
            "end_ns": cols["t1"][ev],
            "name": name_lut.gather(op).cast(pl.Categorical),
            "cat": cat_lut.gather(op),
            "src_cat": pl.Series("src_cat", ["mpi", "posix_io", "nccl"], dtype=pl.Categorical).gather(
                np.where(cats[op] == "nccl", 2, is_io.astype(np.int64))
            ),
            "bytes": np.where(nbytes >= 0, nbytes, -1),
            "io": is_io,
            "peer": world_peer,
            "tag": cols["tag"][ev],
            "comm": comm_name,
            "file": strings.column(cols["text"][ev], "file"),
            "fd": cols["aux"][ev],
            "offset": cols["aux2"][ev],
        },
        strict=False,
    )


def _with_args(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with ``args``: MPI calls' first, then I/O calls' rows."""
    # args: MPI ones by concatenation (communicator names need no escaping), I/O ones
    # through json_encode (file names may); each on its own rows
    peer, comm = pl.col("peer"), pl.col("comm")
    mpi_args = (
        pl.when(peer >= 0)
        .then(
            pl.concat_str(
                pl.lit('{"peer":'),
                peer.cast(pl.String),
                pl.lit(',"tag":'),
                pl.col("tag").cast(pl.String),
                pl.lit(',"comm":"'),
                comm,
                pl.lit('"}'),
            )
        )
        .when(comm.is_not_null())
        .then(pl.concat_str(pl.lit('{"comm":"'), comm, pl.lit('"}')))
    )
    io_args = pl.struct(
        pl.col("file"), pl.col("fd"), pl.when(pl.col("offset") >= 0).then(pl.col("offset")).alias("offset")
    ).struct.json_encode()
    return pl.concat(
        [df.filter(~pl.col("io")).with_columns(args=mpi_args), df.filter(pl.col("io")).with_columns(args=io_args)]
    )


def _nested(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` (sorted by loc, start, longest first) with ``depth`` and ``parent`` (null for none)."""
    from di.nesting import nest

    depth, parent = nest(
        df.get_column("loc").to_numpy(), df.get_column("start_ns").to_numpy(), df.get_column("end_ns").to_numpy()
    )
    return df.with_columns(depth=pl.Series(depth), parent=pl.Series(parent)).with_columns(
        parent=pl.when(pl.col("parent") >= 0).then(pl.col("parent"))
    )


def build_events(
    cols: dict[str, np.ndarray], comms: Any, strings: StringTable, warnings: list[str]
) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame]:
    """Events of CALL, IO and USER records, sorted; record index -> event row (-1 none); the I/O events."""
    df = _with_args(_call_events(cols, comms, strings))
    df = df.with_columns(instant=pl.lit(False))
    user = user_events.user_events(cols, strings, warnings)
    if user is not None:
        df = pl.concat([df, user.with_columns(io=pl.lit(False))], how="diagonal_relaxed")
    df = df.with_columns(
        bytes=pl.when(pl.col("bytes") >= 0).then(pl.col("bytes")),
    ).sort(["loc", "start_ns", pl.col("end_ns")], descending=[False, False, True], maintain_order=True)
    row_of = np.full(cols["kind"].size, -1, np.int64)
    row_of[df.get_column("record").to_numpy()] = np.arange(df.height)
    df = _nested(df)
    io = df.filter(pl.col("io")).select("loc", "name", "start_ns", "end_ns", "bytes", "file")
    return df.drop("record", "io", "peer", "tag", "comm", "file", "fd", "offset"), row_of, io
