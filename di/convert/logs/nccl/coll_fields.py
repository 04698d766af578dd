"""The fields of a COLL line (``AllReduce: opCount N sendbuff .. recvbuff .. count N datatype D op O root R comm
0x.. [nranks=N] stream 0x..``): by word position in the usual layout (NCCL 2.7 to 2.29), by one small regex per
field in another."""

from __future__ import annotations

import polars as pl

from di.convert.logs.text import distinct_ids

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
