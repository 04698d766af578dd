"""Collectives of one run grouped by operation and message size, with nccl-tests' bandwidths.

One row per (op, bytes): ``parts`` (rank parts: one per member rank and call),
``calls`` (collective instances), ``ranks`` (members per call: the
communicator's size where the trace records it, else the ranks seen in the
instance), ``total_ns`` and ``mean_ns`` of the parts' durations, and the
bandwidths of NVIDIA's nccl-tests (``doc/PERFORMANCE.md``):

- ``algbw_gbps = size_bytes / mean_ns`` (bytes per ns = GB/s, 1 GB = 1e9 bytes),
  with ``size_bytes`` the buffer nccl-tests names the size: ``bytes`` as the
  trace records each rank's part (elements x dtype size), times ``ranks`` for
  allgather (its output is every rank's part);
- ``busbw_gbps = algbw_gbps * factor``, the factor per operation in
  :data:`di.engine.comm_bandwidth.BUSBW_FACTORS` (n = ``ranks``); null where nccl-tests gives none.

The duration of a part is that rank's whole call, waiting for late members
included, as nccl-tests times a collective on each rank (``di analyze``'s
:mod:`di.engine.comm_bandwidth` adds the bandwidth once all members arrived).
"""

from __future__ import annotations

import polars as pl

from di.engine.comm_bandwidth import ALGBW_FORMULA, BUSBW_FACTORS, BUSBW_FORMULA, busbw_factor, nccl_size
from di.trace import Trace

__all__ = ["ALGBW_FORMULA", "BUSBW_FACTORS", "BUSBW_FORMULA", "collective_groups"]


def collective_groups(trace: Trace, events: pl.DataFrame) -> pl.DataFrame:
    """op, bytes, parts, calls, ranks, total_ns, mean_ns, size_bytes, algbw_gbps, busbw_gbps, busbw_factor
    of the collectives whose event is among ``events`` (window events with ``row``)."""
    coll = trace.collectives
    if not coll.height:
        return pl.DataFrame(
            schema={
                "op": pl.String,
                "bytes": pl.Int64,
                "parts": pl.Int64,
                "calls": pl.Int64,
                "ranks": pl.Int64,
                "total_ns": pl.Int64,
                "mean_ns": pl.Int64,
                "size_bytes": pl.Int64,
                "algbw_gbps": pl.Float64,
                "busbw_gbps": pl.Float64,
                "busbw_factor": pl.String,
            }
        )
    dur = events.select(
        pl.col("row").cast(pl.Int64).alias("event"), (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")
    )
    parts = coll.join(dur, on="event", how="inner").with_columns(
        pl.col("rank").n_unique().over("instance").alias("seen"), pl.col("instance").fill_null(-1 - pl.col("event"))
    )  # an unmatched part is a call of its own
    parts = parts.with_columns(
        pl.coalesce(pl.col("group_size").cast(pl.Int64), pl.col("seen").cast(pl.Int64)).alias("n")
    )
    groups = parts.group_by("op", "bytes").agg(
        pl.len().cast(pl.Int64).alias("parts"),
        pl.col("instance").n_unique().cast(pl.Int64).alias("calls"),
        pl.col("n").max().alias("ranks"),
        pl.col("dur_ns").sum().alias("total_ns"),
    )
    groups = groups.with_columns(
        (pl.col("total_ns") / pl.col("parts")).round().cast(pl.Int64).alias("mean_ns"),
        nccl_size(pl.col("op"), pl.col("bytes"), pl.col("ranks")).alias("size_bytes"),
    )
    algbw = pl.when(pl.col("mean_ns") > 0).then(pl.col("size_bytes") / pl.col("mean_ns"))
    return (
        groups.with_columns(algbw.alias("algbw_gbps"))
        .with_columns(
            (pl.col("algbw_gbps") * busbw_factor(pl.col("op"), pl.col("ranks"))).alias("busbw_gbps"),
            pl.col("op").replace_strict(BUSBW_FACTORS, default=None, return_dtype=pl.String).alias("busbw_factor"),
        )
        .sort("op", "bytes", nulls_last=True)
    )
