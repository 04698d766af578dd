"""nvidia-smi ``-q`` reports as samples.

A report runs from its banner (``==============NVSMI LOG==============``: :data:`QLOG_RE`) to the next banner, or a
line that starts with ``#`` (a capture's section rule). Its GPU blocks (``GPU 00000000:1B:00.0``) are numbered in
order within the report (a repeated busId keeps its first number); a block's lines ``key : value`` (:data:`KV_RE`)
whose value is a number make series ``q.<section>.<key>`` (``q.<key>`` for the block's own keys), with the value's
unit. Times: the report's ``Timestamp`` (``unix_epoch``, local time read as UTC), else 0.

The steps of :func:`_qlog`: the reports' lines (:func:`_reports`), what each distinct line says
(:func:`_line_says`, by :func:`_key_values`), the GPU block, time and section carried down to each value's line
(:func:`_carried`) and the samples (:func:`_qlog_samples`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.logs.smi.cells import NUM_RE, distinct_codes
from di.convert.logs.smi.kinds import _Kinds

QLOG_RE = r"^=+NVSMI LOG=+$"


def _reports(lines: pl.DataFrame, kinds: _Kinds) -> pl.DataFrame:
    """The lines of ``-q`` reports, each numbered (``report``, from 1): a report runs from its banner to the next
    banner, or a line that starts with ``#`` (a capture's section rule). Line numbers are searched in the few banners
    (among ``kinds.eqs``) and rules (among ``kinds.hashed``; lines are in order)."""
    t = pl.col("text")
    starts = kinds.eqs.filter(t.str.contains(QLOG_RE)).get_column("line").to_numpy()
    if not starts.size:
        return lines.clear()
    rules = kinds.hashed.get_column("line").to_numpy()
    # the next banner or rule after each banner
    next_rule = np.append(rules, np.iinfo(np.int64).max)[np.searchsorted(rules, starts, side="right")]
    ends = np.minimum(np.append(starts[1:], np.iinfo(np.int64).max), next_rule)
    line = lines.get_column("line").to_numpy()
    # reports are disjoint runs of rows (ends[i] <= starts[i + 1]): rows lo[i]..hi[i] of report i + 1
    lo, hi = np.searchsorted(line, starts), np.searchsorted(line, ends)
    n = hi - lo
    at = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n - lo, n)
    report = np.repeat(np.arange(1, starts.size + 1, dtype=np.uint32), n)
    return lines[at].with_columns(pl.Series("report", report, pl.UInt32))


def _filled(x: str, new: pl.Expr) -> pl.Expr:
    """Column ``x`` forward filled within runs of rows that start where ``new`` (a run's first rows before a value
    stay null): the row each value comes from, forward filled, then gathered (``forward_fill().over(...)`` costs
    several times as much)."""
    at = pl.int_range(pl.len())
    return pl.col(x).gather(pl.when(pl.col(x).is_not_null() | new).then(at).forward_fill())


KV_RE = r"^(?P<ind>\s*)(?P<k>\S[^:]*?)\s*:\s(?P<v>.*)$"
"""A ``-q`` line's key and value (``    Product Name                          : NVIDIA H100``)."""


SPLIT_KV_LINES = 2048
"""From this many lines :func:`_key_values` splits them (fewer, the regex costs less than the split's own steps)."""


def _key_values(text: pl.Series) -> pl.DataFrame:
    """Columns ``text``, ``ind`` (the indent's length in characters), ``k`` and ``v``: :data:`KV_RE`'s groups of each
    of ``text``, null where it does not match. From :data:`SPLIT_KV_LINES` lines, a line is split at the first ``:``
    after its indent (a capture of the lazy regex costs several times more), and a line whose first character after
    the indent is ``:`` is read by :data:`KV_RE` itself."""
    t, s = pl.col("text"), pl.col("s")
    if text.len() < SPLIT_KV_LINES:
        groups = text.to_frame("text").with_columns(t.str.extract_groups(KV_RE).alias("g")).unnest("g")
        return groups.with_columns(pl.col("ind").str.len_chars())
    df = text.to_frame("text").with_columns(t.str.strip_chars_start().alias("s"))
    parts = df.select(
        "text",
        (t.str.len_chars() - s.str.len_chars()).alias("ind"),
        s.str.splitn(":", 2).struct.field("field_0").str.strip_chars_end().alias("k"),
        s.str.splitn(":", 2).struct.field("field_1").alias("after"),
    )
    said = pl.col("after").str.contains(r"^\s")  # a space after the ":" (a line of no key is read below)
    out = parts.select(
        "text",
        *(pl.when(said).then(c).alias(n) for n, c in (("ind", "ind"), ("k", "k"), ("v", pl.col("after").str.slice(1)))),
    )
    colon = df.select(s.str.starts_with(":")).to_series().arg_true()
    if colon.len():
        groups = out[colon].select(t.str.extract_groups(KV_RE).alias("g")).unnest("g")
        groups = groups.with_columns(pl.col("ind").str.len_chars().cast(out.schema["ind"]))
        out = out.with_columns(out.get_column(c).scatter(colon, groups.get_column(c)) for c in ("ind", "k", "v"))
    return out


