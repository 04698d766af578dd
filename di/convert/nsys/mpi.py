"""MPI in an Nsight Systems export (``nsys profile --trace=mpi``): calls, messages, collectives.

Tables read (Nsight Systems' SQLite schema reference; columns found by name):

| table | columns used |
| --- | --- |
| MPI_P2P_EVENTS | start, end, globalTid, textId (function), commHandle, tag, remoteRank (rank in the communicator: the destination of a send, the source of a receive), size (bytes), requestHandle |
| MPI_COLLECTIVES_EVENTS | start, end, globalTid, textId, commHandle, rootRank, size (bytes sent), recvSize (older exports: collSendSize, collRecvSize), requestHandle |
| MPI_START_WAIT_EVENTS | start, end, globalTid, textId (MPI_Wait*, MPI_Start*), requestHandle |
| MPI_OTHER_EVENTS | start, end, globalTid, textId |
| MPI_RANKS | globalTid, rank (read by :mod:`.ranks`) |
| MPI_COMMUNICATORS | rank, commHandle, commUid (job-wide id), localRank, size, members |

Each call is an event on its thread (cat ``mpi_p2p``, ``mpi_coll`` or ``other``
as ``di record``'s capture names them); its recorded arguments go to ``args``
(``comm handle``, ``tag``, ``remote rank``, ``root``, ``request``, ``send
bytes``, ``recv bytes``) and the communicator rows to the source's
``info["mpi_communicators"]``, so :func:`link` can match calls across the
reports of a job.

:func:`link` builds ``messages`` and ``collectives`` from those events, over
one report or the merged reports of a job, with the definitions of di's
capture (:mod:`di.capture.matching`):

* A communicator is ``mpi:UID`` where ``MPI_COMMUNICATORS`` gives its
  ``commUid`` for (rank, handle), else ``MPI_COMM_WORLD`` for MPICH's world
  handle, else ``mpi handle H`` (the handle as recorded: MPICH's handles are
  equal on every rank, Open MPI's are addresses and may not be). A rank within it becomes a world rank through the
  (localRank, rank) pairs of its ``MPI_COMMUNICATORS`` rows, or its
  ``members`` text (a list of world ranks in communicator order, or, indexed
  by world rank, 0/1 flags or local ranks); without either, and for a
  communicator of the world's size, it is taken as the world rank.
* A message is the k-th send from world rank s to d on communicator c with
  tag t, matched with the k-th receive of that signature on d: sends in order
  of their start, receives of their post (MPI's non-overtaking rule).
  ``send`` is the send call (blocking, or the Isend), ``recv`` where the data
  arrived (the blocking receive, or the MPI_Wait* that completed an Irecv);
  ``send_done`` and ``recv_post`` the other ends of non-blocking ones. The
  call that completes a request is the first MPI_Wait* on the thread at or
  after its post with the same request handle (before that handle is posted
  again), else the first with no handle recorded, else the first at all (an
  MPI_Waitall recorded with one of its handles). An
  MPI_Sendrecv is one row when its two halves agree, else two rows, the send
  first (as nsys's ``mpi_event_trace`` report reads them). A receive from
  ``MPI_ANY_SOURCE`` or with ``MPI_ANY_TAG`` (a negative source or tag: the
  trace records the call's arguments, not the status) is matched after the
  exact ones, in post order, with the sends left to its rank on its
  communicator in start order (with the same tag, or from the same source,
  where it named one): MPI matches those by arrival, which no trace records.
  Sends to ``MPI_PROC_NULL`` are not matched. ``bytes`` is the sender's size.
* A collective instance is the i-th collective call of every member on one
  communicator (``seq`` per rank and communicator, ``instance`` by
  :func:`di.merge.assign_instances`); ``bytes`` is what the rank sends.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import polars as pl

from di.capture.matching import COLLECTIVE_OPS, RECV_OPS, SEND_OPS, base_name
from di.convert.nsys import activity
from di.convert.nsys.ranks import MAX_RANK
from di.convert.nsys.report import Report
from di.merge import assign_instances
from di.trace import CATS, Trace

__all__ = ["MPI_TABLES", "communicators", "frames", "link"]

P2P, COLL, START_WAIT, OTHER = "MPI_P2P_EVENTS", "MPI_COLLECTIVES_EVENTS", "MPI_START_WAIT_EVENTS", "MPI_OTHER_EVENTS"
MPI_TABLES = (P2P, COLL, START_WAIT, OTHER)
OTHER_CALLS = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Comm_free"}
"""MPI_OTHER_EVENTS calls that are neither point-to-point nor collective (cat ``other``), as di's capture says."""
LOCAL_QUERIES = ("MPI_Comm_rank", "MPI_Comm_size", "MPI_Comm_get_", "MPI_Comm_set_", "MPI_Comm_test_inter", "MPI_Wtime")
"""Calls that ask the local MPI library and wait for no other rank (cat ``other``)."""
COMM_COLUMNS = ("rank", "commHandle", "commUid", "localRank", "size", "members")
WARNING_PREFIX = "MPI (nsys): "
WILDCARDS = "receives from MPI_ANY_SOURCE or with MPI_ANY_TAG matched by order, as MPI matches them by arrival"
MPICH_WORLD = 0x44000000
"""MPICH's (and its derivatives') MPI_COMM_WORLD handle, the same in every process."""

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


