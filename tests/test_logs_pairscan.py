"""Training logs: the numba scans read what the polars reference reads.

- :func:`di.convert.logs.pairscan.line_pairs` (one byte scan) finds, line by line, the pairs that
  ``PAIR_RE``'s ``extract_all`` finds after the tags and logging heads (``training._regex_pairs``, the path of
  non-ASCII and small logs), and reads their values and units as ``training._read_values`` reads the text after the key: same
  rows, keys as written, values and units, on random lines built from the characters the regex turns on and on the
  real logs of ../shared/data/logs (skipped when absent);
- :func:`di.convert.logs.linekinds.line_kinds` gives each line the kind and rank tag the regexes give it;
- a whole training log parsed through the scans gives the tables the regexes give;
- ``first_samples`` (runs of one rank and time compared sample by sample) keeps what a polars
  ``unique`` over (rank, series, time, value) keeps, nulls, NaN and -0.0 included, and gives way where a
  (rank, time) comes back.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import DATA

from di.convert.logs import training
from di.convert.logs.linekinds import KIND_CODES, line_kinds
from di.convert.logs.pairscan import MAX_RUN_SAMPLES, first_samples, line_pairs
from di.convert.logs.text import line_times, own_line_times, read_lines

LOGS = DATA / "logs"

PIECES = [
    "a", "Z", "_", "lr", "loss", "step", "x1", " ", "  ", "\t", "\x0b", "-", "/", "(", ")", ".", ":", "=", "'", '"',
    "[", "]", ",", "0", "7", "12", "3.5", "1e", "E+", "e-3", "+", "-", "nan", "inf", "%", "K", "MiB", "GB", "B", "i",
    "ms", "s", "m", "|", "{", "}", " - INFO - ", " - WARNING - ", "[2024-01-01 10:00:00]", "[INFO]:", "[Rank 3] ",
]  # fmt: skip
"""What random lines are made of: the characters and words ``PAIR_RE``, the tags and the logging heads turn on."""


def random_pair(rng: random.Random) -> str:
    """A piece shaped like a pair, each part maybe left out or doubled."""
    parts = [
        rng.choice(["lr", "loss", "a b", "x(ms)", "_k", "k/s", "9x"]),
        rng.choice(["", "'", '"']),
        rng.choice(["", " ", "\t", "  "]),
        rng.choice([":", "=", ":", "=", ""]),
        rng.choice(["", " ", "\x0b", "   "]),
        rng.choice(["", "", "[", "(["]),
        rng.choice(["", "", "+", "-"]),
        rng.choice(["0", "12", "3.5", "1,024", "2.", ".5", "1e5", "1E-3", "4e", "nan", "inf", "x", "7,,8.9.1"]),
        rng.choice(["", "", "%", "GB", "KiB", "Ki", "ms", "s", "ms_", "sx", "m"]),
    ]
    return "".join(parts)


def random_lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    pieces = (lambda: rng.choice(PIECES), lambda: random_pair(rng))
    return ["".join(rng.choice(pieces)() for _ in range(rng.randint(0, 20))) for _ in range(count)]


def scanned(text: pl.Series, skip: pl.Series, level_heads: bool) -> pl.DataFrame:
    """Per pair the scan finds: row, key as written, value and unit."""
    found = line_pairs(text, skip, level_heads=level_heads)
    return pl.DataFrame(
        {
            "r": found.row.cast(pl.Int64),
            "k": found.keys.gather(found.key_code.gather(found.at)),
            "value": found.value.gather(found.at),
            "unit": found.unit.gather(found.at),
        }
    )


def by_regex(text: pl.Series, skip: pl.Series, level_heads: bool) -> pl.DataFrame:
    """The same, by the polars regexes (the path of non-ASCII text)."""
    kind = pl.Series("kind", ["mllog" if s else "other" for s in skip.to_list()])
    p, d, ks = training._regex_pairs(text, kind, level_heads, ascii=False)
    value, unit = training._read_values(d.get_column("rest"))
    at = p.get_column("at")
    return pl.DataFrame(
        {
            "r": p.get_column("r").cast(pl.Int64),
            "k": ks.gather(d.get_column("code").gather(at)),
            "value": value.gather(at),
            "unit": unit.gather(at),
        }
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level_heads", [False, True])
def test_scan_finds_the_regex_pairs_of_random_lines(seed: int, level_heads: bool) -> None:
    text = pl.Series("text", random_lines(seed, 3000))
    skip = pl.Series([i % 7 == 3 for i in range(text.len())])  # the MLPerf lines: no pairs read
    expected = by_regex(text, skip, level_heads)
    assert expected.height > 1000  # the pieces make pairs
    assert scanned(text, skip, level_heads).equals(expected)


def test_scan_hand_cases() -> None:
    cases = [
        "q=5ms_ q=5msa q=5ms. k=1e k=1e+ k=1e+5 k=-nan k=1,,2.3.4 ab(c)=5KiBx z=5KB z=5Ki z=.5",
        '[t] [u]: lr=[0.0, 0.0], mom=[(0.9, 0.95)] x" : 4 b =\t3',
        "name - WARNING - x - INFO - loss: 2.5 step=3",
        "elapsed time per iteration (ms): 942.0 | learning rate: 5.308E-07 |",
        "[unclosed tag lr=1",
        "",
    ]
    text = pl.Series("text", cases)
    skip = pl.Series([False] * len(cases))
    for level_heads in (False, True):
        got = scanned(text, skip, level_heads)
        assert got.equals(by_regex(text, skip, level_heads))
    assert "lr" in got.get_column("k").to_list()


def text_logs() -> list[Path]:
    if not LOGS.is_dir():
        return []
    return sorted(p for p in LOGS.rglob("*") if p.is_file() and p.suffix != ".darshan" and p.parent.name != "LICENSES")


@pytest.mark.parametrize("path", text_logs(), ids=lambda p: p.name)
def test_scan_finds_the_regex_pairs_of_real_logs(path: Path) -> None:
    text = read_lines(path).lines.get_column("text")
    text = text.filter(text.str.len_bytes() == text.str.len_chars())  # the scan reads ASCII lines
    skip = text.str.contains(":::MLLOG", literal=True)
    level_heads = bool(text.str.contains(training.LEVEL_HEAD_RE).any())
    assert scanned(text, skip, level_heads).equals(by_regex(text, skip, level_heads))


def unique_samples(df: pl.DataFrame) -> pl.Series:
    """Reference: whether each row is the first of its (rank, sid, ts, value), by polars."""
    first = df.with_row_index("i").unique(["rank", "sid", "ts", "value"], keep="first", maintain_order=True)
    return pl.Series(np.isin(np.arange(df.height), first.get_column("i").to_numpy()))


@pytest.mark.parametrize("seed", range(6))
def test_first_samples_is_unique_over_rank_series_time_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 4000
    # runs of one (rank, time) in order: each time a new one, as lines of growing timestamps give them
    run = np.cumsum(rng.random(n) < 0.15)
    rank = pl.Series("rank", (run % 3).astype(np.int64)).scatter(np.flatnonzero(run == 5), None)
    ts = pl.Series("ts", run.astype(np.int64) * 1000).scatter(np.flatnonzero(run == 7), None)
    values = np.array([0.0, -0.0, 1.5, np.nan, 2.0, -1.0])
    df = pl.DataFrame(
        [rank, ts, pl.Series("sid", rng.integers(0, 4, n)), pl.Series("value", values[rng.integers(0, 6, n)])]
    )
    got = first_samples(df["rank"], df["ts"], df["sid"], df["value"])
    assert got is not None
    expected = unique_samples(df)
    assert 0 < int((~expected).sum()) and got.equals(expected, check_names=False)


def test_first_samples_gives_way_where_a_time_comes_back() -> None:
    df = pl.DataFrame({"rank": [0, 0, 0], "ts": [5, 6, 5], "sid": [1, 1, 1], "value": [2.0, 2.0, 2.0]})
    assert first_samples(df["rank"], df["ts"], df["sid"], df["value"]) is None
    back = pl.DataFrame({"rank": [0, 0, 1, 1], "ts": [6, 6, 5, 5], "sid": [1, 1, 1, 2], "value": [2.0] * 4})
    got = first_samples(back["rank"], back["ts"], back["sid"], back["value"])  # times go back, no (rank, time) does
    assert got is not None and got.to_list() == [True, False, True, True]
    long_run = pl.Series("ts", [7] * (int(MAX_RUN_SAMPLES) + 1))
    same = pl.Series("rank", [0] * long_run.len())
    assert first_samples(same, long_run, same, same.cast(pl.Float64)) is None


KIND_PIECES = [
    "iteration", " ", "  ", "\t", "12", "7", "/", "|", "step=", ", skipped=", "SamplesPerSec=", "E2E latency=", "step:",
    "loss:", "epoch: ", "|step: ", "{'", '{"', '"loss":', '"global_step": ', '"lr"', "'", "x", "_", "a", "-", "+",
    ".", ":::MLLOG {", "[Rank ", "]", "[Rank 3]", "9223372036854775807", "9223372036854775808", "0007", "[", ":",
    "iteration 12/ 7 |", "iteration\t3/4|", "iteration 3 /4 |", "iteration  5/  6  |", "xiteration 1/2 |",
    "step: 3  loss:", "step:3 loss:", "step: 3loss:", "_step: 1 loss:", "step=1, skipped=0", "[Rank 0007]",
    "[Rank 9223372036854775807]", "[Rank 9223372036854775808]", "[Rank 99999999999999999999]", "[Rank 5 ]",
]  # fmt: skip
"""What random lines for the kind scan are made of: the words and classes of the kinds' regexes and rank tags."""


