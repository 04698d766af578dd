"""Communicators: what each NCCL (or MPI) communicator of the job is made of and how its ranks are connected.

Read from the trace's ``comms`` and ``comm_links`` tables (an NCCL debug log's init and channel lines, merged with
the job), so that ``di analyze nccl.log`` answers what people grep such logs for: which NCCL version, how many ranks
on how many hosts, how many channels, and which transport the traffic inside a node and across nodes takes.

Definitions, per communicator (``comm``, its key in ``comms`` and ``collectives``):

- ``members``: its rows in ``comms`` (the ranks whose init the log shows); ``nranks``: the size it was created with
  (the largest printed); ``init_incomplete``: members whose init started and never completed (``state`` START);
- ``hosts``: distinct hosts of the members; ``max_ranks_per_host``; ``version``: distinct NCCL versions, joined;
  ``nchannels``: the most channels a member built;
- ``intra_node`` / ``inter_node``: the channel connections (``comm_links`` kind ``connection``) between two members
  on one host / on two hosts, each transport as NCCL prints it (``via``: ``P2P/IPC/read``, ``SHM``, ``NET/IB/0``,
  ``NET/Socket/1``) with its count of connections, the most used first (``via (count), ...``); null where the log
  shows none; a connection both ends print (a network one: ``[send]`` and ``[receive]``) counts once;
  ``socket_links``: inter-node connections over sockets (NCCL found no InfiniBand/RoCE device or was told
  not to use it, :data:`SOCKET`), ``shm_links``: intra-node connections through host shared memory (no GPU peer
  access, :data:`SHM`).

Connections whose ends' hosts are unknown (a member without an init line) count in neither ``intra_node`` nor
``inter_node``. Rows: by communicator key.
"""

from __future__ import annotations

import polars as pl

from di.trace import Trace

__all__ = ["COLUMNS", "communicators"]

SOCKET = "NET/Socket"
"""The prefix of ``via`` of NCCL's TCP socket transport: across nodes several times slower than IB/RoCE."""
SHM = "SHM"
"""The ``via`` prefix of NCCL's host shared memory transport: inside a node slower than GPU peer access."""

COLUMNS = {
    "comm": pl.String,
    "version": pl.String,
    "members": pl.Int64,
    "nranks": pl.Int64,
    "init_incomplete": pl.Int64,
    "hosts": pl.Int64,
    "max_ranks_per_host": pl.Int64,
    "nchannels": pl.Int64,
    "intra_node": pl.String,
    "inter_node": pl.String,
    "socket_links": pl.Int64,
    "shm_links": pl.Int64,
}
"""The columns of :func:`communicators`: one row per communicator."""


def _transports(links: pl.DataFrame, name: str) -> pl.DataFrame:
    """Per comm: ``via (count), ...`` of ``links``, the most used first (ties by name), as column ``name``."""
    counts = links.group_by("comm", "via").len().sort("comm", "len", "via", descending=[False, True, False])
    return counts.group_by("comm", maintain_order=True).agg(
        pl.format("{} ({})", pl.col("via").fill_null("?"), "len").str.join(", ").alias(name)
    )


def communicators(trace: Trace) -> pl.DataFrame:
    """Per communicator of ``trace.comms``, its members, hosts, channels and transports (module docstring); empty
    (:data:`COLUMNS`) without communicators."""
    comms = trace.comms
    if not comms.height:
        return pl.DataFrame(schema=COLUMNS)
    per_host = (
        comms.group_by("comm", "host").len().group_by("comm").agg(pl.col("len").max().alias("max_ranks_per_host"))
    )
    out = comms.group_by("comm", maintain_order=True).agg(
        pl.col("version").drop_nulls().unique(maintain_order=True).str.join(", ").alias("version"),
        pl.len().alias("members"),
        pl.col("nranks").max(),
        (pl.col("state") == "START").sum().alias("init_incomplete"),
        pl.col("host").drop_nulls().n_unique().alias("hosts"),
        pl.col("nchannels").max(),
    )
    out = out.join(per_host, on="comm", how="left")
    host = comms.select("comm", pl.col("comm_rank").cast(pl.Int32), "host").unique(["comm", "comm_rank"], keep="first")
    # a network connection is printed by both ends (send, receive): one connection
    links = (
        trace.comm_links.filter(pl.col("kind") == "connection")
        .select("comm", "channel", pl.col("src_rank").cast(pl.Int32), pl.col("dst_rank").cast(pl.Int32), "via")
        .unique(maintain_order=True)
    )
    links = links.join(
        host.rename({"comm_rank": "src_rank", "host": "src_host"}), on=["comm", "src_rank"], how="left"
    ).join(host.rename({"comm_rank": "dst_rank", "host": "dst_host"}), on=["comm", "dst_rank"], how="left")
    known = links.filter(pl.col("src_host").is_not_null() & pl.col("dst_host").is_not_null())
    same = pl.col("src_host") == pl.col("dst_host")
    intra, inter = known.filter(same), known.filter(~same)
    via = pl.col("via").fill_null("")
    flagged = known.group_by("comm").agg(
        (~same & via.str.starts_with(SOCKET)).sum().alias("socket_links"),
        (same & via.str.starts_with(SHM)).sum().alias("shm_links"),
    )
    for part in (_transports(intra, "intra_node"), _transports(inter, "inter_node"), flagged):
        out = out.join(part, on="comm", how="left")
    out = out.with_columns(pl.col("socket_links", "shm_links").fill_null(0))
    return out.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]).sort("comm")
