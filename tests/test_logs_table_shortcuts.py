"""nvidia-smi, nccl-tests and Darshan text: the shortcuts that keep their tables fast must not change what is read.

Over the real logs of ../shared/data/logs (skipped when absent) and hand-built lines:

- nccl-tests' rank lines, keyed by their first characters with the whole regex on the first line of each key, give
  what the regex over every rank line gives (first line of each rank, garbled lines and long numbers too);
- nccl-tests' table and header lines picked by their first byte are those the anchored regex picks;
- ``--query-gpu`` timestamps read as whole seconds plus a fraction equal the one-format parse;
- cell numbers cast as integers first equal :data:`~di.convert.logs.smi.cells.NUM_RE`'s reading (negative zero too);
- ``-q`` lines split at their first colon give :data:`~di.convert.logs.smi.qlog.KV_RE`'s groups;
- ``--query-gpu`` first cells read once per distinct cell, or once per row, give the same samples;
- cells read once per distinct cell (:func:`~di.convert.logs.smi.cells.read_once`) equal each cell read;
- lines' first bytes read from their string views (:func:`~di.convert.logs.leadbytes.lead_bytes`) are their texts'.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

from di.convert.logs.nccltests import RANK_RE, _first_rank_lines, parse_nccl_tests
from di.convert.logs.smi import parse_smi, query_gpu
from di.convert.logs.smi.qlog import KV_RE, SPLIT_KV_LINES, _key_values
from di.convert.logs.smi.cells import CAST_FIRST_ROWS, NA_CELL_RE, NUM_RE, read_numbers, read_once
from di.convert.logs.smi.timestamps import PLAIN_TS_RE, epoch_ns, timestamps
from di.convert.logs.text import lead_in, read_lines

LOGS = DATA / "logs"


def real_logs(folder: str) -> list[Path]:
    """The text logs of ../shared/data/logs/<folder>, sorted; skips the test when absent."""
    if not (LOGS / folder).is_dir():
        pytest.skip(f"shared test data absent: logs/{folder}/ not found under ../shared/data")
    return sorted(p for p in (LOGS / folder).iterdir() if p.suffix in (".log", ".txt", ".csv"))


RANK_EDGES = [
    "#  Rank  9 Group  0 Pid garbled on x",  # the first line of rank 9 is no whole rank line: the next one is read
    "#  Rank  9 Group  0 Pid 12 on hostA device  1 [0000:1b:00] GPU A",
    "#  Rank 07 Group  0 Pid 13 on hostB device  2 [0000:1c:00] GPU B",  # "07" and "7": two ranks, as the regex says
    "#  Rank  7 Group  0 Pid 14 on hostC device  3 [0000:1d:00] GPU C",
    "#  Rank 99999999999999999999 Group  0 Pid 15 on hostD device  3 [0000:1d:00] GPU D",  # a number past the key
    "#  Rank\u00a011 Group  0 Pid 16 on hostE device  3 [0000:1d:00] GPU \u00e9",
    "#  Rank  \u0663 Group  0 Pid 17 on hostF device  3 [0000:1d:00] GPU F",
    "#  Rank       3 Group  0 Pid 1 on wide device  0 [0000:1b:00] W",  # wide spacing: keyed by the number
    "#  Rank  3 Group  0 Pid 5 on narrow device  0 [0000:1b:00] N",
    "#  Rank 12345 Group  0 Pid garbled",
    "#  Rank 12345 Group  0 Pid 2 on long device  1 [0000:1b:00] L",
    "#  Rank  8Group",
    "#  Rank   8 Group  0 Pid 6 on x device  0 [0000:1b:00] X",
    "#  Rank  8 Group  0 Pid 7 on y device  0 [0000:1b:00] Y",
    "#\tRank  13 Group  0 Pid 19 on hostG device  3 [0000:1d:00] G",  # not "#  Rank": not a rank line
    "#  Ranked 14",
    "# Collective test starting: all_reduce_perf",
]


def regex_rank_lines(heads: pl.DataFrame) -> pl.DataFrame:
    """The first line of each rank by the whole regex on every line that starts with ``#  Rank``."""
    t = pl.col("text")
    found = heads.filter(t.str.starts_with("#  Rank")).select(t.str.extract_groups(RANK_RE).alias("g")).unnest("g")
    return found.drop_nulls("rank").unique("rank", keep="first", maintain_order=True)


