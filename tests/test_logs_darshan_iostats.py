"""Darshan's POSIX/MPI-IO/STDIO counters as the per-file I/O statistics (``io_files``) that ``di record`` writes.

The oracles are Darshan's own numbers: the counter rows ``darshan-parser`` printed (read here with the csv
module, one counter at a time), and the counters PyDarshan hands over for logs without a text dump. A recording
of a real program with ``di record --io`` and a Darshan log must come out of the store, ``di info`` and the
report in the same table, columns and units.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import di_cmd, run
from conftest import DATA
from report_tables import read_page

import di
from di.cli import main

LOGS = DATA / "logs" / "darshan"
PARSER_TEXTS = sorted(p.name.removesuffix(".darshan-parser.txt") for p in LOGS.glob("*.darshan-parser.txt"))
BINS = ["0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M", "100M_1G", "1G_PLUS"]
BIN_NAMES = ["0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+"]
# statistic -> Darshan's counters per module (darshan-runtime's darshan-posix-log-format.h and its MPI-IO, STDIO peers)
DEFINITION = {
    "POSIX": {
        "opens": ["POSIX_OPENS"],
        "reads": ["POSIX_READS"],
        "writes": ["POSIX_WRITES"],
        "seeks": ["POSIX_SEEKS"],
        "syncs": ["POSIX_FSYNCS", "POSIX_FDSYNCS"],
        "mmaps": ["POSIX_MMAPS"],
    },
    "MPI-IO": {
        "opens": ["MPIIO_INDEP_OPENS", "MPIIO_COLL_OPENS"],
        "reads": ["MPIIO_INDEP_READS", "MPIIO_COLL_READS", "MPIIO_SPLIT_READS", "MPIIO_NB_READS"],
        "writes": ["MPIIO_INDEP_WRITES", "MPIIO_COLL_WRITES", "MPIIO_SPLIT_WRITES", "MPIIO_NB_WRITES"],
        "seeks": [],
        "syncs": ["MPIIO_SYNCS"],
        "mmaps": [],
    },
    "STDIO": {
        "opens": ["STDIO_OPENS", "STDIO_FDOPENS"],
        "reads": ["STDIO_READS"],
        "writes": ["STDIO_WRITES"],
        "seeks": ["STDIO_SEEKS"],
        "syncs": [],
        "mmaps": [],
    },
}
PREFIX = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO"}


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/darshan/{rel} not found under ../shared/data")
    return path


def expected_row(module: str, c: dict[str, str]) -> dict[str, object]:
    """One io_files row from one record's counters (name -> printed value); -1 (not collected) counts as 0."""

    def n(name: str) -> int:
        return max(int(float(c.get(name, "0"))), 0)

    def ns(name: str) -> int:
        return max(round(float(c.get(name, "0")) * 1e9), 0)

    p = PREFIX[module]
    row: dict[str, object] = {k: sum(n(x) for x in names) for k, names in DEFINITION[module].items()}
    row.update(
        bytes_read=n(f"{p}_BYTES_READ"),
        bytes_written=n(f"{p}_BYTES_WRITTEN"),
        read_time_ns=ns(f"{p}_F_READ_TIME"),
        write_time_ns=ns(f"{p}_F_WRITE_TIME"),
        meta_time_ns=ns(f"{p}_F_META_TIME"),
    )
    agg = "AGG_" if module == "MPI-IO" else ""
    for op in ("READ", "WRITE"):
        row[f"{op.lower()}_sizes"] = {b: n(f"{p}_SIZE_{op}_{agg}{k}") for k, b in zip(BINS, BIN_NAMES)}
    return row


def parser_counters(path: Path) -> dict[tuple[str, int, str], dict[str, object]]:
    """(module, rank, file) -> expected io_files row, from darshan-parser's counter lines."""
    records: dict[tuple[str, int, str, str], dict[str, str]] = {}
    with path.open(newline="") as fh:
        for f in csv.reader(fh, delimiter="\t"):
            if len(f) < 6 or f[0] not in PREFIX:
                continue
            records.setdefault((f[0], int(f[1]), f[2], f[5]), {})[f[3]] = f[4]
    return {(m, r, file): expected_row(m, c) for (m, r, _rec, file), c in records.items()}


def rows_by_key(files: pl.DataFrame) -> dict[tuple[str, int, str], dict[str, object]]:
    return {(r.pop("module"), r.pop("rank"), r.pop("file")): r for r in files.to_dicts()}


