"""nvidia-smi ``--query-gpu`` CSV tables (with or without header and units) as samples.

A header (a ``, ``-separated list of field names, the first dotted or ``timestamp``/``index``:
:mod:`~di.convert.logs.smi.query_heads`) starts a table; the lines after it with as many cells are its rows, and a
line that starts with a timestamp (:data:`~di.convert.logs.smi.query_heads.NOHEADER_RE`) and has another width is a
header-less row (``--format=csv,noheader``: fields ``timestamp``, ``field_1``, ...). A field's unit is the header's
(``power.draw [W]``), else the value's (``22.89 W``), else :data:`~di.convert.logs.smi.query_heads.UNITS`. GPU
identity: the ``index`` column, else the row's position in its sample (a sample's rows lie within
:data:`SAMPLE_GAP_NS` of each other).

The steps of :func:`parse_query_gpu`: the rows (:func:`_rows`, each a first cell and a rest), their tables
(:func:`_tables`), each row's time, GPU and host (:func:`_per_row`), the numbers of the cells (:func:`_read_cells`),
the cells that are samples (:func:`_sample_cells`) and the samples themselves
(:func:`~di.convert.logs.smi.query_samples._samples_frame`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.smi.cells import NA_CELL_RE, distinct_codes, read_numbers, read_once
from di.convert.logs.smi.query_heads import _csv_heads, _csv_tables
from di.convert.logs.smi.query_samples import _csv_samples, _samples_frame
from di.convert.logs.smi.timestamps import PLAIN_TS_RE, TS_RE, _ts_once, timestamps

SAMPLE_GAP_NS = 100_000_000
"""Rows of one ``-l`` sample lie within this of each other (nvidia-smi queries GPUs ~1 ms apart; samples are >= 1 s apart)."""


def _by_sample(df: pl.DataFrame) -> pl.DataFrame:
    """``gpu`` filled where null: the row's position in its sample (rows of a block within SAMPLE_GAP_NS), by line order."""
    if not df.get_column("line").is_sorted():
        df = df.sort("line")
    # the row before in line order: where it is of another block, the block's change starts a sample anyway
    gap = (pl.col("ts") - pl.col("ts").shift(1)).fill_null(SAMPLE_GAP_NS + 1) > SAMPLE_GAP_NS
    new = (gap | (pl.col("block") != pl.col("block").shift(1))).fill_null(True)
    at = pl.int_range(pl.len())
    in_sample = at - pl.when(new).then(at).forward_fill()  # a sample's rows are consecutive in line order
    return df.with_columns(pl.coalesce("gpu", in_sample).alias("gpu"))


def _no_value(cells: pl.Series) -> np.ndarray:
    """Whether each of ``cells`` says the GPU gives no value (:data:`NA_CELL_RE`): searched in the cells that start
    with ``[`` or maybe whitespace only (a first byte is two comparisons of string views)."""
    c = pl.col("raw")
    frame = cells.to_frame("raw")
    _, (b,) = lead_bytes(cells)
    maybe = (b == ord("[")) | (b < ord("!")) | (b >= 0x80)
    if cells.null_count():
        maybe &= cells.is_not_null().to_numpy()
    maybe = np.flatnonzero(maybe)
    out = np.zeros(cells.len(), np.bool_)
    if maybe.size:
        out[maybe] = frame[maybe].select(c.str.contains(NA_CELL_RE).fill_null(False)).to_series().to_numpy()
    return out


def _repeats(cells: pl.Series) -> bool:
    """Whether ``cells`` repeat enough (at most half of them distinct) that reading each distinct one once pays."""
    return 2 * cells.hash().n_unique() <= cells.len()


