"""MPI point-to-point matching and collective rows from OTF2 records (vectorised numpy).

Input: the kept records (:class:`di.convert.otf2.recordrows.RecordRows`);
``event`` is the row in ``events`` a record belongs to (the innermost region
open when it was recorded, see :mod:`timeline`). Records outside any region
(``event`` -1) take no part.

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
``recv_post`` the region holding the Irecv's MpiIrecvRequest (the last one on
its location at or before the Irecv); both null for blocking calls.

Collectives: one row per MpiCollectiveEnd; ``seq`` counts each rank's
collectives per communicator in time order, and ``instance`` pairs the k-th
of every member (:func:`di.merge.assign_instances`).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import polars as pl

from di.convert.otf2 import clib
from di.convert.otf2.records import (
    ATTRIBUTE,
    COLL_END,
    MPI_IRECV,
    MPI_IRECV_REQUEST,
    MPI_ISEND,
    MPI_ISEND_COMPLETE,
    MPI_RECV,
    MPI_SEND,
)
from di.convert.otf2.categories import COLLECTIVE_OPS
from di.convert.otf2.recordrows import RecordRows
from di.merge import assign_instances

if TYPE_CHECKING:  # the String cfunc compiles on import: the writers that import this module do not need it
    from di.convert.otf2.stringdefs import StringDefs

UNMATCHED_SENDS = "MPI sends without a matching receive (kept as events, no message row)"
UNMATCHED_RECEIVES = "MPI receives without a matching send (kept as events, no message row)"


def _size(ranks: list[int] | str) -> int | None:
    return (len(orjson.loads(ranks)) if isinstance(ranks, str) else len(ranks)) or None


def _text(ranks: list[int] | str) -> str | None:
    return ranks if isinstance(ranks, str) else orjson.dumps(ranks).decode() if ranks else None


def _global_rank(comm_ref: np.ndarray, local: np.ndarray, comms: dict[int, dict[str, Any]]) -> np.ndarray:
    """Global rank of rank ``local`` within communicator ``comm_ref`` (``local`` itself where the group does not say)."""
    pairs = [(ref, i, r) for ref, c in comms.items() for i, r in enumerate(c["ranks"])]
    if not pairs or not comm_ref.size:
        return local.astype(np.int64)
    table = np.array(pairs, dtype=np.int64)
    keys = (table[:, 0].astype(np.uint64) << np.uint64(32)) | table[:, 1].astype(np.uint64)
    order = np.argsort(keys, kind="stable")
    keys, glob = keys[order], table[order, 2]
    want = (comm_ref.astype(np.uint64) << np.uint64(32)) | (local.astype(np.uint64) & np.uint64(0xFFFFFFFF))
    at = np.minimum(np.searchsorted(keys, want), keys.size - 1)
    return np.where(keys[at] == want, glob[at], local.astype(np.int64))


def _group_ids(*cols: np.ndarray) -> np.ndarray:
    """One dense id per distinct tuple of the int64 columns."""
    cols = tuple(c[:, q] for c in cols for q in range(c.shape[1])) if cols[0].ndim == 2 else cols
    n = cols[0].size
    if not n:
        return np.zeros(0, np.int64)
    order = np.lexsort(cols[::-1])
    change = np.zeros(n, bool)
    change[0] = True
    for c in cols:
        s = c[order]
        change[1:] |= s[1:] != s[:-1]
    ids = np.empty(n, np.int64)
    ids[order] = np.cumsum(change) - 1
    return ids


def _nth_in_group(group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """For each row, how many rows of its group come before it in ``order`` (a permutation of the rows)."""
    by_group = order[np.argsort(group[order], kind="stable")]
    g = group[by_group]
    first = np.zeros(g.size, np.int64)
    if g.size:
        starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        first = np.repeat(starts, np.diff(np.r_[starts, g.size]))
    out = np.empty(g.size, np.int64)
    out[by_group] = np.arange(g.size, dtype=np.int64) - first
    return out


def _asof(key: np.ndarray, ts: np.ndarray, other_key: np.ndarray, other_ts: np.ndarray, forward: bool) -> np.ndarray:
    """Index into ``other`` of, per row, the first other row with the same key at or after ``ts`` (forward), or
    the last one at or before it (backward); -1 where none."""
    n = len(key)
    if not n or not len(other_key):
        return np.full(n, -1, np.int64)
    gid = _group_ids(np.r_[key, other_key])
    t = np.unique(np.r_[ts, other_ts], return_inverse=True)[1].ravel().astype(np.int64)
    span = np.int64(t.max() + 1)
    combined = gid * span + t
    mine, theirs = combined[:n], combined[n:]
    order = np.argsort(theirs, kind="stable")
    sorted_theirs = theirs[order]
    if forward:
        at = np.searchsorted(sorted_theirs, mine, side="left")
    else:
        at = np.searchsorted(sorted_theirs, mine, side="right") - 1
    ok = (at >= 0) & (at < theirs.size)
    at = np.clip(at, 0, theirs.size - 1)
    ok &= gid[n:][order[at]] == gid[:n]
    return np.where(ok, order[at], -1)


def _nullable(values: np.ndarray, valid: np.ndarray, dtype: pl.DataType = pl.Int64) -> pl.Series:
    return (
        pl.Series(values, dtype=dtype).scatter(np.flatnonzero(~valid), None)
        if not valid.all()
        else pl.Series(values, dtype=dtype)
    )


def messages(rec: RecordRows, comms: dict[int, dict[str, Any]]) -> tuple[pl.DataFrame, dict[str, int]]:
    """Matched messages (send, recv, bytes, tag, comm, send_done, recv_post) and the unmatched counts."""
    s = rec.inside(MPI_SEND, MPI_ISEND)
    r = rec.inside(MPI_RECV, MPI_IRECV)
    send_done = _send_done(s, rec.inside(MPI_ISEND_COMPLETE))
    recv_post, r_order = _recv_post(r, rec.inside(MPI_IRECV_REQUEST))
    i_s, i_r = _matched(s, r, r_order, comms)
    done_of, post_of = send_done[i_s], recv_post[i_r]
    out = pl.DataFrame(
        {
            "send": s.event[i_s],
            "recv": r.event[i_r],
            "bytes": s.msg_bytes[i_s],
            "tag": s.tag[i_s],
            "comm": _comm_names(s.comm[i_s], comms),
            "send_done": _nullable(done_of, done_of >= 0),
            "recv_post": _nullable(post_of, post_of >= 0),
        }
    )
    unmatched = {UNMATCHED_SENDS: len(s) - i_s.size, UNMATCHED_RECEIVES: len(r) - i_r.size}
    return out, {k: v for k, v in unmatched.items() if v}


def _send_done(s: RecordRows, done: RecordRows) -> np.ndarray:
    """Per send: the region holding its Isend's MpiIsendComplete (``done``), -1 for blocking sends and where none."""
    isend = s.kind == MPI_ISEND
    at = _asof(
        np.column_stack([s.loc, s.request])[isend],
        s.ts_ns[isend],
        np.column_stack([done.loc, done.request]),
        done.ts_ns,
        forward=True,
    )
    send_done = np.full(len(s), -1, np.int64)
    send_done[isend] = np.where(at >= 0, done.event[np.maximum(at, 0)] if len(done) else -1, -1)
    return send_done


