"""nvidia-smi ``dmon``/``pmon`` tables as samples.

A table runs from its header (``# gpu  pwr  gtemp ...``; ``-o DT`` puts ``Date Time`` before ``gpu``, ``-o T``
``Time`` alone: :data:`DMON_RE`) to the next; its unit line (``# Idx  W  C ...``) gives each field's unit, and its
rows (a gpu index, or ``-o DT``'s date, first; as many words as the header) the readings. Series ``dmon.<field>``,
``pmon.<field> (pid <pid>)``; the unit: the unit line's where it is one of ``%``, ``W``, ``C``, ``MHz``, ``MB``,
``MiB``, else the value's. Times: ``-o DT``'s date and time (``abs``), ``-o T``'s time of day, else one second per
sample from 0 (:data:`DMON_INTERVAL_NS`, dmon's default ``-d 1``).

The steps of :func:`_dmon`: the headers and unit lines (:func:`_dmon_heads`), the fields of each table
(:func:`_dmon_fields`), the rows (:func:`_dmon_rows`), each row's gpu, pid and date (:func:`_dmon_per_row`), the
cells that hold a number (:func:`_dmon_values`), the rows' times (:func:`_dmon_times`) and the samples
(:func:`_dmon_samples`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.logs.smi.cells import distinct_codes, read_once
from di.convert.logs.smi.kinds import _Kinds

DMON_RE = r"^#\s*(?:(?:Date\s+)?Time\s+)?gpu\s+\S+"
"""A dmon/pmon header: ``-o DT`` puts ``Date Time`` before ``gpu``, ``-o T`` ``Time`` alone."""
DMON_INTERVAL_NS = 1_000_000_000
"""dmon/pmon's default sampling interval (``-d 1``)."""


@dataclass
class _Fields:
    """One row per (table, field) of the dmon/pmon tables (table 0: none, before the first header).

    Attributes:
        per_field: columns ``fields`` (the field's name), ``tool`` (``dmon``, ``pmon``: a table that names a ``pid``)
            and ``hunit`` (the unit line's unit, null where none).
        names: each field's name.
        n: each table's count of fields.
        f0: each table's first field.
        table: each field's table.
    """

    per_field: pl.DataFrame
    names: np.ndarray
    n: np.ndarray
    f0: np.ndarray
    table: np.ndarray

    def pos(self, name: str) -> np.ndarray:
        """Each table's place of field ``name`` (its first), -1 where none."""
        where = np.flatnonzero(self.names == name)
        of, first = np.unique(self.table[where], return_index=True)
        p = np.full(self.n.size, -1, np.int64)
        p[of] = where[first] - self.f0[of]
        return p


@dataclass
class _DmonRows:
    """The rows of dmon/pmon tables, in line order.

    Attributes:
        lines: their ``line`` and ``text``.
        block: each row's table (from 1).
        code: each row's number among the distinct rows.
        cells: the words of each distinct row, in order (a row of no words: one null).
        word_at: each distinct row's first word in ``cells``.
    """

    lines: pl.DataFrame
    block: np.ndarray
    code: np.ndarray
    cells: pl.Series
    word_at: np.ndarray


def _dmon_heads(kinds: _Kinds) -> tuple[np.ndarray, pl.DataFrame, pl.DataFrame] | None:
    """The lines of the dmon/pmon headers (None: none), their ``fields``, and the tables' unit lines (``line``,
    ``block``: the table, from 1, ``units``; one a table)."""
    # a header names the gpu column, a unit line says Idx: a literal search first
    marks = pl.concat([kinds.hashed, kinds.indented.filter("hash").drop("hash")])
    marks = marks.filter(pl.col("text").str.contains_any(["gpu", "Idx"])).sort("line")
    marks = marks.with_columns(pl.col("text").str.strip_chars().alias("t"))
    heads = marks.filter(pl.col("t").str.contains(DMON_RE))
    if not heads.height:
        return None
    # a table (block, from 1) runs from its header to the next: the headers at or before a line (lines are in order)
    at = heads.get_column("line").to_numpy()
    words = pl.col("t").str.replace(r"^#\s*", "").str.extract_all(r"\S+")
    heads = heads.select(words.alias("fields"))
    units = marks.filter(pl.col("t").str.contains(r"^#\s*(?:\S+\s+){0,2}Idx\b"))  # -o T: a time before Idx
    units = units.select(
        "line",
        pl.Series("block", np.searchsorted(at, units.get_column("line").to_numpy(), "right")),
        words.alias("units"),
    ).unique("block", keep="first", maintain_order=True)  # (one unit line a table)
    return at, heads, units


