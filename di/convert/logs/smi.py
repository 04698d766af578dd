"""nvidia-smi output: ``--query-gpu`` CSV (with or without header and units), ``dmon``/``pmon`` tables, ``-q`` text; DCGM's ``dcgmi dmon`` tables alike.

Every table is found by its own header, so a file that holds several (a capture
script's sections, one ``-l`` log) is read whole; all of it with polars string
ops. What it maps to: one counter timeline per GPU (``GPU <index>``) and one
series per numeric field, named as nvidia-smi names it (``power.draw``,
``utilization.gpu``; dmon/pmon ``dmon.pwr``, ``pmon.sm``; ``-q``
``q.GPU Power Readings.Average Power Draw``; ``dcgmi dmon`` ``dcgm.SMACT``), with its unit from the header
(``power.draw [W]``, dmon's unit line), the value (``22.89 W``) or
:data:`~di.convert.logs.smi_query.UNITS`. ``[N/A]``/``[Not Supported]`` values are skipped (counted in
``info.nvidia_smi.not_available``); text fields (name, uuid, pstate) are not series.

GPU identity: the ``index`` column, dmon's ``gpu`` column, ``-q``'s ``GPU <busId>``
blocks in order; without any (``--format=csv,noheader``) the row's position in
its sample (:mod:`di.convert.logs.smi_query`).
Times: the ``timestamp`` column or ``-q``'s Timestamp (``unix_epoch``, local time
read as UTC); dmon/pmon without ``-o T``: one second per sample, from 0
(``relative``), as dmon samples by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.leadbytes import lead_bytes
from di.convert.logs.smi_query import (
    HEADER_RE,
    NOHEADER_RE,
    NUM_RE,
    UNITS,
    distinct_codes,
    parse_query_gpu,
    read_numbers,
    read_once,
)
from di.convert.logs.text import lead_in

__all__ = ["UNITS", "parse_smi", "sniff_smi"]

DMON_RE = r"^#\s*(?:(?:Date\s+)?Time\s+)?gpu\s+\S+"
"""A dmon/pmon header: ``-o DT`` puts ``Date Time`` before ``gpu``, ``-o T`` ``Time`` alone."""
QLOG_RE = r"^=+NVSMI LOG=+$"
BANNER_RE = r"^(?:# \$ nvidia-smi\b|\| NVIDIA-SMI \d|NVIDIA System Management Interface)"
"""A capture's command banner, the default table's title, ``nvidia-smi -h``'s first line."""
DMON_INTERVAL_NS = 1_000_000_000
"""dmon/pmon's default sampling interval (``-d 1``)."""


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


@dataclass
class _Kinds:
    """The lines each kind of table is looked for in (columns ``line``, ``text``), each sorted by line.

    Attributes:
        comma: lines that hold a ``, `` (``--query-gpu`` CSV; the text as ``t``).
        hashed: lines that start with ``#`` (dmon/pmon and dcgmi headers, unit lines, a capture's rules).
        digits: lines that start with a digit (dmon/pmon rows).
        indented: lines that start with ``#`` or a digit after whitespace, with ``hash``: whether ``#`` (dmon/pmon
            headers, unit lines and rows too).
        eqs: lines that start with ``=`` (``-q``'s banner).
    """

    comma: pl.DataFrame
    hashed: pl.DataFrame
    digits: pl.DataFrame
    indented: pl.DataFrame
    eqs: pl.DataFrame


def _kinds(lines: pl.DataFrame) -> _Kinds:
    """:class:`_Kinds` of ``lines``: one search over all lines (for ``, ``), and each line's first byte, which its
    string view holds (:func:`~di.convert.logs.leadbytes.lead_bytes`). Of the lines that start with whitespace or a
    non-ASCII character (which may be Unicode whitespace or a digit), those that ``^\\s*[#\\d]`` matches are found by
    their first byte after the leading spaces, and by the regex itself where that byte does not tell."""
    t = pl.col("text")
    length, (b,) = lead_bytes(lines.get_column("text"))
    indent = lines.filter(pl.Series(((b < ord("!")) & (length > 0)) | (b >= 0x80)))
    # their first character after the leading spaces: "#" or an ASCII digit is kept, any other ASCII character but
    # whitespace is not (none at all: not either); after other whitespace, or a non-ASCII character (Unicode
    # whitespace, a digit of another script), the regex decides, and a strip of all whitespace tells "#"
    _, (first,) = lead_bytes(indent.get_column("text").str.strip_chars_start(" "))
    hashed = first == ord("#")
    keep = hashed | ((first >= ord("0")) & (first <= ord("9")))
    other = np.flatnonzero(((first >= 0x09) & (first <= 0x0D)) | (first >= 0x80))
    if other.size:
        said = indent[other].select(
            t.str.contains(r"^\s*[#\d]").alias("keep"), lead_in(t.str.strip_chars_start(), "#", "$").alias("hash")
        )
        keep[other] = said.get_column("keep").to_numpy()
        hashed[other] = said.get_column("hash").to_numpy()
    indented = indent.filter(pl.Series(keep)).with_columns(pl.Series("hash", hashed[keep]))
    return _Kinds(
        comma=lines.filter(t.str.contains(", ", literal=True)).rename({"text": "t"}),
        hashed=lines.filter(pl.Series(b == ord("#"))),
        digits=lines.filter(pl.Series((b >= ord("0")) & (b <= ord("9")))),
        indented=indented,
        eqs=lines.filter(pl.Series(b == ord("="))),
    )


