"""nvidia-smi output: ``--query-gpu`` CSV (with or without header and units), ``dmon``/``pmon`` tables, ``-q`` text; DCGM's ``dcgmi dmon`` tables alike.

Every table is found by its own header, so a file that holds several (a capture
script's sections, one ``-l`` log) is read whole; all of it with polars string
ops. What it maps to: one counter timeline per GPU (``GPU <index>``) and one
series per numeric field, named as nvidia-smi names it (``power.draw``,
``utilization.gpu``; dmon/pmon ``dmon.pwr``, ``pmon.sm``; ``-q``
``q.GPU Power Readings.Average Power Draw``; ``dcgmi dmon`` ``dcgm.SMACT``), with its unit from the header
(``power.draw [W]``, dmon's unit line), the value (``22.89 W``) or
:data:`UNITS`. ``[N/A]``/``[Not Supported]`` values are skipped (counted in
``info.nvidia_smi.not_available``); text fields (name, uuid, pstate) are not series.

GPU identity: the ``index`` column, dmon's ``gpu`` column, ``-q``'s ``GPU <busId>``
blocks in order; without any (``--format=csv,noheader``) the row's position in
its sample (a sample's rows lie within :data:`SAMPLE_GAP_NS` of each other).
Times: the ``timestamp`` column or ``-q``'s Timestamp (``unix_epoch``, local time
read as UTC); dmon/pmon without ``-o T``: one second per sample, from 0
(``relative``), as dmon samples by default.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.text import by_distinct

__all__ = ["UNITS", "parse_smi", "sniff_smi"]

FIELD = r"[a-z_][\w.]*(?: \[[^\]]+\])?"
HEADER_RE = rf"^{FIELD}(?:, {FIELD})+\s*$"
NOHEADER_RE = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?, "
DMON_RE = r"^#\s*(?:Date\s+Time\s+)?gpu\s+\S+"
QLOG_RE = r"^=+NVSMI LOG=+$"
BANNER_RE = r"^(?:# \$ nvidia-smi\b|\| NVIDIA-SMI \d|NVIDIA System Management Interface)"
"""A capture's command banner, the default table's title, ``nvidia-smi -h``'s first line."""
NA_CELL_RE = r"(?:^|, )\s*\[(?:N/A|Not Supported|Unknown Error|Requested functionality)"
"""A ``--query-gpu`` cell that says the GPU gives no value, at the start of a row or after a ``, ``."""
NUM_RE = r"^\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/]+)?\s*$"
SAMPLE_GAP_NS = 100_000_000
"""Rows of one ``-l`` sample lie within this of each other (nvidia-smi queries GPUs ~1 ms apart; samples are >= 1 s apart)."""
DMON_INTERVAL_NS = 1_000_000_000
"""dmon/pmon's default sampling interval (``-d 1``)."""
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


def sniff_smi(lines: list[str]) -> bool:
    """True when the first lines hold an nvidia-smi (or ``dcgmi dmon``) table or report."""
    return any(
        re.match(QLOG_RE, ln)
        or re.match(DCGMI_HEADER_RE, ln)
        or re.match(BANNER_RE, ln)
        or re.match(NOHEADER_RE, ln)
        or re.match(DMON_RE, ln)
        or (re.match(HEADER_RE, ln) and ("." in ln.split(",")[0] or ln.startswith(("timestamp", "index"))))
        for ln in lines
    )


def _ts(col: pl.Expr) -> pl.Expr:
    return col.str.strip_chars().str.to_datetime("%Y/%m/%d %H:%M:%S%.f", strict=False, time_unit="ns").dt.epoch("ns")


def _ts_once(text: pl.Series) -> pl.Series:
    """``--query-gpu`` timestamps (``text``, strings) as int64 ns, each distinct string read once: the GPUs of a
    sample share theirs, and reading one costs ~10x hashing it."""
    distinct = text.drop_nulls().unique()
    if 2 * distinct.len() > text.len():
        return text.to_frame().select(_ts(pl.col(text.name))).to_series()
    ns = distinct.to_frame().select(_ts(pl.col(text.name))).to_series()
    return text.replace_strict(distinct, ns, default=None, return_dtype=pl.Int64)


