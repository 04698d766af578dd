"""Slurm job tables: ``sacct -P`` / ``--parsable2`` (``|``), ``squeue``/``sacct`` with ``\\x1f`` separators,
``sacct``'s default fixed-width table (columns cut at its dashed rule), and ``scontrol show job`` records
(``Key=Value`` words from a ``JobId=`` line to a blank line; keys named as sacct names them, :data:`SCONTROL_KEYS`).

The header names the columns (case folded: ``JobID``, ``JOBID``); each row is one
job or job step. What it maps to:

- the trace's ``jobs`` table: one row per row, with the columns it has (job id, name,
  state, exit code, nodes, node list, start, end, elapsed...) as String columns, ``jobid`` its first job id field
  (``schemas/trace/v1/jobs.schema.json``); ``+`` marks a field sacct truncated (``info.slurm.truncated`` counts
  them; ``info.slurm.rows`` is the row count).
- rows with a start and an end (``Start``/``End``, ``START_TIME``/``END_TIME``, ISO
  times, read as UTC) become ``step`` events (``slurm <jobid>``) on a ``slurm`` timeline,
  with the row in args; FAILED/CANCELLED/TIMEOUT/OUT_OF_MEMORY/NODE_FAIL rows are also
  instants ``slurm <STATE>`` at their end.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert.logs.build import Parts
from di.convert.logs.text import by_distinct, lead_in

__all__ = ["SNIFF_RE", "job_events", "jobs_table", "parse_slurm"]

KEYS = r"(?i:jobid|job_id)"
SCONTROL_RE = r"^JobId=\d+\s"
SNIFF_RE = rf"(?:^|[|\x1f])\s*{KEYS}\s*[|\x1f]|[|\x1f]\s*{KEYS}\s*$|^\s*JobID\s+JobName\s|{SCONTROL_RE}"
SCONTROL_KEYS = {
    "jobid": "jobid",
    "arrayjobid": "arrayjobid",
    "jobname": "jobname",
    "userid": "user",
    "account": "account",
    "partition": "partition",
    "jobstate": "state",
    "reason": "reason",
    "exitcode": "exitcode",
    "runtime": "elapsed",
    "timelimit": "timelimit",
    "submittime": "submit",
    "starttime": "start",
    "endtime": "end",
    "nodelist": "nodelist",
    "batchhost": "batchhost",
    "numnodes": "nnodes",
    "numcpus": "ncpus",
    "numtasks": "ntasks",
    "tres": "tres",
    "command": "command",
    "workdir": "workdir",
    "stdout": "stdout",
}
"""``scontrol show job`` keys (case folded) -> the column name sacct gives the same field."""
BAD_STATES = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE")
START = ("start", "start_time")
END = ("end", "end_time")


def _iso(col: str) -> pl.Expr:
    return pl.col(col).str.to_datetime("%Y-%m-%dT%H:%M:%S", strict=False, time_unit="ns").dt.epoch("ns")


def _is_job_id(name: str) -> bool:
    """Whether a column name (lower case, made unique by :func:`_unique`) is a job id's."""
    return name.rstrip("_0123456789") in ("jobid", "job_id")


def _unique(names: list[str]) -> list[str]:
    """Column names made unique (squeue may print one field twice): the second ``jobid`` is ``jobid_2``; a field
    named ``line`` is ``line_2``, as ``line`` is the frame's own column (:data:`RESERVED`)."""
    out: list[str] = list(RESERVED)
    for n in names:
        out.append(n if n not in out else f"{n}_{sum(o == n or o.startswith(n + '_') for o in out) + 1}")
    return out[len(RESERVED) :]


RESERVED = ("line", "_rest")
"""Column names of the tables' own (the line number, a fixed-width row's fields after the first)."""


DELIMITED_HEAD = rf"(?:^|[|\x1f])\s*{KEYS}\s*(?:[|\x1f]|$)"
RULE = r"^-+(?: -+)+\s*$"
"""sacct's default table's dashed rule under its header."""


MARK_RE = r"(?i:job_?id)"
"""What every header and record start holds (rules start with ``-``): a search that leaves the regexes below a few
lines."""


MARK_WORDS = ["jobid", "job_id"]
"""The words :data:`MARK_RE` matches (its case folding of these letters is ASCII's)."""


