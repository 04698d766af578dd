"""Topology lines as the ``comm_links`` table, each of the communicator its line belongs to: connections
(``Channel NN[/MM] : a[bus] -> b[bus] [send|receive] via T``), ring hops (``Channel NN/MM : r0 r1 ...``, ``Ring NN :
prev -> me -> next``) and tree edges (``Trees [c] a/b/c->me->parent``, ``Tree c : parent -> me -> children``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.logs.build import keep_counted
from di.convert.logs.nccl.messages import _picked
from di.convert.logs.text import all_ascii

LINK_RE = (
    r"^Channel (?P<channel>\d+)(?:/\d+)? : (?P<src>\d+)\[[0-9a-fA-Fx]+\] -> (?P<dst>\d+)\[[0-9a-fA-Fx]+\]"
    r"(?: \[(?P<direction>send|receive)\])? via (?P<via>.+?)(?: comm 0x.*)?$"
)
LINK_ASCII_RE = (
    r"^Channel (?P<channel>[0-9]+)(?:/[0-9]+)? : (?P<src>[0-9]+)\[[0-9a-fA-Fx]+\] -> (?P<dst>[0-9]+)\[[0-9a-fA-Fx]+\]"
    r" (?:\[(?P<direction>send|receive)\] )?via (?P<via>.+)$"
)
"""What :data:`LINK_RE` matches in ASCII text, its ``via`` to the line's end (:func:`_link_groups` cuts it): a regex
the one-pass engine captures with, about half the CPU of the backtracking one :data:`LINK_RE` needs."""
LINK_VIA_END = " comm 0x"
"""Where :data:`LINK_RE`'s ``via`` ends: the first of these past its first character, else the line's end."""
RING_RE = r"^Channel (?P<channel>\d+)/(?P<nchannels>\d+) :(?P<order>(?:\s+\d+)+)\s*$"
RING_HOP_RE = r"^Ring (?P<channel>\d+) : (?P<prev>-?\d+) -> (?P<me>\d+) -> (?P<next>-?\d+)"
TREE_ONE_RE = r"^Tree (?P<channel>\d+) : (?P<parent>-?\d+) -> (?P<me>\d+) -> (?P<c1>-?\d+)/(?P<c2>-?\d+)/(?P<c3>-?\d+)"
TREE_RE = r"\[(?P<channel>\d+)\] (?P<c1>-?\d+)/(?P<c2>-?\d+)/(?P<c3>-?\d+)->(?P<me>-?\d+)->(?P<parent>-?\d+)"
TOPOLOGY = {
    "link": (LINK_RE, "via", ("Channel ", " via ")),
    "ring": (RING_RE, "order", ("Channel ", None)),
    "hop": (RING_HOP_RE, "me", ("Ring ", None)),
    "tree": (TREE_ONE_RE, "me", ("Tree ", None)),
}
"""The anchored topology line kinds: regex, a group every match sets, and the start and a text every match has (the
regex runs on the messages that have them only). They exclude each other (each begins with its own word, and a link's
ranks carry ``[bus]`` where a ring's order has digits only)."""


def _line_comms(topo: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    """``comm_key`` of each topology line (``line``, ``comm_key``; ``topo`` in line order): they come before their
    communicator's Init COMPLETE on the same device (or after it: lazy connections, 2.22+). Found once for all
    topology lines."""
    inits = comms.select("gpu", pl.col("line").alias("init_line"), "comm_key").sort("init_line")
    df = topo[["gpu", "line"]]
    nxt, prv = (
        df.join_asof(inits, left_on="line", right_on="init_line", by="gpu", strategy=way, check_sortedness=False)
        for way in ("forward", "backward")
    )
    return nxt.select("line", pl.coalesce(pl.col("comm_key"), prv.get_column("comm_key")).alias("comm_key"))


def _topology_kinds(p: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The lines of each :data:`TOPOLOGY` kind (``p``: the topology lines, with ``comm_key``, ``line``, ``mid`` and
    ``msg``), in ``p``'s order: ``comm_key``, ``line`` and the kind's groups. Each kind's regex runs once per distinct
    message of that kind's start and text; the lines take their message's groups by gathers (joins and frame filters
    cost several times more on these few thousand rows)."""
    mid = p.get_column("mid")
    first = mid.is_first_distinct()
    distinct = pl.DataFrame([mid.filter(first), p.get_column("msg").filter(first)])
    msg = pl.col("msg")
    which = distinct.select(
        (
            msg.str.starts_with(start) & msg.str.contains(holds, literal=True) if holds else msg.str.starts_with(start)
        ).alias(kind)
        for kind, (_, _, (start, holds)) in TOPOLOGY.items()
    )
    bound = int(mid.max() or 0) + 1
    rows = p[["comm_key", "line"]]
    kinds = {}
    for kind, (rx, required, _) in TOPOLOGY.items():
        at = which.get_column(kind).arg_true()
        of_kind = pl.DataFrame([col.gather(at) for col in distinct.iter_columns()])
        groups = (
            _link_groups(of_kind)
            if kind == "link"
            else of_kind.select("mid", msg.str.extract_groups(rx).alias("g")).unnest("g")
        ).drop_nulls(required)
        # each line's row of its message's groups (null where its message is not of this kind)
        slot = pl.repeat(None, bound, dtype=pl.UInt32, eager=True)
        slot = slot.scatter(groups.get_column("mid"), pl.int_range(groups.height, dtype=pl.UInt32, eager=True))[mid]
        kept = slot.is_not_null().arg_true()
        kinds[kind] = rows[kept].hstack(groups.drop("mid")[slot.gather(kept)].get_columns())
    return kinds


def _link_groups(links: pl.DataFrame) -> pl.DataFrame:
    """``mid`` and :data:`LINK_RE`'s groups of the messages ``links`` (``mid``, ``msg``): by :data:`LINK_ASCII_RE`
    where every message is ASCII (``\\d`` and ``[0-9]`` then match alike), its ``via`` cut before the first
    :data:`LINK_VIA_END` past its first character (where :data:`LINK_RE`'s lazy ``via`` stops)."""
    if not all_ascii(links.get_column("msg")):
        return links.select("mid", pl.col("msg").str.extract_groups(LINK_RE).alias("g")).unnest("g")
    groups = links.select("mid", pl.col("msg").str.extract_groups(LINK_ASCII_RE).alias("g")).unnest("g")
    via = pl.col("via")
    end = via.str.slice(1).str.find(LINK_VIA_END, literal=True)  # a byte offset: a character one in ASCII
    return groups.with_columns(pl.when(end.is_null()).then(via).otherwise(via.str.head(end + 1)))


TOPOLOGY_DROPPED = "topology edges with a number beyond int64"
"""The reason a topology edge or ring is dropped for: a number of it (parsed from digits, cast with
``strict=False``) was null, beyond int64 in a garbled line."""


def _readable(
    edges: pl.DataFrame, dropped: dict[str, int], cols: tuple[str, ...] = ("channel", "src_rank", "dst_rank")
) -> pl.DataFrame:
    """``edges`` without the rows whose ``cols`` are null, counted in ``dropped`` (:data:`TOPOLOGY_DROPPED`)."""
    return keep_counted(edges, pl.all_horizontal(pl.col(c).is_not_null() for c in cols), dropped, TOPOLOGY_DROPPED)


def _connections(g: dict[str, pl.DataFrame], dropped: dict[str, int]) -> pl.DataFrame:
    """``Channel NN[/c] : a[bus] -> b[bus] [send|receive] via T``: one ``connection`` edge per channel and peer."""
    lk = g["link"]
    return _readable(
        lk.select(
            pl.col("comm_key").alias("comm"),
            pl.lit("connection").alias("kind"),
            pl.col("channel").cast(pl.Int64, strict=False),
            pl.col("src").cast(pl.Int64, strict=False).alias("src_rank"),
            pl.col("dst").cast(pl.Int64, strict=False).alias("dst_rank"),
            pl.col("via").str.extract(r"^([A-Za-z0-9]+)").alias("transport"),
            "via",
            "direction",
        ),
        dropped,
    )


def _rings(
    g: dict[str, pl.DataFrame], comms: pl.DataFrame, dropped: dict[str, int]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Ring next hops: ``Channel 00/24 : 0 1 2 3`` (the whole ring, printed once per channel) gives
    r[i] -> r[i+1] and the channel count; ``Ring 00 : 3 -> 0 -> 1`` (2.19+, each rank's prev -> me -> next) me -> next."""
    order = g["ring"].select(
        pl.col("comm_key").alias("comm"),
        pl.col("channel").cast(pl.Int64, strict=False),
        pl.col("nchannels").cast(pl.Int64, strict=False),
        pl.col("order").str.extract_all(r"\d+").cast(pl.List(pl.Int64), strict=False).alias("src_rank"),
    )
    whole = pl.col("src_rank").list.drop_nulls().list.len() == pl.col("src_rank").list.len()
    order = _readable(keep_counted(order, whole, dropped, TOPOLOGY_DROPPED), dropped, ("channel", "nchannels"))
    order = order.unique(["comm", "channel"], maintain_order=True)
    # a ring of many ranks is cut short in the log (NCCL prints the first ones): it wraps only when complete
    sizes = comms.group_by("comm_key").agg(pl.col("nranks").max()).rename({"comm_key": "comm"})
    order = order.join(sizes, on="comm", how="left")
    src = pl.col("src_rank")
    dst = pl.concat_list(src.list.slice(1), pl.when(src.list.len() == pl.col("nranks")).then(src.list.first()))
    dst = dst.list.drop_nulls()
    hops = (
        order.filter(src.list.len() > 1)
        .select("comm", "channel", src.list.head(dst.list.len()).alias("src_rank"), dst.alias("dst_rank"))
        .explode("src_rank", "dst_rank")
    )
    ring = _readable(
        g["hop"].select(
            pl.col("comm_key").alias("comm"),
            pl.col("channel").cast(pl.Int64, strict=False),
            pl.col("me").cast(pl.Int64, strict=False).alias("src_rank"),
            pl.col("next").cast(pl.Int64, strict=False).alias("dst_rank"),
        ),
        dropped,
    )
    edges = pl.concat([hops, ring]).filter(pl.col("src_rank") != pl.col("dst_rank"))
    return edges.with_columns(pl.lit("ring").alias("kind")), order[["comm", "channel", "nchannels"]]


def _trees(p: pl.DataFrame, g: dict[str, pl.DataFrame], dropped: dict[str, int]) -> pl.DataFrame:
    """Tree edges me -> parent: ``Trees [0] 1/-1/-1->0->-1 [1] ...`` (per channel: children->me->parent, -1 none)
    and ``Tree 0 : -1 -> 0 -> 1/-1/-1`` (2.19+: parent -> me -> children)."""
    t = (
        p.filter(pl.col("msg").str.starts_with("Trees "))
        .with_columns(pl.col("msg").str.extract_all(TREE_RE).alias("t"))
        .explode("t")
    )
    t = t.drop_nulls("t").with_columns(pl.col("t").str.extract_groups(TREE_RE).alias("g")).unnest("g")
    one = g["tree"]
    cols = ["comm_key", "line", "channel", "me", "parent"]
    t = pl.concat([t.select(cols), one.select(cols)])
    edges = t.sort("line").select(
        pl.col("comm_key").alias("comm"),
        pl.lit("tree").alias("kind"),
        pl.col("channel").cast(pl.Int64, strict=False),
        pl.col("me").cast(pl.Int64, strict=False).alias("src_rank"),
        pl.col("parent").cast(pl.Int64, strict=False).alias("dst_rank"),
    )
    return _readable(edges, dropped).filter(pl.col("dst_rank") >= 0)


LINK_SCHEMA = {
    "comm": pl.String,
    "kind": pl.String,
    "channel": pl.Int64,
    "src_rank": pl.Int64,
    "dst_rank": pl.Int64,
    "transport": pl.String,
    "via": pl.String,
    "direction": pl.String,
}
"""The columns of :func:`_comm_links`' table."""
RING_CHANNELS_SCHEMA = {"comm": pl.String, "channel": pl.Int64, "nchannels": pl.Int64}
"""The columns of :func:`_comm_links`' (comm, channel, nchannels) of the ring lines."""


def _comm_links(p: pl.DataFrame, comms: pl.DataFrame, dropped: dict[str, int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ``comm_links`` table (see its schema) and (comm, channel, nchannels) of the ring lines (``p``: the topology
    lines, in line order); the edges and rings holding a number beyond int64 are left out, counted in ``dropped``."""
    if not p.height:  # no topology line: none of the ~50 steps below on empty frames
        return pl.DataFrame(schema=LINK_SCHEMA), pl.DataFrame(schema=RING_CHANNELS_SCHEMA)
    # each rank prints the same topology lines for each communicator: the rows of one (comm, message) make the same
    # edges (the table keeps each once, the first), so those after the first are not parsed
    if not p.get_column("line").is_sorted():
        p = p.sort("line")
    p = p.with_columns(_line_comms(p, comms).get_column("comm_key")).unique(
        ["comm_key", "mid"], keep="first", maintain_order=True
    )
    g = _topology_kinds(p)
    conn = _connections(g, dropped)
    rings, nch = _rings(g, comms, dropped)
    trees = _trees(p, g, dropped)
    via = conn.unique(["comm", "channel", "src_rank", "dst_rank"], keep="first", maintain_order=True).select(
        "comm", "channel", "src_rank", "dst_rank", "transport", "via"
    )
    keys = ["comm", "channel", "src_rank", "dst_rank"]
    edges = pl.concat([rings[[*keys, "kind"]], trees[[*keys, "kind"]]]).join(via, on=keys, how="left", nulls_equal=True)
    links = pl.concat([conn, edges], how="diagonal_relaxed").drop_nulls(["comm"])
    return links.unique(maintain_order=True), nch


def _topology_lines(p: pl.DataFrame, pick: pl.Series, heads: pl.DataFrame) -> pl.DataFrame:
    """The topology lines of :func:`_prefixed`'s lines ``p`` (with ``mid``; ``pick``: whether each distinct message
    is one, :func:`_message_kinds`' ``topology``) as :func:`_comm_links` reads them: ``line``, ``hid``, ``msg``,
    ``mid`` and their head's ``gpu``."""
    topo, _ = _picked(p, pick, "line", "hid", "msg")
    return topo.hstack([heads.get_column("gpu")[topo.get_column("hid")]])


def _transports(links: pl.DataFrame) -> list[dict[str, Any]]:
    """How many connections of ``links`` (:func:`_comm_links`) each (comm, via) has (``info.nccl.transports``)."""
    return links.filter(pl.col("kind") == "connection").group_by("comm", "via").len().sort("comm", "via").to_dicts()
