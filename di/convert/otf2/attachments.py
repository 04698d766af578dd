"""The OTF2 writer's MPI records: attachment rows (see :mod:`emit`) for messages and collectives.

Each row names the event it is written beside (``COL_EVENT``), before its
Leave or after its Enter (``COL_PHASE``), its record type and the record's own
fields. Per message: a send row on the send event and a receive row on the
receive event (MpiIsend / MpiIrecv where a ``send_done`` / ``recv_post`` event
completes or posts it, with those rows too), one request id per message. Per
collective: MpiCollectiveBegin and MpiCollectiveEnd, the end carrying the OTF2
op, communicator, root, bytes and di's own attributes (dtype, op, group size and
ranks). Every column is filled whole, never per row.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.otf2 import clib, emit
from di.convert.otf2.categories import collective_op_code
from di.convert.otf2.communicators import LocalRanks
from di.convert.otf2.stringtable import Strings
from di.trace import Trace

__all__ = ["optional", "plan_attachments"]


def plan_attachments(trace: Trace, loc_rank: np.ndarray, comms: LocalRanks, strings: Strings) -> np.ndarray:
    """Attachment rows (see :mod:`emit`) for messages and collectives, in no particular order (:func:`plan` sorts
    them), filled into one array column by column."""
    msg, coll = trace.messages, trace.collectives
    done, post = msg["send_done"].fill_null(-1).to_numpy(), msg["recv_post"].fill_null(-1).to_numpy()
    isend, irecv = done >= 0, post >= 0
    m, c = msg.height, coll.height
    n_isend, n_irecv = int(isend.sum()), int(irecv.sum())
    att = np.zeros((2 * m + n_isend + n_irecv + 2 * c, emit.ATT_WIDTH), np.int64)
    if m:
        _message_rows(att, trace, loc_rank, comms, (done, isend), (post, irecv))
    if c:
        _collective_rows(att, trace, comms, strings)
    return att


def _message_rows(
    att: np.ndarray,
    trace: Trace,
    loc_rank: np.ndarray,
    comms: LocalRanks,
    sends_done: tuple[np.ndarray, np.ndarray],
    recvs_posted: tuple[np.ndarray, np.ndarray],
) -> None:
    """Fills the first rows of ``att``: sends, receives, then the completions of the isends and the posts of the
    irecvs. ``sends_done``: each message's ``send_done`` event (-1: none) and whether it has one; ``recvs_posted``:
    the same of ``recv_post``."""
    ev_loc = trace.events["loc"].to_numpy()
    msg = trace.messages
    (done, isend), (post, irecv) = sends_done, recvs_posted
    m = msg.height
    n_isend, n_irecv = int(isend.sum()), int(irecv.sum())
    send, recv = msg["send"].to_numpy(), msg["recv"].to_numpy()
    cref = comms.comm_refs(msg["comm"])
    request = np.arange(1, m + 1, dtype=np.int64)  # one request id per message, unique on every location
    tag, nb = msg["tag"].fill_null(0).to_numpy(), msg["bytes"].fill_null(0).to_numpy()
    for rows, event, phase, kinds, peer in (
        (att[:m], send, 0, np.where(isend, emit.ATT_ISEND, emit.ATT_SEND), loc_rank[ev_loc[recv]]),
        (att[m : 2 * m], recv, 1, np.where(irecv, emit.ATT_IRECV, emit.ATT_RECV), loc_rank[ev_loc[send]]),
    ):
        rows[:, emit.COL_EVENT], rows[:, emit.COL_PHASE], rows[:, emit.COL_TYPE] = event, phase, kinds
        rows[:, emit.COL_PEER] = comms.ranks(cref, peer)
        rows[:, emit.COL_COMM], rows[:, emit.COL_TAG], rows[:, emit.COL_BYTES] = cref, tag, nb
        rows[:, emit.COL_REQUEST] = request
    at = 2 * m
    for event, phase, kind, which, count in (
        (done, 1, emit.ATT_ISEND_COMPLETE, isend, n_isend),
        (post, 0, emit.ATT_IRECV_REQUEST, irecv, n_irecv),
    ):
        rows = att[at : at + count]
        rows[:, emit.COL_EVENT], rows[:, emit.COL_PHASE], rows[:, emit.COL_TYPE] = event[which], phase, kind
        rows[:, emit.COL_REQUEST] = request[which]
        at += count


def _collective_rows(att: np.ndarray, trace: Trace, comms: LocalRanks, strings: Strings) -> None:
    """Fills the last rows of ``att``: the begin row of every collective, then its end row; the dtype, op and
    group_ranks texts are added to ``strings`` in that order."""
    coll = trace.collectives
    c = coll.height
    extra = pl.DataFrame({"args": trace.events["args"].gather(coll["event"])}).select(
        pl.col("args").str.json_path_match("$.collective_op").alias("otf2_op"),
        pl.col("args").str.json_path_match("$.bytes_received").cast(pl.Int64, strict=False).alias("received"),
    )
    begin, end = att[-2 * c : -c], att[-c:]
    event = coll["event"].to_numpy()
    begin[:, emit.COL_EVENT], begin[:, emit.COL_TYPE] = event, emit.ATT_COLL_BEGIN
    end[:, emit.COL_EVENT], end[:, emit.COL_PHASE], end[:, emit.COL_TYPE] = event, 1, emit.ATT_COLL_END
    cref = comms.comm_refs(coll["comm"])
    end[:, emit.COL_OP] = _op_codes(coll["op"], extra["otf2_op"])
    end[:, emit.COL_COMM] = cref
    root = coll["root"]
    end[:, emit.COL_ROOT] = np.where(
        root.is_null().to_numpy(), clib.UNDEFINED_UINT32, comms.ranks(cref, root.fill_null(0).to_numpy())
    )
    sent = coll["bytes"].fill_null(0).to_numpy()
    end[:, emit.COL_SENT], end[:, emit.COL_RECEIVED] = sent, extra["received"].fill_null(pl.Series(sent)).to_numpy()
    own = end[:, emit.COL_ATTRS :]
    own[:, 0], own[:, 1] = strings.add_many(coll["dtype"]), strings.add_many(coll["op"])
    own[:, 2], own[:, 3] = optional(coll["group_size"]), strings.add_many(coll["group_ranks"])


def _op_codes(op: pl.Series, otf2_op: pl.Series) -> np.ndarray:
    """OTF2_CollectiveOp of each collective (:func:`collective_op_code`), found once per distinct pair."""
    pairs = pl.DataFrame({"op": op.cast(pl.String).fill_null(""), "otf2": otf2_op.fill_null("")})
    distinct = pairs.unique(maintain_order=True)
    codes = distinct.with_columns(
        pl.Series("code", [collective_op_code(o, x) for o, x in distinct.iter_rows()], dtype=pl.Int64)
    )
    return pairs.join(codes, on=["op", "otf2"], how="left", maintain_order="left")["code"].to_numpy()


def optional(col: pl.Series) -> np.ndarray:
    """int64 values with NO_VALUE for nulls."""
    return col.cast(pl.Int64).fill_null(emit.NO_VALUE).to_numpy()