def _marks(lines: pl.DataFrame) -> pl.DataFrame:
    """The lines that may be a table's header, a dashed rule or an ``scontrol`` record's start, with which they are
    (the regexes run on these few lines only) and their row position in ``lines``."""
    t = pl.col("text")
    # MARK_RE's words and a rule's "- -", one Aho-Corasick search (other lines found get no flag below)
    mark = t.str.contains_any([*MARK_WORDS, "- -"], ascii_case_insensitive=True)
    cand = lines.with_row_index("pos").filter(mark)
    return cand.select(
        "pos",
        "line",
        "text",
        (t.str.contains(DELIMITED_HEAD) & t.str.contains(r"[|\x1f]")).alias("is_head"),
        t.str.contains(RULE).alias("is_rule"),
        t.str.contains(SNIFF_RE).alias("sniff"),
        t.str.contains(SCONTROL_RE).alias("scontrol"),
    )


def _block_of(lines: pl.DataFrame, starts: pl.DataFrame) -> np.ndarray:
    """Per row of ``lines``: the number of the block it lies in (a block runs from one row of ``starts``, by their
    ``pos``, to the next), -1 before the first."""
    at = np.zeros(lines.height, np.int64)
    at[starts.get_column("pos").to_numpy()] = 1
    return np.cumsum(at) - 1


def _blocks(block: np.ndarray, starts: pl.DataFrame, kind: np.ndarray) -> np.ndarray:
    """Per row: the ``kind`` of the block it lies in (``block``: :func:`_block_of`), -1 before the first; the start
    rows themselves get -1."""
    out = np.append(kind, -1)[block]  # block -1 (before the first) takes the appended -1
    out[starts.get_column("pos").to_numpy()] = -1
    return out


def _delimited(lines: pl.DataFrame, marks: pl.DataFrame, block: np.ndarray) -> list[pl.DataFrame]:
    """One frame of string columns per distinct header line (``|`` or ``\\x1f`` separated): the rows after each of
    its occurrences, up to the next header or rule, with as many fields (a loop over header kinds, not header lines)."""
    t = pl.col("text")
    starts = marks.filter(pl.col("is_head") | pl.col("is_rule"))
    heads = starts.get_column("text").filter(starts.get_column("is_head")).unique(maintain_order=True).to_list()
    kind = starts.select(
        pl.when("is_head").then(pl.col("text").replace_strict(heads, list(range(len(heads))), default=None))
    ).to_series()
    block_kind = pl.Series(_blocks(block, starts, kind.fill_null(-1).to_numpy()))
    out = []
    for k, head in enumerate(heads):  # one per kind of table
        sep = "\x1f" if "\x1f" in head else "|"
        names = _unique([n.strip().lower() for n in head.split(sep)])
        # the first field (the job id, distinct from row to row) and the rest, which repeats (a step's name,
        # partition, account, state): the rest is split once per distinct rest, into a field more than it has (n - 1
        # with n fields in the header: a row has as many when its last is there and the one past it is not)
        n = len(names)
        first_rest = t.str.splitn(sep, 2).struct.rename_fields(["_first", "_rest"])
        split = lines.filter(block_kind == k).select("line", first_rest.alias("s")).unnest("s")
        rest = pl.col("_rest").str.splitn(sep, n)
        field = lambda i: rest.struct.field(f"field_{i}")  # noqa: E731
        rest_fields = lambda d: d.select(  # noqa: E731
            "_rest",
            (field(n - 2).is_not_null() & field(n - 1).is_null()).alias("_fits"),
            *[field(i - 1).str.strip_chars().alias(f"_{i}") for i in range(1, n)],
        )
        rows = by_distinct(split.filter(pl.col("_rest").is_not_null()), "_rest", rest_fields).filter("_fits")
        # by name, a field "*" were every column
        fields = [pl.col("_first").str.strip_chars().alias(names[0])]
        out.append(rows.select("line", *fields, *[pl.col(f"_{i}").alias(names[i]) for i in range(1, n)]))
    return out


def _cut(text: pl.Expr, fields: list[tuple[tuple[int, int], str]], origin: int) -> list[pl.Expr]:
    """The fixed-width ``fields`` ((start, width) in characters, name) of ``text``, which starts at character
    ``origin`` of its line, without their padding."""
    return [text.str.slice(a - origin, n).str.strip_chars().alias(name) for (a, n), name in fields]