def _values(df: pl.DataFrame) -> pl.DataFrame:
    g = pl.col("raw").str.extract_groups(NUM_RE)
    value = (g.struct.field("1").cast(pl.Float64).alias("value"), g.struct.field("2").alias("vunit"))
    return by_distinct(df, "raw", lambda d: d.with_columns(*value))


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


def _csv(lines: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """``--query-gpu`` tables (``lines``: those that hold a ``,``, ``#`` or ``=``, where CSV rows are)."""
    lines = lines.filter(
        pl.col("text").str.contains(", ", literal=True)
    )  # a literal test first: the regexes see CSV lines only
    # each step its own column: an expression used twice in one eager select is evaluated twice (no common
    # subexpression elimination there)
    df = lines.with_columns(pl.col("text").str.strip_chars_end().alias("t"))
    t = pl.col("t")
    df = df.with_columns(t.str.contains(HEADER_RE).alias("is_h"))
    if not df.get_column("is_h").any() and not df.get_column("t").str.contains(NOHEADER_RE).any():
        return pl.DataFrame(), 0  # no table here (a training log's prose): nothing more to look at
    # a header's first field is dotted (a --query-gpu field) or timestamp / index: tested on the few header-shaped lines
    at = df.get_column("is_h").arg_true()
    first_field = t.str.splitn(", ", 2).struct.field("field_0")
    header = first_field.str.contains(".", literal=True) | t.str.starts_with("timestamp") | t.str.starts_with("index")
    is_h = pl.repeat(False, df.height, eager=True).scatter(at.filter(df[at].select(header).to_series()), True)
    df = df.with_columns(is_h.alias("is_h"), t.str.count_matches(", ", literal=True).alias("nc"))
    df = df.select("line", "text", "is_h", "nc", "t")
    df = df.with_columns(pl.col("is_h").cum_sum().alias("block"))
    # hid: the header's text, numbered (a capture repeats the same header in every sample)
    heads = df.filter(pl.col("is_h")).select(
        "block",
        pl.col("nc").alias("hnc"),
        pl.col("t").str.split(", ").alias("fields"),
        pl.col("t").rank("dense").cast(pl.Int64).alias("hid"),
        "t",
    )
    # --query-compute-apps / -accounted-apps / -retired-pages: per process or page, not per GPU: not series
    heads = heads.filter(~pl.col("t").str.contains(r"(?:^|, )(?:pid|retired_pages\.address)\b")).drop("t")
    rows = df.filter(~pl.col("is_h")).join(heads.drop("fields"), on="block", how="left", maintain_order="left")
    noh = pl.col("t").str.contains(NOHEADER_RE) & (pl.col("hnc").is_null() | (pl.col("hnc") != pl.col("nc")))
    rows = rows.with_columns(noh.alias("noh"))  # once (used three times)
    rows = (
        rows.filter(((pl.col("hnc") == pl.col("nc")) & ~pl.col("t").str.starts_with("#")) | pl.col("noh"))
        .with_columns(
            pl.when("noh").then(-1).otherwise(pl.col("block")).alias("block"),
            pl.when("noh").then(-1).otherwise(pl.col("hid")).alias("hid"),
        )
        .drop("noh")
    )
    if not rows.get_column("line").is_sorted():
        rows = rows.sort("line")
    # what a field says (series name, units) is worked out once per distinct header, one row per field; a cell
    # finds its field's row by position (the header's first row + the cell's index in its row)
    noh_width = int(rows.filter(pl.col("hid") == -1).get_column("nc").max() or -1) + 1
    noh_fields = pl.DataFrame({"i": range(noh_width)}, schema={"i": pl.Int64}).select(
        pl.lit(-1, pl.Int64).alias("hid"),
        pl.when(pl.col("i") == 0).then(pl.lit("timestamp")).otherwise(pl.format("field_{}", "i")).alias("field"),
        "i",
    )
    fields = pl.concat(
        [
            heads.unique("hid")
            .select("hid", "fields", pl.int_ranges(0, pl.col("hnc") + 1).alias("i"))
            .explode(["fields", "i"])
            .select("hid", pl.col("fields").alias("field"), "i"),
            noh_fields,
        ]
    ).sort("hid", "i")
    name = pl.col("field").str.replace(r" \[[^\]]+\]$", "")
    table_unit = name.str.extract(r"^([a-z_]+)").replace_strict(UNITS, default=None, return_dtype=pl.String)
    fields = fields.with_columns(
        name.alias("series"),
        pl.col("field").str.extract(r"\[([^\]]+)\]$").alias("hunit"),
        pl.when(pl.col("hid") >= 0).then(table_unit).alias("tunit"),
    ).with_row_index("f")
    pos = lambda name: pl.col("i").filter(pl.col("field") == name).first().alias(name)  # noqa: E731
    per_head = fields.group_by("hid").agg(
        pl.col("f").min().cast(pl.Int64).alias("f0"), pos("timestamp"), pos("index"), pos("hostname")
    )
    rows = rows.join(per_head, on="hid", how="left", maintain_order="left").with_columns(
        pl.col("t").str.split(", ").alias("raw")
    )
    cell = lambda name: pl.col("raw").list.get(pl.col(name).fill_null(0), null_on_oob=True)  # noqa: E731
    has = rows.select(pl.col("timestamp", "index", "hostname").is_not_null().any()).row(0, named=True)

    def where(name: str, value: pl.Expr, dtype: Any) -> pl.Expr:
        """``value`` on the rows whose header has the field ``name`` (not worked out where none has it)."""
        return pl.when(pl.col(name).is_not_null()).then(value) if has[name] else pl.lit(None, dtype)

    per_row = rows.select(
        "block",
        "line",
        where("timestamp", cell("timestamp"), pl.String).alias("ts"),
        where("index", cell("index").str.strip_chars().cast(pl.Int64, strict=False), pl.Int64).alias("gpu"),
        where("hostname", cell("hostname").str.strip_chars(), pl.String).alias("host"),
    )
    per_row = _by_sample(
        per_row.with_columns(_ts_once(per_row.get_column("ts")))
    )  # rows are in line order: per_row's rows are rows' rows
    # cells: (row, field, text); read where the field is a series; the row's and the field's columns gathered for the
    # cells that hold a value only
    cells = rows.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("r"),
        "raw",
        pl.int_ranges(pl.col("f0"), pl.col("f0") + pl.col("nc") + 1).alias("f"),
    ).explode(["raw", "f"])
    is_series = fields.select(~pl.col("field").is_in(["timestamp", "index"])).to_series()
    cells = _values(cells.filter(is_series.gather(cells.get_column("f"))))
    cells = cells.filter(pl.col("value").is_not_null())
    # cells that say no value, counted in their rows (a cell starts the row or follows ", "); a literal search first
    bracketed = rows.filter(pl.col("t").str.contains("[", literal=True))
    na = int(bracketed.select(pl.col("t").str.count_matches(NA_CELL_RE).sum()).item() or 0)
    out = pl.concat(
        [
            per_row.select("gpu", "host", "ts")[cells.get_column("r")],
            fields.select("series", "hunit", "tunit")[cells.get_column("f")],
            cells.select("vunit", "value"),
            per_row.select("line")[cells.get_column("r")],
        ],
        how="horizontal",
    )
    out = out.select(
        "gpu", "host", "ts", "series", pl.coalesce("hunit", "vunit", "tunit").alias("unit"), "value", "line"
    )
    return out, na


