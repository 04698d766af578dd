"""``--query-gpu`` table headers: which lines are headers (:func:`_csv_heads`), and the fields of each table
(:func:`_csv_tables`: name, series name, unit).

A header is a ``, ``-separated list of field names (:data:`HEADER_RE`), the first dotted or ``timestamp``/``index``;
one that names a ``pid`` or ``retired_pages.address`` (``--query-compute-apps``, ``-accounted-apps``,
``-retired-pages``: per process or page, not per GPU) starts a table whose rows are not series. A header-less table
(``--format=csv,noheader``, rows that start with a timestamp: :data:`NOHEADER_RE`) has fields ``timestamp``,
``field_1``, .... A field's unit: the header's (``power.draw [W]``), else, for a header's field, :data:`UNITS` by its
first dotted part.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.logs.smi.cells import distinct_codes

FIELD = r"[a-z_][\w.]*(?: \[[^\]]+\])?"

HEADER_RE = rf"^{FIELD}(?:, {FIELD})+\s*$"

NOHEADER_RE = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?, "

UNITS = {
    "temperature": "C",
    "utilization": "%",
    "memory": "MiB",
    "clocks": "MHz",
    "power": "W",
    "fan": "%",
    "enforced": "W",
}
"""Unit of a ``--query-gpu`` field by its first dotted part, where neither header nor value says it (``nounits``)."""


def _csv_tables(heads: pl.DataFrame, noh_width: int) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """One row per field of each table (the header-less one first, ``noh_width`` fields, then each header's, ``heads``:
    its ``fields``): its ``field``, ``series`` name, header unit ``hunit`` and unit by name ``tunit``; and each table's
    first field row and width."""
    fl = [["timestamp"] + [f"field_{i}" for i in range(1, noh_width)]] + heads.get_column("fields").to_list()
    width = np.array([len(x) for x in fl], np.int64)
    f0 = np.concatenate([[0], np.cumsum(width)[:-1]]).astype(np.int64)
    fields = pl.DataFrame({"field": [x for fs in fl for x in fs]}, schema={"field": pl.String})
    name = pl.col("field").str.replace(r" \[[^\]]+\]$", "")
    table_unit = name.str.extract(r"^([a-z_]+)").replace_strict(UNITS, default=None, return_dtype=pl.String)
    fields = fields.with_columns(
        name.alias("series"),
        pl.col("field").str.extract(r"\[([^\]]+)\]$").alias("hunit"),
        pl.when(pl.int_range(pl.len()) >= noh_width).then(table_unit).alias("tunit"),
    )
    return fields, f0, width


def _csv_heads(comma: pl.DataFrame, word: pl.Series) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """The ``--query-gpu`` headers among the lines ``word`` (rows of ``comma`` that start like a field name): each
    distinct header text once (``t``, ``fields``, ``hnc``: its count of ``, ``, ``kept``: whether its rows are
    series, ``hid``: from 1); the rows of ``comma`` that hold a header, and the ``hid`` of each (after a 0)."""
    t = pl.col("t")
    # a header repeats where each sample prints it (a loop of nvidia-smi calls): each distinct text is read once
    code, texts = distinct_codes(comma.get_column("t").gather(word))
    texts = texts.str.strip_chars_end()
    heads = texts.unique().to_frame().filter(t.str.contains(HEADER_RE))
    first_field = t.str.splitn(", ", 2).struct.field("field_0")
    dotted = first_field.str.contains(".", literal=True) | t.str.starts_with("timestamp") | t.str.starts_with("index")
    heads = heads.filter(dotted).select(
        "t",
        t.str.split(", ").alias("fields"),
        t.str.count_matches(", ", literal=True).alias("hnc"),
        # --query-compute-apps / -accounted-apps / -retired-pages: per process or page, not per GPU: not series
        ~t.str.contains(r"(?:^|, )(?:pid|retired_pages\.address)\b").alias("kept"),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("hid"),  # the same header text: one table
    )
    hid = texts.to_frame().join(heads.select("t", "hid"), on="t", how="left", maintain_order="left")
    hid = hid.get_column("hid").fill_null(0).to_numpy()[code]  # of each line (0: not a header)
    at = np.flatnonzero(hid)
    return heads, word.to_numpy()[at], np.concatenate([[0], hid[at]])