def _fixed(lines: pl.DataFrame, marks: pl.DataFrame, block: np.ndarray) -> list[pl.DataFrame]:
    """sacct's default table: the dashed rule under the header gives the column spans (a loop over distinct
    (header, rule) pairs; the rows of a table run from its rule to the next rule or delimited header)."""
    t = pl.col("text")
    starts = marks.filter(pl.col("is_head") | pl.col("is_rule"))
    pos = starts.get_column("pos").cast(pl.Int64)
    above = lines.get_column("text").gather((pos - 1).clip(0)).set(pos == 0, None)  # the header over a rule
    starts = starts.with_columns(above.alias("above"), pl.col("text").str.strip_chars_end().alias("rule"))
    rules = starts.filter(pl.col("is_rule") & pl.col("above").is_not_null())
    kinds = rules.select("above", "rule").unique(maintain_order=True)
    kind = starts.join(kinds.with_row_index("k"), on=["above", "rule"], how="left", maintain_order="left")
    kind = kind.select(pl.when("is_rule").then(pl.col("k").cast(pl.Int64))).to_series()
    block_kind = pl.Series(_blocks(block, starts, kind.fill_null(-1).to_numpy()))
    out = []
    for k, (head, rule) in enumerate(kinds.iter_rows()):  # one per kind of table
        spans, i = [], 0
        for dash in rule.split(" "):
            spans.append((i, len(dash)))
            i += len(dash) + 1
        names = _unique([head[a : a + n].strip().lower() for a, n in spans])
        if not any(_is_job_id(n) for n in names):  # a dashed rule under other text (a training log's banner)
            continue
        rows = _numbered(lines.filter(block_kind == k))
        fields = list(zip(spans, names))
        frame = rows.select("line", *_cut(t, fields[:1], 0))
        if len(fields) > 1:  # the fields after the first repeat from row to row (a job's steps, partition, account)
            origin = fields[1][0][0]
            frame = by_distinct(
                frame.with_columns(rows.get_column("text").str.slice(origin).alias("_rest")),
                "_rest",
                lambda d: d.with_columns(_cut(pl.col("_rest"), fields[1:], origin)),
            ).drop("_rest")
        out.append(frame)
    return out


def _numbered(rows: pl.DataFrame) -> pl.DataFrame:
    r"""The rows whose text starts with a digit after blanks (``^\s*\d``: a fixed-width table's job rows): those that
    start with an ASCII digit by two comparisons of string views, the regex only on those that start with a blank
    or a non-ASCII character (a Unicode blank or digit)."""
    t = rows.get_column("text")
    digit = lead_in(pl.col("text"), "0", ":")
    keep = rows.select(digit).to_series()
    other = rows.select(~digit & ((pl.col("text") < pl.lit("!")) | (pl.col("text") >= pl.lit("\u0080")))).to_series()
    at = other.arg_true()
    if at.len():
        keep = keep.scatter(at, t.gather(at).str.contains(r"^\s*\d"))
    return rows.filter(keep)


def _scontrol(lines: pl.DataFrame, marks: pl.DataFrame) -> tuple[list[pl.DataFrame], pl.Series]:
    """``scontrol show job`` records: from a ``JobId=N`` line to the next blank line, ``Key=Value`` words; one row per
    record (its ``line`` the JobId line), and the lines of the records."""
    t = pl.col("text")
    if not marks.get_column("scontrol").any():
        return [], pl.Series("line", [], dtype=pl.UInt32)
    df = lines.select(
        "line", t.str.contains(SCONTROL_RE).cum_sum().alias("rec"), t.str.strip_chars().alias("t")
    ).filter(pl.col("rec") > 0)
    df = df.with_columns((pl.col("t") == "").cast(pl.Int32).cum_sum().over("rec").alias("gap"))
    df = df.filter((pl.col("gap") == 0) & pl.col("t").str.contains("=", literal=True))
    kv = (
        df.select("rec", pl.col("t").str.extract_all(r"[A-Za-z][\w:/]*=\S*").alias("kv"))
        .explode("kv")
        .drop_nulls("kv")
        .with_columns(pl.col("kv").str.splitn("=", 2).struct.rename_fields(["k", "v"]).alias("s"))
        .unnest("s")
        .with_columns(pl.col("k").str.to_lowercase())
        .filter(pl.col("k").is_in(list(SCONTROL_KEYS)))
        .with_columns(pl.col("k").replace_strict(SCONTROL_KEYS))
    )
    jobs = kv.pivot(on="k", index="rec", values="v", aggregate_function="first")
    heads = df.group_by("rec").agg(pl.col("line").min())
    jobs = heads.join(jobs, on="rec").drop("rec")
    return [
        jobs.with_columns(
            pl.col(c).replace(["Unknown", "None", "(null)"], [None, None, None]) for c in jobs.columns if c != "line"
        )
    ], df.get_column("line")