def _dmon_fields(heads: pl.DataFrame, units: pl.DataFrame) -> _Fields:
    """The fields of the tables of ``heads`` (their ``fields``), with their units from ``units`` (the unit lines)."""
    # one row per (table, field): its name, unit and tool; a cell finds its row at its table's first + its index
    n = np.concatenate([[0], heads.select(pl.col("fields").list.len()).to_series().to_numpy().astype(np.int64)])
    f0 = np.concatenate([[0], np.cumsum(n)[:-1]])
    table = np.repeat(np.arange(n.size), n)
    unit_of = np.full(n.size, -1, np.int64)
    unit_of[units.get_column("block").to_numpy()] = np.arange(units.height)
    u = unit_of[table]
    unit_list = (
        units.get_column("units").gather(np.clip(u, 0, None))
        if units.height
        else pl.Series([], dtype=pl.List(pl.String)).extend_constant(None, table.size)
    )
    pmon = np.concatenate([[False], heads.select(pl.col("fields").list.contains("pid")).to_series().to_numpy()])
    per_field = pl.DataFrame(
        {"fields": heads.get_column("fields").explode(), "i": np.arange(table.size) - f0[table], "ul": unit_list}
    ).select(
        "fields",
        pl.when(pl.Series(pmon[table])).then(pl.lit("pmon")).otherwise(pl.lit("dmon")).alias("tool"),
        pl.when(pl.Series(u >= 0)).then(pl.col("ul").list.get(pl.col("i"), null_on_oob=True)).alias("hunit"),
    )
    return _Fields(per_field, per_field.get_column("fields").to_numpy(), n, f0, table)


def _dmon_rows(kinds: _Kinds, csv_rows: np.ndarray, at: np.ndarray, n: np.ndarray) -> _DmonRows:
    """The rows of the tables whose headers are at lines ``at`` (``n``: each table's count of fields)."""
    # data rows: a gpu index (or dmon -o DT's date) first, after the first header; not a --query-gpu CSV row (a ", "
    # inside the line: not split into words); as many words as its header
    rows = kinds.digits.filter(pl.col("line") >= int(at[0]))
    if csv_rows.size:
        line = rows.get_column("line").to_numpy()
        csv_row = np.zeros(max(int(line.max(initial=0)), int(csv_rows.max())) + 1, np.bool_)  # by line number
        csv_row[csv_rows] = True
        rows = rows.filter(pl.Series(~csv_row[line]))
    indented = kinds.indented.filter(~pl.col("hash") & (pl.col("line") >= int(at[0]))).drop("hash")
    rows = pl.concat([rows, indented.filter(~pl.col("text").str.contains(r", \s*\S"))])
    rows = rows if rows.get_column("line").is_sorted() else rows.sort("line")
    block = np.searchsorted(at, rows.get_column("line").to_numpy(), "right")
    # rows repeat (a GPU's readings while they hold): each distinct row is split into words once, and a row's word i
    # is word i of its distinct row (from word_at)
    code, distinct = distinct_codes(rows.get_column("text"))
    words = distinct.str.extract_all(r"\S+")
    nw = words.list.len().to_numpy().astype(np.int64)
    keep = np.flatnonzero(nw[code] == n[block])
    cells = words.explode()  # (an empty list gives one null)
    word_at = np.cumsum(np.maximum(nw, 1)) - np.maximum(nw, 1)
    return _DmonRows(rows[keep], block[keep], code[keep], cells, word_at)


def _dmon_per_row(fields: _Fields, rows: _DmonRows) -> pl.DataFrame:
    """Each row's ``line``, ``block``, ``gpu``, ``pid`` and ``dt`` (``-o DT``'s date and time, ``-o T``'s time: ``""``
    where none)."""

    def get(name: str) -> pl.Expr:
        """Each row's word of field ``name`` (from ``per_row``'s ``word``: each row's first word in ``cells``), null
        where its table has none."""
        p = fields.pos(name)[rows.block]
        return pl.when(pl.lit(pl.Series(p >= 0))).then(
            pl.lit(rows.cells).gather(pl.col("word") + pl.lit(pl.Series(np.maximum(p, 0))))
        )

    # one select for every per-row word (each word a gather of ``cells``)
    return pl.DataFrame(
        {"line": rows.lines.get_column("line"), "block": rows.block, "word": rows.word_at[rows.code]}
    ).select(
        "line",
        "block",
        get("gpu").cast(pl.Int64, strict=False).alias("gpu"),
        get("pid").alias("pid"),
        pl.concat_str(get("Date"), get("Time"), separator=" ", ignore_nulls=True).alias("dt"),
    )


