"""MPI point-to-point matching and collective rows from OTF2 records (vectorised, polars).

Input: a frame of records with columns ``kind, ts_ns, a, b, c, d, e, loc,
rank, event`` (``event`` = the row in ``events`` the record belongs to: the
innermost region open when it was recorded, see :mod:`timeline`).

Messages: a send (MpiSend, MpiIsend) and a receive (MpiRecv, MpiIrecv)
match when communicator, sender rank, receiver rank and tag are equal and
they are the k-th of that key on both sides: sends in order of their record,
receives in order of their post (the MpiIrecvRequest of the same request id
for MpiIrecv, the MpiRecv itself otherwise), as MPI's non-overtaking rule
says. Peer ranks in the records are ranks within the communicator; they are
mapped to global ranks through the communicator's group. The send event is
the region holding the send record (MPI_Send, MPI_Isend); the receive event
the region holding the receive record (MPI_Recv, or the MPI_Wait/Test that
completed an MPI_Irecv). Non-blocking ends are marked as the capture ingest
marks them: ``send_done`` is the region holding the MpiIsendComplete of the
Isend's request (the first one on its location at or after the Isend),
``recv_post`` the region holding the Irecv's MpiIrecvRequest; both null for
blocking calls.

Collectives: one row per MpiCollectiveEnd; ``seq`` counts each rank's
collectives per communicator in time order, and ``instance`` pairs the k-th
of every member (:func:`di.merge.assign_instances`).
"""

from __future__ import annotations

from typing import Any

import orjson
import polars as pl

from di.convert.otf2 import clib
from di.convert.otf2 import records as R
from di.convert.otf2.categories import COLLECTIVE_OPS
from di.merge import assign_instances

KEY = ["comm", "src", "dst", "tag"]


