"""MPI communicators: the MPI_COMMUNICATORS rows of a report, and world ranks and names from them.

:func:`communicators` reads the rows a report keeps in its source's
``info["mpi_communicators"]``; over the sources of a trace,
:func:`_communicator_tables` gives (rank, handle) -> job-wide uid and size,
and (uid, local rank) -> world rank (from the (localRank, rank) pairs, else
the ``members`` text, :func:`_member_pairs`). :func:`_on_communicators` names
each call's communicator (``mpi:UID``, ``MPI_COMM_WORLD``, ``mpi handle H``)
and gives the world ranks of its peer and root (see :mod:`di.convert.nsys.mpi`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from di.convert.nsys.ranks import MAX_RANK
from di.convert.nsys.report import Report
from di.trace import Trace

__all__ = ["COMM_COLUMNS", "MPICH_WORLD", "communicators"]

COMM_COLUMNS = ("rank", "commHandle", "commUid", "localRank", "size", "members")
MPICH_WORLD = 0x44000000
"""MPICH's (and its derivatives') MPI_COMM_WORLD handle, the same in every process."""


def communicators(report: Report) -> list[list[Any]]:
    """``MPI_COMMUNICATORS`` rows as [rank, commHandle, commUid, localRank, size, members] ([] when absent)."""
    have = report.columns("MPI_COMMUNICATORS")
    if not {"rank", "commHandle"} <= set(have):
        return []
    cols = ", ".join(f'"{c}"' if c in have else "NULL" for c in COMM_COLUMNS)
    rows = report.con.execute(f"SELECT {cols} FROM MPI_COMMUNICATORS").fetchall()
    # the ids and sizes are integers (else null), the members a text; the table is one row per rank and communicator
    return [
        [_int(r[0], 0, MAX_RANK), _int(r[1]), _int(r[2]), _int(r[3], 0, MAX_RANK), _int(r[4], 1, MAX_RANK)]
        + [None if r[5] is None else str(r[5])]
        for r in rows
    ]


def _int(value: object, low: int = -(2**63), high: int = 2**63 - 1) -> int | None:
    """``value`` when it is an integer in [low, high], else None (a damaged or differently typed cell)."""
    return value if isinstance(value, int) and low <= value <= high else None


def _member_pairs(uid: int, size: int | None, members: str | None) -> list[tuple[int, int, int]]:
    """(uid, local rank, world rank) from a ``members`` text (see the module docstring); [] when it says nothing sure."""
    values = [int(v) for v in re.findall(r"-?\d+", members or "")]
    if not values or not size or size > len(values):  # every form lists at least the members
        return []
    if len(values) == size and sorted(values) != list(range(size)):
        return [(uid, k, w) for k, w in enumerate(values)]  # world ranks in communicator order
    if set(values) <= {0, 1} and sum(values) == size and len(values) >= size:
        return [(uid, k, int(w)) for k, w in enumerate(np.flatnonzero(values))]  # flags indexed by world rank
    local = [(v, w) for w, v in enumerate(values) if v >= 0]
    if sorted(v for v, _ in local) == list(range(size)):
        return [(uid, v, w) for v, w in local]  # local ranks indexed by world rank
    return []


def _communicator_tables(trace: Trace, sources: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rank, handle) -> uid, size; and (uid, local) -> world rank, from every source's rows."""
    rows = [r for i in sources for r in (trace.meta["sources"][i].get("info") or {}).get("mpi_communicators", [])]
    comms = pl.DataFrame(
        [r[:5] for r in rows],
        schema={"rank": pl.Int64, "handle": pl.Int64, "uid": pl.Int64, "local": pl.Int64, "size": pl.Int64},
        orient="row",
    )
    by_handle = comms.filter(pl.col("uid").is_not_null()).unique(["rank", "handle"], keep="last")
    pairs = comms.filter(pl.col("uid").is_not_null() & pl.col("local").is_not_null()).select(
        "uid", "local", world="rank"
    )
    texts = {(int(r[2]), r[4]): r[5] for r in rows if r[2] is not None and r[5]}
    parsed = [p for (uid, size), text in texts.items() for p in _member_pairs(uid, size, text)]
    members = pl.concat(
        [pairs, pl.DataFrame(parsed, schema={"uid": pl.Int64, "local": pl.Int64, "world": pl.Int64}, orient="row")]
    ).unique(["uid", "local"], keep="first")
    return by_handle.select("rank", "handle", "uid", "size"), members


def _world(ev: pl.DataFrame, members: pl.DataFrame, column: str, world_size: int | None) -> pl.Series:
    """World rank of each row's comm-local ``column`` (see the module docstring)."""
    looked = ev.select("uid", "size", pl.col(column).alias("local")).join(
        members, on=["uid", "local"], how="left", maintain_order="left"
    )
    as_world = pl.col("uid").is_null() | (pl.col("size") == world_size) if world_size else pl.col("uid").is_null()
    return looked.select(
        pl.when(pl.col("world").is_not_null()).then("world").when(as_world).then("local").alias(column)
    ).to_series()


def _on_communicators(
    ev: pl.DataFrame, by_handle: pl.DataFrame, members: pl.DataFrame, world_size: int | None
) -> pl.DataFrame:
    """``ev`` with its communicator's uid and size, the world ranks ``peer`` and ``root_world``, and ``comm``."""
    ev = ev.join(
        by_handle.rename({"handle": "comm_handle"}), on=["rank", "comm_handle"], how="left", maintain_order="left"
    )
    return ev.with_columns(
        _world(ev, members, "remote_rank", world_size).alias("peer"),
        _world(ev, members, "root", world_size).alias("root_world"),
        pl.when(pl.col("uid").is_not_null())
        .then(pl.format("mpi:{}", "uid"))
        .when(pl.col("comm_handle") == MPICH_WORLD)
        .then(pl.lit("MPI_COMM_WORLD"))
        .when(pl.col("comm_handle").is_not_null())
        .then(pl.format("mpi handle {}", "comm_handle"))
        .alias("comm"),
    )
