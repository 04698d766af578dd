"""MPI matching at ingest: communicators, point-to-point messages, collective instances.

Definitions:

* A communicator's id is job-wide (the shim agrees on it when the communicator
  is created); its members are world ranks, in communicator rank order.
* A message is the k-th send from world rank s to world rank d on communicator
  c with tag t, matched with the k-th receive of that signature on d, sends
  ordered by post time on s and receives by post time on d (MPI's
  non-overtaking rule). A receive's source and tag are the ones its status
  reported, so wildcard receives match like the others. ``send`` is the row of
  the send call (blocking, or the Isend post) and ``recv`` the row where the
  data arrived (the blocking receive, or the Wait/Test that completed an
  Irecv); ``send_done`` and ``recv_post`` add the other end of nonblocking
  ones. ``bytes`` is what the receiver got.
* A collective instance is the i-th collective call on communicator c: one
  row per member rank, the same ``instance`` for all of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl

from di.capture import shard

SEND_OPS = {
    "MPI_Send",
    "MPI_Ssend",
    "MPI_Bsend",
    "MPI_Rsend",
    "MPI_Isend",
    "MPI_Issend",
    "MPI_Ibsend",
    "MPI_Irsend",
    "MPI_Sendrecv",
    "MPI_Sendrecv_replace",
    "ncclSend",
}
RECV_OPS = {
    "MPI_Recv",
    "MPI_Mrecv",
    "ncclRecv",
}  # blocking receives (an NCCL receive has no tag: its `tag` is the count)
COLLECTIVE_OPS = {  # base name (no I prefix, no _c) -> canonical op of the collectives table
    "MPI_Barrier": "barrier",
    "MPI_Bcast": "broadcast",
    "MPI_Reduce": "reduce",
    "MPI_Allreduce": "allreduce",
    "MPI_Allgather": "allgather",
    "MPI_Allgatherv": "allgather",
    "MPI_Alltoall": "alltoall",
    "MPI_Alltoallv": "alltoall",
    "MPI_Gather": "gather",
    "MPI_Gatherv": "gather",
    "MPI_Scatter": "scatter",
    "MPI_Scatterv": "scatter",
    "MPI_Reduce_scatter": "reduce_scatter",
    "MPI_Reduce_scatter_block": "reduce_scatter",
    "ncclAllReduce": "allreduce",
    "ncclBroadcast": "broadcast",
    "ncclReduce": "reduce",
    "ncclAllGather": "allgather",
    "ncclReduceScatter": "reduce_scatter",
    "ncclAlltoAll": "alltoall",  # NCCL shim and profiler plugin
    "ncclGather": "gather",
    "ncclScatter": "scatter",
    "ncclCollective": "other",
}
WORLD_ID = 0
NONE_ID = (1 << 64) - 1  # MPI_COMM_NULL: calls on no communicator (Wait, Test)
UNKNOWN_BIT = np.uint64(1 << 63)
NCCL_BIT = 1 << 62  # NCCL communicator ids (shim/nccl.c)


def base_name(op: str) -> str:
    """MPI_Iallreduce_c -> MPI_Allreduce (blocking, classic-count name)."""
    name = op.removesuffix("_c")
    if name.startswith("MPI_I") and len(name) > 5:
        blocking = "MPI_" + name[5].upper() + name[6:]
        if blocking in COLLECTIVE_OPS:
            return blocking
    return name


def _op_sets() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Boolean masks over op ids: send, blocking receive, Irecv, collective; and canonical op names."""
    names = shard.op_names()
    bases = [base_name(n) for n in names]
    send = np.array([b in SEND_OPS or n.removesuffix("_c") in SEND_OPS for n, b in zip(names, bases)])
    recv = np.array([n.removesuffix("_c") in RECV_OPS for n in names])
    irecv = np.array([n.removesuffix("_c") in ("MPI_Irecv", "MPI_Imrecv") for n in names])
    coll = np.array([COLLECTIVE_OPS.get(b, "") for b in bases], dtype=object)
    return send, recv, irecv, coll