def _recv_post(r: RecordRows, post: RecordRows) -> tuple[np.ndarray, np.ndarray]:
    """Per receive: (the region holding its Irecv's MpiIrecvRequest (``post``), -1 for blocking receives and where
    none; the time it was posted, ns: the MpiIrecvRequest's, else the receive's own)."""
    irecv = r.kind == MPI_IRECV
    at = _asof(
        np.column_stack([r.loc, r.request])[irecv],
        r.ts_ns[irecv],
        np.column_stack([post.loc, post.request]),
        post.ts_ns,
        forward=False,
    )
    recv_post = np.full(len(r), -1, np.int64)
    r_order = r.ts_ns.copy()
    if len(post):
        recv_post[irecv] = np.where(at >= 0, post.event[np.maximum(at, 0)], -1)
        r_order[irecv] = np.where(at >= 0, post.ts_ns[np.maximum(at, 0)], r.ts_ns[irecv])
    return recv_post, r_order


def _matched(
    s: RecordRows, r: RecordRows, r_order: np.ndarray, comms: dict[int, dict[str, Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """(sends, receives) of the matched pairs, as row indices into ``s`` and ``r``, in send event order: the k-th
    send and the k-th receive (by ``r_order``) of one (comm, sender, receiver, tag) match."""
    s_peer, r_peer = _global_rank(s.comm, s.peer, comms), _global_rank(r.comm, r.peer, comms)
    n_s = len(s)
    key = _group_ids(
        np.r_[s.comm, r.comm],
        np.r_[s.rank.astype(np.int64), r_peer],
        np.r_[s_peer, r.rank.astype(np.int64)],
        np.r_[s.tag, r.tag],
    )
    k_s = _nth_in_group(key[:n_s], np.lexsort((s.row, s.ts_ns)))
    k_r = _nth_in_group(key[n_s:], np.lexsort((r.row, r_order)))
    span = np.int64(max(n_s, len(r)) + 1)
    _, i_s, i_r = np.intersect1d(
        key[:n_s] * span + k_s, key[n_s:] * span + k_r, assume_unique=True, return_indices=True
    )
    by_send = np.lexsort((i_s, s.event[i_s]))
    return i_s[by_send], i_r[by_send]


def _comm_names(comm_refs: np.ndarray, comms: dict[int, dict[str, Any]]) -> pl.Series:
    """The name of each communicator ref (null where the definitions have none)."""
    names = {ref: c["name"] for ref, c in comms.items()}
    uniq, inv = np.unique(comm_refs, return_inverse=True)
    return (
        pl.Series([names.get(int(c)) for c in uniq], dtype=pl.String).gather(inv.ravel())
        if uniq.size
        else pl.Series([], dtype=pl.String)
    )


OWN_COLLECTIVE_ATTRIBUTES = {
    "di.dtype": "dtype",
    "di.op": "op",
    "di.group_size": "group_size",
    "di.group_ranks": "group_ranks",
}
"""Attributes di's writer puts on MpiCollectiveEnd -> the collectives column they restore."""


def _own_values(rec: RecordRows, ref: int, head: np.ndarray, strings: StringDefs | None) -> pl.Series:
    """Per row in ``head``: the value of attribute ``ref`` on that record (string refs resolved through ``strings``), or null."""
    got = rec.of_kind(ATTRIBUTE) & (rec.attribute == ref)
    rows, values = rec.head[got], rec.attr_value[got]
    order = np.argsort(rows, kind="stable")
    rows, values = rows[order], values[order]
    at = np.clip(np.searchsorted(rows, head), 0, max(rows.size - 1, 0))
    found = (rows[at] == head) if rows.size else np.zeros(head.size, bool)
    if strings is None:
        return _nullable(values[at] if rows.size else np.zeros(head.size, np.int64), found)
    ids = (values[at] & 0xFFFFFFFF) if rows.size else np.zeros(head.size, np.int64)
    text = strings.gather(ids)
    return text.scatter(np.flatnonzero(~found), None) if (~found).any() else text


def collectives(
    rec: RecordRows, comms: dict[int, dict[str, Any]], attributes: dict[int, tuple[str, str]], strings: StringDefs
) -> pl.DataFrame:
    """One row per MpiCollectiveEnd (schema ``collectives``); columns di's writer stored as attributes restored from them."""
    ends = rec.inside(COLL_END)  # their times and ranks made for these rows only
    c = ends.take(np.lexsort((ends.row, ends.ts_ns, ends.rank)))
    n = len(c)
    known, pos, comm, group_size, group_ranks = _comm_columns(c, comms)
    root = _nullable(_global_rank(c.comm, c.root, comms), c.root != clib.UNDEFINED_UINT32, pl.Int64).cast(pl.Int32)
    seq = _nth_in_group(_group_ids(c.rank.astype(np.int64), np.where(known, pos, -1)), np.arange(n, dtype=np.int64))
    op = _canonical_ops(c.coll_op)
    own = {name: ref for ref, (name, _) in attributes.items() if name in OWN_COLLECTIVE_ATTRIBUTES}
    dtype = pl.repeat(None, n, dtype=pl.String, eager=True)
    if own and n:
        op, dtype, group_size, group_ranks = _restored(rec, own, c.row, strings, op)
    out = pl.DataFrame(
        {
            "instance": pl.repeat(None, n, dtype=pl.Int64, eager=True),
            "event": c.event,
            "rank": c.rank,
            "comm": comm,
            "seq": seq,
            "op": op,
            "root": root,
            "bytes": c.sent,
            "dtype": dtype,
            "group_size": group_size,
            "group_ranks": group_ranks,
        }
    )
    return assign_instances(out)


def _comm_columns(
    c: RecordRows, comms: dict[int, dict[str, Any]]
) -> tuple[np.ndarray, np.ndarray, pl.Series, pl.Series, pl.Series]:
    """(whether each row's communicator is defined, its position among the defined refs sorted, and the comm,
    group_size and group_ranks columns from its definition, null where it has none)."""
    n = len(c)
    refs = np.array(list(comms), dtype=np.int64)
    pos = np.searchsorted(np.sort(refs), c.comm) if refs.size else np.zeros(n, np.int64)
    by_ref = np.argsort(refs, kind="stable")
    known = (
        (pos < refs.size) & (refs[by_ref][np.minimum(pos, max(refs.size - 1, 0))] == c.comm)
        if refs.size
        else np.zeros(n, bool)
    )
    info = [comms[int(x)] for x in refs[by_ref]] + [{"name": None, "group_ranks": []}]
    idx = np.where(known, pos, len(info) - 1)
    comm = pl.Series([i["name"] for i in info], dtype=pl.String).gather(idx)
    group_size = pl.Series([_size(i["group_ranks"]) for i in info], dtype=pl.Int32).gather(idx)
    group_ranks = pl.Series([_text(i["group_ranks"]) for i in info], dtype=pl.String).gather(idx)
    return known, pos, comm, group_size, group_ranks


def _canonical_ops(codes: np.ndarray) -> pl.Series:
    """di's collective op name (:data:`categories.COLLECTIVE_OPS`) of each OTF2_CollectiveOp code, ``other``
    where it has none."""
    names = _op_names()
    op_codes = np.arange(max(names, default=0) + 2)
    canon = [COLLECTIVE_OPS.get(names.get(int(k), ""), "other") for k in op_codes]
    return pl.Series(canon, dtype=pl.String).gather(np.clip(codes, 0, op_codes.size - 1))


def _restored(
    rec: RecordRows, own: dict[str, int], head: np.ndarray, strings: StringDefs, op: pl.Series
) -> tuple[pl.Series, pl.Series, pl.Series, pl.Series]:
    """(op, dtype, group_size, group_ranks) of the MpiCollectiveEnd records at rows ``head``, from the attributes
    di's writer put on them (``own``: attribute name -> ref); null where an attribute is missing, the record's op
    for the op."""
    n = head.size
    got = {name: _own_values(rec, ref, head, None if name == "di.group_size" else strings) for name, ref in own.items()}
    nulls = {
        name: pl.repeat(None, n, dtype=pl.Int32 if name == "di.group_size" else pl.String, eager=True)
        for name in OWN_COLLECTIVE_ATTRIBUTES
    }
    got = {**nulls, **got}
    op = pl.select(
        pl.coalesce(got["di.op"], op)
    ).to_series()  # the record's own op where the attribute is missing (a damaged archive)
    return op, got["di.dtype"], got["di.group_size"].cast(pl.Int32), got["di.group_ranks"]


@cache
def _op_names() -> dict[int, str]:
    """OTF2_CollectiveOp value -> its name (``11`` -> ``"ALLREDUCE"``)."""
    import _otf2

    return {int(v.value): k[len("COLLECTIVE_OP_") :] for k, v in vars(_otf2).items() if k.startswith("COLLECTIVE_OP_")}


def collective_ops(codes: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(index into the returned names per code, names): the OTF2 CollectiveOp name of each code, ``?`` when unknown."""
    names = _op_names()
    table = [names.get(k, "?") for k in range(max(names, default=0) + 1)] + ["?"]
    return np.where((codes >= 0) & (codes < len(table) - 1), codes, len(table) - 1), table