def _dmon(lines: pl.DataFrame, hashed: pl.DataFrame) -> pl.DataFrame:
    """dmon/pmon tables (``hashed``: the lines that hold a ``#``, where their headers and unit lines are)."""
    marks = hashed.filter(pl.col("text").str.contains(r"^\s*#")).with_columns(
        pl.col("text").str.strip_chars().alias("t")
    )
    heads = marks.filter(pl.col("t").str.contains(DMON_RE))
    if not heads.height:
        return pl.DataFrame()
    # a table (block, from 1) runs from its header to the next: the headers at or before a line (lines are in order)
    at = heads.get_column("line").to_numpy()
    block = lambda df: pl.Series("block", np.searchsorted(at, df.get_column("line").to_numpy(), "right"), pl.Int64)  # noqa: E731
    words = pl.col("t").str.replace(r"^#\s*", "").str.extract_all(r"\S+")
    heads = heads.select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("block"), words.alias("fields"))
    tool = heads.with_columns(
        pl.when(pl.col("fields").list.contains("pid")).then(pl.lit("pmon")).otherwise(pl.lit("dmon")).alias("tool")
    )
    units = marks.filter(pl.col("t").str.contains(r"^#\s*(?:\S+\s+\S+\s+)?Idx\b"))
    units = units.select(block(units), words.alias("units"))
    units = units.unique("block", keep="first", maintain_order=True)  # (one unit line a table)
    heads = tool.join(units, on="block", how="left", maintain_order="left")
    heads = heads.with_columns(pl.col("fields").list.len().alias("n"))
    heads = heads.with_columns((pl.col("n").cum_sum() - pl.col("n")).cast(pl.Int64).alias("f0"))
    # one row per (table, field): its name, unit and tool; a cell finds its row at its table's first + its index
    per_field = (
        heads.select("block", "tool", "fields", "units", pl.int_ranges(0, pl.col("n")).alias("i"))
        .explode(["fields", "i"])
        .select(
            "block",
            "tool",
            "fields",
            "i",
            pl.col("units").list.get(pl.col("i"), null_on_oob=True).alias("hunit"),
        )
    )
    pos = lambda name: (  # noqa: E731
        per_field.filter(pl.col("fields") == name)
        .unique("block", keep="first")
        .select("block", pl.col("i").alias(name))
    )
    # data rows: a gpu index (or dmon -o DT's date) first, after the first header; not a --query-gpu CSV row (a ", "
    # inside the line: not split into words)
    rows = lines.filter((pl.col("line") >= int(at[0])) & pl.col("text").str.contains(r"^\s*\d"))
    rows = rows.filter(~pl.col("text").str.contains(r", \s*\S"))
    rows = (
        rows.with_columns(block(rows))
        .with_columns(pl.col("text").str.extract_all(r"\S+").alias("raw"))
        .join(heads.select("block", "n", "f0"), on="block", maintain_order="left")
        .filter(pl.col("raw").list.len() == pl.col("n"))
    )
    for name in ("gpu", "pid", "Date", "Time"):
        rows = rows.join(pos(name), on="block", how="left", maintain_order="left")
    get = lambda name: pl.col("raw").list.get(pl.col(name).fill_null(0), null_on_oob=True)  # noqa: E731
    per_row = rows.select(
        "line",
        "block",
        pl.when(pl.col("gpu").is_not_null()).then(get("gpu")).cast(pl.Int64, strict=False).alias("gpu"),
        pl.when(pl.col("pid").is_not_null()).then(get("pid")).alias("pid"),
        pl.concat_str(
            pl.when(pl.col("Date").is_not_null()).then(get("Date")),
            pl.when(pl.col("Time").is_not_null()).then(get("Time")),
            separator=" ",
            ignore_nulls=True,
        ).alias("dt"),
    )
    cells = rows.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("r"),
        "raw",
        pl.int_ranges(pl.col("f0"), pl.col("f0") + pl.col("n")).alias("f"),
    ).explode(["raw", "f"])
    skip = per_field.select(pl.col("fields").is_in(["gpu", "pid", "Date", "Time", "type", "command"])).to_series()
    cells = _values(cells.filter(~skip.gather(cells.get_column("f"))))
    cells = cells.filter(pl.col("value").is_not_null())
    cells = pl.concat(
        [
            per_row[cells.get_column("r")],
            per_field.select("fields", "tool", "hunit")[cells.get_column("f")],
            cells.select("value", "vunit"),
        ],
        how="horizontal",
    )
    k = pl.col("line").rank("dense").over("block", "gpu", "pid") - 1
    ts = pl.coalesce(
        pl.col("dt").str.to_datetime("%Y%m%d %H:%M:%S", strict=False, time_unit="ns").dt.epoch("ns"),
        k.cast(pl.Int64) * DMON_INTERVAL_NS,
    )
    # pmon.<field> (pid <pid>), dmon.<field>: a pmon row has a pid, a dmon row none
    name = pl.concat_str("tool", pl.lit("."), "fields", pl.format(" (pid {})", "pid"), ignore_nulls=True)
    unit = (
        pl.when(pl.col("hunit").is_in(["%", "W", "C", "MHz", "MB", "MiB"]))
        .then(pl.col("hunit"))
        .otherwise(pl.col("vunit"))
    )
    return cells.select(
        "gpu",
        pl.lit(None, pl.String).alias("host"),
        ts.alias("ts"),
        name.alias("series"),
        unit.alias("unit"),
        "value",
        "line",
    )


