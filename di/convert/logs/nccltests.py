"""nccl-tests output (``all_reduce_perf`` and friends), alone or interleaved with NCCL INFO lines.

Table rows are found by their token pattern, not one per line: NCCL lines cut
rows in the middle (``... float  sum  -1mew0:123:123 [1] NCCL INFO ...``), so
the table fragments of the file (number-led lines, and what precedes an NCCL
prefix) are joined in order and one regex finds the rows in them (where no
fragment is anything but one whole row, the fragments are the rows: one anchored
regex per fragment checks that and reads the numbers). What it maps to:

- per row and placement (``out-of-place``, ``in-place``): series
  ``nccl-tests.<test>.<time|algbw|busbw>.<placement>`` (us, GB/s) and
  ``nccl-tests.<test>.size`` (bytes), on one ``nccl-tests`` counter timeline;
  a sample's time is the row's position in the file, in ns (``relative``: nccl-tests
  prints no time), so the size series says which size each sample was.
- the run's header: ``info.nccl_tests`` (version, tests, ranks with host, pid,
  device, bus id and GPU name, ``Avg bus bandwidth`` per test).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.convert.logs.build import Parts, keep_counted
from di.convert.logs.text import lead_in

__all__ = ["SNIFF_RE", "parse_nccl_tests"]

SNIFF_RE = r"^# (?:Collective test starting:|nThread \d+ nGpus|nccl-tests version)"
TEST_MARK = "\x01"
UNNAMED_TEST = "unnamed"
"""The test of rows printed before any test's name: their series are ``nccl-tests.unnamed.*``."""
ROW_RE = (
    r"\x01\w+|(\d+)\s+(\d+)\s+([a-z][a-z0-9_]*)\s+([a-z]+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+|N/A)\s+([\d.]+|N/A)\s+(\S+)"
    r"\s+([\d.]+)\s+([\d.]+|N/A)\s+([\d.]+|N/A)\s+(\S+)"
)
LEGACY_ROW_RE = (
    r"\x01\w+|(\d+)\s+(\d+)\s+([a-z][a-z0-9_]*)\s+([a-z]+)\s+([\d.]+)\s+([\d.]+|N/A)\s+([\d.]+|N/A)\s+(\S+)"
    r"\s+([\d.]+)\s+([\d.]+|N/A)\s+([\d.]+|N/A)\s+(\S+)"
)
""":data:`ROW_RE` of nccl-tests before 2.10, whose tables have no ``root`` column (``size count type redop time algbw
busbw error ...``)."""
LEGACY_HEAD_RE = r"^#\s+size\s+count\s+type\s+redop\s+time\s"
"""The column header of a table without ``root`` (:data:`LEGACY_ROW_RE`)."""
RUN_HEAD = "# nThread "
"""The first line of a run's header in every nccl-tests version (``# nThread 1 nGpus 8 minBytes 8 ...``); before 2.13
no ``# Collective test starting:`` line names the test, so a run's rows are named by the last ``*_perf`` program
a line before this header names (the command line a job script echoes), else ``unnamed``."""
PERF_NAME_RE = r"\b([a-z][a-z0-9_]*_perf)\b"
NCCL_TAIL_RE = r"[A-Za-z][\w.\-]*:\d+:\d+ \[\d+\] .*$"
RANK_RE = (
    r"^#\s+Rank\s+(?P<rank>\d+)(?: Group\s+(?P<group>\d+))? Pid\s+(?P<pid>\d+) on\s+(?P<host>\S+) device\s+(?P<device>\d+)"
    r" \[(?P<bus>[^\]]+)\] (?P<gpu>.*)$"
)
RANK_KEY_RE = r"^#\s+Rank\s+(\d+) "
""":data:`RANK_RE`'s start: its ``rank`` where :data:`RANK_RE` matches."""
RANK_HEAD_RE = r"^#\s+Rank\s+\d+\D"
"""A rank line's first characters that hold its whole number (a character follows it)."""
METRICS = (("time", "us"), ("algbw", "GB/s"), ("busbw", "GB/s"))


ROW_WORDS = 13
"""Words of a row ROW_RE matched (each group is one word)."""


WORD = r"[\x00-\x08\x0e-\x1f!-\x7f]+"
"""An ASCII word: no whitespace (on ASCII text, what ``\\S+`` matches)."""


def _ascii_spaced(text: pl.Series) -> bool:
    """Whether ``text`` is ASCII with no whitespace but spaces (then ``\\s``, ``\\S``, ``\\d`` and ``\\w`` of the
    Unicode regexes match what their ASCII forms match)."""
    joined = text.str.join(" ")
    return (
        joined.str.len_bytes().item() == joined.str.len_chars().item()
        and not joined.str.contains(r"(?-u)[\t\n\v\f\r]").item()
    )


