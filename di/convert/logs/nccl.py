"""NCCL ``NCCL_DEBUG=INFO``/``TRACE`` output (NCCL 2.7 to 2.29, RCCL alike), vectorised.

A line is found by its NCCL prefix ``host:pid:tid [cudaDev] NCCL INFO|WARN|TRACE``
anywhere in it (lines of several ranks glue together; a launcher prefix was
taken off by :mod:`.text`), with an optional leading timestamp
(``NCCL_DEBUG_TIMESTAMP_FORMAT``, ``[%F %T]`` or with fractions) and TRACE's
milliseconds since start. What it maps to:

- ``Init COMPLETE`` (or ``Init START`` where it never completed): one entry of
  ``sources[].info.nccl.comms`` per rank and communicator (comm pointer, commId,
  rank, nranks, host, pid, cudaDev, busId, version) and an instant event
  ``ncclCommInit`` (cat ``nccl``) with the same in args. The communicator of a
  COLL line is the commId where NCCL prints it (2.19+), else ``n<nranks>#<k>``: the
  k-th communicator of that size each process made (ranks create them in one order).
- ``Channel NN[/MM] : a[bus] -> b[bus] [send|receive] via TRANSPORT``: one entry of
  ``info.nccl.links`` (comm, channel, src_rank, dst_rank, transport); ``Channel NN/MM :
  r0 r1 ...`` lines give ``info.nccl.rings`` (comm, channel, nchannels, order) and
  ``Trees [c] a/b/c->me->parent`` lines ``info.nccl.trees`` (comm, channel, rank, parent, children).
- COLL lines (``AllReduce: opCount N sendbuff .. count N datatype D op O root R comm 0x..
  [nranks=N] stream 0x..``): an event (cat ``nccl``) and a ``collectives`` row;
  ``seq`` is the call's position per (rank, comm) in line order, never ``opCount``
  (0 on every call in NCCL 2.26+). The TUNING line after it (``N Bytes -> Algo RING
  proto SIMPLE``) adds algorithm and protocol to its args.
- ``NCCL WARN`` lines and errors (NCCL error codes, watchdog timeouts, IB completion
  errors): instant events ``NCCL WARN``/``NCCL error``.

Times: the line's timestamp where every placed line has one (``unix_epoch``); else
TRACE's ms since start; else the nearest timestamped line of the file (another
library's print: ``unix_epoch``, ``info.time = "nearest_line_timestamp"``, lines of
one second 1 ns apart in line order); else the line number in ns (``relative``,
``info.time = "line_order"``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.logs.build import EVENT_COLUMNS, Parts, keep_counted
from di.convert.logs.text import all_ascii, dense_ids, distinct_ids, lead_in

__all__ = ["DTYPES", "OPS", "SNIFF_RE", "parse_nccl"]

SNIFF_RE = r"\S+:\d+:\d+ \[\d+\] (?:[\d.]+ \S+:\d+ )?NCCL (?:INFO|WARN|TRACE)"
INIT_RE = (
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<crank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+)"
    r"(?: nvmlDev \d+)? busId (?P<busid>[0-9a-fA-F]+)(?: commId (?P<commid>0x[0-9a-f]+))?.*- Init (?P<state>START|COMPLETE)"
)
COLL_RE = (
    r"^(?P<opname>[A-Za-z]+): opCount (?P<opcount>[0-9a-f]+) sendbuff \S+ recvbuff \S+ count (?P<count>\d+) "
    r"datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) comm (?P<comm>0x[0-9a-f]+|\(nil\))"
    r"(?: \[nranks=(?P<nranks>\d+)\])? stream (?P<stream>\S+)"
)
COLL_FIELDS = {
    "opname": r"^([A-Za-z]+): opCount",
    "opcount": r"opCount ([0-9a-f]+)",
    "count": r" count (\d+)",
    "dt": r" datatype (\d+)",
    "redop": r" op (\d+)",
    "root": r" root (-?\d+)",
    "comm": r" comm (0x[0-9a-f]+|\(nil\))",
    "nranks": r"\[nranks=(\d+)\]",
    "stream": r" stream (\S+)",
}
"""The fields of a COLL line (COLL_RE's), each on its own."""
TUNE_RE = r"^(?P<opname>[A-Za-z]+): (?P<tbytes>\d+) Bytes -> Algo (?P<algo>\S+) proto (?P<proto>\S+)"
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
VERSION_RE = r"NCCL version (\d+\.\d+\.\d+\S*)|RCCL version (\d+\.\d+\.\d+\S*)"
ERROR_RE = (
    r"(?i)NCCL error|nccl(?:System|Internal|Remote|InvalidUsage|Unhandled\w*)Error|Watchdog caught collective operation timeout"
    r"|IBV_WC_\w+ ERR|ibv_\w+ failed|Call to ibv_\w+ failed|NCCL communicator was aborted"
)

DTYPES = {
    0: ("int8", 1),
    1: ("uint8", 1),
    2: ("int32", 4),
    3: ("uint32", 4),
    4: ("int64", 8),
    5: ("uint64", 8),
    6: ("float16", 2),
    7: ("float32", 4),
    8: ("float64", 8),
    9: ("bfloat16", 2),
    10: ("float8e4m3", 1),
    11: ("float8e5m2", 1),
}
"""ncclDataType_t values (nccl.h; 10 and 11 from NCCL 2.24) -> (name, bytes per element)."""
OPS = {
    "allreduce": "allreduce",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "allgather": "allgather",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "alltoallv": "alltoall",
    "allgatherv": "allgather",
}
"""NCCL's COLL line names (lower-cased) -> the canonical collective op."""
DTYPE_TABLE = pl.DataFrame(
    {"dt": list(DTYPES), "dtype": [v[0] for v in DTYPES.values()], "esize": [v[1] for v in DTYPES.values()]},
    schema={"dt": pl.Int64, "dtype": pl.String, "esize": pl.Int64},
)
""":data:`DTYPES` as a table to join on ``dt``."""
REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}