def kind_lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    starts = ["", "epoch: 3|step: 4|", "{'loss': ", "{'a_b': x", '{"', "{'", "epoch: "]
    return [
        rng.choice(starts) + "".join(rng.choice(KIND_PIECES) for _ in range(rng.randint(0, 14))) for _ in range(count)
    ]


def assert_kinds_as_the_regexes(text: pl.Series) -> None:
    kind, rank = line_kinds(text)
    for ascii in (False, True):  # the Unicode regexes and those in ASCII mode (small ASCII logs)
        assert kind.equals(training._regex_kinds(text, ascii), check_names=False)
        assert rank.equals(training._rank_tags(text, ascii), check_names=False)


@pytest.mark.parametrize("seed", range(4))
def test_kind_scan_is_the_regexes_on_random_lines(seed: int) -> None:
    assert KIND_CODES == tuple(training.KINDS)
    text = pl.Series("text", kind_lines(seed, 5000))
    kind, rank = line_kinds(text)
    assert kind.n_unique() == len(KIND_CODES) + 1 and rank.n_unique() > 3  # every kind, none, and ranks are there
    assert_kinds_as_the_regexes(text)


@pytest.mark.parametrize("path", text_logs(), ids=lambda p: p.name)
def test_kind_scan_is_the_regexes_on_real_logs(path: Path) -> None:
    text = read_lines(path).lines.get_column("text")
    assert_kinds_as_the_regexes(text.filter(text.str.len_bytes() == text.str.len_chars()))


