"""``NCCL version``/``RCCL version`` lines, with an NCCL prefix or bare."""

from __future__ import annotations

import polars as pl

from di.convert.logs.nccl.messages import _gathered, _picked

VERSION_RE = r"NCCL version (\d+\.\d+\.\d+\S*)|RCCL version (\d+\.\d+\.\d+\S*)"


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


def _versions(ver: pl.DataFrame) -> list[str]:
    """The distinct versions of the version lines ``ver`` (:func:`_version_lines`), sorted."""
    if not ver.height:
        return []
    return sorted(set(ver.get_column("1").drop_nulls().to_list()) | set(ver.get_column("2").drop_nulls().to_list()))
