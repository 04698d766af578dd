"""How fast collectives moved their data: the bandwidth of each call as nccl-tests reports it, and once every member
had arrived.

The input is the trace's ``collectives`` (one row per rank's part of a collective instance, matched across ranks
by communicator and sequence at load; for NCCL in Kineto traces the parts are the collective kernels, for MPI the
calls). Definitions (times int64 ns, sizes int64 bytes, bandwidths in GB/s = bytes per ns, 1 GB = 1e9 bytes):

- A part's **call** is its event, start to end, waiting for late members included (what nccl-tests times on each
  rank). An instance's **skew** is its last member's start less its first member's; its **transfer** is from its
  last member's start to its last member's end: the time the data moved once all had arrived (Scalasca's wait at
  N x N is the rest). An instance with a member missing from the trace has neither (its last arrival is
  unknown).
- Groups: operation, bytes (each rank's part), ranks (the communicator's size, else the members seen) and
  **scope**: ``intra-node`` when every member's rank runs on one host, ``inter-node`` when on several, null when
  the trace names no host. Per group: ``calls`` (instances), ``parts``, ``mean_call_ns``, ``mean_skew_ns`` and
  ``mean_transfer_ns`` (over the instances that have one).
- ``size_bytes``: the buffer nccl-tests names the size: ``bytes``, times ``ranks`` for allgather (its output is
  every rank's part). ``algbw_gbps = size_bytes / mean_call_ns``; ``busbw_gbps = algbw_gbps x factor``, the factor
  per operation of :data:`BUSBW_FACTORS` (NVIDIA's nccl-tests ``doc/PERFORMANCE.md``, n = ``ranks``; null where it
  gives none); ``transfer_busbw_gbps``: the same over ``mean_transfer_ns``: the links' speed, which the skew does
  not lower. A busbw far under the transfer's is a collective waiting for late ranks (see the wait states); a
  transfer busbw far under the links' (NVLink, InfiniBand) is the network or NCCL's choice of it.
"""

from __future__ import annotations

import polars as pl

from di.engine.window import EventFrame

__all__ = [
    "ALGBW_FORMULA",
    "BUSBW_FACTORS",
    "BUSBW_FORMULA",
    "busbw_factor",
    "collective_rows",
    "collective_rows_schema",
    "comm_bandwidth",
    "in_order",
    "nccl_size",
]

BUSBW_FACTORS = {
    "allreduce": "2(n-1)/n",
    "allgather": "(n-1)/n",
    "reduce_scatter": "(n-1)/n",
    "alltoall": "(n-1)/n",
    "broadcast": "1",
    "reduce": "1",
    "send": "1",
    "recv": "1",
}
"""busbw / algbw per operation, from nccl-tests doc/PERFORMANCE.md; n = ranks in the collective."""
ALGBW_FORMULA = "algbw = S / t: S the message size in bytes (allgather: n x each rank's part), t the mean duration of a rank's part; bytes/ns = GB/s"
BUSBW_FORMULA = "busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md): " + ", ".join(
    f"{k} {v}" for k, v in BUSBW_FACTORS.items()
)
SCOPES = ("intra-node", "inter-node")

_ROWS = {
    "rank": pl.Int32,
    "instance": pl.Int64,
    "op": pl.String,
    "bytes": pl.Int64,
    "group_size": pl.Int64,
    "host": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "selected": pl.Boolean,
}
_GROUPS = {
    "op": pl.String,
    "bytes": pl.Int64,
    "ranks": pl.Int64,
    "scope": pl.String,
    "calls": pl.Int64,
    "parts": pl.Int64,
    "size_bytes": pl.Int64,
    "mean_call_ns": pl.Int64,
    "mean_skew_ns": pl.Int64,
    "mean_transfer_ns": pl.Int64,
    "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64,
    "transfer_busbw_gbps": pl.Float64,
    "busbw_factor": pl.String,
}


def busbw_factor(op: pl.Expr, n: pl.Expr) -> pl.Expr:
    """The busbw factor of :data:`BUSBW_FACTORS` as a float expression (null: none)."""
    frac = (n - 1).cast(pl.Float64) / n.cast(pl.Float64)
    return (
        pl.when(op == "allreduce")
        .then(2 * frac)
        .when(op.is_in(["allgather", "reduce_scatter", "alltoall"]))
        .then(frac)
        .when(op.is_in(["broadcast", "reduce", "send", "recv"]))
        .then(pl.lit(1.0))
        .otherwise(pl.lit(None, pl.Float64))
    )


def nccl_size(op: pl.Expr, nbytes: pl.Expr, ranks: pl.Expr) -> pl.Expr:
    """The size nccl-tests names a collective by: each rank's part, times the ranks for allgather (whose output is
    every rank's part)."""
    return nbytes * pl.when(op == "allgather").then(ranks).otherwise(1)


def collective_rows(frame: EventFrame, ranks: list[int] | None = None) -> pl.DataFrame:
    """One row per part of a collective (of ``ranks`` only, when given: the parts of several processes put together
    are the whole job's); a part without an instance is an instance of its own.

    Returns:
        rank, instance, op, bytes, group_size, host (of the rank, null when unnamed), start_ns, end_ns, selected
        (its event is in the window).
    """
    coll = frame.trace.collectives.filter(pl.col("op") != "barrier")
    if not coll.height:
        return pl.DataFrame(schema=_ROWS)
    event = coll.get_column("event").to_numpy()
    rows = coll.select(
        pl.col("instance").fill_null(-1 - pl.col("event")),  # an unmatched part is a call of its own
        "op",
        "bytes",
        "group_size",
        pl.Series("rank", frame.rank[event], pl.Int32),
        pl.Series("start_ns", frame.start_ns[event]),
        pl.Series("end_ns", frame.end_ns[event]),
        pl.Series("selected", frame.selected[event]),
    ).join(_hosts(frame), on="rank", how="left")
    if ranks is not None:
        rows = rows.filter(pl.col("rank").is_in(pl.Series(ranks, dtype=pl.Int32).implode()))
    return rows.select(*(pl.col(c).cast(t) for c, t in _ROWS.items()))