@pytest.mark.parametrize("path", text_logs(), ids=lambda p: p.name)
def test_real_logs_parse_alike_through_the_scans(path: Path) -> None:
    lines = read_lines(path).lines
    lines = lines.with_columns(own_line_times(lines))
    lines = lines.with_columns(line_times(lines, lines.get_column("own_ts")))
    by_regex, by_scan = training.parse_training(lines), training.parse_training(lines, scan_min_bytes=0)
    for table in ("events", "samples", "claimed"):
        assert getattr(by_scan, table).equals(getattr(by_regex, table)), table
    assert (by_scan.dropped, by_scan.info, by_scan.epoch) == (by_regex.dropped, by_regex.info, by_regex.epoch)


def test_damaged_logs_parse_alike_through_the_scans(tmp_path: Path) -> None:
    """The fuzzer's line edits (deleted, repeated, cut lines; huge, empty or odd numbers; rank prefixes, colours,
    tabs; another log's lines interleaved) of the shared training logs: the scans give the regexes' tables."""
    from tests.log_fuzz import _edit_lines

    seeds = [p.read_bytes().split(b"\n")[:400] for p in text_logs() if p.parent.name == "training"]
    if not seeds:
        pytest.skip("shared training logs absent")
    rng = random.Random(21)
    for case in range(60):
        lines = _edit_lines(rng, list(rng.choice(seeds)), rng.choice(seeds))
        path = tmp_path / f"case{case}.log"
        path.write_bytes(b"\n".join(lines) + b"\n")
        read = read_lines(path).lines
        read = read.with_columns(own_line_times(read))
        read = read.with_columns(line_times(read, read.get_column("own_ts")))
        by_regex, by_scan = training.parse_training(read), training.parse_training(read, scan_min_bytes=0)
        for table in ("events", "samples", "claimed"):
            assert getattr(by_scan, table).equals(getattr(by_regex, table)), (case, table)
        assert (by_scan.dropped, by_scan.info) == (by_regex.dropped, by_regex.info), case


SWITCH = r"""
import sys
import polars as pl
from di.convert.logs import training
assert "numba" not in sys.modules
print(training._scans_pay(1 << 20, None), training._scans_pay(training.SCAN_ALONE_BYTES, None))
import numba  # noqa: F401
print(training._scans_pay(training.SCAN_MIN_BYTES, None), training._scans_pay(training.SCAN_MIN_BYTES - 1, None))
"""


def test_scans_wait_for_numba_or_a_large_log(tmp_path: Path) -> None:
    """Without numba imported, the scans start only from SCAN_ALONE_BYTES (numba's start is theirs to pay); with it,
    from SCAN_MIN_BYTES; and loading a small training log leaves numba unimported."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", SWITCH], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True", "False"]
    log = tmp_path / "train.log"
    line = " iteration {i}/ 100 | elapsed time per iteration (ms): 812.5 | lm loss: 2.25 | learning rate: 1.0E-04 |"
    log.write_text("\n".join(line.format(i=i) for i in range(1, 101)) + "\n")
    small = "import di, sys; t = di.load(sys.argv[1]); print(t.samples.height > 0, 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", small, str(log)], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False"]
