"""nvidia-smi ``--query-gpu`` CSV tables (with or without header and units), and the cell readers every
nvidia-smi table shares (:func:`read_numbers`, :func:`distinct_codes`).

A header (a ``, ``-separated list of field names, the first dotted or ``timestamp``/``index``) starts a table; the
lines after it with as many cells are its rows, and a line that starts with a timestamp (:data:`NOHEADER_RE`) and has
another width is a header-less row (``--format=csv,noheader``: fields ``timestamp``, ``field_1``, ...). A field's unit
is the header's (``power.draw [W]``), else the value's (``22.89 W``), else :data:`UNITS`. GPU identity: the ``index``
column, else the row's position in its sample (a sample's rows lie within :data:`SAMPLE_GAP_NS` of each other).
"""

from __future__ import annotations


import numpy as np
import polars as pl

from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.text import by_distinct, distinct_ids_by_join, fraction_ns

__all__ = [
    "HEADER_RE",
    "NOHEADER_RE",
    "NUM_RE",
    "UNITS",
    "distinct_codes",
    "epoch_ns",
    "parse_query_gpu",
    "read_numbers",
    "read_once",
]

FIELD = r"[a-z_][\w.]*(?: \[[^\]]+\])?"

HEADER_RE = rf"^{FIELD}(?:, {FIELD})+\s*$"

NOHEADER_RE = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?, "

TS_RE = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$"
""":data:`NOHEADER_RE`'s timestamp, a whole cell."""

NA_CELL_RE = r"^\s*\[(?:N/A|Not Supported|Unknown Error|Requested functionality)"
"""A ``--query-gpu`` cell that says the GPU gives no value."""

NUM_RE = r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]+)?\s*$"

SAMPLE_GAP_NS = 100_000_000
"""Rows of one ``-l`` sample lie within this of each other (nvidia-smi queries GPUs ~1 ms apart; samples are >= 1 s apart)."""

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