@dataclass
class _Rows:
    """The rows of ``--query-gpu`` tables, each read as its first cell and the rest.

    Attributes:
        line: each row's line number.
        block: each row's header line (its number among the header lines, from 1; 0: none before it).
        tcode: each row's rest: its number among the distinct rests.
        hcode: each row's first cell: its place in ``firsts``.
        nc: each row's count of ``, ``.
        is_noh: whether each row is header-less.
        firsts: the first cells' texts (the distinct ones where they repeat, else each row's).
        checked: per first cell, whether it was searched for a timestamp.
        plain_ts: per first cell, whether it is a timestamp of :data:`PLAIN_TS_RE`.
        nrest: each distinct rest's count of cells.
        rest_texts: the cells of each distinct rest that has some, in order.
        texts: the texts of cells: ``firsts``, then ``rest_texts``.
        rest_at: where each distinct rest's cells start in ``texts``.
    """

    line: pl.Series
    block: np.ndarray
    tcode: np.ndarray
    hcode: np.ndarray
    nc: np.ndarray
    is_noh: np.ndarray
    firsts: pl.Series
    checked: np.ndarray
    plain_ts: np.ndarray
    nrest: np.ndarray
    rest_texts: pl.Series
    texts: pl.Series
    rest_at: np.ndarray

    def source(self, r: np.ndarray, i: np.ndarray) -> np.ndarray:
        """The text (in ``texts``) of cell ``i`` of rows ``r``."""
        return np.where(i == 0, self.hcode[r], self.rest_at[self.tcode[r]] + i - 1)


@dataclass
class _Tables:
    """The tables of the rows: 0 the header-less rows, then one per distinct kept header text.

    Attributes:
        fields: one row per field of each table (:func:`~di.convert.logs.smi.query_heads._csv_tables`).
        f0: each table's first field row; width: its count of fields.
        names: each field's name (``fields``' ``field``).
        tab: each row's table.
    """

    fields: pl.DataFrame
    f0: np.ndarray
    width: np.ndarray
    names: np.ndarray
    tab: np.ndarray