def test_nccl_tests_rank_lines_keyed_are_the_regex_over_every_line() -> None:
    """The rank lines read by key give the first line of each rank the regex gives over every line, on every real
    nccl-tests log, and on hand-built lines in both orders after them."""
    for path in real_logs("nccl"):
        heads = read_lines(path).lines.filter(pl.col("text").str.starts_with("#"))
        edges = pl.DataFrame({"text": RANK_EDGES + RANK_EDGES[::-1]})
        for case in (
            heads.select("text"),
            pl.concat([heads.select("text"), edges]),
            pl.concat([edges, heads.select("text")]),
        ):
            case = case.with_row_index("line")
            assert _first_rank_lines(case).equals(regex_rank_lines(case)), path.name
    edges = _first_rank_lines(pl.DataFrame({"text": RANK_EDGES}).with_row_index("line"))
    assert edges.get_column("rank").to_list() == [
        "9", "07", "7", "99999999999999999999", "11", "\u0663", "3", "12345", "8"
    ]  # fmt: skip
    assert edges.get_column("pid").to_list()[0] == "12" and edges.get_column("host").to_list()[-3:] == [
        "wide",
        "long",
        "x",
    ]


def test_nccl_tests_lines_picked_by_first_byte_are_the_regex() -> None:
    """nccl-tests reads the ``#`` lines and those the anchored regex ``^\\s*[\\d.]`` picks: by first byte, and the
    regex only where a line starts with whitespace or a non-ASCII character (a Unicode space or digit)."""
    texts = ["# a", "1 2", ".5", " 3", "\u00a0 4", "\u0663 x", "\u2003.", "\t#", "a 1", "", " ", "\u00e9", "/1", "-1"]
    lines = pl.DataFrame({"text": texts * 3}).with_row_index("line")
    parts = parse_nccl_tests(lines)  # no test named: nothing read, and no error
    assert not parts.samples.height
    t = pl.col("text")
    by_byte = lines.filter(
        lead_in(t, "#", "$")
        | lead_in(t, "0", ":")
        | lead_in(t, ".", "/")
        | (((t < pl.lit("!")) | (t >= pl.lit("\u0080"))) & t.str.contains(r"^\s*[\d.]"))
    )
    assert by_byte.equals(lines.filter(t.str.contains(r"^(?:#|\s*[\d.])")))


TIMESTAMPS = [
    "2025/09/08 14:14:37.120",
    "2025/09/08 14:14:37",
    "2025/09/08 14:14:37.123456789",
    "2025/09/08 14:14:37.1234567891",  # ten fraction digits: the format parse
    "2025/09/08 14:14:37.",
    "2025/13/08 14:14:38.123",
    "2025/02/30 14:14:38.123",
    "2025/12/31 23:59:60.5",
    "2025/09/08 24:00:00.000",
    " 2025/09/08 14:14:39.1 ",
    "2025/9/08 14:14:39.1",
    "\u0662025/09/08 14:14:39",
    "1970/01/01 00:00:00.000000001",
    "",
    None,
    "[N/A]",
]


def test_query_gpu_timestamps_are_the_format_parse() -> None:
    """Timestamps read as whole seconds plus the fraction (where PLAIN_TS_RE matches) equal the one-format parse of
    each, given the PLAIN_TS_RE search or not; random timestamps too."""
    rng = random.Random(5)
    texts = TIMESTAMPS + [
        f"{rng.randint(1970, 2099)}/{rng.randint(0, 13):02d}/{rng.randint(0, 32):02d} {rng.randint(0, 24):02d}:"
        f"{rng.randint(0, 60):02d}:{rng.randint(0, 60):02d}" + ("." + str(rng.randint(0, 10**9))[: rng.randint(1, 10)])
        for _ in range(5000)
    ]
    s = pl.Series("t", texts, pl.String)
    want = s.to_frame().select(epoch_ns(pl.col("t"))).to_series()
    assert timestamps(s).equals(want, check_names=False)
    plain = s.str.contains(PLAIN_TS_RE).fill_null(False)
    assert plain.sum() > 1000 and timestamps(s, plain).equals(want, check_names=False)