DCGMI_HEADER_RE = r"^#\s*Entity\s+\S"
DCGMI_ENTITY = r"(?:GPU-CI|GPU-I|GPU|Switch|NvSwitch|Link|CPU|Core)"
"""Entity groups ``dcgmi dmon`` prints (GPUs, MIG instances, NVSwitches and their links, CPUs and cores)."""
DCGMI_UNITS = {
    "POWER": "W",
    "PWR": "W",
    "GTEMP": "C",
    "MMTMP": "C",
    "SMCLK": "MHz",
    "MMCLK": "MHz",
    "GPUTL": "%",
    "MCUTL": "%",
    "FBUSD": "MiB",
    "FBFRE": "MiB",
    "FBTTL": "MiB",
    "PCITX": "B/s",
    "PCIRX": "B/s",
    "NVLTX": "B/s",
    "NVLRX": "B/s",
    "GRACT": "ratio",
    "SMACT": "ratio",
    "SMOCC": "ratio",
    "TENSO": "ratio",
    "DRAMA": "ratio",
    "FP64A": "ratio",
    "FP32A": "ratio",
    "FP16A": "ratio",
    "ENCUT": "%",
    "DECUT": "%",
    "XIDER": "count",
}
"""Units of ``dcgmi dmon``'s field short names (DCGM's field list: activity fields are ratios 0..1, PCIe/NVLink bytes/s)."""