def _ts_ns(col: str) -> pl.Expr:
    return (
        pl.col(col)
        .str.replace(",", ".")
        .str.replace("T", " ")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ns")
        .dt.epoch("ns")
    )


HEAD_RE = (
    r"(?:\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\] ?)?(?P<host>[A-Za-z0-9][\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) "
    r"\[(?P<dev>\d+)\](?: (?P<ms>\d+\.\d+) \S+:\d+)?$"
)
"""What comes before `` NCCL LEVEL `` (found with a literal search, so the regex runs on these few bytes only)."""


LEVELS = ("INFO", "WARN", "TRACE", "ABORT")
LEVEL_HEX = {
    (level + end).encode().hex(): level for level in LEVELS for end in ("", *(" \t\n\v\f\r" if len(level) < 5 else ()))
}
"""The five bytes after `` NCCL `` (hex: they may end inside a character of a garbled line) that name a level: the
level, then whitespace or the line's end."""
KEY_BYTES = len(" NCCL ") + len("ABORT")
"""A line's key: its bytes up to and with the level's (the head, `` NCCL `` and five bytes)."""


TRACK = pl.format("NCCL {}:{} dev {}", "host", "pid", "dev")
"""An NCCL event's track: its process and (the communicator's) device."""


HEAD_COLUMNS = ("level", "host", "pid", "tid", "dev", "ts_ns", "ms_ns")
"""What a line's head gives (see :func:`_prefixed`)."""


def _with_heads(df: pl.DataFrame, heads: pl.DataFrame, *extra: str) -> pl.DataFrame:
    """``df`` (rows of :func:`_prefixed`'s lines) with its heads' :data:`HEAD_COLUMNS` (and ``extra`` columns of
    ``heads``): a gather by ``hid``."""
    # ``series[indices]`` gathers without the expression engine (``gather`` builds a query: ~10x the fixed cost)
    at = df.get_column("hid")
    return df.hstack([heads.get_column(name)[at] for name in (*HEAD_COLUMNS, *extra)])