@pytest.mark.parametrize("name", PARSER_TEXTS or ["(no darshan-parser texts)"])
def test_io_files_hold_the_counters_darshan_parser_printed(name: str) -> None:
    text = need(f"{name}.darshan-parser.txt")
    expected = parser_counters(text)
    trace = di.load(text)
    trace.validate()
    got = rows_by_key(trace.io_files)
    assert expected and got == expected
    assert trace.meta["sources"][0]["info"]["darshan"]["io_files"] == len(expected)


@pytest.mark.parametrize(
    "name", ["pydarshan_sample", "pydarshan_noposix", "pydarshan_sample-goodost", "release_mpi-io-test-x86_64-3.2.1"]
)
def test_binary_io_files_hold_the_counters_pydarshan_reads(name: str) -> None:
    """Logs without a darshan-parser text (2048 and 512 ranks, Lustre, no POSIX module): against PyDarshan's records."""
    darshan = pytest.importorskip("darshan", reason="PyDarshan (the darshan package) is not installed")
    path = need(f"{name}.darshan")
    report = darshan.DarshanReport(str(path), read_all=True)
    names = {int(k): str(v) for k, v in report.name_records.items()}
    expected = {}
    for module in PREFIX:
        if module not in report.records:
            continue
        frames = report.records[module].to_df()
        merged = frames["counters"].merge(frames["fcounters"], on=["rank", "id"])
        for rec in merged.to_dict("records"):
            counters = {k: repr(float(v)) for k, v in rec.items() if k not in ("rank", "id")}
            expected[(module, int(rec["rank"]), names.get(int(rec["id"]), str(rec["id"])))] = expected_row(
                module, counters
            )
    trace = di.load(path)
    trace.validate()
    assert expected and rows_by_key(trace.io_files) == expected