def _other_cat(name: str) -> str:
    """The cat of an MPI_OTHER_EVENTS call, as di's capture gives it."""
    if name in OTHER_CALLS or name.startswith(LOCAL_QUERIES):
        return "other"
    if name.startswith(("MPI_Comm_", "MPI_Barrier", "MPI_Ibarrier")) or base_name(name) in COLLECTIVE_OPS:
        return "mpi_coll"
    return "mpi_p2p"


def _table(report: Report, table: str, dropped: Counter[str]) -> pl.DataFrame:
    have = set(report.columns(table))
    send = "size" if table == COLL and "size" in have else "collSendSize"
    recv = "recvSize" if "recvSize" in have else "collRecvSize"
    c = report.ints(
        table,
        {
            "start": "start",
            "end": "end",
            "gtid": "globalTid",
            "name": "textId",
            "comm": "commHandle",
            "tag": "tag",
            "remote": "remoteRank",
            "root": "rootRank",
            "size": "size" if table == P2P else None,
            "send": send if table == COLL else None,
            "recv": recv if table == COLL else None,
            "request": "requestHandle",
        },
    )
    n = c["start"].size
    pos = report.positions(c["name"], c["name_null"])
    name = report.derived("name", lambda v: v.cast(pl.Categorical)).gather(pos).fill_null("")
    if table == COLL:
        cat: Any = "mpi_coll"
    elif table == OTHER:
        cat = report.derived(
            "mpi_other_cat",
            lambda v: pl.Series([_other_cat(s or "") for s in v.to_list()], dtype=pl.Enum(list(CATS))),
        ).gather(pos)
        cat = cat.fill_null("other")
    else:
        cat = "mpi_p2p"
    nbytes = np.where(c["size_null"], c["send"], c["size"])
    nbytes_null = c["size_null"] & c["send_null"]
    fields = {
        key: activity.num(c[col], c[col + "_null"])
        for key, col in (
            ("comm handle", "comm"),
            ("tag", "tag"),
            ("remote rank", "remote"),
            ("root", "root"),
            ("request", "request"),
            ("send bytes", "send"),
            ("recv bytes", "recv"),
        )
        if not c[col + "_null"].all()
    }
    rows = activity.frame(
        n,
        activity.base(
            n,
            **activity.thread(c),
            name=name,
            src_cat="mpi",
            cat=cat,
            bytes=pl.Series(nbytes).set(pl.Series(nbytes_null), None) if nbytes_null.any() else nbytes,
            args=activity.json_object(fields) if fields else None,
        ),
    )
    if c["end_null"].any():  # a call still running when the capture stopped
        dropped["MPI calls without an end"] += int(c["end_null"].sum())
        rows = rows.filter(~pl.Series(c["end_null"]))
    return rows


def frames(report: Report, dropped: Counter[str], warnings: list[str]) -> tuple[list[pl.DataFrame], list[str]]:
    """One frame per MPI table present (the columns of :mod:`.activity`'s frames); and the tables read."""
    out, read = [], []
    for table in MPI_TABLES:
        if table not in report.tables:
            continue
        lacking = [c for c in ("start", "end", "globalTid") if c not in report.columns(table)]
        if lacking:
            warnings.append(
                f"{report.path}: table {table} lacks {', '.join(lacking)} (an nsys version di has not seen): skipped"
            )
            continue
        out.append(_table(report, table, dropped))
        read.append(table)
    return out, read


