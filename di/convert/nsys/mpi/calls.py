"""MPI calls in an Nsight Systems export -> event rows on their CPU thread.

MPI_P2P_EVENTS and MPI_START_WAIT_EVENTS calls are cat ``mpi_p2p``,
MPI_COLLECTIVES_EVENTS ``mpi_coll``, MPI_OTHER_EVENTS as di's capture names
them (:func:`_other_cat`); src_cat ``mpi``, ``bytes`` the size sent (a
point-to-point ``size``, a collective's send size), the recorded arguments in
``args`` (``comm handle``, ``tag``, ``remote rank``, ``root``, ``request``,
``send bytes``, ``recv bytes``: those the table has). Calls without an end
(running when the capture stopped) are counted in ``dropped``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import polars as pl

from di.capture.matching import COLLECTIVE_OPS, base_name
from di.convert.nsys.activity import rows
from di.convert.nsys.report import Report
from di.trace import CATS

__all__ = ["COLL", "MPI_TABLES", "OTHER", "P2P", "START_WAIT", "frames"]

P2P, COLL, START_WAIT, OTHER = "MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS", "MPI_OTHER_EVENTS"
MPI_TABLES = (P2P, COLL, START_WAIT, OTHER)
OTHER_CALLS = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Comm_free"}
"""MPI_OTHER_EVENTS calls that are neither point-to-point nor collective (cat ``other``), as di's capture says."""
LOCAL_QUERIES = ("MPI_Comm_rank", "MPI_Comm_size", "MPI_Comm_get_", "MPI_Comm_set_", "MPI_Comm_test_inter", "MPI_Wtime")
"""Calls that ask the local MPI library and wait for no other rank (cat ``other``)."""
ARG_COLUMNS = (
    ("comm handle", "comm"),
    ("tag", "tag"),
    ("remote rank", "remote"),
    ("root", "root"),
    ("request", "request"),
    ("send bytes", "send"),
    ("recv bytes", "recv"),
)
"""``args`` keys and the columns (of :func:`_call_columns`) they come from."""


def _other_cat(name: str) -> str:
    """The cat of an MPI_OTHER_EVENTS call, as di's capture gives it."""
    if name in OTHER_CALLS or name.startswith(LOCAL_QUERIES):
        return "other"
    if name.startswith(("MPI_Comm_", "MPI_Barrier", "MPI_Ibarrier")) or base_name(name) in COLLECTIVE_OPS:
        return "mpi_coll"
    return "mpi_p2p"


def _call_columns(report: Report, table: str) -> dict[str, np.ndarray]:
    """The integer columns of an MPI table (the byte counts under their name in this export's schema)."""
    have = set(report.columns(table))
    send = "size" if table == COLL and "size" in have else "collSendSize"
    recv = "recvSize" if "recvSize" in have else "collRecvSize"
    return report.ints(
        table,
        {
            "start": "start",
            "end": "end",
            "gtid": "globalTid",
            "name": "textId",
            "comm": "commHandle",
            "tag": "tag",
            "remote": "remoteRank",
            "root": "rootRank",
            "size": "size" if table == P2P else None,
            "send": send if table == COLL else None,
            "recv": recv if table == COLL else None,
            "request": "requestHandle",
        },
    )


def _cats(report: Report, table: str, pos: pl.Series) -> Any:
    """The cat of the table's calls: one text, or per call for MPI_OTHER_EVENTS (decided once per distinct name)."""
    if table == COLL:
        cat: Any = "mpi_coll"
    elif table == OTHER:
        cat = report.derived(
            "mpi_other_cat",
            lambda v: pl.Series([_other_cat(s or "") for s in v.to_list()], dtype=pl.Enum(list(CATS))),
        ).gather(pos)
        cat = cat.fill_null("other")
    else:
        cat = "mpi_p2p"
    return cat


def _bytes(c: dict[str, np.ndarray]) -> Any:
    """Bytes sent: a point-to-point call's size, else a collective's send size (null where neither)."""
    nbytes = np.where(c["size_null"], c["send"], c["size"])
    nbytes_null = c["size_null"] & c["send_null"]
    return pl.Series(nbytes).set(pl.Series(nbytes_null), None) if nbytes_null.any() else nbytes


def _call_args(c: dict[str, np.ndarray]) -> pl.Series | None:
    """The recorded arguments as JSON objects (the columns with a value somewhere; None: none has)."""
    fields = {key: rows.num(c[col], c[col + "_null"]) for key, col in ARG_COLUMNS if not c[col + "_null"].all()}
    return rows.json_object(fields) if fields else None


def _table(report: Report, table: str, dropped: Counter[str]) -> pl.DataFrame:
    c = _call_columns(report, table)
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = report.derived("name", lambda v: v.cast(pl.Categorical)).gather(pos).fill_null("")
    cat = _cats(report, table, pos)
    out = rows.frame(
        n,
        rows.base(
            n,
            **rows.thread(c),
            name=name,
            src_cat="mpi",
            cat=cat,
            bytes=_bytes(c),
            args=_call_args(c),
        ),
    )
    if c["end_null"].any():  # a call still running when the capture stopped
        dropped["MPI calls without an end"] += int(c["end_null"].sum())
        out = out.filter(~pl.Series(c["end_null"]))
    return out


def frames(report: Report, dropped: Counter[str], warnings: list[str]) -> tuple[list[pl.DataFrame], list[str]]:
    """One frame per MPI table present (the columns of :mod:`.activity`'s frames); and the tables read."""
    out, read = [], []
    for table in MPI_TABLES:
        if table not in report.tables:
            continue
        lacking = [c for c in ("start", "end", "globalTid") if c not in report.columns(table)]
        if lacking:
            warnings.append(
                f"{report.path}: table {table} lacks {', '.join(lacking)} (an nsys version di has not seen): skipped"
            )
            continue
        out.append(_table(report, table, dropped))
        read.append(table)
    return out, read