def _line_says(distinct: pl.Series) -> pl.DataFrame:
    """What each of the ``distinct`` lines says: its key ``k``, a GPU block's head ``gpu_head``, a section's name
    ``section``, the report's time ``ts``, whether its key is one of the GPU block itself (``shallow``), and the
    ``value`` and ``vunit`` of a number."""
    t = pl.col("text")
    num = pl.col("v").str.extract_groups(NUM_RE)
    return _key_values(distinct).select(
        "text",
        "k",
        pl.when(t.str.contains(r"^GPU [0-9A-Fa-f]+:")).then(t.str.strip_chars()).alias("gpu_head"),
        pl.when(pl.col("k").is_null() & t.str.contains(r"^    \S") & ~t.str.contains(r":\s"))
        .then(t.str.strip_chars())
        .alias("section"),
        pl.when(pl.col("k") == "Timestamp")
        .then(
            pl.col("v")
            .str.strip_chars()
            .str.replace(r"\s+", " ", literal=False)
            .str.to_datetime("%a %b %d %H:%M:%S %Y", strict=False, time_unit="ns")
            .dt.epoch("ns")
        )
        .alias("ts"),
        (pl.col("ind") <= 4).alias("shallow"),  # a key of the GPU block itself: no section
        num.struct.field("1").cast(pl.Float64, strict=False).alias("value"),
        num.struct.field("2").alias("vunit"),
    )


def _carried(df: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``df`` (lines that say something, of :func:`_line_says`, with their ``report``) of a value in a GPU
    block, with the block's GPU number, the report's time and the section carried down to them."""
    # a GPU's number: its block's place among the report's GPU blocks (a repeated busId keeps its first), worked out on
    # the few block heads, then carried down to the block's lines with the head
    at = df.get_column("gpu_head").is_not_null().arg_true()
    heads = df[at].select("report", "gpu_head")
    number = heads.unique(keep="first", maintain_order=True).with_columns(
        pl.int_range(pl.len()).over("report").alias("gpu")
    )
    number = heads.join(number, on=["report", "gpu_head"], how="left", maintain_order="left").get_column("gpu")
    gpu = pl.repeat(None, df.height, dtype=pl.Int64, eager=True).alias("gpu").scatter(at, number)
    report = pl.col("report") != pl.col("report").shift(1, fill_value=0)  # reports are runs of rows, from 1
    # a block's GPU number, time and section carried down its rows (the number stands for the busId: one per busId in
    # a report), then the rows of a value in a GPU block kept
    block = report | pl.col("gpu_head").is_not_null()
    q = df.with_columns(gpu)
    if heads.is_duplicated().any():  # a busId twice in a report: its blocks share their sections
        q = q.with_columns(_filled("gpu", report), _filled("ts", report))
        q = q.with_columns(pl.col("section").forward_fill().over("report", "gpu"))
    else:  # a GPU block is a run of rows from its head
        q = q.with_columns(_filled("gpu", report), _filled("ts", report), _filled("section", block))
    return q.filter(pl.col("k").is_not_null() & pl.col("gpu").is_not_null() & pl.col("value").is_not_null())


def _qlog_samples(q: pl.DataFrame) -> pl.DataFrame:
    """The samples of the value rows ``q`` (of :func:`_carried`)."""
    # q.<section>.<k>, q.<k>
    name = pl.concat_str(
        pl.lit("q"), pl.when(~pl.col("shallow")).then("section"), "k", separator=".", ignore_nulls=True
    )
    return q.select(
        "gpu",
        pl.lit(None, pl.String).alias("host"),
        pl.col("ts").fill_null(0),
        pl.col("ts").is_not_null().alias("abs"),
        name.alias("series"),
        pl.col("vunit").alias("unit"),
        "value",
        "line",
    )


def _qlog(lines: pl.DataFrame, kinds: _Kinds) -> tuple[pl.DataFrame, pl.Series]:
    """``-q`` reports' numeric values per GPU, and every line of the reports (nvidia-smi's own, names and states
    included: read, though only numbers make series)."""
    df = _reports(lines, kinds)
    if not df.height:
        return pl.DataFrame(), pl.Series("line", [], pl.UInt32)
    report_lines = df.get_column("line").cast(pl.UInt32)
    # what a line says, worked out once per distinct line (a report's lines repeat from sample to sample); only the
    # lines that say something (a value, a GPU block's head, a section, the time) are kept
    code, distinct = distinct_codes(df.get_column("text"))
    said = _line_says(distinct)
    says = (
        said.select(
            (pl.col("k").is_not_null() & pl.col("value").is_not_null())
            | pl.any_horizontal(pl.col("gpu_head", "section", "ts").is_not_null())
        )
        .to_series()
        .to_numpy()
    )
    rows = np.flatnonzero(says[code])
    df = pl.concat([df.select("line", "report")[rows], said.drop("text")[code[rows]]], how="horizontal")
    return _qlog_samples(_carried(df)), report_lines
