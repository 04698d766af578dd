"""Text logs: the shortcuts that keep reading fast must not change what is read.

Over every real text log of ../shared/data/logs (skipped when absent) and hand-built lines:

- :func:`~di.convert.logs.text.clean_lines` given the whole text (which skips the passes it shows to change
  nothing) gives the same frame as without it, and its search for launcher prefixes line by line finds what
  the multi-line regex finds;
- a plain file's lines read by polars (``_read_plain``) are those read as bytes (``_read_bytes_lines``), garbled
  counts and size included;
- :func:`~di.convert.logs.text.own_line_times` (captures only where the plain search matched) reads what the
  regex reads on every line;
- the nvidia-smi gate's literal-led searches, and the reader's one search per line, find what its regexes find; nvidia-smi's numbers read once per distinct
  cell are those read cell by cell; dmon's word count is its word split's length;
- NCCL's per-kind regexes run once per distinct message find what they find line by line;
- :func:`~di.convert.logs.reader.present_families` (the per-family gates searched line by line) finds what the
  gates find in the joined text, and never turns away a family whose parser finds something in the file.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

from di.convert.logs import nccl
from di.convert.logs.reader import (
    CONFIRM,
    FAMILIES,
    GATES,
    HEAD_LINES,
    _confirmed,
    _search,
    present_families,
)
from di.convert.logs.smi.cells import NUM_RE, read_numbers
from di.convert.logs.text import (
    ANSI_RE,
    LINE_TS_RE,
    PREFIX_RE,
    _has_prefix,
    read_bytes,
    _read_bytes_lines,
    _read_plain,
    clean_lines,
    line_times,
    own_line_times,
    read_lines,
)

LOGS = DATA / "logs"


def text_logs() -> list[Path]:
    if not LOGS.is_dir():
        return []
    return sorted(p for p in LOGS.rglob("*") if p.is_file() and p.suffix != ".darshan" and p.parent.name != "LICENSES")


def ids(paths: list[Path]) -> list[str]:
    return [f"{p.parent.name}/{p.name}" for p in paths]


LOG_FILES = text_logs()
needs_data = pytest.mark.skipif(not LOG_FILES, reason="shared test data absent: logs/ not found under ../shared/data")


def split(text: str) -> pl.Series:
    raw = pl.Series("text", [text]).str.split("\n").explode()
    return raw.head(raw.len() - 1) if raw.len() and raw[-1] == "" else raw


@pytest.mark.parametrize(
    "text",
    [
        "plain line\nanother: line\n",  # no prefix, no escape, no CR: every pass skipped
        "0: srun prefix\r\n1: another\r\n",  # CR and prefixes
        "\x1b[31m3: \x1b[0mcoloured prefix\nno prefix\n",  # a prefix found only once the escape is gone
        "text\n  12: late prefix\n[rank2]: torchrun\n[1,3]<stdout>: mpi\n",
    ],
)
def test_clean_lines_with_whole_text_is_the_same(text: str) -> None:
    assert clean_lines(split(text), whole=text).equals(clean_lines(split(text)))
    assert clean_lines(split(text), whole=text.encode()).equals(clean_lines(split(text)))


def cleaned_by_regex(raw: pl.Series) -> pl.DataFrame:
    """:func:`clean_lines` as its regexes alone clean ``raw``: every pass over every line."""
    s = raw.str.strip_chars_end("\r").str.replace_all(ANSI_RE, "")
    groups = s.str.extract_groups(PREFIX_RE).struct.unnest()
    rank = groups.select(pl.coalesce(pl.all()).cast(pl.Int64)).to_series()
    return pl.DataFrame(
        {
            "line": pl.Series(range(raw.len()), dtype=pl.UInt32),
            "prefix_rank": rank,
            "text": s.str.replace(PREFIX_RE, ""),
        }
    )


@pytest.mark.parametrize(
    "text",
    [
        "\x1b[31m3: \x1b[0mcoloured prefix\nno prefix\n",
        "plain\n\x1b[1mbold\x1b[0m only\n",
        "0: a\r\n\x1b(B1: b\r\r\n",
        "no escape, no prefix\n",
    ],
)
def test_clean_lines_is_its_regexes_on_every_line(text: str) -> None:
    """Escapes removed on the lines that hold one, and prefixes searched for after, clean as the regexes do run on
    every line."""
    assert clean_lines(split(text)).equals(cleaned_by_regex(split(text)))
    assert clean_lines(split(text), whole=text).equals(cleaned_by_regex(split(text)))


PREFIX_CASES = {
    "no prefix": ("plain\nlines: 12\n", False),
    "srun": ("text\n12: srun -l\n", True),
    "srun indented": ("text\n        7: eight spaces\n", True),
    "nine spaces": ("text\n         7: nine spaces\n", False),
    "eight digits": ("12345678: too long\n", False),
    "no space after colon": ("12:34 a time\n", False),
    "blank line before": ("a\n\n3: b\n", True),
    "torchrun": ("x\n[rank3]: torchrun\n", True),
    "not torchrun": ("[rank]: x\n[rankX]: y\n[2023-01-01 10:00:00] z\n", False),
    "open mpi": ("[1,3]<stderr>: mpi\n", True),
    "not open mpi": ("[1,3]<stdin>: x\n[1]<stdout>: y\n", False),
    "unicode space": ("\u00a01: nbsp\n", True),
    "unicode digit": ("\u0661: arabic-indic one\n", True),
    "eight unicode spaces": ("\u00a0" * 8 + "1234567: longest\n", True),
    "longest open mpi": ("[1234567,1234567]<stdout>: x\n", True),
    "CR line ends": ("a\r\n4: b\r\n", True),
}


@pytest.mark.parametrize("case", list(PREFIX_CASES))
def test_prefix_search_per_line_is_the_whole_text_search(case: str) -> None:
    text, expected = PREFIX_CASES[case]
    assert _has_prefix(split(text)) == pl.Series([text]).str.contains("(?m)" + PREFIX_RE).item() == expected


def times_by_regex(text: pl.Series) -> pl.Series:
    """:func:`own_line_times` as the regex alone reads it (over every line)."""
    return (
        text.str.extract(LINE_TS_RE)
        .str.replace(",", ".")
        .str.replace("T", " ")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ns")
        .dt.epoch("ns")
        .alias("own_ts")
    )


TIME_LINES = [
    "2024-05-01 10:00:00 plain",
    "2024-05-01T10:00:00,123 comma and T",
    "[2024-05-01 10:00:00] bracketed",
    "[2024-05-01 10:00:00.5] [2024-06-01 11:00:00] the regex takes the second",
    "[rank0]:[titan] 2024-05-01 10:00:00,284 - root - INFO - step",
    "[a] [b] [c] 2024-05-01 10:00:00 three groups",
    "[a] [b] [c] [d] 2024-05-01 10:00:00 four groups: none",
    "[2024-05-01 10:00:00] [b] 2024-06-01 11:00:00 a time after two tags wins over the first",
    "[2024-05-01 10:00:00] [x] [y] [z] 2024-06-01 11:00:00 the later time past three tags: the first",
    "[2024-05-01 10:00:00,5][INFO] no later time: the first, read without LINE_TS_RE",
    "[INFO|trainer.py:1143] 2021-05-25 06:38:26,284 >> x",
    "2024-05-01 10:00:0 cut",
    "2024-05-01 10:00:00. no fraction digits",
    "[unclosed 2024-05-01 10:00:00",
    "[\u00e9t\u00e9] 2024-05-01 10:00:00 non-ASCII before the date",
    "\u0662024-05-01 10:00:00 a Unicode digit",
    "2024-05-01 10:00:00.\u0661 a Unicode fraction digit",
    "[x]\u00a02024-05-01 10:00:00 a Unicode space",
    "no time at all",
    "",
]


def test_line_times_scan_is_the_regex() -> None:
    lines = pl.DataFrame({"text": TIME_LINES})
    assert own_line_times(lines).equals(times_by_regex(lines.get_column("text")))


ASCII_TIMES = [
    "2024-05-01 10:00:00",
    "2024-05-01T10:00:00,1",
    "2024-05-01 10:00:00.123456789",
    "2024-05-01 10:00:00.1234567891234",
    "2024-05-01 10:00:00.000000000000000000000000000000001",
    "2024-02-30 10:00:00.5",
    "2024-13-01 10:00:00",
    "2024-05-01 24:00:00,25",
    "2016-12-31 23:59:60.5",
    "0000-01-01 00:00:00",
    "9999-12-31T23:59:59.999999999",
]


@pytest.mark.parametrize("repeats", [1, 5])
def test_ascii_line_times_are_the_fraction_format(repeats: int) -> None:
    """ASCII times are read as whole seconds plus their fraction's digits: what ``%.f`` gives, for bad dates, leap
    seconds and fractions of any length too, with each distinct time parsed once (``repeats`` 5) or every time."""
    text = [f"[{i}] {t} x" for i in range(repeats) for t in ASCII_TIMES] + ["no time"]
    lines = pl.DataFrame({"text": text})
    got = own_line_times(lines)
    assert got.equals(times_by_regex(lines.get_column("text")))
    assert got.null_count() == 1 + 3 * repeats  # the line without a time and the three impossible ones


SMI_LINES = [
    "2025/09/01 12:00:01.123, 45, 1024",
    "2025/09/01 12:00:0",
    "2025-09-01 12:00:01, 45",
    "# gpu   pwr  gtemp",
    "  #  Date  Time  gpu  pwr",
    "# Date Time gpu",
    "#Date  Time gpu\t",
    "# gpux",
    "#Entity  POWER",
    " #Entity  POWER",
    "# Entity",
    "power.draw [W], temperature.gpu",
    "timestamp, index, name",
    "timestamps, index",
    "index [x], name",
    "index [], name",
    "Gpu.x, y",
    "utilization.gpu [%]]",
    "utilization.gpu [%], x",
    "name.x",
    "\u00a0# gpu pwr",
    "# gpu\u00a0pwr",
    "\u0662025/09/01 12:00:01, 4",
    "power.dr\u00e4w, x",
]


TABLE_GATES = GATES["nvidia_smi"][1:]
"""The nvidia-smi gate's table lines."""