def _row_numbers(rows: pl.Series, cols: dict[str, int], n_words: int = ROW_WORDS) -> pl.DataFrame | None:
    """Column ``name`` (Float64) of word ``k`` of each row, for each of ``cols``: one ASCII-mode regex captures the
    words of ``cols`` (a row is ``n_words`` words apart by spaces, so its words are its groups; the ASCII mode
    runs several times faster than the Unicode one, or than a split at spaces, which makes a string per space); None
    when a row holds other whitespace or a non-ASCII character."""
    if not _ascii_spaced(rows):
        return None
    wanted = set(cols.values())
    words = " +".join(f"({WORD})" if k in wanted else WORD for k in range(n_words))
    groups = rows.str.extract_groups(f"(?-u)^{words}$").struct.unnest()
    if groups.null_count().row(0) != (0,) * groups.width:  # not ROW_WORDS words apart by spaces (not a ROW_RE row)
        return None
    at = {k: i for i, k in enumerate(sorted(wanted))}
    return pl.DataFrame({name: groups.to_series(at[k]).cast(pl.Float64, strict=False) for name, k in cols.items()})


ROW_WORD_RES = (
    r"\d+", r"\d+", r"[a-z][a-z0-9_]*", r"[a-z]+", r"-?\d+", r"[\d.]+", r"(?:[\d.]+|N/A)", r"(?:[\d.]+|N/A)", WORD,
    r"[\d.]+", r"(?:[\d.]+|N/A)", r"(?:[\d.]+|N/A)", WORD,
)  # fmt: skip
"""The words of a :data:`ROW_RE` row, on ASCII text."""
LEGACY_WORD_RES = ROW_WORD_RES[:4] + ROW_WORD_RES[5:]
"""The words of a :data:`LEGACY_ROW_RE` row (no ``root``)."""


