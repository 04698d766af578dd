"""Darshan text output (darshan-dxt-parser, darshan-parser, --total) from ../shared/data/logs/darshan."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

LOGS = DATA / "logs"


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    return path


def test_dxt_segments_are_io_events_per_rank_in_epoch_time() -> None:
    trace = di.load(need("darshan/release_mpi-io-test-x86_64-3.1.4.dxt-parser.txt"))
    trace.validate()
    assert trace.ranks == [0, 1, 2, 3] and trace.meta["sources"][0]["dropped"] == {}
    ev = trace.events
    assert ev.height == 16 and set(ev.get_column("cat").cast(pl.String)) == {"io"}
    assert set(ev.get_column("bytes")) == {16777216}
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    names = set(trace.locations.get_column("name").to_list())
    assert names == {"darshan X_POSIX", "darshan X_MPIIO"}


def test_parser_counters_and_totals() -> None:
    trace = di.load(need("darshan/pydarshan_ior_hdf5_example.darshan-parser.txt"))
    trace.validate()
    shared = [
        f
        for f in trace.io_files.to_dicts()
        if f["module"] == "POSIX" and f["rank"] == -1 and f["file"].endswith("test123.h5")
    ]
    assert shared and shared[0]["bytes_written"] == 4195800 and shared[0]["opens"] == 22
    total = di.load(need("darshan/release_mpi-io-test-x86_64-3.4.0.darshan-parser-total.txt")).meta["sources"][0]
    assert total["info"]["darshan"]["totals"]["POSIX_BYTES_WRITTEN"] == 67108864


def darshan_or_skip() -> None:
    pytest.importorskip("darshan", reason="PyDarshan (the darshan package) is not installed")


def keyed(trace: di.Trace) -> pl.DataFrame:
    return (
        trace.events.join(trace.locations.select("loc", "rank", pl.col("name").alias("track")), on="loc")
        .select(
            "rank",
            "track",
            pl.col("name").cast(pl.String),
            "bytes",
            pl.col("args").str.json_path_match("$.file").alias("file"),
            pl.col("args").str.json_path_match("$.offset").cast(pl.Int64).alias("offset"),
            "start_ns",
            "end_ns",
        )
        .sort("rank", "track", "file", "offset", "name", "bytes", "start_ns")
    )


@pytest.mark.parametrize(
    "name",
    ["release_mpi-io-test-x86_64-3.1.4", "pydarshan_sample-dxt-simple", "pydarshan_ior_hdf5_example"],
)
def test_binary_dxt_segments_read_like_darshan_dxt_parser_text(name: str) -> None:
    darshan_or_skip()
    binary = di.load(need(f"darshan/{name}.darshan"))
    binary.validate()
    assert binary.meta["sources"][0]["format"] == "log:darshan" and binary.meta["clock"]["domain"] == "unix_epoch"
    a, b = keyed(binary), keyed(di.load(need(f"darshan/{name}.dxt-parser.txt")))
    assert a.height == b.height > 0
    assert a.drop("start_ns", "end_ns").equals(b.drop("start_ns", "end_ns"))
    # the text prints seconds with 4 decimals; the binary log has them whole
    assert (a.get_column("start_ns") - b.get_column("start_ns")).abs().max() <= 50_000


@pytest.mark.parametrize(
    "name",
    [
        "pydarshan_ior_hdf5_example",
        "release_mpi-io-test-x86_64-3.0.0",
        "release_mpi-io-test-x86_64-3.4.0",
        "release_mpi-io-test-ppc64-3.1.8",  # big-endian
        "pydarshan_macsio",
        "pydarshan_noposixopens",
    ],
)
def test_binary_counters_give_the_per_file_statistics_of_darshan_parser_text(name: str) -> None:
    darshan_or_skip()
    from di.capture.iostats import file_stats

    a = di.load(need(f"darshan/{name}.darshan")).io_files
    b = di.load(need(f"darshan/{name}.darshan-parser.txt")).io_files
    a, b = a.sort("module", "rank", "file"), b.sort("module", "rank", "file")
    times = ["read_time_ns", "write_time_ns", "meta_time_ns"]
    assert a.height > 0 and a.drop(times).equals(b.drop(times))
    assert max(int((a.get_column(c) - b.get_column(c)).abs().max()) for c in times) < 1_000  # text: 6 decimals
    # the columns of `di record`'s per-file statistics, module (POSIX for a write) included
    recorded = file_stats(
        pl.DataFrame({"loc": [0], "name": ["write"], "start_ns": [0], "end_ns": [5], "bytes": [10], "file": ["f"]}),
        pl.DataFrame({"loc": [0], "rank": [0]}),
    )
    assert a.columns == recorded.columns and recorded.get_column("module").to_list() == ["POSIX"]


def test_heatmap_series_hold_the_bytes_each_rank_moved() -> None:
    darshan_or_skip()
    trace = di.load(need("darshan/release_mpi-io-test-x86_64-3.4.0.darshan"))
    s = trace.series.join(trace.locations.select("loc", "rank"), on="loc").join(trace.samples, on="series")
    assert set(s.get_column("unit")) == {"B/s"}
    posix = s.filter(pl.col("name").str.starts_with("darshan.heatmap.POSIX."))
    # mpi-io-test: each of 4 ranks writes and reads 16 MiB of one shared file, in the first 0.1 s bin
    per_rank = posix.group_by("rank").agg((pl.col("value") * 0.1).sum().round().alias("b")).sort("rank")
    assert per_rank.get_column("b").to_list() == [2 * 16 * 2**20] * 4
    files = trace.io_files.to_dicts()
    shared = next(f for f in files if f["module"] == "POSIX" and f["rank"] == -1 and f["file"].endswith(".dat"))
    assert shared["bytes_written"] + shared["bytes_read"] == per_rank.get_column("b").sum()


def test_a_damaged_darshan_log_is_one_line(tmp_path: Path) -> None:
    darshan_or_skip()
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(need("darshan/pydarshan_sample.darshan").read_bytes()[:100])
    with pytest.raises(di.FormatError) as err:
        di.load(cut)
    assert "not a readable Darshan log" in str(err.value) and "\n" not in str(err.value)


LEAD_CASES = [
    "# darshan log version: 3.41",
    "# start_time: 1700000000",
    "# DXT, file_id: 7, file_name: /scratch/a b.dat",
    "# DXT, rank: 1, hostname: nid00042",
    " X_POSIX       0  write        0            2048          262144      0.0300      0.0331   [106]   N/A",
    "\tX_MPIIO\t1\tread\t0\t0\t4096\t0.5\t0.75",
    "X_POSIX 2 write 1 -1 16 1.0 2.0",
    "\u00a0X_POSIX 3 read 0 0 8 0.1 0.2",
    "\u3000X_MPIIO 3 write 0 0 8 0.1 0.2",
    "x_POSIX 3 write 0 0 8 0.1 0.2",
    "Y X_POSIX 3 write 0 0 8 0.1 0.2",
    "POSIX\t-1\t42\tPOSIX_READS\t3\t/scratch/a b.dat\t/scratch\tlustre",
    "POSIX\t0\t42\tPOSIX_BYTES_READ\t300\t/scratch/a b.dat\t/scratch",
    "MPI-IO\t1\t42\tMPIIO_INDEP_READS\t1\t/scratch/a b.dat",
    "posix\t0\t42\tPOSIX_READS\t3\t/f\t/\tx",
    "\u00c9POSIX\t0\t42\tPOSIX_READS\t3\t/f\t/\tx",
    "total_POSIX_READS: 12",
    "totals: 3",
    "#",
    "#comment",
    "",
]


def test_lines_picked_by_their_first_characters_are_those_the_full_searches_find(tmp_path: Path) -> None:
    """The parser looks at a line only where its first characters allow it (comments, DXT segments after white
    space of any kind, counter rows starting with a capital, totals): on hand-built lines with every kind of start,
    what it loads and claims is what the regexes and splits find over all lines."""
    import re

    from di.convert.logs.darshan_text import DXT_RE, TOTAL_RE, parse_darshan_text
    from di.convert.logs.text import read_lines

    path = tmp_path / "lead.txt"
    path.write_text("\n".join(LEAD_CASES) + "\n")
    lines = read_lines(path).lines
    parts = parse_darshan_text(lines)
    texts = lines.get_column("text").to_list()
    segments = [i for i, s in enumerate(texts) if re.match(DXT_RE, s)]
    assert parts.events.height == len(segments) == 5
    counter_rows = [
        i
        for i, s in enumerate(texts)
        if len(f := s.split("\t")) >= 7 and re.fullmatch(r"[A-Z][A-Z0-9_-]*", f[0]) and f[1].lstrip("-").isdigit()
    ]
    assert parts.info["darshan"]["counters"] == len(counter_rows) == 2
    totals = [i for i, s in enumerate(texts) if re.match(TOTAL_RE, s)]
    assert parts.info["darshan"]["totals"] == {"POSIX_READS": 12.0} and len(totals) == 1
    comments = [i for i, s in enumerate(texts) if s.startswith("#")]
    assert sorted(parts.claimed.to_list()) == sorted(segments + counter_rows + totals + comments)