def smi_tables_in(text: pl.Series) -> bool:
    return _search(pl.DataFrame({"text": text}), {"nvidia_smi": TABLE_GATES})["nvidia_smi"]


def test_smi_table_gate_is_the_regexes() -> None:
    """The nvidia-smi gate's table lines, searched as one alternation per line, then each regex on the lines it picks
    (head and whole text), are what its regexes match alone."""
    lines = pl.Series("text", SMI_LINES)
    for line in SMI_LINES:
        by_regex = any(pl.Series([line]).str.contains("(?m)" + rx).item() for rx in TABLE_GATES)
        assert smi_tables_in(pl.Series("text", [line])) == by_regex, line
        assert smi_tables_in(pl.Series("text", ["plain"] * 2 * HEAD_LINES + [line])) == by_regex, line
    assert smi_tables_in(lines) and not smi_tables_in(pl.Series("text", ["plain", "text: 1, 2"]))


def joined_search(lines: pl.DataFrame, regexes: dict[str, tuple[str, ...]]) -> dict[str, bool]:
    """Name -> whether one of its regexes matches the lines joined by newlines (multi-line mode): what the gates
    searched line by line must find."""
    joined = pl.Series([lines.get_column("text").str.join("\n").item()])
    return {name: any(joined.str.contains("(?m)" + rx).item() for rx in rxs) for name, rxs in regexes.items()}


