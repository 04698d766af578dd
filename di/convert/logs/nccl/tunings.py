"""TUNING lines (``AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE ...``): the algorithm and protocol of the
COLL line before each on its thread."""

from __future__ import annotations

import polars as pl

from di.convert.logs.nccl.messages import _picked

TUNE_RE = r"^(?P<opname>[A-Za-z]+): (?P<tbytes>\d+) Bytes -> Algo (?P<algo>\S+) proto (?P<proto>\S+)"


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