def _prefixed(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The NCCL lines (``line``, ``prefix_rank``, ``hid``, ``msg``: the text after ``NCCL LEVEL``, and ``lid``, the
    line's text id, where the lines repeat: :func:`_repeated_lines`) and their distinct heads (row ``hid`` of the
    second table: :data:`HEAD_COLUMNS`, ``thread``, one id per host, pid and tid, and ``gpu``, one per host, pid and
    device).
    Each part gathers the head columns of the few lines it reads (:func:`_with_heads`): the lines' filters move four
    columns, not ten."""
    pos = pl.col("text").str.find(" NCCL ", literal=True)  # a byte offset
    rows = lines.select("line", "prefix_rank", "text", pos.alias("pos")).filter(pl.col("pos").is_not_null())
    # where whole lines repeat (a loop's calls and their TUNING lines, with no timestamp and opCount 0 or reused
    # buffers), the head and message of each distinct line are cut and read once (``lid``: the line's text id)
    repeated = _repeated_lines(rows.get_column("text"))
    lid = None if repeated is None else repeated[0]
    found = rows if repeated is None else rows[["text", "pos"]][repeated[1]]
    # cut at bytes (str.slice counts characters: a line with non-ASCII text before the prefix was cut wrong); the head
    # and level of a line are read from its key: keys repeat (one per thread and level, or per timestamp), so the cut
    # in two, the regex, host fix-up and casts run once per distinct key
    raw = pl.col("text").cast(pl.Binary)
    found = found.with_columns(raw.bin.slice(0, pl.col("pos") + KEY_BYTES).alias("key"))
    kid, firsts = distinct_ids(found.get_column("key"))
    key = pl.col("key")
    heads = found[["key", "pos"]].gather(firsts)  # the key holds its " NCCL " at pos: one pos per key
    head = key.bin.slice(0, pl.col("pos")).cast(pl.String)
    heads = (
        heads.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("kid"),
            head.alias("head"),
            key.bin.slice(pl.col("pos") + 6, 5)
            .bin.encode("hex")
            .replace_strict(LEVEL_HEX, default=None)
            .alias("level"),
            head.str.extract_groups(HEAD_RE).alias("g"),
        )
        .unnest("g")
        .filter(pl.col("level").is_in(LEVELS) & pl.col("host").is_not_null())
    )
    # a glued line's host may carry the tail of the line before it ("...N/A   0mew0:..."): the known host it ends with
    known = set(
        heads.filter(pl.col("head").str.starts_with(pl.col("host")) | pl.col("ts").is_not_null())
        .get_column("host")
        .unique()
    )
    fix = {
        h: max((k for k in known if h.endswith(k)), key=len, default=h)
        for h in heads.get_column("host").unique()
        if h not in known
    }
    if fix:
        heads = heads.with_columns(pl.col("host").replace(fix))
    heads = heads.select(
        "kid",
        "level",
        "host",
        *(pl.col(name).cast(pl.Int64, strict=False) for name in ("pid", "tid", "dev")),
        _ts_ns("ts").alias("ts_ns"),
        (pl.col("ms").cast(pl.Float64) * 1e6).round().cast(pl.Int64, strict=False).alias("ms_ns"),
        pl.col("ms").is_not_null().alias("has_ms"),
        pl.col("head").str.contains("CCL version ", literal=True).alias("head_version"),
    )
    # a pid, tid or device past int64, or a TRACE time past int64 ns, is no NCCL head (it stopped the load): its lines
    # are left to the unknown ones
    fits = pl.col("ms_ns").is_not_null() | ~pl.col("has_ms")
    heads = heads.drop_nulls(["pid", "tid", "dev"]).filter(fits).drop("has_ms").with_row_index("hid")
    heads = heads.with_columns(
        pl.col("hid").min().over("host", "pid", "tid").alias("thread"),  # one id per thread
        pl.col("hid").min().over("host", "pid", "dev").alias("gpu"),  # one id per process and device
    )
    # each line's head (null where its key is not a head's: those lines are not NCCL's) and the bytes of its level
    hid = pl.repeat(None, len(firsts), dtype=pl.UInt32, eager=True)
    hid = hid.scatter(heads.get_column("kid"), heads.get_column("hid"))[kid].rename("hid")
    skip = (7 + heads.get_column("level").str.len_bytes())[hid]
    # the message after "NCCL LEVEL ": one slice of the line (no copy of its rest first); the line's text and the
    # head's strings are not carried through the filters and joins that follow
    msg = found.hstack([skip.alias("skip")]).select(raw.bin.slice(pl.col("pos") + pl.col("skip")).cast(pl.String))
    cols = [hid, msg.to_series().alias("msg")]
    if lid is not None:
        cols = [col[lid] for col in cols] + [lid]
    p = rows[["line", "prefix_rank"]].hstack(cols)
    if hid.has_nulls():
        p = p.filter(pl.col("hid").is_not_null())
    return p, heads.drop("kid")


REPEATED_LINES = 0.3
"""Lines are read once per distinct text where at most this share of a sample of the NCCL lines is distinct."""
REPEAT_SAMPLE = 16384
"""Lines of that sample, spread over the file in :data:`REPEAT_BLOCK`-line runs (a file of more distinct lines is not
hashed whole for nothing)."""
REPEAT_BLOCK = 64
"""Lines of each run of the sample: the lines of a run lie side by side in memory (hashing lines strewn over the file
costs several times more, a cache miss each), and a loop's repeated lines still fall in several runs."""


def _line_sample(text: pl.Series) -> pl.Series:
    """:data:`REPEAT_SAMPLE` of the lines ``text`` in :data:`REPEAT_BLOCK`-line runs evenly spread (all of them where
    they are fewer)."""
    n = text.len()
    if n <= REPEAT_SAMPLE:
        return text
    runs = REPEAT_SAMPLE // REPEAT_BLOCK
    at = pl.int_range(REPEAT_SAMPLE, dtype=pl.Int64, eager=True)
    return text.gather((at // REPEAT_BLOCK) * (n // runs) + at % REPEAT_BLOCK)


def _repeated_lines(text: pl.Series) -> tuple[pl.Series, pl.Series] | None:
    """Each line's text id (``lid``, :func:`~di.convert.logs.text.dense_ids`) and the first line of each, where the lines repeat
    (:data:`REPEATED_LINES`); None where they do not, or two texts share a hash (then each line is read on its
    own)."""
    if not text.len():
        return None
    sample = _line_sample(text)
    if sample.hash().n_unique() > REPEATED_LINES * sample.len():  # equal texts, equal hashes
        return None
    ids, firsts = dense_ids(text.hash())
    if not text[firsts[ids]].eq_missing(text).all():
        return None
    return ids.rename("lid"), firsts


def _tuple_ids(*columns: tuple[pl.Series, int]) -> tuple[pl.Series, pl.Series]:
    """:func:`~di.convert.logs.text.dense_ids` of the rows' tuples of ids (each column's ids below its bound), packed in one u64; where
    the next column would overflow it, the tuples so far are ranked to dense ids first."""
    code, span = None, 1
    for ids, bound in columns:
        if code is not None and span * bound >= 2**64:
            code, firsts = dense_ids(code)
            span = len(firsts)
        code = ids.cast(pl.UInt64) if code is None else code.cast(pl.UInt64) * bound + ids.cast(pl.UInt64)
        span *= bound
    return dense_ids(code)


def _message_ids(p: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """``p`` (:func:`_prefixed`'s lines) with ``mid``, the id of its message, and the distinct messages (row ``mid``).

    Messages repeat (each rank prints the same topology and TUNING lines; a COLL line repeats its call's words where
    the opCount is 0, NCCL 2.26+, and the buffers are reused): every search and parse of a message kind runs once per
    distinct message, and the lines take the result by ``mid``."""
    msg = p.get_column("msg")
    # lines read once per distinct text (:func:`_prefixed`): the messages of those texts are told apart
    if "lid" in p.columns and p.height:
        lid = p.get_column("lid")
        lfirst = lid.is_first_distinct().arg_true()
        slot = pl.zeros(lid.max() + 1, pl.UInt32, eager=True).scatter(
            lid[lfirst], pl.int_range(len(lfirst), eager=True)
        )
        ids, firsts = distinct_ids(msg[lfirst])
        ids, firsts = ids[slot[lid]], lfirst[firsts]
    else:
        ids, firsts = distinct_ids(msg)
    # where the hashes told them apart, ids go in order of first line: the distinct messages lie in the order of the
    # text (the searches over them run several times faster than over messages in hash order)
    if not firsts.is_sorted():
        order = firsts.arg_sort()
        renumber = pl.zeros(len(order), pl.UInt32, eager=True).scatter(order, pl.int_range(len(order), eager=True))
        ids, firsts = renumber[ids], firsts[order]
    return p.hstack([ids.rename("mid")]), msg[firsts]


def _gathered(flags: pl.Series, at: pl.Series) -> pl.Series:
    """``flags[at]`` (Boolean): gathered as bytes, about a third of the CPU of a gather of bits (and by indexing:
    ``gather`` converts and checks the indices first)."""
    return flags.cast(pl.UInt8)[at] != 0


MESSAGE_TEXTS = {"coll": ": opCount ", "tune": " Bytes -> Algo ", "init": "Init ", "version": "CCL version "}
"""The texts that pick a distinct message for each kind of line's parse (COLL, TUNING, communicator init and version
lines): a message of a kind holds its text anywhere."""


def _message_kinds(msgs: pl.Series) -> dict[str, pl.Series]:
    """One bool per distinct message for each :data:`MESSAGE_TEXTS` kind, and ``topology``: the message begins with
    ``Channel ``, ``Ring `` or ``Tree``. The texts are found in one pass of all four (each one searched on its own
    costs about as much as the pass); the starts by comparing the strings' inline first bytes (:func:`lead_in`)."""
    texts = list(MESSAGE_TEXTS.values())
    found = msgs.str.extract_many(texts, overlapping=True).rename("found").to_frame()  # every occurrence of each
    m = pl.col("msg")
    topology = lead_in(m, "Channel ", "Channel!") | lead_in(m, "Ring ", "Ring!") | lead_in(m, "Tree", "Tref")
    picks = found.select(
        *(pl.col("found").list.contains(pl.lit(text)).alias(kind) for kind, text in MESSAGE_TEXTS.items()),
        msgs.rename("msg").to_frame().select(topology.alias("topology")).to_series(),
    )
    return {name: picks.get_column(name) for name in picks.columns}


def _picked(p: pl.DataFrame, pick: pl.Series, *columns: str) -> tuple[pl.DataFrame, pl.Series]:
    """The lines of ``p`` (with ``mid``; only its ``columns`` and ``mid`` where given) whose distinct message ``pick``
    (one bool per message) picks, and for each the row of its message among the picked ones (``msgs.filter(pick)``)."""
    keep = _gathered(pick, p.get_column("mid"))
    rows = pl.DataFrame([col.filter(keep) for col in (p[[*columns, "mid"]] if columns else p).iter_columns()])
    slot = pick.cast(pl.UInt32).cum_sum() - 1  # a picked message's row among the picked ones
    return rows, slot[rows.get_column("mid")]


def _matching(p: pl.DataFrame, msgs: pl.Series, pick: pl.Series, pattern: str, required: str) -> pl.DataFrame:
    """The lines whose message ``pick`` picks (see :func:`_picked`), with ``pattern``'s named groups as columns; those
    where ``required`` did not match dropped. The regex runs once per distinct message."""
    rows, at = _picked(p, pick)
    groups = msgs.filter(pick).str.extract_groups(pattern).struct.unnest()
    return rows.hstack([col[at] for col in groups.iter_columns()]).drop_nulls(required)


def _comms(
    p: pl.DataFrame,
    msgs: pl.Series,
    heads: pl.DataFrame,
    version: str | None,
    dropped: dict[str, int],
    kinds: dict[str, pl.Series],
) -> pl.DataFrame:
    """One row per communicator init line (the last state of each (host, pid, comm); ``kinds``:
    :func:`_message_kinds`); an init line whose rank,
    nranks or cudaDev is beyond int64 is counted in ``dropped`` and left out."""
    init = _matching(p[["line", "hid", "mid"]], msgs, kinds["init"], INIT_RE, "comm")  # the columns it keeps
    numbers = ("crank", "nranks", "cudadev")
    init = _with_heads(init, heads, "gpu")
    fits = pl.all_horizontal(
        pl.col(c).is_null() | pl.col(c).cast(pl.Int64, strict=False).is_not_null() for c in numbers
    )
    # a number the line does not have (cudaDev before 2.x) stays null
    init = keep_counted(init, fits, dropped, "communicator init lines with a number beyond int64")
    init = init.with_columns(pl.col(c).cast(pl.Int64) for c in numbers)
    init = init.sort(pl.col("state") == "COMPLETE", descending=True, maintain_order=True).unique(
        ["host", "pid", "comm"], keep="first", maintain_order=True
    )
    init = init.sort("line").with_columns((pl.int_range(pl.len()).over("host", "pid", "dev", "nranks")).alias("k"))
    return init.with_columns(
        pl.coalesce("commid", pl.format("n{}#{}", "nranks", "k")).alias("comm_key"), pl.lit(version).alias("version")
    )


def _ranks(p: pl.DataFrame, heads: pl.DataFrame, comms: pl.DataFrame) -> pl.Series:
    """Rank of each (host, pid, dev), at its ``gpu`` id (a row of ``heads``; null where none): the rank in the
    largest communicator it joined, else a launcher prefix's."""
    by_init = comms.sort("nranks", "line", descending=[True, False]).unique("gpu", keep="first")
    # the first line of each head, then of each (host, pid, dev): the first line of each (host, pid, dev)
    firsts = _with_heads(p.drop_nulls("prefix_rank").unique("hid", keep="first", maintain_order=True), heads, "gpu")
    by_prefix = firsts.unique("gpu", keep="first")
    rank = pl.repeat(None, heads.height, dtype=pl.Int64, eager=True)
    # a communicator's rank wins over a prefix's where it has one (a rank past int64 is none)
    for part, col in ((by_prefix, "prefix_rank"), (by_init, "crank")):
        part = part.drop_nulls(col)
        rank = rank.scatter(part.get_column("gpu"), part.get_column(col))
    return rank


COLL_TOKENS = {1: "opCount", 3: "sendbuff", 5: "recvbuff", 7: "count", 9: "datatype", 11: "op", 13: "root", 15: "comm"}
"""Word positions of a COLL line's field names in the layout of NCCL 2.7 to 2.29 (fields follow their names)."""


COLL_WORDS = [f"_w{i}" for i in range(20)]
"""Columns of a COLL line's first words (split at single spaces; null past its last word)."""


COLL_INTS = ("count", "dt", "root", "nranks", "redop")
"""A COLL line's integer fields: a number that is not one (a garbled word, an overflow) is null."""


def _coll_tail_fields(tails: pl.DataFrame) -> pl.DataFrame:
    """Fields of the usual layout from a COLL line's words past its buffers (``_tail``, one row per distinct tail),
    with ``_tail_ok``: the words name their fields where :data:`COLL_TOKENS` says."""
    tails = tails.with_columns(pl.col("_tail").str.split(" ").list.to_struct(fields=COLL_WORDS[7:]).alias("_t"))
    w = {i: pl.col(COLL_WORDS[i]) for i in range(7, len(COLL_WORDS))}
    has_nr = w[17].str.starts_with("[nranks=")
    return (
        tails.unnest("_t")
        .select(
            "_tail",
            pl.all_horizontal([w[i] == word for i, word in COLL_TOKENS.items() if i >= 7])
            .fill_null(False)
            .alias("_tail_ok"),
            w[8].alias("count"),
            w[10].alias("dt"),
            w[12].alias("redop"),
            w[14].alias("root"),
            w[16].alias("comm"),
            pl.when(has_nr).then(w[17].str.slice(8).str.strip_suffix("]")).alias("nranks"),
            pl.when(has_nr)
            .then(pl.when(w[18] == "stream").then(w[19]))
            .otherwise(pl.when(w[17] == "stream").then(w[18]))
            .alias("stream"),
        )
        .with_columns(pl.col(name).cast(pl.Int64, strict=False) for name in COLL_INTS)
    )


COLL_FIELDS_OUT = ("count", "dt", "redop", "root", "comm", "nranks", "stream")
"""The fields of a COLL line past its name and opCount, one row per ``fid`` (see :func:`_coll_by_tokens`)."""


def _coll_by_tokens(c: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """COLL lines (``msg``, in line order) with ``opname``, ``opcount`` and ``fid``, the row of their other fields in
    the second table (:data:`COLL_FIELDS_OUT`): one row per distinct tail of the usual layout (words
    :data:`COLL_WORDS` at single spaces; several times cheaper than regex captures), and one per line of another
    layout (:func:`_coll_by_regex`)."""
    # the words as columns at once (one struct; a lookup per word costs more). The seven words up to ``count`` (name,
    # opCount and buffers: new on each call) are split per line, the rest (count, datatype, op, root, comm, stream:
    # a few distinct tails) and their fields once per distinct tail, which the lines point at by ``fid``
    head = pl.col("msg").str.splitn(" ", 8).struct.rename_fields([*COLL_WORDS[:7], "_tail"]).alias("_h")
    c = c.with_columns(head).unnest("_h")
    fid, firsts = distinct_ids(c.get_column("_tail"))
    tails = _coll_tail_fields(c[["_tail"]][firsts])
    c = c.hstack([fid.alias("fid"), tails.get_column("_tail_ok")[fid]])
    w = [pl.col(name) for name in COLL_WORDS[:7]]
    heads_ok = pl.all_horizontal([w[i] == word for i, word in COLL_TOKENS.items() if i < 7]).fill_null(False)
    c = c.select(
        pl.exclude(*COLL_WORDS[:7], "_tail", "_tail_ok", "fid"),
        w[0].str.strip_suffix(":").alias("opname"),
        w[2].alias("opcount"),
        "fid",
        (heads_ok & pl.col("_tail_ok")).alias("_usual"),
    )
    fields = tails[list(COLL_FIELDS_OUT)]
    usual = c.get_column("_usual")
    if not usual.all():  # lines of another layout: their fields by regex, one row each past the tails'
        at = (~usual).arg_true()
        odd = _coll_by_regex(c.select(pl.col("msg").gather(at)))
        fid = pl.int_range(fields.height, fields.height + odd.height, dtype=pl.UInt32, eager=True)
        fields = pl.concat([fields, odd[list(COLL_FIELDS_OUT)]])
        c = c.with_columns(
            c.get_column("fid").scatter(at, fid),
            c.get_column("opname").scatter(at, odd.get_column("opname")),
            c.get_column("opcount").scatter(at, odd.get_column("opcount")),
        )
    return c.drop("_usual"), fields


def _coll_by_regex(c: pl.DataFrame) -> pl.DataFrame:
    """COLL lines of another layout: one small regex per field (each finds its literal first and captures over a
    few bytes; one regex of all fields runs the capturing engine over the whole line, several times slower)."""
    m = pl.col("msg")
    c = c.select(pl.exclude(COLL_FIELDS), **{name: m.str.extract(rx) for name, rx in COLL_FIELDS.items()})
    return c.with_columns(pl.col(name).cast(pl.Int64, strict=False) for name in COLL_INTS)


JSON_ESCAPED = r'[\x00-\x1f"\\]'
"""Characters a JSON string escapes (polars' ``json_encode`` escapes these and no others)."""


def _tunings(
    p: pl.DataFrame, msgs: pl.Series, heads: pl.DataFrame, c: pl.DataFrame, pick: pl.Series
) -> tuple[pl.Series, pl.DataFrame]:
    """For each COLL line of ``c`` (in line order, with ``thread``), the row of its TUNING line's (algo, proto) in
    the second table (null where none); ``pick``: the messages that hold a TUNING line's text. A TUNING line belongs to the last COLL line before it on its thread; a COLL
    line takes the first TUNING line that belongs to it."""
    none = pl.repeat(None, c.height, dtype=pl.UInt32, eager=True).rename("tune")
    rows, at = _picked(p, pick, "line", "hid")
    # the regex runs once per distinct message (one per collective size); a message it does not match is no TUNING line
    algos = msgs.filter(pick).str.extract_groups(TUNE_RE).struct.unnest()
    matched = algos.get_column("algo").is_not_null()
    tune = (matched.cast(pl.UInt32).cum_sum() - 1)[at]  # the message's row among the matched ones
    algos = algos.filter(matched)[["algo", "proto"]]
    kept = matched[at]
    t = rows.select("line", "hid", tune.alias("tune")).filter(kept)
    if not t.height:
        return none, algos
    t = t[["line", "tune"]].hstack([heads.get_column("thread")[t.get_column("hid")]])
    colls = c.select("thread", pl.col("line").alias("coll_line"), pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"))
    t = (
        t.join_asof(
            colls,
            left_on="line",
            right_on="coll_line",
            by="thread",
            strategy="backward",
            check_sortedness=False,  # both in line order
        )
        .drop_nulls("coll_line")
        .unique("coll_line", keep="first", maintain_order=True)
    )
    return none.scatter(t.get_column("row"), t.get_column("tune")), algos


COLL_SCHEMA = {
    "rank": pl.Int64,
    "host": pl.String,
    "pid": pl.Int64,
    "dev": pl.Int64,
    "line": pl.UInt32,
    "ts_ns": pl.Int64,
    "ms_ns": pl.Int64,
    "name": pl.String,
    "cat": pl.String,
    "instant": pl.Boolean,
    "args": pl.String,
    **{c: EVENT_COLUMNS[c] for c in ("op", "comm", "seq", "instance_key", "root", "dtype", "group_size", "bytes")},
    "track": pl.String,
}
"""The columns of :func:`_collectives`' rows (``line`` as the lines' own)."""


def _collectives(
    p: pl.DataFrame, msgs: pl.Series, heads: pl.DataFrame, comms: pl.DataFrame, kinds: dict[str, pl.Series]
) -> tuple[pl.DataFrame, int]:
    """The COLL lines' collectives, and how many COLL lines there were (those of an unknown layout are dropped);
    ``heads`` with their ``rank``; ``kinds``: :func:`_message_kinds`."""
    pick = kinds["coll"]
    if not pick.any():  # no COLL line (most logs): none of the ~60 steps below on empty frames
        return pl.DataFrame(schema={**COLL_SCHEMA, "line": p.schema["line"]}), 0
    rows, at = _picked(p, pick, "line", "hid")
    n_lines = rows.height
    # each distinct COLL message is read once: its name, opCount and the row of its other fields
    words, fields = _coll_by_tokens(msgs.filter(pick).to_frame())
    # a line without its name, count or datatype is dropped, counted with those of an unknown layout
    fields_ok = fields.select(pl.all_horizontal(pl.col("count", "dt", "comm").is_not_null())).to_series()
    ok = words.get_column("opname").is_not_null() & fields_ok[words.get_column("fid")]
    # the op of each distinct name (a few), not a lower-casing of each line's
    ops = {name: OPS.get(name.lower(), "other") for name in words.filter(ok).get_column("opname").unique().to_list()}
    words = words.with_columns(pl.col("opname").replace_strict(ops, default=None, return_dtype=pl.String).alias("op"))
    # one search of the kept messages' opCounts joined (a few bytes each), not one per line
    raw_opcount = words.filter(ok).get_column("opcount")
    escape = raw_opcount.has_nulls() or raw_opcount.str.join("").str.contains(JSON_ESCAPED).any()
    keep = ok[at]
    at = at.filter(keep)
    c = rows.filter(keep)[["line", "hid"]].hstack(
        [words.get_column(name)[at] for name in ("opname", "opcount", "fid", "op")]
    )
    c = c.hstack([heads.get_column("thread")[c.get_column("hid")]])
    tune, algos = _tunings(p, msgs, heads, c, kinds["tune"])
    c = c.with_columns(tune)
    # what a line's head, fields and TUNING line give (comm, rank, device, sizes, most of its args) is worked out once
    # per kind of line, a distinct (head, fields, TUNING) (table ``k``), and gathered by the line's kind (``at``): a few
    # kinds for thousands of lines
    hid, fid, tune = (c.get_column(name) for name in ("hid", "fid", "tune"))
    at, firsts = _tuple_ids((hid, heads.height), (fid, fields.height), ((tune + 1).fill_null(0), algos.height + 1))
    k = pl.concat(
        [
            heads[["host", "pid", "dev", "ts_ns", "ms_ns", "rank"]].gather(hid[firsts]),
            fields.gather(fid[firsts]),
            algos.gather(tune[firsts]),
        ],
        how="horizontal",
    )
    key = comms.select(
        "host",
        "pid",
        pl.col("comm").alias("comm_ptr"),
        "comm_key",
        "crank",
        pl.col("nranks").alias("cn"),
        "grank",
        "cudadev",
    )
    k = (
        k.rename({"comm": "comm_ptr"})
        .join(key, on=["host", "pid", "comm_ptr"], how="left", maintain_order="left")
        .join(DTYPE_TABLE, on="dt", how="left", maintain_order="left")
    )
    # a COLL line of a comm whose init was not logged: host, pid and pointer (formatted only where there is one)
    comm = pl.col("comm_key")
    if k.get_column("comm_key").has_nulls():
        comm = pl.coalesce(comm, pl.format("{}:{}:{}", "host", "pid", "comm_ptr"))
    k = k.with_row_index("kind").with_columns(
        comm.alias("comm"),
        # one thread may drive several GPUs: the comm's device and rank, not the line's
        pl.coalesce("grank", "rank").alias("rank"),
        pl.coalesce("cudadev", "dev").alias("dev"),
    )
    # the args past opCount and up to the line's number: a JSON object's middle
    mid = pl.struct(
        "count",
        pl.col("dt").alias("datatype"),
        pl.col("redop").replace_strict(REDOPS, default=None, return_dtype=pl.String).alias("redop"),
        "comm_ptr",
        pl.col("crank").alias("comm_rank"),
        "stream",
        "algo",
        "proto",
        "dev",
    ).struct.json_encode()
    k = k.with_columns(
        pl.format(',{},"line":', mid.str.slice(1, mid.str.len_chars() - 2)).alias("args_mid"),
        (pl.col("count") * pl.col("esize")).alias("bytes"),
        pl.coalesce("nranks", "cn").alias("group_size"),
        TRACK.alias("track"),
        # the calls of one (rank, comm) are numbered in line order: one id per (rank, comm)
        pl.col("kind").min().over("rank", "comm").alias("group"),
    )
    cols = (
        "rank",
        "host",
        "pid",
        "dev",
        "ts_ns",
        "ms_ns",
        "comm",
        "root",
        "dtype",
        "group_size",
        "bytes",
        "args_mid",
        "track",
    )
    c = c.hstack([k.get_column(name)[at] for name in (*cols, "group")])
    opcount = pl.col("opcount")
    if escape:
        opc = pl.struct(opcount.alias("opCount")).struct.json_encode().str.head(-1)
    else:
        opc = pl.concat_str(pl.lit('{"opCount":"'), opcount, pl.lit('"'))
    c = c.with_columns(pl.int_range(pl.len()).over("group").cast(pl.Int64).alias("seq"))
    coll = c.select(
        "rank",
        "host",
        "pid",
        "dev",
        "line",
        "ts_ns",
        "ms_ns",
        pl.col("opname").alias("name"),
        pl.lit("nccl").alias("cat"),
        pl.lit(False).alias("instant"),
        pl.concat_str(opc, pl.col("args_mid"), pl.col("line").cast(pl.String), pl.lit("}")).alias("args"),
        "op",
        "comm",
        "seq",
        pl.format("{}#{}", "comm", "seq").alias("instance_key"),
        "root",
        "dtype",
        "group_size",
        "bytes",
        "track",
    )
    return coll, n_lines


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


def _instants(p: pl.DataFrame, msgs: pl.Series, heads: pl.DataFrame) -> pl.DataFrame:
    """``NCCL WARN`` lines and errors as instant events (``heads`` with their ``rank``)."""
    warned = heads.get_column("level") == "WARN"  # per head (row hid), and per distinct message: one search each
    errors = msgs.str.contains(ERROR_RE)
    # the few rows gathered (a filter of the frame copies every column of every line)
    warn = p[(_gathered(warned, p.get_column("hid")) | _gathered(errors, p.get_column("mid"))).arg_true()]
    warn = _with_heads(warn, heads, "rank")
    return warn.with_columns(
        pl.when(pl.col("level") == "WARN").then(pl.lit("NCCL WARN")).otherwise(pl.lit("NCCL error")).alias("name"),
        pl.lit("nccl").alias("cat"),
        pl.lit(True).alias("instant"),
        pl.struct("msg", "dev", "tid", "line").struct.json_encode().alias("args"),
    )


def _version_lines(
    lines: pl.DataFrame, p: pl.DataFrame, msgs: pl.Series, heads: pl.DataFrame, pick: pl.Series
) -> pl.DataFrame:
    """The lines :data:`VERSION_RE` matches (``line``, its groups ``1`` and ``2``), in line order.

    An NCCL line whose head holds no ``CCL version `` is searched in its message (``pick``: the distinct messages
    that hold it), once per distinct message: there
    the match is the line's (none can span the ``NCCL LEVEL`` between, which holds no ``CCL version`` and ends in
    whitespace, or begin in a head, which ends in ``]`` or a digit). The other lines are searched whole."""
    if heads.get_column("head_version").any():
        p = p.filter(~_gathered(heads.get_column("head_version"), p.get_column("hid")))
    outside = pl.ones(lines.height, pl.Boolean, eager=True).scatter(p.get_column("line"), False).arg_true()
    text = lines.get_column("text").gather(outside)
    has = text.str.contains("CCL version ", literal=True)
    whole = (
        pl.DataFrame([lines.get_column("line").gather(outside.filter(has)), text.filter(has)])
        .select("line", pl.col("text").str.extract_groups(VERSION_RE).alias("g"))
        .unnest("g")
    )
    rows, at = _picked(p, pick, "line")
    groups = msgs.filter(pick).str.extract_groups(VERSION_RE).struct.unnest()
    in_msg = rows.select("line").hstack([col[at] for col in groups.iter_columns()])
    ver = pl.concat([whole, in_msg]) if in_msg.height else whole
    if whole.height and in_msg.height:
        ver = ver.sort("line")
    return ver.filter(pl.col("1").is_not_null() | pl.col("2").is_not_null())


def parse_nccl(lines: pl.DataFrame) -> Parts:
    """NCCL debug lines of a log (``lines`` from :func:`di.convert.logs.text.read_lines`) as :class:`Parts`."""
    p, heads = _prefixed(lines)
    p, msgs = _message_ids(p)
    kinds = _message_kinds(msgs)
    ver = _version_lines(lines, p, msgs, heads, kinds["version"])
    versions = (
        sorted(set(ver.get_column("1").drop_nulls().to_list()) | set(ver.get_column("2").drop_nulls().to_list()))
        if ver.height
        else []
    )
    version = versions[0] if len(versions) == 1 else None
    if not p.height:
        return Parts(
            "nccl",
            claimed=ver.get_column("line"),
            info={"nccl": {"versions": versions}} if versions else {},
        )
    dropped: dict[str, int] = {}
    comms = _comms(p, msgs, heads, version, dropped, kinds)
    rank = _ranks(p, heads, comms)
    # each communicator's and head's rank: that of its (host, pid, dev)
    comms = comms.hstack([rank[comms.get_column("gpu")].alias("grank")])
    heads = heads.hstack([rank[heads.get_column("gpu")].alias("rank")])
    coll, n_coll_lines = _collectives(p, msgs, heads, comms, kinds)
    inits = comms.with_columns(
        pl.lit("ncclCommInit").alias("name"),
        pl.lit("nccl").alias("cat"),
        pl.lit(True).alias("instant"),
        pl.col("grank").alias("rank"),
        pl.struct(
            pl.col("comm_key").alias("comm"),
            pl.col("comm").alias("comm_ptr"),
            pl.col("crank").alias("comm_rank"),
            "nranks",
            "cudadev",
            "busid",
            "version",
            "state",
            "line",
        )
        .struct.json_encode()
        .alias("args"),
    )
    inst = _instants(p, msgs, heads)
    cols = ["rank", "host", "pid", "dev", "line", "ts_ns", "ms_ns", "name", "cat", "instant", "args"]
    extra = ["op", "comm", "seq", "instance_key", "root", "dtype", "group_size", "bytes"]
    ev = pl.concat([coll[cols + extra], inits[cols], inst[cols]], how="diagonal_relaxed")
    timed = ev.get_column("ts_ns").is_not_null().all()
    trace_ms = not timed and ev.get_column("ms_ns").is_not_null().all()
    # else the time of the nearest timestamped line of the file (another library's, a training log's), kept in line order
    near = not timed and not trace_ms and "line_ts" in lines.columns and lines.get_column("line_ts").is_not_null().any()
    if near:
        ev = ev.join(lines[["line", "line_ts"]], on="line", how="left")
        t = pl.col("line_ts") + (pl.col("line").cast(pl.Int64) - pl.col("line").cast(pl.Int64).min().over("line_ts"))
    else:
        t = pl.col("ts_ns") if timed else (pl.col("ms_ns") if trace_ms else pl.col("line").cast(pl.Int64))
    # the collectives' tracks were formatted once per kind of COLL line, in the rows' order unless joined above
    track = (
        TRACK
        if near
        else pl.concat([coll.get_column("track"), inits.select(TRACK).to_series(), inst.select(TRACK).to_series()])
    )
    ev = ev.with_columns(t.alias("start_ns"), t.alias("end_ns"), track.alias("track"))
    topo, _ = _picked(p, kinds["topology"], "line", "hid", "msg")
    topo = topo.hstack([heads.get_column("gpu")[topo.get_column("hid")]])
    topology: dict[str, int] = {}  # listed after the COLL lines' reason
    links, nch = _comm_links(topo, comms, topology)
    info: dict[str, Any] = {
        "nccl": {
            "versions": versions,
            "time": "timestamps"
            if timed
            else ("trace_ms_since_start" if trace_ms else ("nearest_line_timestamp" if near else "line_order")),
            "transports": links.filter(pl.col("kind") == "connection")
            .group_by("comm", "via")
            .len()
            .sort("comm", "via")
            .to_dicts(),
        }
    }
    bad_coll = n_coll_lines - coll.height
    if bad_coll:
        dropped["COLL lines in an unknown layout"] = bad_coll
    dropped.update(topology)
    claimed = pl.concat([p.get_column("line"), ver.get_column("line")])
    tables = {"comms": _comms_table(comms, ver, nch), "comm_links": links}
    return Parts("nccl", events=ev, claimed=claimed, dropped=dropped, info=info, epoch=timed or near, tables=tables)


def _comms_table(comms: pl.DataFrame, ver: pl.DataFrame, nch: pl.DataFrame) -> pl.DataFrame:
    """The ``comms`` table (see its schema): each init's version is the nearest ``NCCL version`` line before it
    (after it, for a log that prints it late)."""
    if ver.height:
        v = ver.select("line", pl.coalesce("1", "2").alias("ver")).drop_nulls("ver").sort("line")
        comms = comms.sort("line")
        back = comms.join_asof(v, on="line", strategy="backward").get_column("ver")
        fwd = comms.join_asof(v, on="line", strategy="forward").get_column("ver")
        comms = comms.with_columns(pl.coalesce(back, fwd, pl.col("version")).alias("version"))
    nch = nch.group_by("comm").agg(pl.col("nchannels").max())
    return (
        comms.join(nch, left_on="comm_key", right_on="comm", how="left")
        .sort("line")
        .select(
            pl.col("comm_key").alias("comm"),
            pl.col("commid").alias("comm_id"),
            pl.col("comm").alias("comm_ptr"),
            pl.col("grank").alias("rank"),
            pl.col("crank").alias("comm_rank"),
            "nranks",
            "host",
            "pid",
            pl.col("cudadev").alias("device"),
            pl.col("busid").alias("bus_id"),
            "version",
            "nchannels",
            "state",
        )
    )