CONFIRM_CASES = {
    "header": (["x", "JobID|JobName|State", "1|a|RUNNING"], True),
    "header key alone on its line": (["a|", "  JobID  ", "|b"], True),
    "header split over lines": (["a|", "", "  job_id"], True),
    "rule": (["JobID JobName", "------ -------   "], True),
    "record": (["JobId=12 JobName=x", "more"], True),
    "record ending its line": (["JobId=12", "UserId=x"], True),
    "record ending the text": (["jobid is 12", "JobId=12"], False),
    "key inside words": (["my_jobid_file.txt", "the jobid is 3"], False),
    "dashes only": (["-----", "x - y"], False),
}


@pytest.mark.parametrize("case", list(CONFIRM_CASES))
def test_slurm_confirm_line_by_line_is_the_joined_search(case: str) -> None:
    text, want = CONFIRM_CASES[case]
    for filler in (0, 2 * HEAD_LINES):  # past the head too
        lines = pl.DataFrame({"text": ["filler"] * filler + text})
        assert _confirmed(lines, "slurm") == joined_search(lines, {"slurm": (CONFIRM["slurm"],)})["slurm"] == want


@pytest.mark.parametrize(
    "late",
    ["JobID|JobName|State", "# darshan log version: 3.41", "host:1:1 [0] NCCL INFO NCCL version 2.19.3", "plain"],
)
def test_gates_find_a_family_first_seen_past_the_head(late: str) -> None:
    """A family whose first line comes after the first lines the gates search first is found by the search of the
    whole text (one search for every family not yet seen, then one per family); a gate finds nothing it should not."""
    text = pl.Series("text", ["filler line number %d" % i for i in range(2 * HEAD_LINES)] + [late, "more filler"])
    lines = pl.DataFrame({"text": text})
    got = _search(lines, GATES)
    assert got == joined_search(lines, GATES)
    want = {name: any(pl.Series([late]).str.contains(rx).item() for rx in rxs) for name, rxs in GATES.items()}
    assert got == want and sum(want.values()) == (late != "plain")


RAW_CASES = {
    "empty": b"",
    "one newline": b"\n",
    "blank lines": b"\n\nx\n\n",
    "no final newline": b"a\nb",
    "CRLF": b"0: a\r\n1: b\r\n",
    "two CRs": b"a\r\r\nb\r",
    "lone CR": b"a\rb\nc\n",
    "escapes": b"\x1b[31m3: \x1b[0mred\nplain\n",
    "NUL": b"x\x00y\nz\n",
    "replacement character": b"\xef\xbf\xbd kept\nok\n",
    "BOM and line separator": b"\xef\xbb\xbfbom\nx\xe2\x80\xa8y\n",
    "not utf-8": b"bad \xff\xfe\nok\n",
}


ANCHORED_CASES = {
    **RAW_CASES,
    "BOM before a time": b"\xef\xbb\xbf2024-05-01 10:00:00 x\n# Collective test starting\n",
    "BOM before a gate": b"\xef\xbb\xbf# darshan log version: 3.41\nplain\n",
    "prefixed times": b"0: 2024-05-01 10:00:00 a\n1: # gpu pwr\nplain\n",
    "escaped time": b"\x1b[32m2024-05-01 10:00:00\x1b[0m ok\r\nTraceback (most recent call last):\n",
}