def communicators(report: Report) -> list[list[Any]]:
    """``MPI_COMMUNICATORS`` rows as [rank, commHandle, commUid, localRank, size, members] ([] when absent)."""
    have = report.columns("MPI_COMMUNICATORS")
    if not {"rank", "commHandle"} <= set(have):
        return []
    cols = ", ".join(f'"{c}"' if c in have else "NULL" for c in COMM_COLUMNS)
    rows = report.con.execute(f"SELECT {cols} FROM MPI_COMMUNICATORS").fetchall()
    # the ids and sizes are integers (else null), the members a text; the table is one row per rank and communicator
    return [
        [_int(r[0], 0, MAX_RANK), _int(r[1]), _int(r[2]), _int(r[3], 0, MAX_RANK), _int(r[4], 1, MAX_RANK)]
        + [None if r[5] is None else str(r[5])]
        for r in rows
    ]


def _int(value: object, low: int = -(2**63), high: int = 2**63 - 1) -> int | None:
    """``value`` when it is an integer in [low, high], else None (a damaged or differently typed cell)."""
    return value if isinstance(value, int) and low <= value <= high else None


def _member_pairs(uid: int, size: int | None, members: str | None) -> list[tuple[int, int, int]]:
    """(uid, local rank, world rank) from a ``members`` text (see the module docstring); [] when it says nothing sure."""
    values = [int(v) for v in re.findall(r"-?\d+", members or "")]
    if not values or not size or size > len(values):  # every form lists at least the members
        return []
    if len(values) == size and sorted(values) != list(range(size)):
        return [(uid, k, w) for k, w in enumerate(values)]  # world ranks in communicator order
    if set(values) <= {0, 1} and sum(values) == size and len(values) >= size:
        return [(uid, k, int(w)) for k, w in enumerate(np.flatnonzero(values))]  # flags indexed by world rank
    local = [(v, w) for w, v in enumerate(values) if v >= 0]
    if sorted(v for v, _ in local) == list(range(size)):
        return [(uid, v, w) for v, w in local]  # local ranks indexed by world rank
    return []


def _communicator_tables(trace: Trace, sources: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rank, handle) -> uid, size; and (uid, local) -> world rank, from every source's rows."""
    rows = [r for i in sources for r in (trace.meta["sources"][i].get("info") or {}).get("mpi_communicators", [])]
    comms = pl.DataFrame(
        [r[:5] for r in rows],
        schema={"rank": pl.Int64, "handle": pl.Int64, "uid": pl.Int64, "local": pl.Int64, "size": pl.Int64},
        orient="row",
    )
    by_handle = comms.filter(pl.col("uid").is_not_null()).unique(["rank", "handle"], keep="last")
    pairs = comms.filter(pl.col("uid").is_not_null() & pl.col("local").is_not_null()).select(
        "uid", "local", world="rank"
    )
    texts = {(int(r[2]), r[4]): r[5] for r in rows if r[2] is not None and r[5]}
    parsed = [p for (uid, size), text in texts.items() for p in _member_pairs(uid, size, text)]
    members = pl.concat(
        [pairs, pl.DataFrame(parsed, schema={"uid": pl.Int64, "local": pl.Int64, "world": pl.Int64}, orient="row")]
    ).unique(["uid", "local"], keep="first")
    return by_handle.select("rank", "handle", "uid", "size"), members


def _world(ev: pl.DataFrame, members: pl.DataFrame, column: str, world_size: int | None) -> pl.Series:
    """World rank of each row's comm-local ``column`` (see the module docstring)."""
    looked = ev.select("uid", "size", pl.col(column).alias("local")).join(
        members, on=["uid", "local"], how="left", maintain_order="left"
    )
    as_world = pl.col("uid").is_null() | (pl.col("size") == world_size) if world_size else pl.col("uid").is_null()
    return looked.select(
        pl.when(pl.col("world").is_not_null()).then("world").when(as_world).then("local").alias(column)
    ).to_series()


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