def _dmon(kinds: _Kinds, csv_rows: np.ndarray) -> tuple[pl.DataFrame, pl.Series]:
    """dmon/pmon tables (their headers and unit lines among ``kinds.hashed`` and ``kinds.indented``, their rows among
    ``kinds.digits`` and ``kinds.indented``, not the ``csv_rows``: lines of --query-gpu CSV that start with a
    digit), and the lines of their headers and unit lines."""
    # a header names the gpu column, a unit line says Idx: a literal search first
    marks = pl.concat([kinds.hashed, kinds.indented.filter("hash").drop("hash")])
    marks = marks.filter(pl.col("text").str.contains_any(["gpu", "Idx"])).sort("line")
    marks = marks.with_columns(pl.col("text").str.strip_chars().alias("t"))
    heads = marks.filter(pl.col("t").str.contains(DMON_RE))
    if not heads.height:
        return pl.DataFrame(), pl.Series("line", [], pl.UInt32)
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
    read_lines = pl.concat([pl.Series("line", at, pl.UInt32), units.get_column("line").cast(pl.UInt32)])
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
    names = per_field.get_column("fields").to_numpy()

    def pos(name: str) -> np.ndarray:
        """Each table's place of field ``name`` (its first), -1 where none."""
        where = np.flatnonzero(names == name)
        of, first = np.unique(table[where], return_index=True)
        p = np.full(n.size, -1, np.int64)
        p[of] = where[first] - f0[of]
        return p

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
    rows, code, block = rows[keep], code[keep], block[keep]
    cells = words.explode()  # (an empty list gives one null)
    word_at = np.cumsum(np.maximum(nw, 1)) - np.maximum(nw, 1)
    count = n[block]

    def get(name: str) -> pl.Expr:
        """Each row's word of field ``name`` (from ``per_row``'s ``word``: each row's first word in ``cells``), null
        where its table has none."""
        p = pos(name)[block]
        return pl.when(pl.lit(pl.Series(p >= 0))).then(
            pl.lit(cells).gather(pl.col("word") + pl.lit(pl.Series(np.maximum(p, 0))))
        )

    # one select for every per-row word (each word a gather of ``cells``)
    per_row = pl.DataFrame({"line": rows.get_column("line"), "block": block, "word": word_at[code]}).select(
        "line",
        "block",
        get("gpu").cast(pl.Int64, strict=False).alias("gpu"),
        get("pid").alias("pid"),
        pl.concat_str(get("Date"), get("Time"), separator=" ", ignore_nulls=True).alias("dt"),
    )
    start = np.cumsum(count) - count
    k = np.arange(int(count.sum()))
    src = np.repeat(word_at[code] - start, count) + k
    f = np.repeat(f0[block] - start, count) + k
    read = read_once(cells.rename("raw"))
    skip = np.isin(names, ["gpu", "pid", "Date", "Time", "type", "command"])
    take = np.flatnonzero(read.get_column("value").is_not_null().to_numpy()[src] & ~skip[f])
    r = np.repeat(np.arange(rows.height), count)[take]
    f = f[take]
    read = read.select("value", "vunit")[src[take]]
    # a row's sample: its place among its (table, gpu, pid)'s rows that hold a number, in line order, one second apart
    # (dmon's default -d 1), where the row has no date and time
    held = np.zeros(rows.height, np.bool_)
    held[r] = True
    k = np.zeros(rows.height, np.int64)
    k[held] = per_row.filter(pl.Series(held)).select(pl.int_range(pl.len()).over("block", "gpu", "pid")).to_series()
    dated = (per_row.get_column("dt") != "").any()
    absolute = (
        pl.col("dt").str.to_datetime("%Y%m%d %H:%M:%S", strict=False, time_unit="ns").dt.epoch("ns")
        if dated
        else pl.lit(None, pl.Int64)
    )
    per_row = per_row.with_columns(absolute.alias("abs_ts")).with_columns(
        pl.coalesce("abs_ts", _time_of_day("dt") if dated else None, pl.Series(k) * DMON_INTERVAL_NS).alias("ts"),
        pl.col("abs_ts").is_not_null().alias("abs"),
    )
    # pmon.<field> (pid <pid>), dmon.<field>: a pmon row has a pid, a dmon row none; the unit: the header's where it
    # is one of these, else the value's. One select of gathers from the per-field and per-row columns
    of_field = lambda c: pl.lit(per_field.get_column(c)).gather(pl.col("f"))  # noqa: E731
    of_row = lambda c: pl.lit(per_row.get_column(c)).gather(pl.col("r"))  # noqa: E731
    name = pl.concat_str(
        of_field("tool"), pl.lit("."), of_field("fields"), pl.format(" (pid {})", of_row("pid")), ignore_nulls=True
    )
    hunit = of_field("hunit")
    header = hunit.is_in(["%", "W", "C", "MHz", "MB", "MiB"]).fill_null(False)
    out = read.with_columns(pl.Series("f", f), pl.Series("r", r)).select(
        of_row("gpu").alias("gpu"),
        pl.lit(None, pl.String).alias("host"),
        of_row("ts").alias("ts"),
        of_row("abs").alias("abs"),
        name.alias("series"),
        pl.when(header).then(hunit).otherwise("vunit").alias("unit"),
        "value",
        of_row("line").alias("line"),
    )
    return out, read_lines