def _anchored_read_is_the_full_search(path: Path, want_rows: bool | None = None) -> None:
    """What the reader finds from the rows its read picked (:attr:`LogText.anchored_rows`) is what it finds searching
    every line: each line's time and the gates; every line an anchored regex matches is among the rows; the polars
    and the bytes path pick the same rows."""
    from di.convert.logs.reader import ANCHORED

    text = read_lines(path, anchored=ANCHORED)
    lines, rows = text.lines, text.anchored_rows
    if want_rows is not None:
        assert (rows is not None) == want_rows
    if rows is not None:
        hit = lines.select(pl.any_horizontal(*(pl.col("text").str.contains(rx) for rx in ANCHORED))).to_series()
        assert set(hit.arg_true().to_list()) <= set(rows.to_list()) and rows.is_sorted()
    own = own_line_times(lines, rows)
    assert own.equals(own_line_times(lines))
    timed = lines.with_columns(line_times(lines, own), own)
    assert present_families(timed, rows) == present_families(timed)
    plain, by_bytes = _read_plain(path, None, ANCHORED), _read_bytes_lines(path, None, ANCHORED)
    if plain is not None:
        assert (plain.anchored_rows is None) == (by_bytes.anchored_rows is None)
        assert plain.anchored_rows is None or plain.anchored_rows.equals(by_bytes.anchored_rows)


@pytest.mark.parametrize("case", list(ANCHORED_CASES))
def test_anchored_rows_give_what_every_line_gives(case: str, tmp_path: Path) -> None:
    path = tmp_path / "case.log"
    path.write_bytes(ANCHORED_CASES[case])
    _anchored_read_is_the_full_search(path, want_rows=False if case in ("prefixed times", "CRLF", "escapes") else None)


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_anchored_rows_give_what_every_line_gives(path: Path) -> None:
    _anchored_read_is_the_full_search(path)


@pytest.mark.parametrize("case", list(RAW_CASES))
def test_lines_read_by_polars_are_those_read_as_bytes(case: str, tmp_path: Path) -> None:
    """A plain file read into lines by polars gives the lines, garbled counts and size the bytes path gives; a file
    that is not UTF-8 (and a gzip one) is left to the bytes path."""
    path = tmp_path / "case.log"
    path.write_bytes(RAW_CASES[case])
    got, want = _read_plain(path, None), _read_bytes_lines(path, None)
    if case == "not utf-8":
        assert got is None and want.garbled == {"lines with bytes that are not UTF-8": 1}
        return
    if case == "empty":  # a size of 0 is read as bytes (a pseudo-file's size is 0 too)
        assert got is None and want.lines.height == 0 and want.nbytes == 0
        return
    assert got is not None
    assert got.lines.equals(want.lines) and got.garbled == want.garbled and got.nbytes == want.nbytes
    assert got.lines.height == RAW_CASES[case].count(b"\n") + (not RAW_CASES[case].endswith(b"\n") and case != "empty")
    gz = tmp_path / "case.log.gz"
    gz.write_bytes(gzip.compress(RAW_CASES[case]))
    assert _read_plain(gz, None) is None and _read_bytes_lines(gz, None).lines.equals(want.lines)


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_read_by_polars_as_bytes(path: Path) -> None:
    got, want = _read_plain(path, None), _read_bytes_lines(path, None)
    assert got is not None
    assert got.lines.equals(want.lines) and got.garbled == want.garbled and got.nbytes == want.nbytes


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_line_times(path: Path) -> None:
    lines = read_lines(path).lines
    assert own_line_times(lines).equals(times_by_regex(lines.get_column("text")))


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_smi_table_scan(path: Path) -> None:
    lines = read_lines(path).lines.get_column("text")
    by_regex = pl.Series([lines.str.join("\n").item()]).str.contains("|".join(f"(?m:{rx})" for rx in TABLE_GATES))
    assert smi_tables_in(lines) == by_regex.item()


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_clean_and_gate_like_the_slow_path(path: Path) -> None:
    text = read_bytes(path, None).decode("utf-8", errors="replace")
    assert clean_lines(split(text), whole=text).equals(clean_lines(split(text)))
    assert clean_lines(split(text)).equals(cleaned_by_regex(split(text)))
    assert clean_lines(split(text), whole=text.encode()).equals(clean_lines(split(text)))
    got = read_lines(path).lines
    lines = got.with_columns(line_times(got))
    present = present_families(lines)
    # the gates searched line by line find what they find in the joined text
    assert _search(lines, GATES) == joined_search(lines, GATES)
    assert {n: _confirmed(lines, n) for n in CONFIRM} == joined_search(lines, {n: (rx,) for n, rx in CONFIRM.items()})
    for name, (_, parse) in FAMILIES.items():
        parts = parse(lines)
        if parts.events.height or parts.samples.height or parts.info:
            assert present[name], f"{path.name}: the {name} gate turned away a family its parser finds"


