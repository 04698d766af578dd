"""Collective calls -> ``collectives`` rows (the rules: :mod:`di.convert.nsys.mpi`).

:func:`_collectives` gives each collective call of :mod:`.events` (on its
communicator) its ``seq`` per rank and communicator, its op
(:data:`di.capture.matching.COLLECTIVE_OPS`), root as a world rank, bytes sent,
group size and ranks; ``instance`` is left to :func:`di.merge.assign_instances`.
"""

from __future__ import annotations

import polars as pl

from di.capture.matching import COLLECTIVE_OPS, base_name
from di.convert.nsys.mpi.events import COLLECTIVE
from di.convert.nsys.ranks import MAX_RANK

__all__: list[str] = []


def _group_ranks(members: pl.DataFrame) -> pl.DataFrame:
    """uid -> JSON list of its members' world ranks in communicator order, where every member is known."""
    full = members.sort("uid", "local").group_by("uid", maintain_order=True).agg("local", "world")
    full = full.filter(pl.col("local").list.len() == pl.col("local").list.max() + 1)
    return full.select("uid", pl.format("[{}]", pl.col("world").cast(pl.List(pl.String)).list.join(",")).alias("ranks"))


def _collectives(ev: pl.DataFrame, members: pl.DataFrame, world_size: int | None) -> pl.DataFrame:
    c = ev.filter(pl.col("role") == COLLECTIVE).sort("start_ns", "row")
    c = c.join(_group_ranks(members), on="uid", how="left", maintain_order="left")
    world = f"[{','.join(map(str, range(world_size)))}]" if world_size and world_size <= 65536 else None
    names = c.get_column("name").unique()  # an op per distinct call name, not per call
    ops = pl.Series([COLLECTIVE_OPS.get(base_name(n), "other") for n in names.to_list()], dtype=pl.String)
    op = c.get_column("name").replace_strict(names, ops, return_dtype=pl.String)
    return (
        c.with_columns(op=op, seq=pl.int_range(pl.len()).over("rank", "comm"))
        .sort("row")
        .select(
            pl.lit(None, pl.Int64).alias("instance"),
            pl.col("row").alias("event"),
            pl.col("rank").cast(pl.Int32),
            "comm",
            "seq",
            "op",
            pl.when(pl.col("root_world").is_between(0, MAX_RANK)).then("root_world").cast(pl.Int32).alias("root"),
            pl.when(pl.col("send_bytes") >= 0).then("send_bytes").alias("bytes"),
            pl.lit(None, pl.String).alias("dtype"),
            pl.coalesce("size", pl.when(pl.col("comm") == "MPI_COMM_WORLD").then(pl.lit(world_size, pl.Int64))).alias(
                "group_size"
            ),
            pl.when(pl.col("ranks").str.count_matches(",") + 1 == pl.col("size"))  # all members known
            .then("ranks")
            .when(pl.col("comm") == "MPI_COMM_WORLD")
            .then(pl.lit(world, pl.String))
            .alias("group_ranks"),
        )
    )