def test_a_darshan_log_and_a_recording_are_stored_and_shown_alike(tmp_path: Path, capsys) -> None:
    """``di record --io`` of a real program and a converted Darshan log: the same io_files table in the store,
    the same ``di info`` totals, the same report table, each equal to the table's numbers."""
    program = tmp_path / "writes.py"
    target = tmp_path / "data.bin"
    program.write_text(
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)\n"
        "for _ in range(3):\n    os.write(fd, b'x' * 4096)\n"
        "os.fsync(fd)\nos.close(fd)\n"
        "with open(sys.argv[1], 'rb', buffering=0) as f:\n    f.read(1000)\n"
    )
    recording = tmp_path / "rec.di"
    proc = run(
        di_cmd("record", "--io", "-o", str(recording), "--", sys.executable, str(program), str(target)), tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    converted = tmp_path / "darshan.di"
    assert main(["convert", str(need("pydarshan_ior_hdf5_example.darshan")), "-o", str(converted)]) == 0
    capsys.readouterr()
    schema = None
    for store in (recording, converted):
        assert (store / "io_files.parquet").is_file()
        files = di.load(store).io_files
        assert files.height > 0
        schema = schema or files.schema
        assert files.schema == schema  # same columns, order and types
        assert main(["info", str(store), "--json"]) == 0
        totals = json.loads(capsys.readouterr().out)["io_files"]
        by_module = files.group_by("module").agg(pl.col("bytes_written").sum(), pl.col("writes").sum())
        assert {(t["module"], t["bytes_written"], t["writes"]) for t in totals} == set(by_module.iter_rows())
        page = tmp_path / f"{store.stem}.html"
        assert main(["report", str(store), "-o", str(page), "--no-plugins"]) == 0
        capsys.readouterr()
        shown = read_page(page.read_text(encoding="utf-8"))[0]["io_stats"]
        stats = rows_by_key(files)
        assert len(shown) == min(30, files.height)
        for r in shown:
            row = stats[(None if r["module"] == "di record" else r["module"], r["rank"], r["file"])]
            assert [r[k] for k in ("reads", "writes", "bytes_read", "bytes_written", "write_time_ns")] == [
                row[k] for k in ("reads", "writes", "bytes_read", "bytes_written", "write_time_ns")
            ]
    mine = rows_by_key(di.load(recording).io_files.filter(pl.col("file") == str(target)))
    ((_, row),) = mine.items()
    assert (row["opens"], row["writes"], row["bytes_written"], row["syncs"]) == (2, 3, 3 * 4096, 1)
    assert row["reads"] >= 1 and row["bytes_read"] == 1000 and row["write_sizes"]["1K-10K"] == 3


def test_info_shows_every_io_total_whole_on_a_terminal_and_in_a_file(monkeypatch) -> None:
    """``di info``'s I/O table: on an 80-column terminal every number of every column is whole (the cells keep
    one space between them instead of two), and written to a file it is as wide as its cells."""
    import io

    from rich.console import Console

    from di.viewers.info import render

    trace = di.load(need("pydarshan_ior_hdf5_example.darshan"))
    totals = trace.io_files.group_by("module").agg(pl.col("bytes_read", "bytes_written", "opens").sum())
    monkeypatch.delenv("COLUMNS", raising=False)
    for terminal in (True, False):
        out = io.StringIO()
        render(trace, Console(file=out, width=80, force_terminal=terminal, color_system=None, highlight=False))
        lines = out.getvalue().splitlines()
        header = next(line for line in lines if line.split()[:2] == ["I/O", "files"])
        assert header.split()[-2:] == ["meta", "ms"]
        assert (max(map(len, lines)) <= 80) == terminal
        for module, *values in totals.iter_rows():
            row = next(line for line in lines if line.split()[:1] == [module])
            assert all(f"{v:,}" in row.split() for v in values)


def test_io_files_survive_a_merge_and_a_partitioned_store(tmp_path: Path) -> None:
    """With the job's trace (combine) and in a store split by rank group, the table is kept whole."""
    from di.store import read_store, write_store

    kineto = DATA / "kineto" / "hta_nccl_parser_config" / "nccl_data.json.gz"
    if not kineto.is_file():
        pytest.skip("shared test data absent: kineto/hta_nccl_parser_config not found under ../shared/data")
    log = need("pydarshan_ior_hdf5_example.darshan-parser.txt")
    alone = di.load(log).io_files
    job = di.load([kineto, log])
    job.validate()
    assert job.io_files.equals(alone) and job.meta["tables"]["io_files"] == alone.height
    write_store(job, tmp_path / "job.di", partitioned=True, ranks_per_group=1)
    assert read_store(tmp_path / "job.di").io_files.equals(alone)


def test_damaged_parser_text_loads_what_is_sound_and_counts_the_rest(tmp_path: Path) -> None:
    """A counter value that is no number, a row whose rank is not one, a DXT segment with a broken time and a
    last line cut short: the rest loads; each is counted."""
    text = need("pydarshan_macsio.darshan-parser.txt").read_text().splitlines()
    counters = [i for i, ln in enumerate(text) if ln.startswith("POSIX\t-1\t") and "\tPOSIX_BYTES_WRITTEN\t" in ln]
    garbled, odd_rank = counters[0], counters[1]
    fields = text[garbled].split("\t")
    text[garbled] = "\t".join([*fields[:4], "garbage", *fields[5:]])
    text[odd_rank] = text[odd_rank].replace("POSIX\t-1\t", "POSIX\tx\t", 1)
    damaged = tmp_path / "damaged.darshan-parser.txt"
    damaged.write_text("\n".join(text) + "\n" + text[-1][: len(text[-1]) // 2])
    want = parser_counters(need("pydarshan_macsio.darshan-parser.txt"))
    trace = di.load(damaged)
    got = rows_by_key(trace.io_files)
    for line in (garbled, odd_rank):  # neither counter is read: the other counters of both files are
        key = ("POSIX", -1, text[line].split("\t")[5])
        assert want[key]["bytes_written"] > 0
        want[key]["bytes_written"] = 0
    assert got == want
    dropped = trace.meta["sources"][0]["dropped"]
    assert dropped["darshan: counter values that are not numbers"] == 1
    assert dropped["unknown lines (no log family understood them)"] == 2  # the odd rank's row, the cut line

    dxt = need("release_mpi-io-test-x86_64-3.1.4.dxt-parser.txt").read_text().splitlines()
    first = next(i for i, ln in enumerate(dxt) if ln.lstrip().startswith("X_POSIX"))
    dxt[first] = dxt[first].replace("0.0122", "0..122")
    broken = tmp_path / "broken.dxt-parser.txt"
    broken.write_text("\n".join(dxt) + "\n")
    trace = di.load(broken)
    assert trace.events.height == di.load(need("release_mpi-io-test-x86_64-3.1.4.dxt-parser.txt")).events.height - 1
    assert trace.meta["sources"][0]["dropped"] == {"darshan: DXT segments with an unreadable number": 1}