DEFAULT_SMI_TABLE = """\
+ nvidia-smi
Wed May 12 10:00:00 2021
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 460.32.03    Driver Version: 460.32.03    CUDA Version: 11.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
|   0  Tesla V100-SXM2...  On   | 00000000:1A:00.0 Off |                    0 |
| N/A   40C    P0    56W / 300W |      0MiB / 32510MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""


def test_smi_gate_shuts_on_the_default_table_the_parser_cannot_read() -> None:
    """A training log that prints nvidia-smi's default table (a job script's ``nvidia-smi``) does not run the
    nvidia-smi parser: it reads no such table, and its gate names only what it reads."""
    from di.convert.logs.smi import parse_smi

    lines = pl.DataFrame({"text": DEFAULT_SMI_TABLE.splitlines()}).with_row_index("line")
    lines = lines.with_columns(line_times(lines))
    parts = parse_smi(lines)
    assert not (parts.events.height or parts.samples.height or parts.info)
    assert _search(lines, {"nvidia_smi": GATES["nvidia_smi"]}) == {"nvidia_smi": False}


def test_unknown_line_count_is_the_stripped_count() -> None:
    """The reader counts a line as unknown where stripping leaves it non-empty, testing only the lines that do not
    start with a printable ASCII character."""
    from di.convert.logs.reader import _non_blank

    cases = ["", " ", "\t", "a", " a", "\u00a0", "\u00a0x", "\u2003", "\u00e9", "\x7f", "\x1f", "\x85", " \u3000 ", "!"]
    text = pl.Series(cases * 3)
    assert _non_blank(text) == int((text.str.strip_chars() != "").sum()) == 3 * 7


def test_nccl_tests_row_numbers_are_the_words() -> None:
    """nccl-tests row numbers read by position in the rows (one ASCII regex) equal each row's words cast one by one;
    a row with a tab, other whitespace or a non-ASCII character goes the slow way (None)."""
    from di.convert.logs.nccltests import _row_numbers

    rows = pl.Series(
        "m",
        [
            "8388608   2097152   float   sum   -1   123.4   67.98   101.97   0   120.1   69.85   104.77   0",
            "16   4   double   none   -1   18.22   0.00   0.00   N/A   17.90   0.00   0.00   N/A",
        ],
    )
    cols = {"size": 0, "time": 5, "busbw": 7, "wrong": 8, "bus_in": 11}
    got = _row_numbers(rows, cols)
    words = rows.str.extract_all(r"\S+")
    want = pl.DataFrame({n: words.list.get(k).cast(pl.Float64, strict=False) for n, k in cols.items()})
    assert got is not None and got.equals(want)
    assert _row_numbers(rows.str.replace("   float", "\tfloat"), cols) is None
    assert _row_numbers(rows.str.replace("   float", "\u00a0float"), cols) is None  # Unicode whitespace
    assert _row_numbers(rows.str.replace("float", "fl\u00f6at"), cols) is None  # not ASCII: the regex is


NCCL_TESTS_COLS = {"size": 0, "time": 5, "busbw": 7, "wrong": 8, "bus_in": 11, "last": 12}
FRAGMENTS = {
    "rows and marks": [
        "\x01all_reduce_perf",
        "   8388608   2097152   float   sum   -1   123.4   67.98   101.97   0   120.1   69.85   104.77   0  ",
        "16 4 double none -1 18.22 N/A 0.00 N/A 17.90 0.00 0.00 N/A",
        "\x01alltoall_perf",
        "1 2 int8 none 0 .5 1. 2 x\x01y 3 4 5 z",
    ],
    "a row cut in two": ["1024 256 float sum -1", "10.5 0.10 0.10 0 9.5 0.11 0.11 0"],
    "a row with a word more": ["1 2 float sum -1 1 2 3 0 4 5 6 0 7", "8 9 float sum -1 1 2 3 0 4 5 6 0"],
    "a tab": ["1\t2 float sum -1 1 2 3 0 4 5 6 0"],
    "not ascii": ["1 2 fl\u00f6at sum -1 1 2 3 0 4 5 6 0"],
    "not a row": ["12: a launcher line", "1 2 float sum -1 1 2 3 0 4 5 6 0"],
    "no rows": ["\x01all_reduce_perf"],
}


@pytest.mark.parametrize("case", list(FRAGMENTS))
def test_nccl_tests_whole_rows_are_the_search_of_the_joined_fragments(case: str) -> None:
    """Where every table fragment is a test mark or one whole row, the fragments read one by one give the matches
    and row numbers of ROW_RE's search of the joined fragments; any other fragment goes the slow way (None)."""
    from di.convert.logs.nccltests import ROW_RE, TEST_MARK, _row_numbers, _whole_rows

    frags = pl.Series("frag", FRAGMENTS[case])
    found = pl.Series("m", [frags.str.join(" ").item()]).str.extract_all(ROW_RE).explode().drop_nulls()
    rows = found.filter(~found.str.starts_with(TEST_MARK))
    whole = _whole_rows(frags, NCCL_TESTS_COLS)
    if case in ("rows and marks", "no rows"):
        assert whole is not None
        assert whole[0].get_column("m").equals(found) and whole[0].get_column("is_test").equals(
            found.str.starts_with(TEST_MARK)
        )
        want = _row_numbers(rows, NCCL_TESTS_COLS)
        assert want is not None and whole[1].equals(want) and whole[1].height == rows.len()
    else:
        assert whole is None


