"""The numeric ``key: value`` pairs of a training log's step lines, read once per distinct pair.

:func:`_pairs` gives three tables (pairs, distinct pairs' values, distinct keys) that the steps and samples gather
from by row (:func:`_of_key`, :func:`_of_pair`, :func:`_of_row`); the pairs are found by the numba scan
(:func:`~di.convert.logs.pairscan.line_pairs`) on long ASCII logs, else by :func:`_regex_pairs` and
:func:`_read_values`, which find the same. MLPerf lines give their ``"key"`` and ``"value"`` as written.
"""

from __future__ import annotations

import polars as pl

from di.convert.logs.text import ASCII_MODE
from di.convert.logs.training.keys import _KEYS, STEP_KEYS, _norm
from di.convert.logs.training.patterns import LEVEL_HEAD_RE, PAIR_RE, TAGS_RE


def _group_ids(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The distinct rows of ``df`` (in no order) and each row's place among them (u32), from one hash grouping (an
    Enum of thousands of strings, or a unique() then a join, costs a second and slower lookup per row)."""
    groups = df.with_row_index("_i").group_by(df.columns).agg("_i")
    members = groups.select(pl.int_range(0, pl.len(), dtype=pl.UInt32).alias("g"), "_i").explode("_i")
    ids = pl.Series("g", [], pl.UInt32).extend_constant(0, df.height).scatter(members["_i"], members["g"])
    return groups.drop("_i"), ids


def _regex_pairs(
    text: pl.Series, kind: pl.Series, level_heads: bool, ascii: bool
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """:func:`~di.convert.logs.pairscan.line_pairs` by polars regexes (``ascii``: every line is ASCII), as (pairs:
    ``r``, ``at``; distinct pairs: ``rest``, ``code``; keys as written)."""
    body = text.str.replace(TAGS_RE, "")
    if level_heads:
        body = body.str.replace(r"^.*?" + LEVEL_HEAD_RE, "")
    other = pl.DataFrame({"r": pl.int_range(0, text.len(), dtype=pl.UInt32, eager=True), "pair": body})
    mllog = kind == "mllog"
    if mllog.any():
        other = other.filter(~mllog)
    # the row number is the only column copied to each of a line's pairs
    p = other.select("r", pl.col("pair").str.extract_all(ASCII_MODE + PAIR_RE if ascii else PAIR_RE)).explode("pair")
    p = p.drop_nulls("pair")
    # pairs repeat ("skipped=0,", a memory reading, a constant lr: a third to a half are distinct in real logs): each
    # distinct pair is cut and read once, and every pair gathers its key code, value and unit by its row among them
    d, at = _group_ids(p.select("pair"))
    # a pair matched PAIR_RE: cut it at its first ':' or '=' (no capturing regex), the unit is what follows the
    # number; one column per step: an expression reused inside another would be evaluated again (no
    # common-subexpression elimination in eager frames)
    d = d.with_columns(pl.col("pair").str.find("[:=]").alias("pos"))
    if ascii:  # str.find gives a byte offset, str.slice counts characters: the same on ASCII text
        key, rest = pl.col("pair").str.head(pl.col("pos")), pl.col("pair").str.slice(pl.col("pos") + 1)
    else:  # cut at bytes (a non-ASCII key would shift the value)
        pair = pl.col("pair").cast(pl.Binary)
        key = pair.bin.slice(0, pl.col("pos")).cast(pl.String)
        rest = pair.bin.slice(pl.col("pos") + 1).cast(pl.String)
    d = d.select(key.alias("k"), rest.alias("rest"))
    ks = d.get_column("k").unique()  # in any order: a code is only a row of the table
    code = d.get_column("k").cast(pl.Enum(ks)).to_physical().cast(pl.Int64).alias("code")
    return pl.DataFrame([p.get_column("r"), at.cast(pl.UInt32).alias("at")]), pl.DataFrame([d["rest"], code]), ks


def _read_values(rest: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Per pair's text after its ``:`` or ``=`` (``rest``): its value (f64, null where it reads as no number) and
    unit (the suffix after the number, null for none)."""
    # most values are a bare number; the others (spaces or '[' before, a ',' in, a unit after) are cut on their
    # own rows: a bare number holds none of the characters cut, and none of the others casts (nor one with a ',')
    value = rest.cast(pl.Float64, strict=False)
    again = value.is_null().arg_true()
    u = pl.Series("u", [], pl.String).extend_constant(None, rest.len())
    if again.len():
        cut_rest = rest.gather(again).str.strip_chars_start(" [")
        v = cut_rest.str.strip_chars_end("%KMGTiBms")  # "1,024", "0," (a ',' after a number is taken by [\d,]*)
        value = value.scatter(again, v.str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False))
        cut = cut_rest.str.len_bytes() != v.str.len_bytes()
        if cut.any():
            u = u.scatter(again.filter(cut), cut_rest.filter(cut).str.strip_prefix(v.filter(cut)))
    return value, u