def test_numbers_cast_first_are_num_re() -> None:
    """Cells read with plain integers cast first (from CAST_FIRST_ROWS cells) equal NUM_RE's reading of each: value
    (negative zero's sign too) and unit; other columns kept."""
    rng = random.Random(7)
    alphabet = [
        "0",
        "1",
        "9",
        "-",
        "+",
        ".",
        " ",
        "W",
        "%",
        "\u0663",
        "e",
        "\u00a0",
        "[N/A]",
        "[Not Supported]",
        "9" * 20,
    ]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(2 * CAST_FIRST_ROWS)]
    texts += [str(rng.randint(-(10**20), 10**20) // 10 ** rng.randint(0, 20)) for _ in range(CAST_FIRST_ROWS)]
    df = pl.DataFrame({"raw": texts + ["-0", "-00", "+0", "0", "+12", "007", None], "k": range(len(texts) + 7)})
    got = read_numbers(df)
    g = pl.col("raw").str.extract_groups(NUM_RE)
    want = df.with_columns(
        g.struct.field("1").cast(pl.Float64, strict=False).alias("value"), g.struct.field("2").alias("vunit")
    )
    assert got.columns == want.columns and got.drop("value").equals(want.drop("value"))
    pairs = zip(got.get_column("value").to_list(), want.get_column("value").to_list(), strict=True)
    assert all(a == b and math.copysign(1, a) == math.copysign(1, b) if b is not None else a is None for a, b in pairs)
    assert df.select(pl.col("raw").cast(pl.Int64, strict=False).is_not_null().sum()).item() > CAST_FIRST_ROWS
    for rows in (df, df.head(CAST_FIRST_ROWS - 1)):  # cast first, and not
        na = read_numbers(rows, no_value=True)
        assert na.drop("na").equals(read_numbers(rows)) and na.get_column("na").sum() > 0
        assert na.get_column("na").equals(
            rows.get_column("raw").str.contains(NA_CELL_RE).fill_null(False), check_names=False
        )


def test_q_lines_split_at_the_colon_are_kv_re() -> None:
    """``-q`` lines split at their first colon after the indent (from SPLIT_KV_LINES lines) give KV_RE's indent
    length, key and value: real nvidia-smi lines and random ones of spaces (Unicode too), colons and letters."""
    texts: list[str] = []
    for path in real_logs("nvidia-smi"):
        texts += read_lines(path).lines.get_column("text").to_list()
    rng = random.Random(3)
    alphabet = [" ", ":", "a", "B", "\t", "\u00a0", "\u2003", "\u00e9", "1", "\r", "::", " : ", "\u0085"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(4 * SPLIT_KV_LINES)]
    s = pl.Series("text", texts)
    got = _key_values(s)
    want = s.to_frame().with_columns(pl.col("text").str.extract_groups(KV_RE).alias("g")).unnest("g")
    want = want.with_columns(pl.col("ind").str.len_chars())
    assert got.select("text", "ind", "k", "v").equals(want.select("text", "ind", "k", "v"))
    assert got.get_column("k").is_not_null().sum() > SPLIT_KV_LINES


def test_query_gpu_first_cells_by_distinct_or_by_row_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """The samples of every real nvidia-smi log, and of one with its numbers changed, are the same whether the first
    cells are read once per distinct cell or once per row."""
    for path in real_logs("nvidia-smi"):
        lines = read_lines(path).lines
        lines = pl.concat([lines, lines.with_columns(pl.col("text").str.replace_all("1", "2"))]).with_columns(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("line")
        )
        parts = {}
        for repeats in (True, False):
            monkeypatch.setattr(query_gpu, "_repeats", lambda cells, repeats=repeats: repeats)
            parts[repeats] = parse_smi(lines)
        assert parts[True].samples.height, path.name
        assert parts[True].samples.equals(parts[False].samples), path.name
        assert parts[True].claimed.equals(parts[False].claimed) and parts[True].info == parts[False].info


def test_cells_read_once_per_distinct_are_each_cell_read() -> None:
    """read_once (each distinct cell read once, where at least CAST_FIRST_ROWS cells repeat) equals read_numbers of
    every cell, na too: the cells of every real nvidia-smi log's lines (split at ``, `` and spaces), repeated, with
    random cells of digits, signs, units, N/A and nulls among them; and where the cells do not repeat."""
    cells: list[str | None] = []
    for path in real_logs("nvidia-smi"):
        text = read_lines(path).lines.get_column("text")
        cells += text.str.split(", ").explode().to_list() + text.str.extract_all(r"\S+").explode().to_list()
    rng = random.Random(5)
    alphabet = ["0", "7", "-", "+", ".", " ", "W", "%", "MiB", "\u0663", "[N/A]", "[Not Supported]", "9" * 20]
    cells += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5))) for _ in range(CAST_FIRST_ROWS)]
    cells += [None, "-0", "0"]
    repeated = pl.Series("raw", [cells[rng.randrange(len(cells))] for _ in range(4 * len(cells))])
    distinct = pl.Series("raw", [f"{i} W" if i % 3 else str(i) for i in range(2 * CAST_FIRST_ROWS)])
    for series in (repeated, distinct, repeated.head(CAST_FIRST_ROWS - 1)):
        for no_value in (False, True):
            want = read_numbers(series.to_frame(), no_value=no_value)
            got = read_once(series, no_value=no_value)
            assert got.equals(want), (series.len(), no_value)
    assert 2 * repeated.n_unique() <= repeated.len() and read_numbers(repeated.to_frame(), no_value=True)["na"].any()