def _comm_frames(comms: dict[int, dict[str, Any]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(comm ref -> name, size, ranks JSON), (comm ref, local rank -> global rank)."""
    info = pl.DataFrame(
        {
            "comm_ref": list(comms),
            "comm": [c["name"] for c in comms.values()],
            "group_size": [_size(c["group_ranks"]) for c in comms.values()],
            "group_ranks": [_text(c["group_ranks"]) for c in comms.values()],
        },
        schema={"comm_ref": pl.Int64, "comm": pl.String, "group_size": pl.Int32, "group_ranks": pl.String},
    )
    pairs = [(ref, i, r) for ref, c in comms.items() for i, r in enumerate(c["ranks"])]
    members = pl.DataFrame(pairs, schema={"comm_ref": pl.Int64, "local": pl.Int64, "global": pl.Int64}, orient="row")
    return info, members


def _size(ranks: list[int] | str) -> int | None:
    return (len(orjson.loads(ranks)) if isinstance(ranks, str) else len(ranks)) or None


def _text(ranks: list[int] | str) -> str | None:
    return ranks if isinstance(ranks, str) else orjson.dumps(ranks).decode() if ranks else None


def _global_peer(df: pl.DataFrame, members: pl.DataFrame) -> pl.DataFrame:
    """Column ``peer``: the global rank of local rank ``a`` in communicator ``b`` (``a`` itself when unknown)."""
    df = df.join(members, left_on=["b", "a"], right_on=["comm_ref", "local"], how="left")
    return df.with_columns(pl.col("global").fill_null(pl.col("a")).alias("peer")).drop("global")


def messages(rec: pl.DataFrame, comms: dict[int, dict[str, Any]]) -> tuple[pl.DataFrame, dict[str, int]]:
    """Matched messages (send, recv, bytes, tag, comm) and the unmatched counts."""
    info, members = _comm_frames(comms)
    p2p = rec.filter(pl.col("kind").is_in([R.MPI_SEND, R.MPI_ISEND, R.MPI_RECV, R.MPI_IRECV]))
    p2p = _global_peer(p2p, members)
    sends = p2p.filter(pl.col("kind").is_in([R.MPI_SEND, R.MPI_ISEND])).select(
        pl.col("b").alias("comm_ref"), pl.col("rank").cast(pl.Int64).alias("src"), pl.col("peer").alias("dst"),
        pl.col("c").alias("tag"), pl.col("d").alias("bytes"), pl.col("event").alias("send"), pl.col("ts_ns").alias("order_ns"),
        pl.col("row"), "loc", pl.when(pl.col("kind") == R.MPI_ISEND).then(pl.col("e")).otherwise(None).alias("req"),
    )
    dones = rec.filter(pl.col("kind") == R.MPI_ISEND_COMPLETE).select(
        "loc", pl.col("e").alias("req"), pl.col("ts_ns").alias("done_ns"), pl.col("event").alias("send_done")).sort("done_ns")
    sends = sends.sort("order_ns").join_asof(dones, left_on="order_ns", right_on="done_ns", by=["loc", "req"], strategy="forward",
                                             check_sortedness=False)
    posts = rec.filter(pl.col("kind") == R.MPI_IRECV_REQUEST).select(
        "loc", pl.col("e").alias("req"), pl.col("ts_ns").alias("post_ns"), pl.col("event").alias("recv_post")).sort("post_ns")
    recvs = p2p.filter(pl.col("kind").is_in([R.MPI_RECV, R.MPI_IRECV])).with_columns(
        pl.when(pl.col("kind") == R.MPI_IRECV).then(pl.col("e")).otherwise(None).alias("req")
    ).sort("ts_ns")
    if posts.height:
        recvs = recvs.join_asof(posts, left_on="ts_ns", right_on="post_ns", by=["loc", "req"], strategy="backward", check_sortedness=False)
    else:
        recvs = recvs.with_columns(pl.lit(None, pl.Int64).alias("post_ns"), pl.lit(None, pl.Int64).alias("recv_post"))
    recvs = recvs.select(
        pl.col("b").alias("comm_ref"), pl.col("peer").alias("src"), pl.col("rank").cast(pl.Int64).alias("dst"),
        pl.col("c").alias("tag"), pl.col("event").alias("recv"), pl.col("post_ns").fill_null(pl.col("ts_ns")).alias("order_ns"),
        pl.col("row"), "recv_post",
    )
    key = ["comm_ref", "src", "dst", "tag"]
    sends = sends.sort("order_ns", "row").with_columns(pl.int_range(pl.len()).over(key).alias("k"))
    recvs = recvs.sort("order_ns", "row").with_columns(pl.int_range(pl.len()).over(key).alias("k"))
    matched = sends.join(recvs.select(*key, "k", "recv", "recv_post"), on=[*key, "k"], how="inner")
    matched = matched.join(info.select("comm_ref", "comm"), on="comm_ref", how="left")
    out = matched.sort("send").select("send", "recv", "bytes", "tag", "comm",
                                      *(pl.when(pl.col(c) >= 0).then(pl.col(c)).alias(c) for c in ("send_done", "recv_post")))
    unmatched = {"unmatched_mpi_send": sends.height - matched.height, "unmatched_mpi_recv": recvs.height - matched.height}
    return out, {k: v for k, v in unmatched.items() if v}


OWN_COLLECTIVE_ATTRIBUTES = {"di.dtype": "dtype", "di.op": "op", "di.group_size": "group_size", "di.group_ranks": "group_ranks"}
"""Attributes di's writer puts on MpiCollectiveEnd -> the collectives column they restore."""


def collectives(rec: pl.DataFrame, comms: dict[int, dict[str, Any]], attributes: dict[int, tuple[str, str]], strings: dict[int, str]) -> pl.DataFrame:
    """One row per MpiCollectiveEnd (schema ``collectives``); columns di's writer stored as attributes restored from them."""
    info, members = _comm_frames(comms)
    names = _op_names()
    ops = pl.DataFrame({"a": list(names), "otf2_op": list(names.values())}, schema={"a": pl.Int64, "otf2_op": pl.String})
    coll = rec.filter(pl.col("kind") == R.COLL_END).join(ops, on="a", how="left")
    coll = coll.join(members, left_on=["b", "c"], right_on=["comm_ref", "local"], how="left")
    coll = coll.join(info, left_on="b", right_on="comm_ref", how="left").sort("rank", "ts_ns", "row")
    own = {ref: name for ref, (name, _) in attributes.items() if name in OWN_COLLECTIVE_ATTRIBUTES}
    for ref, name in own.items():
        got = rec.filter((pl.col("kind") == R.ATTRIBUTE) & (pl.col("a") == ref))
        value = pl.col("c") if name == "di.group_size" else (pl.col("c") & 0xFFFFFFFF).replace_strict(strings, default=None, return_dtype=pl.String)
        coll = coll.join(got.select(pl.col("head").alias("row"), value.alias(name)), on="row", how="left")
    for name in OWN_COLLECTIVE_ATTRIBUTES:
        if name not in coll.columns:
            coll = coll.with_columns(pl.lit(None, pl.Int64 if name == "di.group_size" else pl.String).alias(name))
    flag = pl.lit(bool(own))
    out = coll.select(
        pl.lit(None, pl.Int64).alias("instance"),
        pl.col("event"),
        pl.col("rank"),
        pl.col("comm"),
        pl.int_range(pl.len()).over("rank", "comm").cast(pl.Int64).alias("seq"),
        pl.when(flag).then(pl.col("di.op")).otherwise(pl.col("otf2_op").replace_strict(COLLECTIVE_OPS, default="other")).alias("op"),
        pl.when(pl.col("c") == clib.UNDEFINED_UINT32).then(None).otherwise(pl.col("global").fill_null(pl.col("c"))).cast(pl.Int32).alias("root"),
        pl.col("d").alias("bytes"),
        pl.col("di.dtype").alias("dtype"),
        pl.when(flag).then(pl.col("di.group_size")).otherwise(pl.col("group_size")).cast(pl.Int32).alias("group_size"),
        pl.when(flag).then(pl.col("di.group_ranks")).otherwise(pl.col("group_ranks")).alias("group_ranks"),
    )
    return assign_instances(out)


def _op_names() -> dict[int, str]:
    """OTF2_CollectiveOp value -> its name (``11`` -> ``"ALLREDUCE"``)."""
    import _otf2

    return {int(v.value): k[len("COLLECTIVE_OP_"):] for k, v in vars(_otf2).items() if k.startswith("COLLECTIVE_OP_")}


def collective_args(rec: pl.DataFrame) -> pl.DataFrame:
    """(event, otf2 op name, bytes received) of every collective, for the event's args."""
    names = _op_names()
    coll = rec.filter(pl.col("kind") == R.COLL_END)
    return coll.select("event", pl.col("a").replace_strict(names, default="?").alias("collective_op"), pl.col("e").alias("bytes_received"))