def smi_words(lines: pl.DataFrame) -> pl.DataFrame:
    """Every ``, ``-separated cell and every whitespace-separated word of ``lines``, as ``raw`` (what nvidia-smi's
    tables hand to the number reader), and a null."""
    cells = lines.select(pl.col("text").str.split(", ").alias("raw")).explode("raw")
    words = lines.select(pl.col("text").str.extract_all(r"\S+").alias("raw")).explode("raw")
    return pl.concat([cells, words, pl.DataFrame({"raw": [None, " 22.89 W ", "[N/A]", "1e5", "45C"]})])


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_smi_values_by_distinct_are_per_row(path: Path) -> None:
    """nvidia-smi's numbers and units, read once per distinct cell and joined back, are those read cell by cell."""
    raw = smi_words(read_lines(path).lines)
    g = pl.col("raw").str.extract_groups(NUM_RE)
    value = g.struct.field("1").cast(pl.Float64, strict=False)
    per_row = raw.with_columns(value.alias("value"), g.struct.field("2").alias("vunit"))
    assert read_numbers(raw).equals(per_row)
    assert per_row.get_column("value").is_not_null().any()


def test_smi_dmon_word_count_is_the_split() -> None:
    """dmon's row filter counts words (``\\S+``) before splitting: the count is the split's length, tabs included."""
    text = pl.Series("t", ["    0     70  45\t-", "a, b, c", "", "x\u00a0y", "2026/07/14 08:12:38.696, 590.48, 1"])
    assert text.str.count_matches(r"\S+").equals(text.str.extract_all(r"\S+").list.len())


NCCL_KINDS = {
    "tuning": (pl.col("msg").str.contains(" Bytes -> Algo ", literal=True), nccl.TUNE_RE, "algo"),
    "links": (pl.col("msg").str.contains(" via ", literal=True), nccl.LINK_RE, "via"),
    "init": (pl.col("msg").str.contains("Init ", literal=True), nccl.INIT_RE, "comm"),
    "rings": (pl.col("msg").str.starts_with("Channel "), nccl.RING_RE, "order"),
    "ring hops": (pl.col("msg").str.starts_with("Ring "), nccl.RING_HOP_RE, "me"),
    "trees": (pl.col("msg").str.starts_with("Tree "), nccl.TREE_ONE_RE, "me"),
}


@needs_data
@pytest.mark.parametrize("path", LOG_FILES, ids=ids(LOG_FILES))
def test_real_logs_nccl_matching_by_distinct_is_per_line(path: Path) -> None:
    """NCCL's per-kind searches and regexes, run once per distinct message and gathered back, find what they find
    line by line."""
    p, msgs = nccl._message_ids(nccl._prefixed(read_lines(path).lines)[0])
    assert msgs.n_unique() == msgs.len() and msgs.gather(p.get_column("mid")).equals(p.get_column("msg"))
    for which, pattern, required in NCCL_KINDS.values():
        per_line = (
            p.filter(which)
            .with_columns(pl.col("msg").str.extract_groups(pattern).alias("g"))
            .unnest("g")
            .drop_nulls(required)
        )
        pick = msgs.to_frame().select(which).to_series()
        assert nccl._matching(p, msgs, pick, pattern, required).equals(per_line)


COLL_ODD = [
    "AllReduce: opCount 5 sendbuff",
    "AllReduce: opCount 6 sendbuff 0x1 recvbuff 0x2 count 99999999999999999999999 datatype 7 op 0 root 0 comm 0xa1 stream 0x9",
    "AllReduce: opCount 7 sendbuff 0x1 recvbuff 0x2 count 12 datatype 7 op 0 root 0 comm 0xa1 [nranks=2] stream",
    "Weird:  opCount 8 sendbuff 0x1 recvbuff 0x2 count 12 datatype 7 op 0 root 0 comm 0xa1 [nranks=2] stream 0x3",
    "AllReduce: opCount 9 sendbuff 0x1 recvbuff 0x2 count 12 datatype x op 0 root 0 comm 0xa1 [nranks=2] stream 0x3",
    "Bcast: opCount 1 sendbuff 0x1 recvbuff 0x2 count 12 datatype 7 op 0 root 0 comm (nil) [nranks=2] stream 0x3 tail",
    "Send: opCount 2 sendbuff 0x1 recvbuff 0x2  count 12 datatype 7 op 0 root 0 comm 0xa1 stream 0x3",
]


