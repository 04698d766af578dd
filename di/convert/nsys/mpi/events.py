"""The nsys MPI call events of a trace, as rows to match: their rank, recorded arguments and role.

:func:`_calls` picks the ``mpi`` events of the nsys sources that read MPI
tables, with their location's rank; :func:`_with_roles` decodes their ``args``
(:data:`ARGS`, a space in a key becoming ``_``) and gives each its role in
matching (:func:`_role`), dropping the calls that play none.
"""

from __future__ import annotations

import polars as pl

from di.capture.matching import COLLECTIVE_OPS, RECV_OPS, SEND_OPS, base_name
from di.convert.nsys.mpi.calls import MPI_TABLES
from di.trace import Trace

__all__ = ["ARGS", "COLLECTIVE", "IRECV", "ISEND", "RECV", "SEND", "SENDRECV", "WAIT"]

SEND, ISEND, RECV, IRECV, SENDRECV, WAIT, COLLECTIVE = 1, 2, 3, 4, 5, 6, 7
"""Roles of MPI calls in matching (0: none)."""
ARGS = pl.Struct(
    {
        "comm handle": pl.Int64,
        "tag": pl.Int64,
        "remote rank": pl.Int64,
        "root": pl.Int64,
        "request": pl.Int64,
        "send bytes": pl.Int64,
        "recv bytes": pl.Int64,
    }
)


def _role(name: str) -> int:
    plain = name.removesuffix("_c")
    if plain in ("MPI_Sendrecv", "MPI_Sendrecv_replace"):
        return SENDRECV
    if plain in SEND_OPS:
        return ISEND if plain.startswith("MPI_I") else SEND
    if plain in RECV_OPS and plain.startswith("MPI_"):
        return RECV
    if plain == "MPI_Irecv":
        return IRECV
    if plain.startswith("MPI_Wait"):
        return WAIT
    if base_name(name) in COLLECTIVE_OPS:
        return COLLECTIVE
    return 0


def _sources(trace: Trace) -> list[int]:
    """Indexes of the nsys sources of ``trace`` that read MPI tables."""
    return [
        i
        for i, s in enumerate(trace.meta.get("sources", []))
        if s.get("format") == "nsys" and set((s.get("info") or {}).get("tables_read", ())) & set(MPI_TABLES)
    ]


def _calls(trace: Trace, sources: list[int]) -> pl.DataFrame:
    """The ``mpi`` events of ``sources``: their row in the events table and their location's rank."""
    locs = trace.locations.filter(pl.col("source").is_in(sources)).select("loc", pl.col("rank").cast(pl.Int64))
    return (
        trace.events.select("loc", "start_ns", "end_ns", "name", "src_cat", "args", "bytes")
        .with_row_index("row")
        .filter(pl.col("src_cat") == "mpi")
        .join(locs, on="loc", how="inner")
    )


def _with_roles(ev: pl.DataFrame) -> pl.DataFrame:
    """``ev`` with its arguments as columns and its ``role`` (decided once per distinct name), calls of none dropped."""
    names = ev.get_column("name").unique()
    roles = dict(zip(names.cast(pl.String).to_list(), [_role(n or "") for n in names.cast(pl.String).to_list()]))
    ev = ev.with_columns(
        pl.col("row").cast(pl.Int64),
        pl.col("name").cast(pl.String),
        pl.col("args").fill_null("{}").str.json_decode(ARGS).alias("a"),
    ).unnest("a")
    ev = ev.rename({c: c.replace(" ", "_") for c in ARGS.to_schema()}).with_columns(
        pl.col("name").replace_strict(roles, default=0, return_dtype=pl.Int8).alias("role")
    )
    return ev.filter(pl.col("role") > 0)
