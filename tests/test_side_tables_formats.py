"""comms, comm_links and io_files through Chrome JSON, Perfetto and OTF2: what di writes, di reads back equal.

The tables come from real inputs: a Darshan log with an NCCL log of a 2-GPU nccl-tests run, and a real program
recorded with ``di record --io``. OTF2 keeps io_files as IoFileProperty definitions, which ``otf2-print``
shows with the file; a damaged document loads the rest and says what it dropped; a column no format can hold
is a DataLossWarning with its count.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import di_cmd, run
from conftest import DATA

import di
from di.errors import DataLossWarning

LOGS = DATA / "logs"
FORMATS = ("json", "json.gz", "perfetto-trace", "otf2")
SIDE = ("comms", "comm_links", "io_files")


@pytest.fixture(scope="module")
def logs_job() -> di.Trace:
    darshan = LOGS / "darshan" / "pydarshan_ior_hdf5_example.darshan"
    nccl = LOGS / "nccl" / "nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log"
    if not (darshan.is_file() and nccl.is_file()):
        pytest.skip("shared test data absent: logs/darshan or logs/nccl not found under ../shared/data")
    trace = di.load([darshan, nccl])
    assert all(getattr(trace, t).height for t in SIDE)
    return trace


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> di.Trace:
    """A real program writing with os.write and reading with Python's buffered files, under ``di record --io``."""
    tmp = tmp_path_factory.mktemp("rec")
    program, target = tmp / "io.py", tmp / "data.bin"
    program.write_text(
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)\n"
        "for _ in range(5):\n    os.write(fd, b'x' * 3000)\n"
        "os.fsync(fd)\nos.close(fd)\n"
        "with open(sys.argv[1], 'rb') as f:\n    f.read(2000)\n"
    )
    out = tmp / "rec.di"
    proc = run(di_cmd("record", "--io", "-o", str(out), "--", sys.executable, str(program), str(target)), tmp)
    assert proc.returncode == 0, proc.stderr
    trace = di.load(out)
    assert trace.io_files.filter(pl.col("file") == str(target)).height
    return trace


def round_trip(trace: di.Trace, path: Path) -> di.Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataLossWarning)  # nothing of these tables may be left out
        di.save(trace, path)
    return di.load(path)


@pytest.mark.parametrize("ext", FORMATS)
def test_log_tables_come_back_equal(logs_job: di.Trace, tmp_path: Path, ext: str) -> None:
    back = round_trip(logs_job, tmp_path / f"job.{ext}")
    for t in SIDE:
        assert getattr(back, t).equals(getattr(logs_job, t)), t
        assert back.meta["tables"][t] == getattr(logs_job, t).height
    back.validate()


@pytest.mark.parametrize("ext", FORMATS)
def test_a_recordings_io_files_come_back_equal(recording: di.Trace, tmp_path: Path, ext: str) -> None:
    back = round_trip(recording, tmp_path / f"rec.{ext}")
    assert back.io_files.equals(recording.io_files)


def test_otf2_holds_io_files_as_io_file_properties(logs_job: di.Trace, tmp_path: Path) -> None:
    """``otf2-print -G`` shows each file's counters with the file: what Vampir and Score-P's tools read."""
    printer = shutil.which("otf2-print")
    if printer is None:
        pytest.skip("otf2-print not installed")
    di.save(logs_job, tmp_path / "job.otf2")
    text = subprocess.run([printer, "-G", str(tmp_path / "job.otf2")], capture_output=True, text=True).stdout
    shown = {}
    for line in text.splitlines():
        if line.startswith("IO_FILE_PROPERTY"):
            file = line.split('File: "file://', 1)[1].split('" <', 1)[0]
            name = line.split('Name: "', 1)[1].split('"', 1)[0]
            shown[(file, name)] = int(line.rsplit("Value: ", 1)[1])
    checked = 0
    for r in logs_job.io_files.iter_rows(named=True):
        for col in ("opens", "bytes_read", "bytes_written", "write_time_ns"):
            key = (r["file"], f"io_files:{r['module']}:{r['rank']}:{col}")
            assert shown.get(key, 0) == r[col], key  # counters of 0 are left out
            checked += r[col] > 0
    assert checked >= logs_job.io_files.height
    anchor = subprocess.run([printer, "-A", str(tmp_path / "job.otf2")], capture_output=True, text=True).stdout
    assert "DI::SIDE_TABLES" in anchor