def _line_tables(
    comma: pl.DataFrame, b: np.ndarray, heads: pl.DataFrame, hpos: np.ndarray, hid: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each line's header line (``block``: the header at or before it, 0: none); per header line (after a 0 for
    none), whether its rows are series (``kept``) and its count of ``, `` (``hnc``); and whether each line may be a row
    of a kept table (``in_kept``: after one, not a header, not a line that starts with ``#``)."""
    # a line's table: the header at or before it (block 0: none); the header's own line is not a row
    block = np.zeros(comma.height, np.int64)
    block[hpos] = 1
    block = np.cumsum(block)
    kept = np.concatenate([[False], heads.get_column("kept").to_numpy()])[hid]
    hnc = np.concatenate([[-1], heads.get_column("hnc").to_numpy().astype(np.int64)])[hid]
    in_kept = kept[block] & (b != ord("#"))
    in_kept[hpos] = False
    return block, kept, hnc, in_kept


def _split_rows(text: pl.Series) -> tuple[pl.Series, np.ndarray, pl.Series]:
    """Each of ``text`` split at its first ``, `` (``field_0``, ``field_1``), each one's rest (``field_1``) by its
    number among the distinct rests, and those distinct rests."""
    split = text.str.splitn(", ", 2)
    tcode, rests = distinct_codes(split.struct.field("field_1"))
    # a line's trailing whitespace ends its rest, or was the space of its last ", " (then the rest is empty): taken
    # off (and the line split again) where there is some
    ends = rests.to_frame("r").select(pl.col("r").str.contains(r"\s$") | (pl.col("r") == "")).to_series()
    trailing = np.flatnonzero(ends.fill_null(False).to_numpy()[tcode])
    if trailing.size:
        split = text.scatter(trailing, text.gather(trailing).str.strip_chars_end()).str.splitn(", ", 2)
        tcode, rests = distinct_codes(split.struct.field("field_1"))
    return split, tcode, rests


def _timestamp_firsts(firsts: pl.Series, maybe_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per first cell (``firsts``): whether it was searched for a timestamp (those of ``maybe_ts``), whether it is one
    of :data:`PLAIN_TS_RE`, and whether one of :data:`TS_RE` (a whole timestamp)."""
    checked = np.zeros(firsts.len(), np.bool_)  # first cells searched for a timestamp
    plain_ts = np.zeros(firsts.len(), np.bool_)  # of PLAIN_TS_RE
    whole_ts = np.zeros(firsts.len(), np.bool_)  # of TS_RE
    if maybe_ts.size:
        cells = firsts.gather(maybe_ts)
        plain = cells.str.contains(PLAIN_TS_RE).fill_null(False)  # the usual ones, by the faster ASCII regex
        checked[maybe_ts] = True
        plain_ts[maybe_ts] = plain.to_numpy()
        other = (~plain).arg_true()
        if other.len():
            plain = plain.scatter(other, cells.gather(other).str.contains(TS_RE).fill_null(False))
        whole_ts[maybe_ts] = plain.to_numpy()
    return checked, plain_ts, whole_ts


def _cell_texts(firsts: pl.Series, rest_cells: pl.Series, nrest: np.ndarray) -> tuple[pl.Series, pl.Series, np.ndarray]:
    """The texts of cells (the first cells, then the cells of each distinct rest), the latter alone, and where each
    distinct rest's cells start among the texts."""
    more = np.flatnonzero(nrest > 0)
    rest_texts = rest_cells.gather(more).explode()
    texts = pl.concat([firsts, rest_texts])
    rest_at = np.zeros(nrest.size, np.int64)
    rest_at[more] = firsts.len() + np.concatenate([[0], np.cumsum(nrest[more])[:-1]])
    return texts, rest_texts, rest_at


def _rows(
    comma: pl.DataFrame, b: np.ndarray, digit: np.ndarray, heads: pl.DataFrame, hpos: np.ndarray, hid: np.ndarray
) -> tuple[_Rows | None, np.ndarray]:
    """The rows of the tables among ``comma`` (None: none), and the lines that start with a digit (``digit``) and
    hold a ``, `` that is not trailing whitespace. ``b``: each line's first byte; ``heads``, ``hpos``, ``hid``: from
    :func:`~di.convert.logs.smi.query_heads._csv_heads`."""
    block, kept, hnc, in_kept = _line_tables(comma, b, heads, hpos, hid)
    cand = np.flatnonzero(in_kept | digit)
    split, tcode, rests = _split_rows(comma.get_column("t").gather(cand))
    # first cells (mostly timestamps): each distinct one read once where they repeat (a file of repeated samples),
    # else each row's (a timestamp differs from row to row: finding the distinct ones costs more than it saves)
    first = split.struct.field("field_0")
    repeats = _repeats(first)
    hcode, firsts = distinct_codes(first) if repeats else (np.arange(cand.size), first)
    rest_cells = rests.str.split(", ")
    nrest = rest_cells.list.len().fill_null(0).to_numpy().astype(np.int64)
    nc = nrest[tcode]  # the row's count of ", "
    # header-less: NOHEADER_RE, that is a first cell that is a whole timestamp, and more cells
    noh = digit[cand] & (nc > 0)
    checked, plain_ts, whole_ts = _timestamp_firsts(firsts, np.unique(hcode[noh]) if repeats else np.flatnonzero(noh))
    noh &= whole_ts[hcode]
    cb = block[cand]
    row_hnc = np.where(kept[cb], hnc[cb], -1)
    is_noh = noh & (row_hnc != nc)
    keep = np.flatnonzero((in_kept[cand] & (nc == row_hnc)) | is_noh)
    real = comma.get_column("line").to_numpy()[cand[digit[cand] & (nc > 0)]]
    if not keep.size:
        return None, real
    if repeats:
        hcode = hcode[keep]  # each row's first cell is text hcode[row]
    else:
        firsts, checked, plain_ts, hcode = firsts.gather(keep), checked[keep], plain_ts[keep], np.arange(keep.size)
    texts, rest_texts, rest_at = _cell_texts(firsts, rest_cells, nrest)
    line = comma.get_column("line").gather(cand[keep])
    kept_rows = (cb[keep], tcode[keep], hcode, nc[keep], is_noh[keep])
    return _Rows(line, *kept_rows, firsts, checked, plain_ts, nrest, rest_texts, texts, rest_at), real


def _tables(rows: _Rows, heads: pl.DataFrame, hid: np.ndarray) -> _Tables:
    """The tables of ``rows``: 0 the header-less rows, then one per distinct kept header text (of ``heads``; ``hid``:
    each header line's)."""
    kept_heads = heads.filter("kept")
    tab_of_hid = np.zeros(heads.height + 1, np.int64)
    tab_of_hid[kept_heads.get_column("hid").to_numpy()] = np.arange(1, kept_heads.height + 1)
    tab = np.where(rows.is_noh, 0, tab_of_hid[hid[rows.block]])
    fields, f0, width = _csv_tables(kept_heads, int(rows.nc[rows.is_noh].max()) + 1 if rows.is_noh.any() else 0)
    return _Tables(fields, f0, width, fields.get_column("field").to_numpy(), tab)


def _place(tables: _Tables, name: str) -> np.ndarray:
    """Each row's place of field ``name`` (its table's first), -1 where its table has none."""
    at = np.flatnonzero(tables.names == name)
    of, first = np.unique(np.searchsorted(tables.f0, at, "right") - 1, return_index=True)
    where = np.full(tables.width.size, -1, np.int64)
    where[of] = at[first] - tables.f0[of]
    return where[tables.tab]


def _cell(
    rows: _Rows, tables: _Tables, name: str, read: pl.Expr | None = None, dtype: pl.DataType = pl.String
) -> pl.Series:
    """Each row's cell of field ``name`` (maybe ``read``: an expression of ``pl.col(name)`` of type ``dtype``), null
    where its table has none; read on the rows that have one only."""
    p = _place(tables, name)
    has = np.flatnonzero(p >= 0)
    none = pl.Series(name, [], dtype).extend_constant(None, rows.line.len())
    if not has.size:
        return none
    cells = rows.texts.gather(rows.source(has, p[has])).alias(name)
    return none.scatter(has, cells if read is None else cells.to_frame().select(read).to_series())


def _per_row(rows: _Rows, tables: _Tables) -> pl.DataFrame:
    """Each row's ``line``, ``block`` (-1: header-less), ``ts``, ``gpu`` (where no ``index``: its place in its sample)
    and ``host``, in line order."""
    # timestamps: where first, of the first cells
    p = _place(tables, "timestamp")
    ts = _ts_once(_cell(rows, tables, "timestamp")) if (p > 0).any() else None
    if ts is None:
        # where a row's first cell was not searched (not digit-led, or the row's only cell), all are searched again
        plain = None if (~rows.checked[rows.hcode] & (p == 0)).any() else pl.Series(rows.plain_ts)
        ts = timestamps(rows.firsts, plain).gather(rows.hcode)
        ts = ts.scatter(np.flatnonzero(p < 0), None) if (p < 0).any() else ts
    per_row = pl.DataFrame(
        {
            "line": rows.line,
            "block": np.where(rows.is_noh, -1, rows.block),
            "ts": ts.cast(pl.Int64),
            "gpu": _cell(
                rows, tables, "index", pl.col("index").str.strip_chars().cast(pl.Int64, strict=False), pl.Int64
            ),
            "host": _cell(rows, tables, "hostname", pl.col("hostname").str.strip_chars()),
        }
    )
    return _by_sample(per_row)  # rows are in line order


def _read_cells(rows: _Rows, tables: _Tables) -> tuple[pl.DataFrame, np.ndarray, int]:
    """The number of each text of ``rows.texts`` (``value``, ``vunit``), whether each field is a series (not a
    timestamp or index), and the count of the rows' cells that say no value."""
    # the numbers of the cells: of each distinct rest's cells, and of the rows' first cells where their table's first
    # field is a series (a timestamp or index first is not read)
    series = ~np.isin(tables.names, ["timestamp", "index"])
    f0, firsts = tables.f0, rows.firsts
    first_series = np.unique(rows.hcode[(series[np.minimum(f0, series.size - 1)] & (f0 < series.size))[tables.tab]])
    read_first = pl.DataFrame(schema={"value": pl.Float64, "vunit": pl.String}).clear(firsts.len())
    if first_series.size:
        numbers = read_numbers(firsts.gather(first_series).to_frame("raw"))
        read_first = read_first.with_columns(
            read_first.get_column(c).scatter(first_series, numbers.get_column(c)) for c in ("value", "vunit")
        )
    rest_read = read_once(rows.rest_texts, no_value=True)
    read = pl.concat([read_first, rest_read.select("value", "vunit")])
    # cells that say no value: counted in the first cells and the distinct rests' cells, then per row
    na_text = np.concatenate([_no_value(firsts), rest_read.get_column("na").to_numpy()])
    upto = np.concatenate([[0], np.cumsum(na_text)])  # NA cells before each text
    rest_at, nrest = rows.rest_at, rows.nrest
    na = int(na_text[rows.hcode].sum() + (upto[rest_at + nrest] - upto[rest_at])[rows.tcode].sum())
    return read, series, na


def _sample_cells(
    rows: _Rows, tables: _Tables, series: np.ndarray, read: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, field, text) of each cell of a series field that holds a number (``read``: each text's), in row and cell
    order."""
    r, f, src = _csv_samples(
        np.asarray(rows.tcode * tables.width.size + tables.tab),
        rows.rest_at,
        rows.nrest,
        tables.f0,
        series,
        read.get_column("value").is_not_null().to_numpy(),
    )
    first = np.flatnonzero(src < 0)  # a first cell: its row's, where it holds a number
    if first.size:
        src[first] = rows.hcode[r[first]]
        held = np.flatnonzero(read.get_column("value").is_not_null().to_numpy()[src])
        r, f, src = r[held], f[held], src[held]
    return r, f, src


def parse_query_gpu(comma: pl.DataFrame) -> tuple[pl.DataFrame, int, np.ndarray]:
    """``--query-gpu`` tables (``comma``: columns ``line`` and ``t``, the lines that hold a ``, ``). A header (a
    ``, ``-separated list of field names, the first dotted or ``timestamp``/``index``) starts a table; the lines after
    it with as many cells are its rows (not those that start with ``#``), and a line that starts with a timestamp and
    has another width is a header-less row.

    A row is read as its first cell and the rest: the rest repeats from sample to sample (a GPU's readings, while
    they hold) and is read once per distinct rest; the first cell, mostly a timestamp that differs from row to row,
    is read once per distinct cell only where the first cells repeat (:func:`_repeats`), else once per row. A cell is
    found by (row, place) from them.

    Returns the samples, the count of cells that say no value, and the lines that start with a digit and hold a ``, ``
    that is not trailing whitespace (they match ``, \\s*\\S``: not dmon rows)."""
    _, (b,) = lead_bytes(comma.get_column("t"))
    word = ((b >= ord("a")) & (b <= ord("z"))) | (b == ord("_"))  # where a header can start
    digit = ((b >= ord("0")) & (b <= ord("9"))) | (b >= 0x80)  # where a timestamp (\d) can start
    heads, hpos, hid = _csv_heads(comma, pl.Series(np.flatnonzero(word), dtype=pl.UInt32))
    if not heads.height and not digit.any():
        return pl.DataFrame(), 0, np.zeros(0, np.int64)  # no table here (a training log's prose)
    rows, real = _rows(comma, b, digit, heads, hpos, hid)
    if rows is None:
        return pl.DataFrame(), 0, real
    tables = _tables(rows, heads, hid)
    per_row = _per_row(rows, tables)
    read, series, na = _read_cells(rows, tables)
    r, f, src = _sample_cells(rows, tables, series, read)
    return _samples_frame(per_row, tables.fields, read, r, f, src), na, real