@dataclass
class Communicators:
    """Communicator id -> member world ranks (from the shims' COMM records)."""

    members: dict[int, np.ndarray]

    @classmethod
    def from_records(cls, cols: dict[str, np.ndarray], strings: list[str]) -> Communicators:
        """From the COMM records (``cols["text"]``: global string ids into ``strings``)."""
        members: dict[int, np.ndarray] = {}
        idx = np.flatnonzero(cols["kind"] == shard.KIND_COMM)
        ids, first = np.unique(cols["comm"][idx], return_index=True)
        for cid, k in zip(ids, idx[first]):
            text = strings[int(cols["text"][k])]
            if text:
                members[int(cid)] = np.array([int(x) for x in text.split(",")], dtype=np.int64)
        for cid, ranks in nccl_members(cols).items():
            members.setdefault(cid, ranks)
        return cls(members)

    def world_peer(self, comm: np.ndarray, peer: np.ndarray) -> np.ndarray:
        """Comm-local ranks -> world ranks; -1 where unknown (wildcard, none, unknown comm)."""
        out = np.full(peer.size, -1, np.int64)
        for cid in np.unique(comm):
            m = self.members.get(int(cid))
            if m is None:
                continue
            sel = (comm == cid) & (peer >= 0) & (peer < m.size)
            out[sel] = m[peer[sel]]
        return out

    def names(self, comm: np.ndarray, column: str = "comm") -> pl.Series:
        """Readable communicator names (MPI_COMM_WORLD, comm:LEADER.N, local:RANK.HANDLE) as a String column."""
        uniq, inverse = np.unique(comm, return_inverse=True)
        return pl.Series(column, [self.name(int(c)) for c in uniq], dtype=pl.String).gather(inverse.astype(np.int64))

    @staticmethod
    def name(cid: int) -> str | None:
        if cid == NONE_ID:
            return None
        if cid == WORLD_ID:
            return "MPI_COMM_WORLD"
        if cid & NCCL_BIT and not cid & int(UNKNOWN_BIT):
            return f"nccl:{cid & (NCCL_BIT - 1):x}"
        if cid & int(UNKNOWN_BIT):
            return f"local:{(cid >> 32) & 0x7FFFFFFF}.{cid & 0xFFFFFFFF:x}"
        return f"comm:{(cid >> 32) - 1}.{cid & 0xFFFFFFFF}"


