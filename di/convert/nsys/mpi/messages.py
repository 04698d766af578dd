"""Point-to-point messages from the matched MPI calls (the rules: :mod:`di.convert.nsys.mpi`).

:func:`_messages` takes the call rows of :mod:`.events` (on their communicator,
:func:`~di.convert.nsys.mpi.communicators._on_communicators`) and returns the
``messages`` rows (send, recv, bytes, tag, comm, send_done, recv_post,
src_rank, dst_rank), counting in ``counts`` what it could not match.
"""

from __future__ import annotations

from collections import Counter

import polars as pl

from di.convert.nsys.mpi.events import IRECV, ISEND, RECV, SEND, SENDRECV, WAIT

__all__ = ["WILDCARDS"]

WILDCARDS = "receives from MPI_ANY_SOURCE or with MPI_ANY_TAG matched by order, as MPI matches them by arrival"
WILD_SRC, WILD_TAG = pl.col("remote") < 0, pl.col("tag") < 0
"""A receive from MPI_ANY_SOURCE, with MPI_ANY_TAG (the call's arguments as recorded: negative)."""


def _completions(ev: pl.DataFrame) -> pl.DataFrame:
    """For each Isend/Irecv row: the row of the MPI_Wait* that completed it (null: none found)."""
    posts = ev.filter(pl.col("role").is_in([ISEND, IRECV])).select("row", "loc", "start_ns", "request").sort("start_ns")
    waits = ev.filter(pl.col("role") == WAIT).select("loc", "start_ns", "request", done="row").sort("start_ns")
    if not posts.height or not waits.height:
        return posts.select("row", pl.lit(None, pl.Int64).alias("done"))
    nxt = posts.sort("loc", "request", "start_ns").select(
        "row", next_post=pl.col("start_ns").shift(-1).over("loc", "request")
    )
    same = (
        posts.filter(pl.col("request").is_not_null())
        .join_asof(
            waits.filter(pl.col("request").is_not_null()).with_columns(pl.col("start_ns").alias("wait_ns")),
            on="start_ns",
            by=["loc", "request"],
            strategy="forward",
            check_sortedness=False,
        )
        .join(nxt, on="row", how="left")
        .filter(pl.col("next_post").is_null() | (pl.col("wait_ns") < pl.col("next_post")))
        .select("row", "done")
    )
    out = posts.select("row").join(same, on="row", how="left")
    # then a wait that recorded no handle (MPI_Waitall), then any wait (one that recorded another of its handles)
    for name, which in (("no_handle", waits.filter(pl.col("request").is_null())), ("any", waits)):
        nearest = posts.join_asof(
            which.drop("request"), on="start_ns", by="loc", strategy="forward", check_sortedness=False
        )
        out = out.join(nearest.select("row", pl.col("done").alias(name)), on="row", how="left")
    return out.select("row", done=pl.coalesce("done", "no_handle", "any"))


def _sides(ev: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The send side and the receive side of every call (an MPI_Sendrecv is both), with where each completed."""
    done = _completions(ev)
    ev = ev.join(done, on="row", how="left", maintain_order="left")
    # an MPI_Sendrecv recorded as two rows: the first is the send, the second the receive
    pair = pl.len().over("loc", "start_ns", "end_ns", "role") if ev.height else pl.lit(1)
    nth = pl.int_range(pl.len()).over("loc", "start_ns", "end_ns", "role") if ev.height else pl.lit(0)
    ev = ev.sort("row").with_columns(pair=pair, nth=nth)
    sr = pl.col("role") == SENDRECV
    is_send = pl.col("role").is_in([SEND, ISEND]) | (sr & ((pl.col("pair") == 1) | (pl.col("nth") == 0)))
    is_recv = pl.col("role").is_in([RECV, IRECV]) | (sr & ((pl.col("pair") == 1) | (pl.col("nth") == 1)))
    sends = ev.filter(is_send).select(
        src="rank",
        dst="peer",
        comm="comm",
        tag="tag",
        t="start_ns",
        send="row",
        send_done=pl.when(pl.col("role") == ISEND).then("done"),
        bytes="bytes",
    )
    recvs = ev.filter(is_recv).select(
        dst="rank",
        src="peer",
        comm="comm",
        tag="tag",
        t="start_ns",
        recv=pl.when(pl.col("role") == IRECV).then(pl.coalesce("done", "row")).otherwise("row"),
        recv_post=pl.when(pl.col("role") == IRECV).then("row"),
        remote="remote_rank",
    )
    return sends, recvs


def _usable(sends: pl.DataFrame, recvs: pl.DataFrame, counts: Counter[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The sends and receives that can be matched; the others counted."""
    unusable_s = pl.col("dst").is_null() | (pl.col("dst") < 0) | pl.col("tag").is_null()
    unusable_r = pl.col("tag").is_null() | pl.col("remote").is_null() | (~WILD_SRC & pl.col("src").is_null())
    counts["sends to MPI_PROC_NULL or an unknown rank"] += int(sends.select(unusable_s.sum()).item())
    counts["receives from an unknown rank"] += int(recvs.select(unusable_r.sum()).item())
    return sends.filter(~unusable_s), recvs.filter(~unusable_r)


def _matched(sends: pl.DataFrame, recvs: pl.DataFrame, counts: Counter[str]) -> pl.DataFrame:
    """Exact receives first, then MPI_ANY_SOURCE and/or MPI_ANY_TAG ones in post order against the sends left."""
    parts, left = [], sends
    for key, which in (
        (["src", "dst", "comm", "tag"], ~WILD_SRC & ~WILD_TAG),
        (["dst", "comm", "tag"], WILD_SRC & ~WILD_TAG),
        (["src", "dst", "comm"], ~WILD_SRC & WILD_TAG),
        (["dst", "comm"], WILD_SRC & WILD_TAG),
    ):
        part = _kth(left, recvs.filter(which), key)
        parts.append(part)
        left = left.join(part.select("send"), on="send", how="anti")
        if len(key) < 4:
            counts[WILDCARDS] += part.height
    return pl.concat(parts)


def _messages(ev: pl.DataFrame, counts: Counter[str]) -> pl.DataFrame:
    sends, recvs = _usable(*_sides(ev), counts)
    matched = _matched(sends, recvs, counts)
    counts["sends without a matching receive"] += sends.height - matched.height
    counts["receives without a matching send"] += recvs.height - matched.height
    return matched.sort("send").select(
        "send", "recv", "bytes", "tag", "comm", "send_done", "recv_post", src_rank="src", dst_rank="dst"
    )


def _kth(sends: pl.DataFrame, recvs: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """The k-th send of each ``key`` (by start) matched with the k-th receive of it (by post)."""
    s = sends.sort("t", "send").with_columns(k=pl.int_range(pl.len()).over(key))
    r = recvs.select(*key, "t", "recv", "recv_post").sort("t", "recv").with_columns(k=pl.int_range(pl.len()).over(key))
    return s.join(r.drop("t"), on=[*key, "k"], how="inner", nulls_equal=True).select(
        "src", "dst", "comm", "tag", "send", "recv", "bytes", "send_done", "recv_post"
    )