def _dcgmi(lines: pl.DataFrame, hashed: pl.DataFrame) -> tuple[pl.DataFrame, int, pl.Series]:
    """``dcgmi dmon`` tables: a ``#Entity  F1  F2 ...`` header (``# Entity`` in older DCGM), an ``ID`` (``Id``) line,
    rows ``GPU 0  v1  v2 ...`` (entities GPU, GPU-I, GPU-CI, ...; ``N/A`` skipped); one sample per ``-d`` interval
    (1 s by default) from 0. Also the count of ``N/A`` cells and the lines read (headers, ID lines and rows, those
    of ``N/A`` only too). ``hashed``: the lines that hold a ``#``."""
    t = pl.col("text").str.strip_chars()
    hdr = hashed.filter(pl.col("text").str.starts_with("#")).filter(pl.col("text").str.contains(DCGMI_HEADER_RE))
    if not hdr.height:
        return pl.DataFrame(), 0, pl.Series("line", [], pl.UInt32)
    df = lines.filter(pl.col("line") >= hdr.get_column("line").min()).with_columns(
        t.alias("t"), pl.col("line").is_in(hdr.get_column("line").implode()).alias("is_h")
    )
    df = df.with_columns(pl.col("is_h").cum_sum().alias("block"))
    heads = (
        df.filter("is_h")
        .select(
            "block",
            pl.col("t")
            .str.replace(r"^#\s*Entity\s+", "")
            .str.split(" ")
            .list.eval(pl.element().filter(pl.element() != ""))
            .alias("fields"),
        )
        .with_columns(pl.col("fields").list.len().alias("n"))
    )
    rows = (
        df.filter(pl.col("t").str.contains(rf"^{DCGMI_ENTITY}\s+\d+\s"))
        .with_columns(
            pl.col("t").str.extract_groups(rf"^(?P<entity>{DCGMI_ENTITY})\s+(?P<id>\d+)\s+(?P<rest>.*)$").alias("g")
        )
        .unnest("g")
    )
    rows = rows.with_columns(
        pl.col("rest").str.split(" ").list.eval(pl.element().filter(pl.element() != "")).alias("raw")
    ).join(heads, on="block")
    rows = rows.filter(pl.col("raw").list.len() == pl.col("n"))
    k = pl.col("line").rank("dense").over("block", "entity", "id") - 1
    cells = rows.with_columns(k.cast(pl.Int64).alias("k")).explode(["fields", "raw"])
    na = int((cells.get_column("raw") == "N/A").sum())
    # the header's unit line (``ID``, ``Id``; a unit per field in DCGM 4: ``ID  W  C  MHz``) right under it
    under = df.filter(pl.col("is_h").shift(1).fill_null(False) & pl.col("t").str.contains(r"^I[Dd]\b"))
    read = pl.concat([hdr.get_column("line"), under.get_column("line"), rows.get_column("line")])
    cells = _values(cells)
    name = pl.when(pl.col("entity") == "GPU").then(pl.format("dcgm.{}", "fields"))
    name = name.otherwise(pl.format("dcgm.{} ({} {})", "fields", "entity", "id"))
    out = cells.filter(pl.col("value").is_not_null()).select(
        pl.when(pl.col("entity") == "GPU").then(pl.col("id").cast(pl.Int64)).alias("gpu"),
        pl.lit(None, pl.String).alias("host"),
        (pl.col("k") * DMON_INTERVAL_NS).alias("ts"),
        name.alias("series"),
        pl.coalesce(pl.col("fields").replace_strict(DCGMI_UNITS, default=None, return_dtype=pl.String), "vunit").alias(
            "unit"
        ),
        "value",
        "line",
    )
    return out, na, read