def _dmon_values(fields: _Fields, rows: _DmonRows) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """The cells of the rows that hold a number, but those of the fields gpu, pid, Date, Time, type and command:
    their ``value`` and ``vunit``, row and field."""
    count = fields.n[rows.block]
    start = np.cumsum(count) - count
    k = np.arange(int(count.sum()))
    src = np.repeat(rows.word_at[rows.code] - start, count) + k
    f = np.repeat(fields.f0[rows.block] - start, count) + k
    read = read_once(rows.cells.rename("raw"))
    skip = np.isin(fields.names, ["gpu", "pid", "Date", "Time", "type", "command"])
    take = np.flatnonzero(read.get_column("value").is_not_null().to_numpy()[src] & ~skip[f])
    r = np.repeat(np.arange(rows.lines.height), count)[take]
    f = f[take]
    read = read.select("value", "vunit")[src[take]]
    return read, r, f


def _dmon_times(per_row: pl.DataFrame, r: np.ndarray) -> pl.DataFrame:
    """``per_row`` with each row's ``ts`` and whether it is absolute (``abs``, with ``abs_ts``); ``r``: the rows of
    the cells that hold a number."""
    # a row's sample: its place among its (table, gpu, pid)'s rows that hold a number, in line order, one second apart
    # (dmon's default -d 1), where the row has no date and time
    held = np.zeros(per_row.height, np.bool_)
    held[r] = True
    k = np.zeros(per_row.height, np.int64)
    k[held] = per_row.filter(pl.Series(held)).select(pl.int_range(pl.len()).over("block", "gpu", "pid")).to_series()
    dated = (per_row.get_column("dt") != "").any()
    absolute = (
        pl.col("dt").str.to_datetime("%Y%m%d %H:%M:%S", strict=False, time_unit="ns").dt.epoch("ns")
        if dated
        else pl.lit(None, pl.Int64)
    )
    return per_row.with_columns(absolute.alias("abs_ts")).with_columns(
        pl.coalesce("abs_ts", _time_of_day("dt") if dated else None, pl.Series(k) * DMON_INTERVAL_NS).alias("ts"),
        pl.col("abs_ts").is_not_null().alias("abs"),
    )


def _dmon_samples(
    per_field: pl.DataFrame, per_row: pl.DataFrame, read: pl.DataFrame, f: np.ndarray, r: np.ndarray
) -> pl.DataFrame:
    """The samples of the cells ``read`` (of field ``f`` and row ``r``)."""
    # pmon.<field> (pid <pid>), dmon.<field>: a pmon row has a pid, a dmon row none; the unit: the header's where it
    # is one of these, else the value's. One select of gathers from the per-field and per-row columns
    of_field = lambda c: pl.lit(per_field.get_column(c)).gather(pl.col("f"))  # noqa: E731
    of_row = lambda c: pl.lit(per_row.get_column(c)).gather(pl.col("r"))  # noqa: E731
    name = pl.concat_str(
        of_field("tool"), pl.lit("."), of_field("fields"), pl.format(" (pid {})", of_row("pid")), ignore_nulls=True
    )
    hunit = of_field("hunit")
    header = hunit.is_in(["%", "W", "C", "MHz", "MB", "MiB"]).fill_null(False)
    return read.with_columns(pl.Series("f", f), pl.Series("r", r)).select(
        of_row("gpu").alias("gpu"),
        pl.lit(None, pl.String).alias("host"),
        of_row("ts").alias("ts"),
        of_row("abs").alias("abs"),
        name.alias("series"),
        pl.when(header).then(hunit).otherwise("vunit").alias("unit"),
        "value",
        of_row("line").alias("line"),
    )


def _dmon(kinds: _Kinds, csv_rows: np.ndarray) -> tuple[pl.DataFrame, pl.Series]:
    """dmon/pmon tables (their headers and unit lines among ``kinds.hashed`` and ``kinds.indented``, their rows among
    ``kinds.digits`` and ``kinds.indented``, not the ``csv_rows``: lines of --query-gpu CSV that start with a
    digit), and the lines of their headers and unit lines."""
    found = _dmon_heads(kinds)
    if found is None:
        return pl.DataFrame(), pl.Series("line", [], pl.UInt32)
    at, heads, units = found
    read_lines = pl.concat([pl.Series("line", at, pl.UInt32), units.get_column("line").cast(pl.UInt32)])
    fields = _dmon_fields(heads, units)
    rows = _dmon_rows(kinds, csv_rows, at, fields.n)
    per_row = _dmon_per_row(fields, rows)
    read, r, f = _dmon_values(fields, rows)
    per_row = _dmon_times(per_row, r)
    return _dmon_samples(fields.per_field, per_row, read, f, r), read_lines


def _time_of_day(col: str) -> pl.Expr:
    """dmon ``-o T``'s ``HH:MM:SS`` (no date) as ns from the first row's midnight: a time earlier than the row before
    it is on the next day (dmon samples every few seconds, so it never skips a whole day)."""
    t = pl.col(col).str.to_time("%H:%M:%S", strict=False).cast(pl.Int64)  # ns since midnight
    days = (t < t.shift(1)).fill_null(False).cum_sum().cast(pl.Int64)
    return t + days * 86_400_000_000_000
