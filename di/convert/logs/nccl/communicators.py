"""Communicators from the ``Init START``/``Init COMPLETE`` lines: one row per (host, pid, comm), the rank of each
process and device, and the ``comms`` table."""

from __future__ import annotations

import polars as pl

from di.convert.logs.build import keep_counted
from di.convert.logs.nccl.heads import _with_heads
from di.convert.logs.nccl.messages import _matching

INIT_RE = (
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<crank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cudadev>\d+)"
    r"(?: nvmlDev \d+)? busId (?P<busid>[0-9a-fA-F]+)(?: commId (?P<commid>0x[0-9a-f]+))?.*- Init (?P<state>START|COMPLETE)"
)


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


def _with_ranks(p: pl.DataFrame, heads: pl.DataFrame, comms: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``comms`` with ``grank`` and ``heads`` with ``rank``: each one's rank, that of its (host, pid, dev)
    (:func:`_ranks`)."""
    rank = _ranks(p, heads, comms)
    comms = comms.hstack([rank[comms.get_column("gpu")].alias("grank")])
    heads = heads.hstack([rank[heads.get_column("gpu")].alias("rank")])
    return comms, heads


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