def _reports(lines: pl.DataFrame, marked: pl.DataFrame, hashed: pl.DataFrame) -> pl.DataFrame:
    """The lines of ``-q`` reports, each numbered (``report``, from 1): a report runs from its banner to the next
    banner, or a line that starts with ``#`` (a capture's section rule; ``hashed``: the lines that hold a ``#``,
    ``marked``: those that hold one of ``#,=``). Line numbers are searched in the few banners and rules (lines are
    in order)."""
    t = pl.col("text")
    starts = marked.filter(t.str.starts_with("=")).filter(t.str.contains(QLOG_RE)).get_column("line").to_numpy()
    if not starts.size:
        return lines.clear()
    rules = hashed.filter(t.str.starts_with("#")).get_column("line").to_numpy()
    bounds = np.union1d(starts, rules)
    ends = np.append(bounds, np.iinfo(np.int64).max)[np.searchsorted(bounds, starts, side="right")]
    line = lines.get_column("line").to_numpy()
    # reports are disjoint runs of rows (ends[i] <= starts[i + 1]): rows lo[i]..hi[i] of report i + 1
    lo, hi = np.searchsorted(line, starts), np.searchsorted(line, ends)
    n = hi - lo
    at = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n - lo, n)
    report = np.repeat(np.arange(1, starts.size + 1, dtype=np.uint32), n)
    return lines[at].with_columns(pl.Series("report", report, pl.UInt32))