def nccl_members(cols: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """NCCL communicators' member world ranks, in communicator rank order, from the COMM records
    every member writes (peer: its rank in the communicator, tag: the size); only communicators
    whose every member was recorded (a loop over communicators, not records)."""
    comm = cols["comm"]
    nccl = (comm & np.uint64(NCCL_BIT)) != 0
    idx = np.flatnonzero((cols["kind"] == shard.KIND_COMM) & nccl & ((comm & UNKNOWN_BIT) == 0))
    out: dict[int, np.ndarray] = {}
    if not idx.size:
        return out
    recs = (
        pl.DataFrame(
            {
                "comm": comm[idx],
                "peer": cols["peer"][idx].astype(np.int64),
                "size": cols["tag"][idx].astype(np.int64),
                "rank": cols["rank"][idx].astype(np.int64),
            }
        )
        .unique(["comm", "peer"], keep="first")
        .sort("comm", "peer")
    )
    for (cid,), part in recs.group_by("comm"):
        size = int(part.get_column("size").max())
        if part.height == size and part.get_column("peer").to_list() == list(range(size)):
            out[int(cid)] = part.get_column("rank").to_numpy()
    return out


def _completion_rows(
    cols: dict[str, np.ndarray], row_of: np.ndarray, kind: int = shard.KIND_REQ_DONE
) -> tuple[np.ndarray, np.ndarray]:
    """For each record of ``kind`` (REQ_DONE, REQ_START): its index and the event row of the
    next CALL on its thread (the call it happened in)."""
    done = np.flatnonzero(cols["kind"] == kind)
    calls = np.flatnonzero(cols["kind"] == shard.KIND_CALL)
    nxt = np.searchsorted(calls, done)
    ok = nxt < calls.size
    rows = np.full(done.size, -1, np.int64)
    target = calls[np.minimum(nxt, max(calls.size - 1, 0))] if calls.size else done
    same = ok & (cols["thread"][target] == cols["thread"][done]) if calls.size else ok
    rows[same] = row_of[target[same]]
    return done, rows


def _done_by_req(cols: dict[str, np.ndarray], done: np.ndarray, done_rows: np.ndarray) -> pl.DataFrame:
    """The request completions (REQ_DONE records) with their event rows, keyed by (process, request)."""
    return pl.DataFrame(
        {
            "thread_src": cols["source"][done],
            "req": cols["req"][done],
            "done_row": done_rows,
            "d_peer": cols["peer"][done],
            "d_tag": cols["tag"][done],
            "d_bytes": cols["bytes"][done],
            "d_aux": cols["aux"][done],
            "d_t": cols["t0"][done],
            "d_comm_thread": cols["thread"][done],
        }
    )


def _sends(
    cols: dict[str, np.ndarray],
    comms: Communicators,
    s: np.ndarray,
    s_row: np.ndarray,
    done_by_req: pl.DataFrame,
) -> pl.DataFrame:
    """The sends (records ``s``, event rows ``s_row``) with the row that completed each nonblocking one."""
    sends = pl.DataFrame(
        {
            "src": cols["rank"][s].astype(np.int64),
            "dst": comms.world_peer(cols["comm"][s], cols["peer"][s]),
            "comm": cols["comm"][s],
            "tag": cols["tag"][s].astype(np.int64),
            "t": cols["t0"][s],
            "send": s_row,
            "req": cols["req"][s],
            "thread_src": cols["source"][s],
        }
    )
    return sends.join(
        done_by_req.filter(pl.col("req") > 0).select("thread_src", "req", send_done="done_row"),
        on=["thread_src", "req"],
        how="left",
    )


def _blocking_recvs(
    cols: dict[str, np.ndarray], row_of: np.ndarray, comms: Communicators, r: np.ndarray
) -> pl.DataFrame:
    """The blocking receives (records ``r``): the data arrived in the call itself."""
    return pl.DataFrame(
        {
            "dst": cols["rank"][r].astype(np.int64),
            "src": comms.world_peer(cols["comm"][r], cols["peer"][r]),
            "comm": cols["comm"][r],
            "tag": cols["tag"][r].astype(np.int64),
            "t": cols["t0"][r],
            "recv": row_of[r],
            "bytes": cols["bytes"][r],
            "recv_post": np.full(r.size, -1, np.int64),
        }
    )


def _nonblocking_recvs(
    cols: dict[str, np.ndarray], comms: Communicators, ir: np.ndarray, ir_row: np.ndarray, done_by_req: pl.DataFrame
) -> pl.DataFrame:
    """The nonblocking receives (posts: records ``ir``, event rows ``ir_row``), each where its
    completion says the data came from and arrived."""
    posts = pl.DataFrame(
        {
            "dst": cols["rank"][ir].astype(np.int64),
            "comm": cols["comm"][ir],
            "t": cols["t0"][ir],
            "recv_post": ir_row,
            "req": cols["req"][ir],
            "thread_src": cols["source"][ir],
        }
    )
    posts = posts.join(done_by_req, on=["thread_src", "req"], how="inner")
    post_src = comms.world_peer(posts.get_column("comm").to_numpy(), posts.get_column("d_peer").to_numpy())
    return posts.select(
        "dst",
        pl.Series("src", post_src),
        "comm",
        tag=pl.col("d_tag").cast(pl.Int64),
        t="t",
        recv="done_row",
        bytes="d_bytes",
        recv_post="recv_post",
    )


def _sendrecv_halves(
    cols: dict[str, np.ndarray], comms: Communicators, call: np.ndarray, done: np.ndarray, done_by_req: pl.DataFrame
) -> pl.DataFrame:
    """The receive halves of Sendrecv calls, on the communicator of the call they belong to."""
    # the receive half of Sendrecv: a REQ_DONE with aux 2 right before the Sendrecv call
    sr = done_by_req.with_row_index("k").filter(pl.col("d_aux") == 2)
    sr_idx = done[sr.get_column("k").to_numpy()]
    sr_call = np.searchsorted(np.flatnonzero(call), sr_idx)
    call_idx = np.flatnonzero(call)
    sr_comm = (
        cols["comm"][call_idx[np.minimum(sr_call, max(call_idx.size - 1, 0))]]
        if call_idx.size
        else np.empty(0, np.uint64)
    )
    return pl.DataFrame(
        {
            "dst": cols["rank"][sr_idx].astype(np.int64),
            "src": comms.world_peer(sr_comm, cols["peer"][sr_idx]),
            "comm": sr_comm,
            "tag": cols["tag"][sr_idx].astype(np.int64),
            "t": cols["t0"][sr_idx],
            "recv": sr.get_column("done_row").to_numpy(),
            "bytes": cols["bytes"][sr_idx],
            "recv_post": np.full(sr_idx.size, -1, np.int64),
        }
    )


def _matched(sends: pl.DataFrame, recvs: pl.DataFrame, comms: Communicators, warnings: list[str]) -> pl.DataFrame:
    """The k-th send of each (src, dst, comm, tag) paired with the k-th receive, in send-row order."""
    key = ["src", "dst", "comm", "tag"]
    sends = sends.sort("t").with_columns(k=pl.int_range(pl.len()).over(key))
    recvs = recvs.sort("t").with_columns(k=pl.int_range(pl.len()).over(key))
    matched = sends.join(recvs, on=[*key, "k"], how="inner")
    unmatched_s, unmatched_r = sends.height - matched.height, recvs.height - matched.height
    if unmatched_s or unmatched_r:
        warnings.append(
            f"messages: {unmatched_s} sends and {unmatched_r} receives without a partner (job cut short, "
            "PROC_NULL peers, or a communicator created outside the wrapped calls)"
        )
    matched = matched.with_columns(comms.names(matched.get_column("comm").to_numpy(), "comm_name"))
    return matched.sort("send").select(
        "send",
        "recv",
        "bytes",
        "tag",
        comm="comm_name",
        send_done=pl.col("send_done"),
        recv_post=pl.when(pl.col("recv_post") >= 0).then(pl.col("recv_post")),
        src_rank="src",
        dst_rank="dst",
    )


def messages(
    cols: dict[str, np.ndarray], row_of: np.ndarray, comms: Communicators, warnings: list[str]
) -> pl.DataFrame:
    """Matched point-to-point messages (see the module docstring)."""
    send_op, recv_op, irecv_op, _ = _op_sets()
    kind, op = cols["kind"], cols["op"]
    call = kind == shard.KIND_CALL
    done, done_rows = _completion_rows(cols, row_of)
    done_by_req = _done_by_req(cols, done, done_rows)

    started, start_rows = _completion_rows(cols, row_of, shard.KIND_REQ_START)  # persistent requests' posts
    start_send = cols["aux"][started] == 1
    s = np.flatnonzero(call & send_op[op])
    s_row = row_of[s]
    s, s_row = np.concatenate([s, started[start_send]]), np.concatenate([s_row, start_rows[start_send]])
    sends = _sends(cols, comms, s, s_row, done_by_req)

    blocking = _blocking_recvs(cols, row_of, comms, np.flatnonzero(call & recv_op[op]))
    ir = np.flatnonzero(call & irecv_op[op])
    ir_row = row_of[ir]
    ir, ir_row = np.concatenate([ir, started[~start_send]]), np.concatenate([ir_row, start_rows[~start_send]])
    nonblocking = _nonblocking_recvs(cols, comms, ir, ir_row, done_by_req)
    halves = _sendrecv_halves(cols, comms, call, done, done_by_req)
    recvs = pl.concat([blocking, nonblocking, halves], how="vertical_relaxed")
    return _matched(sends, recvs, comms, warnings)


def collectives(cols: dict[str, np.ndarray], row_of: np.ndarray, comms: Communicators) -> pl.DataFrame:
    """One row per rank's part in each collective instance (see the module docstring)."""
    _, _, _, coll = _op_sets()
    op = cols["op"]
    c = np.flatnonzero((cols["kind"] == shard.KIND_CALL) & (coll[op] != ""))
    cid = cols["comm"][c]
    uniq, inverse = np.unique(cid, return_inverse=True)  # per communicator, not per call
    size = np.array([comms.members[int(x)].size if int(x) in comms.members else -1 for x in uniq], dtype=np.int64)[
        inverse
    ]
    ranks_text = np.array(
        [json.dumps(comms.members[int(x)].tolist()) if int(x) in comms.members else None for x in uniq] + [None],
        dtype=object,
    )[:-1][inverse]
    df = pl.DataFrame(
        {
            "event": row_of[c],
            "rank": cols["rank"][c],
            "comm_id": cid,
            "t": cols["t0"][c],
            "op": coll[op[c]].astype(str),
            "root": comms.world_peer(cid, cols["peer"][c]),
            "bytes": cols["bytes"][c],
            "group_size": size,
            "comm": comms.names(cid),
            "group_ranks": pl.Series(ranks_text, dtype=pl.String),
        },
        strict=False,
    )
    df = df.sort("t").with_columns(seq=pl.int_range(pl.len()).over(["rank", "comm_id"]))
    df = df.with_columns(instance=pl.struct("comm_id", "seq").rank("dense").cast(pl.Int64) - 1)
    return df.sort("event").select(
        "instance",
        "event",
        "rank",
        "comm",
        "seq",
        "op",
        root=pl.when(pl.col("root") >= 0).then(pl.col("root")),
        bytes="bytes",
        group_size=pl.when(pl.col("group_size") >= 0).then(pl.col("group_size")),
        group_ranks="group_ranks",
    )