def collective_rows_schema() -> dict[str, pl.DataType]:
    """The columns of :func:`collective_rows`."""
    return dict(_ROWS)


def _instances(rows: pl.DataFrame) -> pl.DataFrame:
    """The window's parts with their instance's ranks, first and last member's start, last member's end, whether
    every member is in the trace and on how many hosts they run (null when one is unknown)."""
    members = pl.col("rank").n_unique().over("instance")
    n = pl.coalesce(pl.col("group_size").cast(pl.Int64), members.cast(pl.Int64))
    return rows.with_columns(
        n.alias("ranks"),
        pl.col("start_ns").min().over("instance").alias("first_ns"),
        pl.col("start_ns").max().over("instance").alias("last_ns"),
        pl.col("end_ns").max().over("instance").alias("finish_ns"),
        (members >= n).alias("complete"),
        pl.when(pl.col("host").is_null().any().over("instance"))
        .then(None)
        .otherwise(pl.col("host").n_unique().over("instance"))
        .cast(pl.Int64)
        .alias("hosts"),
    ).filter(pl.col("selected"))


def _hosts(frame: EventFrame) -> pl.DataFrame:
    """rank, host: the host of each rank's timelines (null where none is named or they disagree)."""
    loc = frame.trace.locations.filter(pl.col("rank").is_not_null())
    return loc.group_by(pl.col("rank").cast(pl.Int32)).agg(
        pl.when(pl.col("host").drop_nulls().n_unique() == 1).then(pl.col("host").drop_nulls().first()).alias("host")
    )


def comm_bandwidth(rows: pl.DataFrame) -> pl.DataFrame:
    """Per operation, bytes, ranks and scope, the calls' and the transfers' bandwidth (see the module docstring),
    from :func:`collective_rows` of every rank. An instance's arrivals and end are its members', those outside the
    window included; its parts in the window are counted."""
    parts = _instances(rows)
    if not parts.height:
        return pl.DataFrame(schema=_GROUPS)
    scope = pl.when(pl.col("hosts") == 1).then(pl.lit(SCOPES[0])).when(pl.col("hosts") > 1).then(pl.lit(SCOPES[1]))
    keys = ["op", "bytes", "ranks", "scope"]
    parts = parts.with_columns(scope.alias("scope"), (pl.col("end_ns") - pl.col("start_ns")).alias("call_ns"))
    instances = (
        parts.group_by("instance", *keys)
        .agg(
            pl.col("first_ns").first(),
            pl.col("last_ns").first(),
            pl.col("finish_ns").first(),
            pl.col("complete").first(),
        )
        .with_columns(
            pl.when(pl.col("complete")).then(pl.col("last_ns") - pl.col("first_ns")).alias("skew_ns"),
            pl.when(pl.col("complete") & (pl.col("finish_ns") > pl.col("last_ns")))
            .then(pl.col("finish_ns") - pl.col("last_ns"))
            .alias("transfer_ns"),
        )
        .group_by(keys)
        .agg(
            pl.len().cast(pl.Int64).alias("calls"),
            pl.col("skew_ns").mean().round().cast(pl.Int64).alias("mean_skew_ns"),
            pl.col("transfer_ns").mean().round().cast(pl.Int64).alias("mean_transfer_ns"),
        )
    )
    calls = parts.group_by(keys).agg(
        pl.len().cast(pl.Int64).alias("parts"), pl.col("call_ns").mean().round().cast(pl.Int64).alias("mean_call_ns")
    )
    size = nccl_size(pl.col("op"), pl.col("bytes"), pl.col("ranks"))
    factor = busbw_factor(pl.col("op"), pl.col("ranks"))

    def gbps(ns: str) -> pl.Expr:
        return pl.when(pl.col(ns) > 0).then(pl.col("size_bytes") / pl.col(ns))

    return in_order(
        calls.join(instances, on=keys, how="left", nulls_equal=True)
        .with_columns(size.alias("size_bytes"))
        .with_columns(
            gbps("mean_call_ns").alias("algbw_gbps"),
            (gbps("mean_call_ns") * factor).alias("busbw_gbps"),
            (gbps("mean_transfer_ns") * factor).alias("transfer_busbw_gbps"),
            pl.col("op").replace_strict(BUSBW_FACTORS, default=None, return_dtype=pl.String).alias("busbw_factor"),
        )
        .select(*(pl.col(c).cast(t) for c, t in _GROUPS.items()))
    )


def in_order(groups: pl.DataFrame | None) -> pl.DataFrame:
    """The groups by total call time (calls x mean), largest first, then by operation and size."""
    if groups is None:
        return pl.DataFrame(schema=_GROUPS)
    total = pl.col("parts") * pl.col("mean_call_ns")
    return groups.sort(
        [total, "op", "bytes", "ranks", "scope"], descending=[True, False, False, False, False], nulls_last=True
    )