def _qlog(lines: pl.DataFrame, marked: pl.DataFrame, hashed: pl.DataFrame) -> pl.DataFrame:
    t = pl.col("text")
    df = _reports(lines, marked, hashed)
    if not df.height:
        return pl.DataFrame()
    kv = t.str.extract_groups(r"^(?P<ind>\s*)(?P<k>\S[^:]*?)\s*:\s(?P<v>.*)$")
    df = by_distinct(
        df,
        "text",
        lambda d: (
            d.with_columns(kv.alias("g"))
            .unnest("g")
            .with_columns(
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
            )
        ),
    )
    # a GPU's number: its block's place among the report's GPU blocks (a repeated busId keeps its first), worked out on
    # the few block heads, then carried down to the block's lines with the head
    at = df.get_column("gpu_head").is_not_null().arg_true()
    heads = df[at].select("report", "gpu_head")
    number = heads.unique(keep="first", maintain_order=True).with_columns(
        pl.int_range(pl.len()).over("report").alias("gpu")
    )
    number = heads.join(number, on=["report", "gpu_head"], how="left", maintain_order="left").get_column("gpu")
    gpu = pl.repeat(None, df.height, dtype=pl.Int64, eager=True).alias("gpu").scatter(at, number)
    df = df.with_columns(gpu).with_columns(
        pl.col("gpu_head", "gpu", "ts").forward_fill().over("report"),
    )
    df = df.with_columns(pl.col("section").forward_fill().over("report", "gpu_head"))
    df = df.with_columns(
        pl.when(pl.col("ind").str.len_chars() <= 4).then(None).otherwise(pl.col("section")).alias("section")
    )
    df = _values(df.filter(pl.col("k").is_not_null() & pl.col("gpu_head").is_not_null()).rename({"v": "raw"}))
    name = pl.concat_str(pl.lit("q"), "section", "k", separator=".", ignore_nulls=True)  # q.<section>.<k>, q.<k>
    return df.filter(pl.col("value").is_not_null()).select(
        "gpu",
        pl.lit(None, pl.String).alias("host"),
        pl.col("ts").fill_null(0),
        name.alias("series"),
        pl.col("vunit").alias("unit"),
        "value",
        "line",
    )


def parse_smi(lines: pl.DataFrame) -> Parts:
    """nvidia-smi tables of a log (``lines`` from :func:`di.convert.logs.text.read_lines`) as :class:`Parts`."""
    lines = lines.select("line", "text")  # the tables' filters and joins carry no other column
    # one search over all lines for the marks of four kinds of table (CSV's ", ", dmon/pmon/dcgmi's "#", -q's "=")
    marked = lines.filter(pl.col("text").str.contains("[#,=]"))
    csv, na = _csv(marked)
    hashed = marked.filter(pl.col("text").str.contains("#", literal=True))
    dcgmi, dcgmi_na, dcgmi_lines = _dcgmi(lines, hashed)
    tables = {
        "query_gpu": csv,
        "dmon_pmon": _dmon(lines, hashed),
        "q": _qlog(lines, marked, hashed),
        "dcgmi_dmon": dcgmi,
    }
    parts = [f for f in tables.values() if f.height]
    if not parts and not dcgmi_lines.len():
        return Parts("nvidia_smi")
    # a dcgmi table whose every value is N/A (fields DCGM cannot read on that GPU) is read, with no series
    found = [n for n, f in tables.items() if f.height or (n == "dcgmi_dmon" and dcgmi_lines.len())]
    cols = {"gpu": pl.Int64, "host": pl.String, "ts": pl.Int64, "series": pl.String, "unit": pl.String}
    cols |= {"value": pl.Float64, "line": pl.UInt32}
    s = pl.concat([p.select(pl.col(c).cast(t) for c, t in cols.items()) for p in parts] or [pl.DataFrame(schema=cols)])
    epoch = bool(csv.height and csv.get_column("ts").is_not_null().all()) and not any(p is not csv for p in parts)
    s = s.with_columns(pl.col("ts").fill_null(pl.col("line").cast(pl.Int64)), pl.col("gpu").fill_null(0))
    gpus = s.get_column("gpu").unique()  # each track's name written once
    names = gpus.to_frame().select(pl.format("GPU {}", "gpu")).to_series()
    track = pl.col("gpu").replace_strict(gpus, names) if s.height else pl.lit(None, pl.String)  # (none: keeps String)
    samples = s.select(
        pl.lit(None, pl.Int64).alias("rank"),
        "host",
        track.alias("track"),
        "series",
        "unit",
        pl.col("ts").alias("ts_ns"),
        "value",
    )
    info: dict[str, Any] = {
        "nvidia_smi": {
            "tables": found,
            "not_available": na + dcgmi_na,
            "time": "timestamps" if epoch else "relative",
        }
    }
    read = np.zeros(int(lines.get_column("line").max()) + 1, np.bool_)
    read[s.get_column("line").to_numpy()] = True
    read[dcgmi_lines.to_numpy()] = True
    claimed = pl.Series("line", np.flatnonzero(read), pl.UInt32)
    return Parts("nvidia_smi", samples=samples, claimed=claimed, info=info, epoch=epoch)