def test_a_damaged_table_in_chrome_json_is_dropped_with_its_count(logs_job: di.Trace, tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    di.save(logs_job, path)
    doc = json.loads(path.read_text())
    doc["diTrace"]["side_tables"]["comm_links"]["columns"]["channel"][0] = "seven"
    path.write_text(json.dumps(doc))
    back = di.load(path)
    assert back.comm_links.height == 0
    assert back.comms.equals(logs_job.comms) and back.io_files.equals(logs_job.io_files)
    said = [w for w in back.meta["warnings"] if "comm_links ignored" in w]
    assert len(said) == 1 and f"{logs_job.comm_links.height} rows dropped" in said[0]


def test_damaged_io_file_properties_in_otf2_are_dropped_with_their_count(logs_job: di.Trace, tmp_path: Path) -> None:
    """A rank that is no integer (an archive another tool wrote): the table is left out and said."""
    from di.convert.otf2.iofiles import read_io_files, type_code
    from di.convert.otf2.stringdefs import StringDefs

    i64 = type_code("INT64")
    got = read_io_files(
        [(0, 1, i64, 5), (0, 2, i64, 7)],
        {0: "/a"},
        StringDefs.of({1: "io_files:POSIX:x0:opens", 2: "io_files:POSIX:0:opens"}),
        said := [],
    )
    assert got is None and len(said) == 1 and "2 rows dropped" in said[0]
    files = read_io_files(
        [(0, 2, i64, 7), (0, 3, i64, 2**64 - 1), (0, 4, i64, 2**64 - 3)],
        {0: "/a"},
        StringDefs.of({2: "io_files::0:opens", 3: "other", 4: "io_files::0:extra"}),
        [],
    )
    assert files.select("module", "rank", "file", "opens", "extra").rows() == [(None, 0, "/a", 7, -3)]


def test_a_column_no_format_holds_is_a_data_loss_warning(logs_job: di.Trace, tmp_path: Path) -> None:
    import datetime as dt

    comms = logs_job.comms.with_columns(pl.lit(dt.date(2026, 1, 2)).alias("seen"), pl.lit(3, pl.Int16).alias("extra"))
    trace = logs_job.__class__.build(meta=logs_job.meta, **{**logs_job.tables(), "comms": comms})
    for ext in ("json", "perfetto-trace", "otf2"):
        with pytest.warns(
            DataLossWarning, match=rf"comms column 'seen' \(Date\) not written to .*: {comms.height} values"
        ):
            di.save(trace, tmp_path / f"x.{ext}")
        back = di.load(tmp_path / f"x.{ext}")
        assert back.comms.equals(comms.drop("seen")), ext  # the extra Int16 column keeps its type


def test_di_convert_says_the_loss_in_one_line(logs_job: di.Trace, tmp_path: Path, capsys) -> None:
    import datetime as dt

    from di.cli import main

    comms = logs_job.comms.with_columns(pl.lit(dt.date(2026, 1, 2)).alias("seen"))
    di.save(logs_job.__class__.build(meta=logs_job.meta, **{**logs_job.tables(), "comms": comms}), tmp_path / "x.di")
    assert main(["convert", str(tmp_path / "x.di"), "-o", str(tmp_path / "x.json"), "--no-analysis"]) == 0
    out = capsys.readouterr().out
    assert f"{comms.height} comms, {logs_job.comm_links.height} comm_links" in out
    assert f"warning: comms column 'seen' (Date) not written to Chrome JSON: {comms.height} values" in out


@pytest.mark.parametrize("ext", FORMATS)
def test_a_darshan_log_of_counters_only_comes_back_in_every_format(tmp_path: Path, ext: str) -> None:
    """A log without DXT or HEATMAP gives no timeline at all, only io_files: that table alone still goes through."""
    log = LOGS / "darshan" / "release_mpi-io-test-x86_64-3.1.8.darshan"
    if not log.is_file():
        pytest.skip("shared test data absent: logs/darshan not found under ../shared/data")
    trace = di.load(log)
    assert trace.locations.height == 0 and trace.io_files.height > 0
    back = round_trip(trace, tmp_path / f"io.{ext}")
    assert back.io_files.equals(trace.io_files)
    assert not [w for w in back.meta["warnings"] if "ignored" in w]


def test_an_io_files_column_beyond_the_schema_keeps_its_zeros_in_otf2(tmp_path: Path) -> None:
    """OTF2 leaves out counters of 0 (they read back 0); a column beyond the schema has no such default, so its
    zeros are written: all-zero, it would vanish; partly zero, its zeros would read back null."""
    log = LOGS / "darshan" / "release_mpi-io-test-x86_64-3.1.8.darshan"
    if not log.is_file():
        pytest.skip("shared test data absent: logs/darshan not found under ../shared/data")
    trace = di.load(log)
    n = trace.io_files.height
    io = trace.io_files.with_columns(
        pl.Series("zeros", [0] * n, pl.Int64), pl.Series("some", [0] + [4] * (n - 1), pl.Int64)
    )
    back = round_trip(trace.__class__.build(meta=trace.meta, **{**trace.tables(), "io_files": io}), tmp_path / "x.otf2")
    assert back.io_files.select("zeros", "some").equals(io.select("zeros", "some"))


@pytest.mark.parametrize("ext", ("json", "perfetto-trace"))
def test_nan_in_a_float_column_is_a_data_loss_warning_with_its_count(tmp_path: Path, ext: str) -> None:
    """JSON has no NaN or infinity: the document holds null there, and the writer says how many."""
    log = LOGS / "darshan" / "release_mpi-io-test-x86_64-3.1.8.darshan"
    if not log.is_file():
        pytest.skip("shared test data absent: logs/darshan not found under ../shared/data")
    trace = di.load(log)
    n = trace.io_files.height
    assert n >= 2
    ratio = [float("nan"), float("inf")] + [1.5] * (n - 2)
    io = trace.io_files.with_columns(pl.Series("ratio", ratio, pl.Float64))
    with pytest.warns(DataLossWarning, match=r"io_files column 'ratio' written to .* with 2 NaN or infinite values"):
        di.save(trace.__class__.build(meta=trace.meta, **{**trace.tables(), "io_files": io}), tmp_path / f"x.{ext}")
    back = di.load(tmp_path / f"x.{ext}").io_files.get_column("ratio")
    assert back.to_list() == [None, None] + ratio[2:]


@pytest.mark.parametrize("dtype", ["Object", "Decimal", "Datetime", "Struct", "Nonsense"])
def test_a_dtype_di_never_writes_drops_the_table_with_its_count(tmp_path: Path, dtype: str) -> None:
    """A document naming a type di's writer never names (an edited or foreign file): Object or Decimal would
    take the JSON values into a column the trace cannot save; the table is left out and said."""
    log = LOGS / "darshan" / "release_mpi-io-test-x86_64-3.1.8.darshan"
    if not log.is_file():
        pytest.skip("shared test data absent: logs/darshan not found under ../shared/data")
    trace = di.load(log)
    path = tmp_path / "x.json"
    di.save(trace, path)
    doc = json.loads(path.read_text())
    table = doc["diTrace"]["side_tables"]["io_files"]
    table["columns"]["extra"] = [1] * trace.io_files.height
    table["dtypes"]["extra"] = dtype
    path.write_text(json.dumps(doc))
    back = di.load(path)
    assert back.io_files.height == 0
    said = [w for w in back.meta["warnings"] if "io_files ignored" in w]
    assert len(said) == 1 and f"{trace.io_files.height} rows dropped" in said[0] and "not one di writes" in said[0]
    di.save(back, tmp_path / "back.di")


def test_otf2_says_every_loss_of_one_writing_in_one_warning(logs_job: di.Trace, tmp_path: Path) -> None:
    """io_files (IoFile properties) and comms (the archive property) each lose a column: one warning says both."""
    import datetime as dt

    day = pl.lit(dt.date(2026, 1, 2)).alias("seen")
    tables = {**logs_job.tables(), "comms": logs_job.comms.with_columns(day)}
    tables["io_files"] = logs_job.io_files.with_columns(day)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always", DataLossWarning)
        di.save(logs_job.__class__.build(meta=logs_job.meta, **tables), tmp_path / "x.otf2")
    said = [str(w.message) for w in got if issubclass(w.category, DataLossWarning)]
    assert len(said) == 1, said
    assert "io_files column 'seen'" in said[0] and "comms column 'seen'" in said[0]