def parse_slurm(lines: pl.DataFrame) -> Parts:
    """Slurm tables of a log as :class:`Parts` (see the module docstring)."""
    marks = _marks(lines)
    records, record_lines = _scontrol(lines, marks)
    block = _block_of(lines, marks.filter(pl.col("is_head") | pl.col("is_rule")))
    text = lines.select("line", "text")  # the tables' rows are taken from these two columns only
    frames = [f for f in _delimited(text, marks, block) + _fixed(text, marks, block) + records if f.height]
    if not frames:
        return Parts("slurm")
    jobs = pl.concat(frames, how="diagonal_relaxed")
    if not jobs.get_column("line").is_sorted():  # tables of several kinds, interleaved
        jobs = jobs.sort("line")
    jobid = next((c for c in jobs.columns if _is_job_id(c)), None)
    if jobid is None:  # tables without a job id are no Slurm output
        return Parts("slurm")
    events = job_events(jobs, jobid)
    # per frame (each one contiguous; a column a frame lacks is null in ``jobs``, never a truncated field)
    truncated = sum(sum(f.select(pl.col(pl.String).str.ends_with("+").sum()).row(0)) for f in frames)
    info: dict[str, Any] = {"slurm": {"rows": jobs.height, "truncated": truncated}}
    kw: dict[str, Any] = {"events": events} if events.height else {}
    header_lines = marks.filter(pl.col("sniff") | pl.col("is_rule")).get_column("line")
    claimed = pl.concat([jobs.get_column("line"), header_lines, record_lines])
    return Parts("slurm", claimed=claimed, info=info, epoch=bool(kw), tables={"jobs": jobs_table(jobs)}, **kw)


def job_events(jobs: pl.DataFrame, jobid: str) -> pl.DataFrame:
    """The ``slurm`` timeline's events of the rows of ``jobs`` (String columns named as sacct names its fields, an
    optional ``line``): a ``step`` event ``slurm <jobid>`` per row with a start and an end (ISO times, read as UTC)
    that do not run backwards, the row in its args, and an instant ``slurm <STATE>`` at the end of each such row
    whose state is one of :data:`BAD_STATES`. Empty where no row has both times."""
    start = next((c for c in jobs.columns if c in START), None)
    end = next((c for c in jobs.columns if c in END), None)
    state = next((c for c in jobs.columns if c in ("state", "st")), None)
    if not (start and end):
        return pl.DataFrame()
    args = pl.struct(pl.all().exclude("line")).struct.json_encode()
    timed = jobs.with_columns(_iso(start).alias("s_ns"), _iso(end).alias("e_ns"), args.alias("args")).filter(
        pl.col("s_ns").is_not_null() & pl.col("e_ns").is_not_null() & (pl.col("e_ns") >= pl.col("s_ns"))
    )
    ev = [
        timed.select(
            pl.col("s_ns").alias("start_ns"),
            pl.col("e_ns").alias("end_ns"),
            pl.format("slurm {}", jobid).alias("name"),
            pl.lit("step").alias("cat"),
            pl.lit(False).alias("instant"),
            "args",
        )
    ]
    if state:
        first = pl.col(state).str.split(" ").list.first()
        ev.append(
            timed.filter(first.is_in(BAD_STATES)).select(
                pl.col("e_ns").alias("start_ns"),
                pl.col("e_ns").alias("end_ns"),
                pl.format("slurm {}", first).alias("name"),
                pl.lit("other").alias("cat"),
                pl.lit(True).alias("instant"),
                "args",
            )
        )
    return pl.concat(ev).with_columns(pl.lit("slurm").alias("track"))


def jobs_table(jobs: pl.DataFrame) -> pl.DataFrame:
    """The rows of the trace's ``jobs`` table (``schemas/trace/v1/jobs.schema.json``): every field of ``jobs`` as
    parsed, and ``jobid``, the row's first job id field (each table of the output has one: a table of several
    kinds' rows holds each row's in the column its own header names). A field whose header is empty (a separator
    at the header's end) is the column :data:`UNNAMED` (a table's columns need names)."""
    ids = [c for c in jobs.columns if _is_job_id(c)]
    table = jobs.drop("line", strict=False).with_columns(pl.coalesce(ids).alias("jobid"))
    return table.rename({"": UNNAMED}) if "" in table.columns and UNNAMED not in table.columns else table


UNNAMED = "unnamed"
"""The ``jobs`` column of a field with an empty header."""
