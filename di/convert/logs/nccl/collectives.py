"""COLL lines as collective events (cat ``nccl``): op, communicator, rank, ``seq`` per (rank, comm) in line order,
size in bytes, and args with the TUNING line's algorithm and protocol."""

from __future__ import annotations

import polars as pl

from di.convert.logs.build import EVENT_COLUMNS
from di.convert.logs.nccl.coll_fields import _coll_by_tokens
from di.convert.logs.nccl.heads import TRACK
from di.convert.logs.nccl.messages import _picked
from di.convert.logs.nccl.tunings import _tunings
from di.convert.logs.text import dense_ids

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


JSON_ESCAPED = r'[\x00-\x1f"\\]'
"""Characters a JSON string escapes (polars' ``json_encode`` escapes these and no others)."""


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
    c, fields, escape, n_lines = _coll_lines(p, msgs, heads, pick)
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
    k = _kind_columns(_kind_comms(k, comms))
    c = c.hstack([k.get_column(name)[at] for name in (*KIND_COLUMNS, "group")])
    return _coll_rows(c, escape), n_lines


def _coll_lines(
    p: pl.DataFrame, msgs: pl.Series, heads: pl.DataFrame, pick: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame, bool, int]:
    """The COLL lines (``pick``: the messages that are COLL lines) of a known layout (``line``, ``hid``, ``opname``,
    ``opcount``, ``fid``: their row of the fields, ``op``, ``thread``), the distinct messages' fields
    (:func:`_coll_by_tokens`), whether an opCount needs escaping in JSON, and how many COLL lines there were."""
    rows, at = _picked(p, pick, "line", "hid")
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
    return c, fields, escape, rows.height


def _kind_comms(k: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    """The kinds of COLL line ``k`` (row ``kind``) with their communicator (``comm``: its key, or host, pid and
    pointer where its init was not logged; ``comm_ptr``, ``crank``, ``cn``: its size) and data type (``dtype``,
    ``esize``); ``rank`` and ``dev`` those of the communicator where it is known."""
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
    return k.with_row_index("kind").with_columns(
        comm.alias("comm"),
        # one thread may drive several GPUs: the comm's device and rank, not the line's
        pl.coalesce("grank", "rank").alias("rank"),
        pl.coalesce("cudadev", "dev").alias("dev"),
    )


KIND_COLUMNS = (
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
"""What a COLL line takes from its kind (:func:`_kind_columns`), with the kind's ``group``."""


def _kind_columns(k: pl.DataFrame) -> pl.DataFrame:
    """``k`` (:func:`_kind_comms`) with ``args_mid`` (the args past opCount and up to the line's number), ``bytes``,
    ``group_size``, ``track`` and ``group``, one id per (rank, comm)."""
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
    return k.with_columns(
        pl.format(',{},"line":', mid.str.slice(1, mid.str.len_chars() - 2)).alias("args_mid"),
        (pl.col("count") * pl.col("esize")).alias("bytes"),
        pl.coalesce("nranks", "cn").alias("group_size"),
        TRACK.alias("track"),
        # the calls of one (rank, comm) are numbered in line order: one id per (rank, comm)
        pl.col("kind").min().over("rank", "comm").alias("group"),
    )


def _coll_rows(c: pl.DataFrame, escape: bool) -> pl.DataFrame:
    """The collectives (:data:`COLL_SCHEMA`) of the COLL lines ``c`` with their kinds' columns: ``seq`` numbered per
    ``group``, args the opCount (escaped for JSON where ``escape``), the kind's middle and the line's number."""
    opcount = pl.col("opcount")
    if escape:
        opc = pl.struct(opcount.alias("opCount")).struct.json_encode().str.head(-1)
    else:
        opc = pl.concat_str(pl.lit('{"opCount":"'), opcount, pl.lit('"'))
    c = c.with_columns(pl.int_range(pl.len()).over("group").cast(pl.Int64).alias("seq"))
    return c.select(
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