LEAD_EDGES = ["", "a", "ab", "abc", "abcd", "abcdefghijkl", "abcdefghijklm", "\u00e9t\u00e9", "\u0663", "\x00x", "#"]


@pytest.mark.parametrize("views", [True, False])
@pytest.mark.parametrize("folder", ["nvidia-smi", "darshan", "nccl"])
def test_lead_bytes_are_each_lines_first_bytes(folder: str, views: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first bytes read from the lines' string views (:func:`~di.convert.logs.leadbytes.lead_bytes`) are those
    of the lines' UTF-8 texts, 0 past a line's end: on real logs, on short and non-ASCII texts (whose views hold them
    inline, maybe with other bytes after them), a null, a slice and a column of several chunks; and so are those
    polars reads where a column is not exported as views."""
    from di.convert.logs import leadbytes
    from di.convert.logs.leadbytes import lead_bytes

    if not views:
        monkeypatch.setattr(leadbytes, "_view_bytes", lambda values, k: None)

    texts = [read_lines(p).lines.get_column("text") for p in real_logs(folder)]
    edges = pl.Series("text", LEAD_EDGES + [None])
    sliced = pl.concat([*texts, edges]).slice(3)
    for values in (*texts, edges, sliced, pl.concat([edges, texts[0]], rechunk=False)):
        for k in (1, 3, 4):
            lengths, lead = lead_bytes(values, k)
            raw = [(v or "").encode() for v in values.to_list()]
            assert lengths.tolist() == [len(b) for b in raw]
            for j in range(k):
                assert lead[j].tolist() == [b[j] if j < len(b) else 0 for b in raw]


INDENT_EDGES = [
    "    # gpu   pwr",  # a dmon header after spaces
    "\t# Idx   W",  # after a tab: the regex decides
    "\u00a0\u00a0# gpu",  # after Unicode whitespace
    "  \t  7   12",  # a row after mixed whitespace
    "   \u0663  1",  # a digit of another script
    "      --help",  # help text: not kept
    "     ",  # whitespace only
    " \x00# x",  # a NUL is no whitespace
    "\u2003\u0665",  # an em space, then an Arabic-Indic digit
]


def test_indented_lines_are_those_the_regex_picks() -> None:
    """The lines that start with ``#`` or a digit after whitespace, picked by their first byte after the leading
    spaces (the regex only where other whitespace or a non-ASCII character comes first), are those ``^\\s*[#\\d]``
    picks, and ``hash`` says where the first character after all whitespace is ``#``."""
    from di.convert.logs.smi import _kinds

    texts = [read_lines(p).lines.get_column("text") for p in real_logs("nvidia-smi")]
    text = pl.concat([*texts, pl.Series("text", INDENT_EDGES)])
    lines = text.to_frame().with_row_index("line")
    got = _kinds(lines).indented
    t = pl.col("text")
    want = lines.filter(~lead_in(t, "!", "\u0080") & (t != "")).filter(t.str.contains(r"^\s*[#\d]"))
    want = want.with_columns(t.str.strip_chars_start().str.starts_with("#").alias("hash"))
    assert got.equals(want)
    assert got.get_column("text").is_in(INDENT_EDGES).sum() == 6