def _pairs(rows: pl.DataFrame, ascii: bool, scan: bool) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The numeric pairs of ``rows``, their distinct pairs' values and the table of their distinct keys.

    Pairs: one row per pair, in line order (MLPerf lines after the others): ``r`` (the row of ``rows`` it is on) and
    ``at`` (its row of the values); a pair's line, rank, kind and time are its row's (:func:`_of_row`), its code,
    value and unit its value row's (:func:`_of_pair`), gathered where needed. Values: one row per distinct pair (the
    scan: per pair that does not repeat its key's last value) and per MLPerf line: ``code`` (its key's row in the table, null for an MLPerf line without a key), ``value`` (float,
    null when unreadable) and ``u`` (the value's own unit suffix, null for none). Keys: per code, ``key``
    (normalised; MLPerf keys as written), ``series`` (from :data:`KEYS`, else the key), ``unit`` (from :data:`KEYS`,
    null: the value's suffix), ``o`` (the key's place in :data:`STEP_KEYS`, null for a non-step key), ``sample``
    (the key is no step key: its pairs are samples) and ``sid`` (the series' number). Pairs repeat a few dozen keys:
    each is normalised and looked up once, and the values carry its integer code, not the string. ``ascii``: every
    line of ``rows`` is ASCII; ``scan``: they are read by :func:`~di.convert.logs.pairscan.line_pairs`, else by
    :func:`_regex_pairs`."""
    text = rows.get_column("text")
    kind = rows.get_column("kind")
    p, vals, ks = _found_pairs(text, kind, ascii, scan)
    keys = pl.DataFrame({"k": ks}).select(pl.col("k").str.strip_chars(" '\"").alias("key"))
    keys = keys.select(_norm("key").alias("key"))
    ml_rows = (kind == "mllog").arg_true()
    if ml_rows.len():  # MLPerf keys as written, after the others
        p, vals, keys = _with_mllog_pairs(p, vals, keys, text.gather(ml_rows), ml_rows)
    return p, vals, _key_table(keys)


def _found_pairs(
    text: pl.Series, kind: pl.Series, ascii: bool, scan: bool
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """The pairs of the lines ``text`` (of kinds ``kind``) but MLPerf's, as (pairs: ``r``, ``at``; values: ``code``,
    ``value``, ``u``; keys as written, by code): by :func:`~di.convert.logs.pairscan.line_pairs` where ``scan``,
    else by :func:`_regex_pairs` and :func:`_read_values` (``ascii``: every line is ASCII)."""
    level_heads = bool(text.str.contains(LEVEL_HEAD_RE).any())  # Python logging's "name - LEVEL - ": only where it is
    if scan:
        from di.convert.logs.pairscan import line_pairs

        found = line_pairs(text, kind == "mllog", level_heads=level_heads)
        p = pl.DataFrame([found.row, found.at])
        value, u, ks, code = found.value, found.unit, found.keys, found.key_code
    else:
        p, d, ks = _regex_pairs(text, kind, level_heads, ascii)
        value, u = _read_values(d.get_column("rest"))
        code = d.get_column("code")
    return p, pl.DataFrame([code.alias("code"), value.alias("value"), u.alias("u")]), ks


def _with_mllog_pairs(
    p: pl.DataFrame, vals: pl.DataFrame, keys: pl.DataFrame, ml_text: pl.Series, ml_rows: pl.Series
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """``p``, ``vals`` and ``keys`` (:func:`_pairs`' tables, keys not yet looked up) with one pair per MLPerf line
    (``ml_text``, the rows ``ml_rows`` of the lines) after the others: its ``"key"`` as written (a new code where no
    MLPerf line before had it) and its ``"value"``."""
    ml = pl.DataFrame(
        {
            "r": ml_rows,
            "key": ml_text.str.extract(r"\"key\":\s*\"([^\"]+)\""),
            "value": ml_text.str.extract(r"\"value\":\s*([-+]?\d[\d.]*(?:[eE][-+]?\d+)?)").cast(
                pl.Float64, strict=False
            ),
            "u": pl.Series([], dtype=pl.String).extend_constant(None, ml_rows.len()),
        }
    )
    mk = ml.select(pl.col("key").drop_nulls().unique(maintain_order=True))
    mk = mk.with_row_index("code", offset=keys.height).with_columns(pl.col("code").cast(pl.Int64))
    keys = pl.concat([keys, mk.select("key")])
    ml = ml.join(mk, on="key", how="left", maintain_order="left")
    at = pl.int_range(vals.height, vals.height + ml.height, dtype=pl.UInt32, eager=True)
    vals = pl.concat([vals, ml.select(vals.columns)])
    p = pl.concat([p, pl.DataFrame([ml.get_column("r"), at.alias("at")])])
    return p, vals, keys


def _key_table(keys: pl.DataFrame) -> pl.DataFrame:
    """The distinct ``key`` s (by code) with ``series``, ``unit``, ``o``, ``sample`` and ``sid`` (:func:`_pairs`)."""
    keys = keys.join(_KEYS, on="key", how="left", maintain_order="left").select(
        "key",
        pl.coalesce("series", "key").alias("series"),
        "unit",
        pl.col("key")
        .replace_strict({k: i for i, k in enumerate(STEP_KEYS)}, default=None, return_dtype=pl.Int32)
        .alias("o"),
        (~pl.col("key").is_in(STEP_KEYS)).alias("sample"),
    )
    return keys.with_columns(pl.col("series").rank("dense").cast(pl.Int64).alias("sid"))


def _of_key(pairs: pl.DataFrame, keys: pl.DataFrame, column: str) -> pl.Series:
    """Per pair: ``column`` of its key (:func:`_pairs`' table)."""
    return keys.get_column(column).gather(pairs.get_column("code"))


def _of_pair(pairs: pl.DataFrame, vals: pl.DataFrame, column: str) -> pl.Series:
    """Per pair: ``column`` of its distinct pair (the row ``at`` of ``vals``, :func:`_pairs`)."""
    return vals.get_column(column).gather(pairs.get_column("at"))


def _of_row(pairs: pl.DataFrame, rows: pl.DataFrame, column: str) -> pl.Series:
    """Per pair: ``column`` of its line (the row ``r`` of ``rows``, :func:`_pairs`)."""
    return rows.get_column(column).gather(pairs.get_column("r"))