def _whole_rows(
    frags: pl.Series, cols: dict[str, int], word_res: tuple[str, ...] = ROW_WORD_RES
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The usual table, where no NCCL line cut a row: when every fragment is one test mark or one whole row
    (ASCII, spaces only; a row the words ``word_res`` match), ROW_RE's matches in the joined fragments are the
    fragments themselves, so one anchored
    ASCII regex per fragment finds the rows and captures their words of ``cols`` (Float64, as in
    :func:`_row_numbers`), instead of a search of the joined fragments and a capture per row. (found: ``m``,
    ``is_test`` as the search gives them; the numbers of the rows), or None when a fragment is anything else."""
    if not _ascii_spaced(frags):
        return None
    is_test = frags.str.starts_with(TEST_MARK)
    rows = frags.filter(~is_test)
    wanted = set(cols.values())
    words = " +".join(f"({rx})" if k in wanted else rx for k, rx in enumerate(word_res))
    groups = rows.str.extract_groups(f"(?-u)^ *{words} *$").struct.unnest()
    if groups.null_count().row(0) != (0,) * groups.width:  # a fragment that is not one whole row
        return None
    at = {k: i for i, k in enumerate(sorted(wanted))}
    nums = pl.DataFrame({name: groups.to_series(at[k]).cast(pl.Float64, strict=False) for name, k in cols.items()})
    found = pl.DataFrame({"m": frags, "is_test": is_test}).with_columns(
        pl.when(pl.col("is_test")).then(pl.col("m")).otherwise(pl.col("m").str.strip_chars(" "))
    )
    return found, nums


COLS = {
    "size": 0,
    "time.out-of-place": 5,
    "algbw.out-of-place": 6,
    "busbw.out-of-place": 7,
    "time.in-place": 9,
    "algbw.in-place": 10,
    "busbw.in-place": 11,
}
"""Each series' word of a :data:`ROW_RE` row."""
LEGACY_COLS = {name: k if k < 4 else k - 1 for name, k in COLS.items()}
"""Each series' word of a :data:`LEGACY_ROW_RE` row."""


def _legacy_tests(lines: pl.DataFrame, marks: pl.DataFrame) -> pl.Series | None:
    """Per line of ``marks``, the test of a run header (:data:`RUN_HEAD`) among them: the last ``*_perf``
    program named on a line before it (:data:`PERF_NAME_RE`), else :data:`UNNAMED_TEST`; null on other lines; None
    without a run header."""
    t = pl.col("text")
    runs = marks.select(t.str.starts_with(RUN_HEAD)).to_series()
    if not runs.any():
        return None
    named = lines.filter(t.str.contains("_perf", literal=True)).select(
        "line", t.str.extract(PERF_NAME_RE).alias("name")
    )
    heads = marks.select("line").with_row_index("at").filter(runs)
    by = heads.join_asof(named.drop_nulls().sort("line"), on="line", strategy="backward", allow_exact_matches=False)
    names = by.get_column("name").fill_null(UNNAMED_TEST)
    out = pl.Series("test", [None] * marks.height, pl.String)
    return out.scatter(by.get_column("at"), names)


UNITS = {"size": "bytes", **{f"{m}.{p}": u for m, u in METRICS for p in ("out-of-place", "in-place")}}


def _samples(g: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """The samples of rows ``g`` (``i``, ``test`` and a Float64 column per metric): one block per metric, in
    ``metrics``' order, rows in order, null values dropped (``g`` unpivoted). Each (test, metric) series name is
    formatted once and gathered by the row's test (a name formatted per sample cost more than the rest)."""
    tests = g.get_column("test").unique(maintain_order=True).drop_nulls()
    code = pl.col("test").replace_strict(
        tests, pl.int_range(tests.len(), eager=True), default=None, return_dtype=pl.Int64
    )
    codes = g.select(code).to_series()
    base = tests.str.replace("_perf$", "")
    return pl.concat(
        [
            g.select(
                pl.lit(None, pl.Int64).alias("rank"),
                pl.lit("nccl-tests").alias("track"),
                ("nccl-tests." + base + "." + metric).gather(codes).alias("series"),
                pl.lit(UNITS[metric], pl.String).alias("unit"),
                pl.col("i").cast(pl.Int64).alias("ts_ns"),
                pl.col(metric).alias("value"),
            )
            for metric in metrics
        ]
    ).drop_nulls("value")


def _on_lines_starting(frame: pl.DataFrame, prefix: str, expr: pl.Expr) -> pl.Series:
    """``expr`` over the rows of ``frame`` whose ``text`` starts with ``prefix``, null on the others: a regex that
    starts with ``prefix`` runs on the few rows it can match (a capture costs far more than the literal test)."""
    rows = frame.select(pl.col("text").str.starts_with(prefix)).to_series().arg_true()
    values = frame[rows].select(expr).to_series()
    return pl.Series(values.name, [], values.dtype).extend_constant(None, frame.height).scatter(rows, values)


def _first_rank_lines(heads: pl.DataFrame) -> pl.DataFrame:
    """:data:`RANK_RE`'s groups of the first line of each rank among the rank lines (those that start with
    ``#  Rank``) of ``heads`` (columns ``line``, ``text``) that :data:`RANK_RE` matches, in line order.

    Every test prints the list again (with other pids where the runs differ), so the whole regex (several times the
    cost of a slice) reads only the first line of each key: a line's first 12 characters (a string view holds them
    inline), which tell a rank line's number where they hold a character after it (:data:`RANK_HEAD_RE`); lines of
    other keys are keyed by their number (:data:`RANK_KEY_RE`). Where a key's first line is not a whole rank line,
    the regex reads its later lines."""
    t, key = pl.col("text"), pl.col("key")
    keyed = heads.filter(lead_in(t, "#  ", "#  S")).select("line", "text", t.str.head(12).alias("key"))
    first = keyed.filter(key.is_first_distinct()).filter(
        key.str.starts_with("#  Rank") | key.str.starts_with("#   Rank")
    )
    open_keys = first.filter(~key.str.contains(RANK_HEAD_RE)).get_column("key")
    if open_keys.len():  # a long rank number or wide spacing: keyed by the number ("\n" first: no head holds one)
        is_open = key.is_in(open_keys.implode())
        numbered = (
            keyed.filter(is_open).with_columns(("\n" + t.str.extract(RANK_KEY_RE)).alias("key")).drop_nulls("key")
        )
        keyed = pl.concat([keyed.filter(~is_open), numbered]).sort("line")
        first = pl.concat([first.filter(~is_open), numbered.filter(key.is_first_distinct())]).sort("line")
    groups = t.str.extract_groups(RANK_RE).alias("g")
    found = first.select("line", "key", groups).unnest("g")
    failed = found.filter(pl.col("rank").is_null())
    if failed.height:
        later = keyed.filter(key.is_in(failed.get_column("key").implode()))
        later = later.filter(~pl.col("line").is_in(failed.get_column("line").implode()))
        found = pl.concat([found, later.select("line", "key", groups).unnest("g")]).sort("line")
    found = found.drop_nulls("rank")
    # a rank keyed twice (other spacing): its first line
    return found.unique("rank", keep="first", maintain_order=True).drop("line", "key")


def parse_nccl_tests(lines: pl.DataFrame) -> Parts:
    """nccl-tests tables and headers of a log as :class:`Parts` (see the module docstring)."""
    heads, picked = _read_lines(lines)
    marks = _mark_lines(heads)
    tests = _run_tests(lines, marks)
    if tests is None:
        return Parts("nccl_tests")
    test, named = tests
    used = _fragments(picked, marks, test, named)
    # a row matched ROW_RE: its fields are its words (no capturing regex)
    legacy = bool(heads.select(pl.col("text").str.contains(LEGACY_HEAD_RE).any()).item())
    row_re, word_res, cols = (LEGACY_ROW_RE, LEGACY_WORD_RES, LEGACY_COLS) if legacy else (ROW_RE, ROW_WORD_RES, COLS)
    found, rows, g = _table_rows(used, row_re, word_res, cols)
    samples = _samples(g, list(cols))
    dropped: dict[str, int] = {}
    ranks = _rank_lines(heads, dropped)
    avg = _avg_busbw(marks, test, dropped)
    info: dict[str, Any] = {
        "nccl_tests": {
            "version": _version(marks),
            "tests": found.filter("is_test").get_column("test").unique(maintain_order=True).to_list(),
            "layout": "no root column (before 2.10)" if legacy else "current",
            "rows": rows.height,
            "ranks": ranks.drop("group").to_dicts(),
            "avg_busbw_GBps": avg,
            "time": "row_order",
        }
    }
    claimed = pl.concat(
        [
            used.filter(~pl.col("frag").str.contains(" NCCL ", literal=True)).get_column("line"),
            heads.get_column("line"),
        ]
    )
    return Parts("nccl_tests", samples=samples, claimed=claimed, dropped=dropped, info=info, epoch=False)


def _read_lines(lines: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The header and footer lines (``#``) and the number-led ones of ``lines`` (each ``line``, ``text``): the few
    lines the rest reads."""
    t = pl.col("text")
    # by their first byte (compared as string views, which hold it inline); only the lines that start with whitespace
    # or a non-ASCII character (maybe a Unicode space or digit) are searched
    lead = lines.select(
        lead_in(t, "#", "$").alias("hash"),
        (lead_in(t, "0", ":") | lead_in(t, ".", "/")).alias("num"),
        ((t < pl.lit("!")) | (t >= pl.lit("\u0080"))).alias("odd"),
    )
    hashed = lead.get_column("hash")
    heads = lines[["line", "text"]].filter(hashed)  # the header and footer lines
    odd = lines[["line", "text"]].filter(lead.get_column("odd"))
    picked = pl.concat(
        [lines[["line", "text"]].filter(lead.get_column("num")), odd.filter(t.str.contains(r"^\s*[\d.]"))]
    )
    return heads, picked


def _mark_lines(heads: pl.DataFrame) -> pl.DataFrame:
    """The lines of ``heads`` that name a test, its average or the version (``# A`` to ``# n``, no rank line: ``#
    R``): the regexes that read the header see these few."""
    t = pl.col("text")
    marks = heads.filter(lead_in(t, "# A", "# o"))
    return marks.filter(
        t.str.contains(r"^# (?:Collective test starting:|Avg bus bandwidth|nccl-tests version|nThread \d+ nGpus)")
    )


def _run_tests(lines: pl.DataFrame, marks: pl.DataFrame) -> tuple[pl.Series, bool] | None:
    """Per line of ``marks``, the test it starts (null on the others), and whether ``# Collective test starting:``
    lines name them (else, before 2.13, :func:`_legacy_tests`); None where no line starts a run."""
    t = pl.col("text")
    test = _on_lines_starting(
        marks, "# Collective test starting: ", t.str.extract(r"^# Collective test starting: (\w+)")
    )
    named = bool(test.is_not_null().any())
    if not named:  # nccl-tests before 2.13: each run's header names no test
        legacy = _legacy_tests(lines, marks)
        if legacy is None:
            return None
        test = legacy
    return test, named


def _fragments(picked: pl.DataFrame, marks: pl.DataFrame, test: pl.Series, named: bool) -> pl.DataFrame:
    """The table fragments (``line``, ``frag``), in line order: number-led lines (a row, a row's tail, a row head glued
    to an NCCL line: no line of ``heads``), the NCCL tail cut off, and test headers (of ``marks``) as
    :data:`TEST_MARK` and the test's name."""
    t = pl.col("text")
    # picked first, so the NCCL tail is cut on these few lines only
    is_test = t.str.starts_with("# Collective test starting: " if named else RUN_HEAD)
    marks = marks.with_columns(test.alias("test"))
    cand = pl.concat([picked.with_columns(pl.lit(None, pl.String).alias("test")), marks.filter(is_test)]).sort("line")
    nccl_tail = t.str.contains(" NCCL ", literal=True)
    test_name = pl.lit(TEST_MARK) + pl.col("test")
    # each regex runs on the fragments it changes only (a when/then computes both branches on every row)
    frag = cand.get_column("text")
    for which, value in ((is_test, test_name), (~is_test & nccl_tail, t.str.replace(NCCL_TAIL_RE, ""))):
        rows = cand.select(which).to_series().arg_true()
        if rows.len():
            frag = frag.scatter(rows, cand[rows].select(value).to_series())
    cand = cand.with_columns(frag.alias("frag"))
    return cand.select("line", "frag").drop_nulls("frag")


def _table_rows(
    used: pl.DataFrame, row_re: str, word_res: tuple[str, ...], cols: dict[str, int]
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The tables' rows in the fragments ``used`` (:func:`_fragments`): the matches (``m``, ``is_test``, ``test``) of
    ``row_re`` (a row of words ``word_res``), the rows among them (numbered ``i``), and the rows' values (``i``,
    ``test`` and a Float64 column per series of ``cols``)."""
    whole = _whole_rows(used.get_column("frag"), cols, word_res)
    if whole is not None:
        found, nums = whole
    else:
        stream = used.select(pl.col("frag").str.join(" ")).item()
        found = pl.Series("m", [stream]).str.extract_all(row_re).explode().drop_nulls().to_frame()
        found = found.with_columns(pl.col("m").str.starts_with(TEST_MARK).alias("is_test"))
    found = found.with_columns(
        pl.when(pl.col("is_test"))
        .then(pl.col("m").str.strip_chars(TEST_MARK))
        .forward_fill()
        .fill_null(UNNAMED_TEST)  # rows before any test's name (a log cut or garbled above them)
        .alias("test")
    )
    rows = found.filter(~pl.col("is_test")).with_row_index("i")
    if whole is None:
        nums = _row_numbers(rows.get_column("m"), cols, len(word_res))
    if nums is not None:
        return found, rows, rows.select("i", "test").hstack(nums)
    words = pl.col("m").str.extract_all(r"\S+")
    g = rows.select("i", "test", words.alias("w")).select(
        "i",
        "test",
        *[pl.col("w").list.get(k, null_on_oob=True).cast(pl.Float64, strict=False).alias(n) for n, k in cols.items()],
    )
    return found, rows, g


def _rank_lines(heads: pl.DataFrame, dropped: dict[str, int]) -> pl.DataFrame:
    """The ranks of the header (:func:`_first_rank_lines`), their numbers as Int64; those with a number beyond int64
    left out, counted in ``dropped``."""
    ints = ("rank", "pid", "device")
    ranks = _first_rank_lines(heads).with_columns(pl.col(c).cast(pl.Int64, strict=False) for c in ints)
    fits = pl.all_horizontal(pl.col(c).is_not_null() for c in ints)
    return keep_counted(ranks, fits, dropped, "rank lines with a number beyond int64")


def _avg_busbw(marks: pl.DataFrame, test: pl.Series, dropped: dict[str, int]) -> dict[str, float]:
    """Each test's ``# Avg bus bandwidth`` (GB/s; ``test``: the test each line of ``marks`` starts); the lines
    without a number counted in ``dropped``."""
    t = pl.col("text")
    avg_value = t.str.extract(r"^# Avg bus bandwidth\s*:\s*([\d.]+)").cast(pl.Float64, strict=False)
    avg = pl.DataFrame({"test": test.forward_fill(), "v": _on_lines_starting(marks, "# Avg bus bandwidth", avg_value)})
    avg_lines = marks.get_column("text").str.starts_with("# Avg bus bandwidth")
    unread = int((avg_lines & avg.get_column("v").is_null()).sum())
    if unread:  # "1.2.3", no number: the line is the run's, its value none
        dropped["Avg bus bandwidth lines without a number"] = unread
    return dict(avg.drop_nulls().iter_rows())


def _version(marks: pl.DataFrame) -> str | None:
    """The version of the first ``# nccl-tests version`` line of ``marks`` (None without one)."""
    version = _on_lines_starting(
        marks, "# nccl-tests version ", pl.col("text").str.extract(r"^# nccl-tests version (\S+)")
    )
    return version.drop_nulls().first() if version.null_count() < version.len() else None