def coll_fields_per_line(c: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The usual-layout COLL fields with every line split whole (what :func:`nccl._coll_by_tokens` gives once per
    distinct tail)."""
    c = c.with_columns(pl.col("msg").str.split(" ").list.to_struct(fields=nccl.COLL_WORDS).alias("_t")).unnest("_t")
    w = [pl.col(name) for name in nccl.COLL_WORDS]
    usual = c.select(pl.all_horizontal([w[i] == word for i, word in nccl.COLL_TOKENS.items()]).fill_null(False))
    has_nr = w[17].str.starts_with("[nranks=")
    fields = c.select(
        w[0].str.strip_suffix(":").alias("opname"),
        w[2].alias("opcount"),
        w[8].cast(pl.Int64, strict=False).alias("count"),
        w[10].cast(pl.Int64, strict=False).alias("dt"),
        w[12].cast(pl.Int64, strict=False).alias("redop"),
        w[14].cast(pl.Int64, strict=False).alias("root"),
        w[16].alias("comm"),
        pl.when(has_nr).then(w[17].str.slice(8).str.strip_suffix("]")).cast(pl.Int64, strict=False).alias("nranks"),
        pl.when(has_nr)
        .then(pl.when(w[18] == "stream").then(w[19]))
        .otherwise(pl.when(w[17] == "stream").then(w[18]))
        .alias("stream"),
    )
    return fields, usual.to_series()


@pytest.mark.parametrize("source", ["odd lines", *(ids(LOG_FILES) if LOG_FILES else [])])
def test_nccl_coll_fields_by_distinct_tail_are_per_line(source: str) -> None:
    """A COLL line's words past its buffers split and cast once per distinct tail give the fields and the layout
    check of each line split whole (real logs; short lines, overflows, double spaces, garbled numbers)."""
    if source == "odd lines":
        c = pl.DataFrame({"line": range(len(COLL_ODD)), "msg": COLL_ODD})
    else:
        path = next(p for p in LOG_FILES if ids([p])[0] == source)
        p, _ = nccl._prefixed(read_lines(path).lines)
        c = p.filter(pl.col("msg").str.contains(": opCount ", literal=True))
    want, want_usual = coll_fields_per_line(c)
    got, fields = nccl._coll_by_tokens(c)
    fid = got.get_column("fid")
    per_line = got.select("opname", "opcount").hstack(fields.gather(fid))
    assert got.height == c.height and got.get_column("line").equals(c.get_column("line"))
    assert per_line.select(want.columns).filter(want_usual).equals(want.filter(want_usual))
    # a line of another layout has its own row of fields, read by regex, past the distinct tails' rows
    odd = per_line.select(want.columns).filter(~want_usual)
    assert odd.equals(nccl._coll_by_regex(c.filter(~want_usual)).select(want.columns))
    assert fid.filter(~want_usual).n_unique() == odd.height
    if odd.height and want_usual.any():
        assert fid.filter(~want_usual).min() > fid.filter(want_usual).max()
    if source == "odd lines":
        assert want_usual.to_list() == [False, True, True, False, True, True, False]


def test_nccl_tests_samples_are_the_unpivot() -> None:
    """nccl-tests samples built one block per metric, with each (test, metric) name formatted once and gathered by the
    row's test, equal the rows unpivoted with a name formatted per sample (rows before any test, null values, two
    tests, no rows)."""
    from di.convert.logs.nccltests import UNITS, _samples

    def unpivoted(g: pl.DataFrame) -> pl.DataFrame:
        long = g.unpivot(index=["i", "test"], variable_name="metric", value_name="value")
        return long.drop_nulls("value").select(
            pl.lit(None, pl.Int64).alias("rank"),
            pl.lit("nccl-tests").alias("track"),
            pl.format("nccl-tests.{}.{}", pl.col("test").str.replace("_perf$", ""), "metric").alias("series"),
            pl.col("metric").replace_strict(UNITS, return_dtype=pl.String).alias("unit"),
            pl.col("i").cast(pl.Int64).alias("ts_ns"),
            "value",
        )

    g = pl.DataFrame(
        {
            "i": pl.Series([0, 1, 2, 3, 4], dtype=pl.UInt32),
            "test": [None, "all_reduce_perf", "all_reduce_perf", "alltoall_perf", "all_reduce_perf"],
            "size": [8.0, 16.0, None, 32.0, 64.0],
            "time.out-of-place": [1.0, None, 3.0, 4.0, 5.0],
            "busbw.in-place": [None, None, None, 0.5, 0.25],
        }
    )
    metrics = ["size", "time.out-of-place", "busbw.in-place"]
    assert _samples(g, metrics).equals(unpivoted(g))
    assert _samples(g.head(0), metrics).equals(unpivoted(g.head(0)))
    no_test = g.with_columns(pl.lit(None, pl.String).alias("test"))
    assert _samples(no_test, metrics).equals(unpivoted(no_test))


SLURM_MARK_LINES = [
    "JobID|JobName|State",
    "       JobID    JobName  Partition",
    "JOBID PARTITION NAME",
    "job_id\x1fstate",
    "Job_Id=12",
    "jobs id",
    "JobId=123 JobName=x",
    "J\u00d6BID not a mark",
    "job\u0130d capital dotted I",
    "job\u0131d dotless i",
    "\u212aJOBID Kelvin sign before",
    "------------ ----------",
    "",
]


def test_slurm_marks_by_words_are_the_regex() -> None:
    """Slurm's header candidates found by an ASCII-case-insensitive search for MARK_RE's words are those MARK_RE
    (Unicode case folding) finds, on hand-built lines and every real log."""
    from di.convert.logs.slurm import MARK_RE, MARK_WORDS

    texts = [pl.Series("text", SLURM_MARK_LINES)] + [read_lines(p).lines.get_column("text") for p in LOG_FILES]
    for text in texts:
        assert text.str.contains_any(MARK_WORDS, ascii_case_insensitive=True).equals(text.str.contains(MARK_RE))


ASCII_CASES = [
    " X_POSIX       0  write        0            2048          262144      0.0300      0.0331   [106]   N/A",
    "   X_MPIIO  12  read  3  -1  4096  1.5  2.25",
    " X_POSIX 0 write 0 0 1 0.1 0.2abc",
    "step=10, skipped=0, lr=[5.3e-07, 5.3e-07], mom=[(0.9, 0.95)]",
    "0/10, RunningAvgSamplesPerSec=357.38, CurrSamplesPerSec=358.42, MemAllocated=1.64GB, MaxMemAllocated=5.53GB",
    " iteration 20/ 1000 | consumed samples: 80 | elapsed time per iteration (ms): 1000.0 | lm loss: 1.2E+01 |",
    "step: 10  loss: 2.0  mem: 3.25GiB  tps: 1,234  mfu: 45.5%  time: 12ms  'lr': nan",
    "",
]


def test_ascii_mode_regexes_match_the_unicode_ones_on_ascii_text() -> None:
    """The DXT segment regex and the training pair regex, switched to ASCII classes where every line is ASCII, find
    what the Unicode regexes find (hand-built lines and every real log's ASCII lines); a non-ASCII line keeps the
    Unicode regex."""
    from di.convert.logs.darshan_text import DXT_RE
    from di.convert.logs.text import ASCII_MODE, all_ascii, ascii_mode
    from di.convert.logs.training import PAIR_RE

    texts = [pl.Series("text", ASCII_CASES)] + [read_lines(p).lines.get_column("text") for p in LOG_FILES]
    for text in texts:
        text = text.filter(text.str.len_bytes() == text.str.len_chars())
        assert all_ascii(text) and ascii_mode(DXT_RE, text) == ASCII_MODE + DXT_RE
        for rx in (DXT_RE, PAIR_RE):
            assert text.str.extract_all(ASCII_MODE + rx).equals(text.str.extract_all(rx))
        assert text.str.extract_groups(ASCII_MODE + DXT_RE).equals(text.str.extract_groups(DXT_RE))
    unicode = pl.Series("text", [" X_POSIX  \u0661  write  0  0  1  0.1  0.2", "Verlust_\u00f6: 1.5"])
    assert not all_ascii(unicode) and ascii_mode(PAIR_RE, unicode) == PAIR_RE


TRAINING_LINES = {
    "megatron": " iteration       10/    1000 | consumed samples:           40 | elapsed time per iteration (ms): 2000.0 |",
    "mllog": ':::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "POINT_IN_TIME", "key": "x", "value": 0.7}',
    "deepspeed": "[Rank 0] step=10, skipped=0, lr=[1e-05, 1e-05], mom=[(0.9, 0.95)]",
    "deepspeed timer": "epoch=0/micro_step=20/global_step=10, RunningAvgSamplesPerSec=12.5, CurrSamplesPerSec=12.1",
    "deepspeed chat": "E2E latency=2.34s, E2E TFLOPs=12.1, Samples/sec=3.4",
    "torchtitan": "[rank0]:[titan] 2025-01-01 12:00:01,000 - root - INFO - step: 1  loss:  8.5  memory: 41.2GiB(52.1%)",
    "epoch_step": "epoch: 0|step: 10|loss: 2.5",
    "hf": "{'loss': 2.5, 'learning_rate': 5e-05, 'epoch': 0.1}",
    "jsonl": '{"step": 1, "loss": 2.0}',
    "error": "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "exception": "RuntimeError: NCCL communicator was aborted on rank 3.",
    "interrupt": "KeyboardInterrupt",
    "traceback": "Traceback (most recent call last):",
    "child failed": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "slurmstepd": "slurmstepd: error: *** JOB 123 ON n1 CANCELLED AT 2023-01-01T00:00:00 ***",
    "return code": "[launch.py:315:sigkill_handler] exits with return code = 1",
}


@pytest.mark.parametrize("kind", list(TRAINING_LINES))
def test_training_gate_admits_each_line_the_parser_reads(kind: str) -> None:
    """Each training format's line, past the head, passes the training gate, and the parser finds something in it;
    an nccl-tests header (``step: 2(factor)``) and an nvidia-smi report's error counters do not pass it."""
    from di.convert.logs.training import parse_training

    filler = ["filler line number %d" % i for i in range(2 * HEAD_LINES)]
    lines = pl.DataFrame({"text": filler + [TRAINING_LINES[kind]]}).with_row_index("line")
    lines = lines.with_columns(pl.lit(None, pl.Int64).alias("prefix_rank"))
    parts = parse_training(lines)
    assert parts.events.height or parts.samples.height
    assert _search(lines, {"training": GATES["training"]}) == {"training": True}
    for other in (
        "#  nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1",
        "    ECC Errors",
        "        Volatile                          : Unknown Error",
    ):
        gate = _search(pl.DataFrame({"text": filler + [other]}), {"training": GATES["training"]})
        assert gate == {"training": False}, other