def distinct_codes(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(each value's number among the distinct ``values``, in the order of their first rows; those distinct values):
    work done once per distinct value is gathered back by number (a null is a value of its own). The same numbers as
    :func:`~di.convert.logs.text.distinct_ids`, from a dense rank of the values' hashes (a sort of integers) and numpy
    gathers, which cost about half of its join; values that share a hash (never seen) are told apart by a join on the
    values themselves."""
    ids, firsts = _ranked_ids(values.hash())
    if values.len() and not values.gather(firsts[ids]).eq_missing(values).all():
        by_join, by_join_firsts = distinct_ids_by_join(values)
        ids, firsts = by_join.to_numpy().astype(np.int64), by_join_firsts.to_numpy()
    return ids, values.gather(firsts)


def _ranked_ids(codes: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct integer ``codes`` (0 to their count - 1, in the order of their first rows)
    and, per number, the first row of its code (ascending), as int64 arrays."""
    rank = codes.rank("dense").to_numpy().astype(np.int64) - 1  # 0 to count - 1, by code
    firsts = np.flatnonzero(codes.is_first_distinct().to_numpy())
    number = np.empty(firsts.size, np.int64)
    number[rank[firsts]] = np.arange(firsts.size)
    return number[rank], firsts


def read_numbers(df: pl.DataFrame, *, no_value: bool = False, distinct: bool = False) -> pl.DataFrame:
    """``df`` with its column ``raw`` (cell texts) read as ``value`` (float) and ``vunit`` (:data:`NUM_RE`'s number
    and unit); null where a text is no number, or one float parsing does not read (digits of other scripts, which
    ``\\d`` matches). A plain integer (what an integer cast reads: ``[-+]?`` and ASCII digits; not a negative zero,
    which :data:`NUM_RE` reads as -0.0) is cast; of the other texts, those :data:`NUM_RE` can match (a digit, a sign or
    a space first) are read by it once per distinct text (``distinct``: the texts are distinct already). With
    ``no_value``, also ``na``: whether the text says the GPU gives no value (:data:`NA_CELL_RE`)."""
    raw = pl.col("raw")
    if df.height < CAST_FIRST_ROWS:
        return _read_matched(df, no_value, distinct=distinct)
    ints = df.select(raw.cast(pl.Int64, strict=False)).to_series()
    # where NUM_RE can match (a digit, maybe of another script, a sign or a space first; not a null) and NA_CELL_RE
    # ("[" or a space first): first bytes, from the texts' string views
    _, (b,) = lead_bytes(df.get_column("raw"))
    if df.get_column("raw").null_count():
        b = np.where(df.get_column("raw").is_null().to_numpy(), np.uint8(ord("a")), b)  # (a byte that says neither)
    num = ((b >= ord("0")) & (b <= ord("9"))) | ((b >= ord("+")) & (b <= ord("-"))) | (b < ord("!")) | (b >= 0x80)
    # a plain integer: what the cast reads, but a zero that starts with "-"
    plain = ints.is_not_null().to_numpy() & ((ints != 0).fill_null(False).to_numpy() | (b != ord("-")))
    value = ints.cast(pl.Float64).alias("value")  # (null where no integer)
    vunit = pl.Series("vunit", [], pl.String).extend_constant(None, df.height)
    na = pl.Series("na", [], pl.Boolean).extend_constant(False, df.height)  # (an integer says a value)
    other = np.flatnonzero(~plain & num)
    if other.size:
        read = _read_matched(df[other].select("raw"), no_value, distinct=distinct)
        value = value.scatter(other, read.get_column("value"))
        vunit = vunit.scatter(other, read.get_column("vunit"))
        na = na.scatter(other, read.get_column("na")) if no_value else na
    bracket = np.flatnonzero(b == ord("["))
    if no_value and bracket.size:
        na = na.scatter(bracket, df[bracket].select(raw.str.contains(NA_CELL_RE)).to_series())
    return df.with_columns(value, vunit, *([na] if no_value else []))


CAST_FIRST_ROWS = 4096
"""From this many texts :func:`read_numbers` casts the plain integers first (fewer, its own steps cost more)."""


def _read_matched(df: pl.DataFrame, no_value: bool, *, distinct: bool = False) -> pl.DataFrame:
    """``df`` with ``value`` and ``vunit`` read from ``raw`` by :data:`NUM_RE` (and ``na``, with ``no_value``), once
    per distinct text (``distinct``: the texts are distinct already, and each is read as it is)."""
    raw = pl.col("raw")

    def add(d: pl.DataFrame) -> pl.DataFrame:
        # one match per text: the groups' struct is taken apart after (a select would run the regex per field)
        read = d.with_columns(raw.str.extract_groups(NUM_RE).alias("g"))
        g = pl.col("g")
        na = [raw.str.contains(NA_CELL_RE).fill_null(False).alias("na")] if no_value else []
        value = [g.struct.field("1").cast(pl.Float64, strict=False).alias("value"), g.struct.field("2").alias("vunit")]
        return read.with_columns(*value, *na).drop("g")

    return add(df) if distinct else by_distinct(df, "raw", add)


def epoch_ns(col: pl.Expr) -> pl.Expr:
    """``--query-gpu`` timestamps (``YYYY/MM/DD HH:MM:SS.fff``, maybe padded) as int64 ns since the epoch (local time
    read as UTC), null where not one."""
    return col.str.strip_chars().str.to_datetime("%Y/%m/%d %H:%M:%S%.f", strict=False, time_unit="ns").dt.epoch("ns")


PLAIN_TS_RE = r"(?-u)^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?$"
"""The timestamps :func:`timestamps` reads in two parts: ASCII digits, no padding, at most 9 fraction digits."""


def timestamps(text: pl.Series, plain: pl.Series | None = None) -> pl.Series:
    """:func:`epoch_ns` of each of ``text``. Those of :data:`PLAIN_TS_RE` (``plain``, when known) are read as whole
    seconds, which polars parses several times faster than a format with a fraction, plus the fraction as an integer
    of ns; the others by :func:`epoch_ns`."""
    plain = text.str.contains(PLAIN_TS_RE).fill_null(False) if plain is None else plain
    t = pl.col("t")
    ns = text.to_frame("t").select(
        t.str.slice(0, 19).str.to_datetime("%Y/%m/%d %H:%M:%S", strict=False, time_unit="ns").dt.epoch("ns")
        + fraction_ns(t)
    )
    ns = ns.to_series().alias(text.name)
    other = (~plain).arg_true()  # (their values above are not theirs)
    if other.len():
        ns = ns.scatter(other, text.gather(other).to_frame("t").select(epoch_ns(pl.col("t"))).to_series())
    return ns


def _ts_once(text: pl.Series) -> pl.Series:
    """``--query-gpu`` timestamps (``text``, strings) as int64 ns, each distinct string read once where they repeat
    (the GPUs of a sample may share theirs)."""
    distinct = text.drop_nulls().unique()
    if 2 * distinct.len() > text.len():
        return timestamps(text)
    return text.replace_strict(distinct, timestamps(distinct), default=None, return_dtype=pl.Int64)


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


def _csv_samples(
    key: np.ndarray, rest_at: np.ndarray, nrest: np.ndarray, f0: np.ndarray, series: np.ndarray, number: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The samples of ``--query-gpu`` rows: (row, field, text) of each cell of a series field that holds a number,
    in row and cell order. ``key``: each row's distinct rest (``key // tables``) and table (``key % tables``, whose
    fields start at ``f0``); the cells of rest ``j`` are texts ``rest_at[j]`` on (``nrest[j]`` of them), ``number``:
    whether a text holds a number, ``series``: whether a field is a series. A row's first cell is given as text -1
    (the caller reads it: first cells are not shared by rows).

    The cells to take are worked out once per distinct (rest, table): a row takes those of its pair."""
    tables = f0.size
    if key.size and int(key.max()) < 4 * key.size + 4096:  # pairs numbered through a table of all keys
        seen = np.zeros(int(key.max()) + 1, np.bool_)
        seen[key] = True
        keys = np.flatnonzero(seen)
        pair = (np.cumsum(seen) - 1)[key]
    else:
        keys, pair = np.unique(key, return_inverse=True)
    rest, table = keys // tables, keys % tables
    first = series[np.minimum(f0, series.size - 1)][table] & (f0[table] < series.size)  # is its first field a series
    count = nrest[rest] + first
    of = np.repeat(np.arange(keys.size), count)
    i = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + ~first[of]  # cell place in the row
    f = f0[table[of]] + i
    src = np.where(i == 0, -1, rest_at[rest[of]] + i - 1)
    take = np.flatnonzero(series[f] & ((i == 0) | number[src]))
    f, src, of = f[take], src[take], of[take]
    count = np.bincount(of, minlength=keys.size)
    per_row = count[pair]
    r = np.repeat(np.arange(key.size), per_row)
    cell = np.repeat(np.cumsum(count)[pair] - count[pair] - (np.cumsum(per_row) - per_row), per_row) + np.arange(r.size)
    return r, f[cell], src[cell]


def _repeats(cells: pl.Series) -> bool:
    """Whether ``cells`` repeat enough (at most half of them distinct) that reading each distinct one once pays."""
    return 2 * cells.hash().n_unique() <= cells.len()


def read_once(cells: pl.Series, *, no_value: bool = False) -> pl.DataFrame:
    """:func:`read_numbers` of ``cells`` (column ``raw``), each distinct cell read once where there are at least
    :data:`CAST_FIRST_ROWS` and at most half of them are distinct (a field's readings repeat from row to row: the
    codes cost less than reading every cell; fewer cells are read once per distinct text anyway)."""
    if cells.len() < CAST_FIRST_ROWS:
        return read_numbers(cells.to_frame("raw"), no_value=no_value)
    code, distinct = distinct_codes(cells)
    if 2 * distinct.len() > cells.len():
        return read_numbers(cells.to_frame("raw"), no_value=no_value)
    return read_numbers(distinct.to_frame("raw"), no_value=no_value, distinct=True)[code]


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
    # a line's table: the header at or before it (block 0: none); the header's own line is not a row
    block = np.zeros(comma.height, np.int64)
    block[hpos] = 1
    block = np.cumsum(block)
    kept = np.concatenate([[False], heads.get_column("kept").to_numpy()])[hid]
    hnc = np.concatenate([[-1], heads.get_column("hnc").to_numpy().astype(np.int64)])[hid]
    in_kept = kept[block] & (b != ord("#"))
    in_kept[hpos] = False
    cand = np.flatnonzero(in_kept | digit)
    text = comma.get_column("t").gather(cand)
    split = text.str.splitn(", ", 2)
    tcode, rests = distinct_codes(split.struct.field("field_1"))
    # a line's trailing whitespace ends its rest, or was the space of its last ", " (then the rest is empty): taken
    # off (and the line split again) where there is some
    ends = rests.to_frame("r").select(pl.col("r").str.contains(r"\s$") | (pl.col("r") == "")).to_series()
    trailing = np.flatnonzero(ends.fill_null(False).to_numpy()[tcode])
    if trailing.size:
        split = text.scatter(trailing, text.gather(trailing).str.strip_chars_end()).str.splitn(", ", 2)
        tcode, rests = distinct_codes(split.struct.field("field_1"))
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
    checked = np.zeros(firsts.len(), np.bool_)  # first cells searched for a timestamp
    plain_ts = np.zeros(firsts.len(), np.bool_)  # of PLAIN_TS_RE
    whole_ts = np.zeros(firsts.len(), np.bool_)  # of TS_RE
    maybe_ts = np.unique(hcode[noh]) if repeats else np.flatnonzero(noh)
    if maybe_ts.size:
        cells = firsts.gather(maybe_ts)
        plain = cells.str.contains(PLAIN_TS_RE).fill_null(False)  # the usual ones, by the faster ASCII regex
        checked[maybe_ts] = True
        plain_ts[maybe_ts] = plain.to_numpy()
        other = (~plain).arg_true()
        if other.len():
            plain = plain.scatter(other, cells.gather(other).str.contains(TS_RE).fill_null(False))
        whole_ts[maybe_ts] = plain.to_numpy()
    noh &= whole_ts[hcode]
    cb = block[cand]
    row_hnc = np.where(kept[cb], hnc[cb], -1)
    is_noh = noh & (row_hnc != nc)
    keep = np.flatnonzero((in_kept[cand] & (nc == row_hnc)) | is_noh)
    real = comma.get_column("line").to_numpy()[cand[digit[cand] & (nc > 0)]]
    if not keep.size:
        return pl.DataFrame(), 0, real
    line = comma.get_column("line").gather(cand[keep])
    tcode, nc, is_noh, cb = tcode[keep], nc[keep], is_noh[keep], cb[keep]
    if repeats:
        hcode = hcode[keep]  # each row's first cell is text hcode[row]
    else:
        firsts, checked, plain_ts, hcode = firsts.gather(keep), checked[keep], plain_ts[keep], np.arange(keep.size)
    # tables: 0 the header-less rows, then one per distinct kept header text
    kept_heads = heads.filter("kept")
    tab_of_hid = np.zeros(heads.height + 1, np.int64)
    tab_of_hid[kept_heads.get_column("hid").to_numpy()] = np.arange(1, kept_heads.height + 1)
    tab = np.where(is_noh, 0, tab_of_hid[hid[cb]])
    fields, f0, width = _csv_tables(kept_heads, int(nc[is_noh].max()) + 1 if is_noh.any() else 0)
    names = fields.get_column("field").to_numpy()
    # the texts of cells: the first cells, then the cells of each distinct rest (from rest_at)
    more = np.flatnonzero(nrest > 0)
    rest_texts = rest_cells.gather(more).explode()
    texts = pl.concat([firsts, rest_texts])
    rest_at = np.zeros(nrest.size, np.int64)
    rest_at[more] = firsts.len() + np.concatenate([[0], np.cumsum(nrest[more])[:-1]])

    def source(r: np.ndarray, i: np.ndarray) -> np.ndarray:
        """The text (in ``texts``) of cell ``i`` of rows ``r``."""
        return np.where(i == 0, hcode[r], rest_at[tcode[r]] + i - 1)

    def place(name: str) -> np.ndarray:
        """Each row's place of field ``name`` (its table's first), -1 where its table has none."""
        at = np.flatnonzero(names == name)
        of, first = np.unique(np.searchsorted(f0, at, "right") - 1, return_index=True)
        where = np.full(width.size, -1, np.int64)
        where[of] = at[first] - f0[of]
        return where[tab]

    def cell(name: str, read: pl.Expr | None = None, dtype: pl.DataType = pl.String) -> pl.Series:
        """Each row's cell of field ``name`` (maybe ``read``: an expression of ``pl.col(name)`` of type ``dtype``), null
        where its table has none; read on the rows that have one only."""
        p = place(name)
        has = np.flatnonzero(p >= 0)
        none = pl.Series(name, [], dtype).extend_constant(None, line.len())
        if not has.size:
            return none
        cells = texts.gather(source(has, p[has])).alias(name)
        return none.scatter(has, cells if read is None else cells.to_frame().select(read).to_series())

    # timestamps: where first, of the first cells
    p = place("timestamp")
    ts = _ts_once(cell("timestamp")) if (p > 0).any() else None
    if ts is None:
        # where a row's first cell was not searched (not digit-led, or the row's only cell), all are searched again
        ts = timestamps(firsts, None if (~checked[hcode] & (p == 0)).any() else pl.Series(plain_ts)).gather(hcode)
        ts = ts.scatter(np.flatnonzero(p < 0), None) if (p < 0).any() else ts
    per_row = pl.DataFrame(
        {
            "line": line,
            "block": np.where(is_noh, -1, cb),
            "ts": ts.cast(pl.Int64),
            "gpu": cell("index", pl.col("index").str.strip_chars().cast(pl.Int64, strict=False), pl.Int64),
            "host": cell("hostname", pl.col("hostname").str.strip_chars()),
        }
    )
    per_row = _by_sample(per_row)  # rows are in line order
    # the numbers of the cells: of each distinct rest's cells, and of the rows' first cells where their table's first
    # field is a series (a timestamp or index first is not read)
    series = ~np.isin(names, ["timestamp", "index"])
    first_series = np.unique(hcode[(series[np.minimum(f0, series.size - 1)] & (f0 < series.size))[tab]])
    read_first = pl.DataFrame(schema={"value": pl.Float64, "vunit": pl.String}).clear(firsts.len())
    if first_series.size:
        numbers = read_numbers(firsts.gather(first_series).to_frame("raw"))
        read_first = read_first.with_columns(
            read_first.get_column(c).scatter(first_series, numbers.get_column(c)) for c in ("value", "vunit")
        )
    rest_read = read_once(rest_texts, no_value=True)
    read = pl.concat([read_first, rest_read.select("value", "vunit")])
    # cells that say no value: counted in the first cells and the distinct rests' cells, then per row
    na_text = np.concatenate([_no_value(firsts), rest_read.get_column("na").to_numpy()])
    upto = np.concatenate([[0], np.cumsum(na_text)])  # NA cells before each text
    na = int(na_text[hcode].sum() + (upto[rest_at + nrest] - upto[rest_at])[tcode].sum())
    r, f, src = _csv_samples(
        np.asarray(tcode * width.size + tab),
        rest_at,
        nrest,
        f0,
        series,
        read.get_column("value").is_not_null().to_numpy(),
    )
    first = np.flatnonzero(src < 0)  # a first cell: its row's, where it holds a number
    if first.size:
        src[first] = hcode[r[first]]
        held = np.flatnonzero(read.get_column("value").is_not_null().to_numpy()[src])
        r, f, src = r[held], f[held], src[held]
    # the unit: the header's, else the value's, else the field's (UNITS): one gather from all three, then a null
    units = pl.concat(
        [
            fields.get_column("hunit"),
            read.get_column("vunit"),
            fields.get_column("tunit"),
            pl.Series([None], dtype=pl.String),
        ]
    )
    nf, nt = fields.height, read.height
    has = lambda col: col.is_not_null().to_numpy()  # noqa: E731
    unit = np.where(
        has(fields.get_column("hunit"))[f],
        f,
        np.where(
            has(read.get_column("vunit"))[src],
            nf + src,
            np.where(has(fields.get_column("tunit"))[f], nf + nt + f, 2 * nf + nt),
        ),
    )
    out = pl.DataFrame(
        {
            "gpu": per_row.get_column("gpu").gather(r),
            "host": per_row.get_column("host").gather(r),
            "ts": per_row.get_column("ts").gather(r),
            "series": fields.get_column("series").gather(f),
            "unit": units.gather(unit),
            "value": read.get_column("value").gather(src),
            "line": per_row.get_column("line").gather(r),
        }
    )
    return out, na, real