def _time_of_day(col: str) -> pl.Expr:
    """dmon ``-o T``'s ``HH:MM:SS`` (no date) as ns from the first row's midnight: a time earlier than the row before
    it is on the next day (dmon samples every few seconds, so it never skips a whole day)."""
    t = pl.col(col).str.to_time("%H:%M:%S", strict=False).cast(pl.Int64)  # ns since midnight
    days = (t < t.shift(1)).fill_null(False).cum_sum().cast(pl.Int64)
    return t + days * 86_400_000_000_000


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
    of ``N/A`` only too). ``hashed``: the lines that start with ``#``."""
    t = pl.col("text").str.strip_chars()
    # the header's "E" is its first character after the "#" and ASCII whitespace (other whitespace is not ASCII): a
    # line whose first 3 bytes after the "#" say otherwise is not searched
    _, (_, *after) = lead_bytes(hashed.get_column("text"), 4)
    ruled_out = np.zeros(hashed.height, np.bool_)
    decided = np.zeros(hashed.height, np.bool_)
    for byte in after:
        space = (byte == ord(" ")) | ((byte >= 0x09) & (byte <= 0x0D))
        ruled_out |= ~decided & ~space & (byte != ord("E")) & (byte < 0x80)
        decided |= ~space
    hdr = hashed.filter(pl.Series(~ruled_out)).filter(pl.col("text").str.contains("Entity", literal=True))
    hdr = hdr.filter(pl.col("text").str.contains(DCGMI_HEADER_RE))
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
        df.filter(pl.col("t").str.contains(rf"^{DCGMI_ENTITY}\s+[0-9]{{1,9}}\s"))  # a longer id, other digits: garbled
        .with_columns(
            pl.col("t")
            .str.extract_groups(rf"^(?P<entity>{DCGMI_ENTITY})\s+(?P<id>[0-9]{{1,9}})\s+(?P<rest>.*)$")
            .alias("g")
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
    cells = read_numbers(cells)
    name = pl.when(pl.col("entity") == "GPU").then(pl.format("dcgm.{}", "fields"))
    name = name.otherwise(pl.format("dcgm.{} ({} {})", "fields", "entity", "id"))
    out = cells.filter(pl.col("value").is_not_null()).select(
        pl.when(pl.col("entity") == "GPU").then(pl.col("id").cast(pl.Int64)).alias("gpu"),
        pl.lit(None, pl.String).alias("host"),
        (pl.col("k") * DMON_INTERVAL_NS).alias("ts"),
        pl.lit(False).alias("abs"),
        name.alias("series"),
        pl.coalesce(pl.col("fields").replace_strict(DCGMI_UNITS, default=None, return_dtype=pl.String), "vunit").alias(
            "unit"
        ),
        "value",
        "line",
    )
    return out, na, read


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


def _qlog(lines: pl.DataFrame, kinds: _Kinds) -> tuple[pl.DataFrame, pl.Series]:
    """``-q`` reports' numeric values per GPU, and every line of the reports (nvidia-smi's own, names and states
    included: read, though only numbers make series)."""
    t = pl.col("text")
    df = _reports(lines, kinds)
    if not df.height:
        return pl.DataFrame(), pl.Series("line", [], pl.UInt32)
    report_lines = df.get_column("line").cast(pl.UInt32)
    num = pl.col("v").str.extract_groups(NUM_RE)
    # what a line says, worked out once per distinct line (a report's lines repeat from sample to sample); only the
    # lines that say something (a value, a GPU block's head, a section, the time) are kept
    code, distinct = distinct_codes(df.get_column("text"))
    said = _key_values(distinct).select(
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
    q = q.filter(pl.col("k").is_not_null() & pl.col("gpu").is_not_null() & pl.col("value").is_not_null())
    # q.<section>.<k>, q.<k>
    name = pl.concat_str(
        pl.lit("q"), pl.when(~pl.col("shallow")).then("section"), "k", separator=".", ignore_nulls=True
    )
    out = q.select(
        "gpu",
        pl.lit(None, pl.String).alias("host"),
        pl.col("ts").fill_null(0),
        pl.col("ts").is_not_null().alias("abs"),
        name.alias("series"),
        pl.col("vunit").alias("unit"),
        "value",
        "line",
    )
    return out, report_lines


def parse_smi(lines: pl.DataFrame) -> Parts:
    """nvidia-smi tables of a log (``lines`` from :func:`di.convert.logs.text.read_lines`) as :class:`Parts`."""
    lines = lines.select("line", "text")  # the tables' filters and joins carry no other column
    kinds = _kinds(lines)
    csv, na, csv_rows = parse_query_gpu(kinds.comma)
    dcgmi, dcgmi_na, dcgmi_lines = _dcgmi(lines, kinds.hashed)
    dmon, dmon_lines = _dmon(kinds, csv_rows)
    q, q_lines = _qlog(lines, kinds)
    tables = {
        "query_gpu": csv.with_columns(pl.col("ts").is_not_null().alias("abs")) if csv.height else csv,
        "dmon_pmon": dmon,
        "q": q,
        "dcgmi_dmon": dcgmi,
    }
    parts = [f for f in tables.values() if f.height]
    if not parts and not dcgmi_lines.len():
        return Parts("nvidia_smi")
    # a dcgmi table whose every value is N/A (fields DCGM cannot read on that GPU) is read, with no series
    found = [n for n, f in tables.items() if f.height or (n == "dcgmi_dmon" and dcgmi_lines.len())]
    cols = {"gpu": pl.Int64, "host": pl.String, "ts": pl.Int64, "abs": pl.Boolean, "series": pl.String}
    cols |= {"unit": pl.String, "value": pl.Float64, "line": pl.UInt32}
    s = pl.concat([p.select(pl.col(c).cast(t) for c, t in cols.items()) for p in parts] or [pl.DataFrame(schema=cols)])
    # one clock per log: absolute where every reading has a date and time (--query-gpu's timestamp, dmon -o DT, -q's
    # Timestamp); else relative, the dated readings from the first of them (dmon without -o DT counts seconds from 0)
    absolute = s.get_column("abs")
    epoch = bool(s.height) and bool(absolute.all())
    base = None if epoch or not absolute.any() else int(s.filter("abs").get_column("ts").min())
    if base is not None:
        s = s.with_columns(pl.when("abs").then(pl.col("ts") - base).otherwise("ts").alias("ts"))
    s = s.with_columns(pl.col("ts").fill_null(pl.col("line").cast(pl.Int64)), pl.col("gpu").fill_null(0))
    gpus = s.get_column("gpu").unique()  # each track's name written once
    if not s.height:
        track = pl.lit(None, pl.String)  # (keeps String)
    elif int(gpus.max()) - int(gpus.min()) < 1 << 16:  # GPU numbers: the names of the range, gathered by number
        low = int(gpus.min())
        names = pl.int_range(low, int(gpus.max()) + 1, eager=True).to_frame("gpu").select(pl.format("GPU {}", "gpu"))
        track = pl.lit(names.to_series()).gather(pl.col("gpu") - low)
    else:
        track = pl.col("gpu").replace_strict(gpus, gpus.to_frame().select(pl.format("GPU {}", "gpu")).to_series())
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
    if base is not None:  # the readings' own dates, for whoever needs them: base + the sample's time
        info["nvidia_smi"]["dated_from_ns"] = base
    read = np.zeros(int(lines.get_column("line").max()) + 1, np.bool_)
    read[s.get_column("line").to_numpy()] = True
    for also in (dcgmi_lines, dmon_lines, q_lines):  # headers, unit lines, a report's non-numeric lines
        read[also.to_numpy()] = True
    claimed = pl.Series("line", np.flatnonzero(read), pl.UInt32)
    return Parts("nvidia_smi", samples=samples, claimed=claimed, info=info, epoch=epoch)