def _messages(ev: pl.DataFrame, counts: Counter[str]) -> pl.DataFrame:
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
    unusable_s = pl.col("dst").is_null() | (pl.col("dst") < 0) | pl.col("tag").is_null()
    wild_src, wild_tag = pl.col("remote") < 0, pl.col("tag") < 0
    unusable_r = pl.col("tag").is_null() | pl.col("remote").is_null() | (~wild_src & pl.col("src").is_null())
    counts["sends to MPI_PROC_NULL or an unknown rank"] += int(sends.select(unusable_s.sum()).item())
    counts["receives from an unknown rank"] += int(recvs.select(unusable_r.sum()).item())
    sends, recvs = sends.filter(~unusable_s), recvs.filter(~unusable_r)
    parts, left = [], sends
    # exact receives first, then MPI_ANY_SOURCE and/or MPI_ANY_TAG ones in post order against the sends left
    for key, which in (
        (["src", "dst", "comm", "tag"], ~wild_src & ~wild_tag),
        (["dst", "comm", "tag"], wild_src & ~wild_tag),
        (["src", "dst", "comm"], ~wild_src & wild_tag),
        (["dst", "comm"], wild_src & wild_tag),
    ):
        part = _kth(left, recvs.filter(which), key)
        parts.append(part)
        left = left.join(part.select("send"), on="send", how="anti")
        if len(key) < 4:
            counts[WILDCARDS] += part.height
    matched = pl.concat(parts)
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


def link(trace: Trace) -> Trace:
    """``messages`` and ``collectives`` of the nsys MPI calls in ``trace`` (one report or a merged job), replacing
    those a previous link made; the unmatched calls are counted in one warning."""
    sources = [
        i
        for i, s in enumerate(trace.meta.get("sources", []))
        if s.get("format") == "nsys" and set((s.get("info") or {}).get("tables_read", ())) & set(MPI_TABLES)
    ]
    if not sources:
        return trace
    locs = trace.locations.filter(pl.col("source").is_in(sources)).select("loc", pl.col("rank").cast(pl.Int64))
    ev = (
        trace.events.select("loc", "start_ns", "end_ns", "name", "src_cat", "args", "bytes")
        .with_row_index("row")
        .filter(pl.col("src_cat") == "mpi")
        .join(locs, on="loc", how="inner")
    )
    if not ev.height:
        return trace
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
    ev = ev.filter(pl.col("role") > 0)
    world_size = trace.meta.get("world_size")
    by_handle, members = _communicator_tables(trace, sources)
    ev = ev.join(
        by_handle.rename({"handle": "comm_handle"}), on=["rank", "comm_handle"], how="left", maintain_order="left"
    )
    ev = ev.with_columns(
        _world(ev, members, "remote_rank", world_size).alias("peer"),
        _world(ev, members, "root", world_size).alias("root_world"),
        pl.when(pl.col("uid").is_not_null())
        .then(pl.format("mpi:{}", "uid"))
        .when(pl.col("comm_handle") == MPICH_WORLD)
        .then(pl.lit("MPI_COMM_WORLD"))
        .when(pl.col("comm_handle").is_not_null())
        .then(pl.format("mpi handle {}", "comm_handle"))
        .alias("comm"),
    )
    counts: Counter[str] = Counter()
    messages = _messages(ev, counts)
    collectives = _collectives(ev, members, world_size)
    ours = ev.get_column("row").implode()
    kept_m = trace.messages.filter(~pl.col("send").is_in(ours))
    kept_c = trace.collectives.filter(~pl.col("event").is_in(ours))
    all_m = pl.concat([kept_m, messages], how="diagonal_relaxed").sort("send") if kept_m.height else messages
    all_c = assign_instances(pl.concat([kept_c, collectives], how="diagonal_relaxed").sort("event"))
    warnings = [w for w in trace.meta.get("warnings", []) if not w.startswith(WARNING_PREFIX)]
    unmatched = ", ".join(f"{n} {what}" for what, n in sorted(counts.items()) if n and what != WILDCARDS)
    said = [unmatched + " (a rank's report missing, or a communicator not recorded)"] if unmatched else []
    said += [f"{counts[WILDCARDS]} {WILDCARDS}"] if counts[WILDCARDS] else []
    if said:
        warnings.append(WARNING_PREFIX + "; ".join(said))
    tables = {**trace.tables(), "messages": all_m, "collectives": all_c}
    return Trace.build(meta={**trace.meta, "warnings": warnings}, **tables)
