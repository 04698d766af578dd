"""The POSIX-I/O shim and the shard format without MPI: threads, fork, stdio,
exit codes, damaged shards."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from capture_helpers import PROGRAMS, di_cmd, run

import di
from di.capture import shard
from di.capture.ingest import ingest
from di.capture.iostats import read_file_stats
from di.errors import FormatError


@pytest.fixture(scope="module")
def threads_fork(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("io")
    run_dir = out / "io.di"
    before = time.time_ns()
    proc = run(
        di_cmd(
            "record", "--io", "-o", str(run_dir), "--", sys.executable, str(PROGRAMS / "io_threads_fork.py"), str(out)
        ),
        out,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (out / "window.json").write_text(json.dumps([before, time.time_ns()]))
    return out, run_dir


def test_without_mpi_clock_sync_times_are_still_unix_epoch(threads_fork: tuple[Path, Path]) -> None:
    out, run_dir = threads_fork
    before, after = json.loads((out / "window.json").read_text())
    trace = di.load(run_dir)
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    ev = trace.events
    assert before <= ev.get_column("start_ns").min() and ev.get_column("end_ns").max() <= after


def test_threads_get_their_own_timelines_and_bytes(threads_fork: tuple[Path, Path]) -> None:
    out, run_dir = threads_fork
    trace = di.load(run_dir)
    trace.validate()
    files = read_file_stats(run_dir).filter(pl.col("file").str.starts_with(str(out)))
    by_name = {Path(f).name: row for f, row in zip(files.get_column("file"), files.iter_rows(named=True))}
    for k in range(3):
        row = by_name[f"thread-{k}.dat"]
        assert (row["writes"], row["bytes_written"]) == (k + 1, 512 * (k + 1))
    assert by_name["thread-0.dat"]["reads"] == 1 and by_name["thread-0.dat"]["bytes_read"] == 512
    ev = trace.events.join(trace.locations.select("loc", "pid", "tid"), on="loc")
    writers = ev.filter((pl.col("name") == "write") & pl.col("args").str.contains("thread-"))
    assert writers.get_column("tid").n_unique() == 3  # one timeline per thread
    assert writers.get_column("pid").n_unique() == 1


def test_forked_child_records_into_its_own_shard(threads_fork: tuple[Path, Path]) -> None:
    out, run_dir = threads_fork
    trace = di.load(run_dir)
    child = read_file_stats(run_dir).filter(pl.col("file") == str(out / "child.dat")).row(0, named=True)
    assert (child["opens"], child["writes"], child["bytes_written"]) == (1, 3, 300)  # fopen/fwrite: stdio
    parent_rank = read_file_stats(run_dir).filter(pl.col("file") == str(out / "thread-0.dat")).get_column("rank")[0]
    assert child["rank"] != parent_rank
    fwrites = trace.events.filter(pl.col("name") == "fwrite")
    assert fwrites.height == 3 and fwrites.get_column("bytes").to_list() == [100, 100, 100]
    assert not [w for w in trace.meta["warnings"] if "abnormally" in w]


def test_raw_shards_can_be_ingested_again(threads_fork: tuple[Path, Path]) -> None:
    _, run_dir = threads_fork
    before = di.load(run_dir).events.height
    proc = run(di_cmd("record", "--ingest", "-o", str(run_dir)), run_dir.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert di.load(run_dir).events.height == before and (run_dir / "raw").is_dir()


def test_exit_code_is_passed_through(tmp_path: Path) -> None:
    proc = run(
        di_cmd(
            "record",
            "--io",
            "-o",
            str(tmp_path / "x.di"),
            "--",
            sys.executable,
            "-c",
            "open(__import__('os').devnull).close(); raise SystemExit(7)",
        ),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 7, proc.stderr
    assert json.loads((tmp_path / "x.di" / "raw" / "run.json").read_text())["exit_code"] == 7


def test_failed_command_without_records_keeps_its_exit_code(tmp_path: Path) -> None:
    proc = run(
        di_cmd("record", "--io", "-o", str(tmp_path / "y.di"), "--", "/bin/sh", "-c", "exit 3"), tmp_path, timeout=120
    )
    assert proc.returncode == 3, proc.stderr
    assert "no trace written" in proc.stdout and "Traceback" not in proc.stderr


def _fake_raw(raw: Path, records: np.ndarray, header: dict | None = None) -> None:
    raw.mkdir(parents=True)
    h = {
        "format": "di-shard",
        "version": 1,
        "lib": "io",
        "host": "h",
        "pid": 5,
        "rank": -1,
        "state": "exited",
        "record_bytes": 64,
        "clock": {"id": "CLOCK_MONOTONIC", "now_ns": 0, "realtime_ns": 0},
    }
    (raw / "io-h-5.json").write_text(json.dumps(header or h))
    (raw / "io-h-5.str").write_bytes(
        np.array([1, 3], "<u4").tobytes() + b"/f1" + np.array([2, 50], "<u4").tobytes() + b"cut"
    )
    records.tofile(raw / "io-h-5-5.bin")


def _io_records(n: int) -> np.ndarray:
    r = np.zeros(n, shard.RECORD)
    r["kind"], r["op"] = shard.KIND_IO, shard.op_names().index("write")
    r["t0"] = np.arange(n) * 100
    r["t1"] = r["t0"] + 50
    r["bytes"], r["comm"], r["aux"], r["aux2"] = 10, 1, 3, -1
    return r


def test_slots_never_completed_are_dropped_and_counted(tmp_path: Path) -> None:
    recs = _io_records(6)
    recs["kind"][2] = 0  # a record cut short by a kill; the zero tail is unused file space
    _fake_raw(tmp_path / "run.di" / "raw", np.concatenate([recs, np.zeros(10, shard.RECORD)]))
    trace, files = ingest(tmp_path / "run.di")
    assert trace.events.height == 5
    assert trace.meta["sources"][0]["dropped"] == {"incomplete records": 1}
    assert files.row(0, named=True)["bytes_written"] == 50 and files.row(0, named=True)["file"] == "/f1"


def test_bad_shard_header_is_a_format_error_naming_the_file(tmp_path: Path) -> None:
    raw = tmp_path / "run.di" / "raw"
    _fake_raw(raw, _io_records(2), {"format": "di-shard", "version": 9})
    with pytest.raises(FormatError, match=r"io-h-5\.json: shard format version 9"):
        ingest(tmp_path / "run.di")
    (raw / "io-h-5.json").write_text("{not json")
    with pytest.raises(FormatError, match=r"io-h-5\.json: unreadable shard header"):
        ingest(tmp_path / "run.di")


def test_no_raw_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no raw capture shards"):
        ingest(tmp_path)


def test_string_table_ignores_a_record_cut_short(tmp_path: Path) -> None:
    _fake_raw(tmp_path / "raw", _io_records(1))
    assert shard.read_strings(tmp_path / "raw" / "io-h-5.str") == {1: "/f1"}


def test_record_layout_matches_the_c_struct() -> None:
    assert shard.RECORD.itemsize == 64
    text = (shard.SHIM_DIR / "shard.h").read_text()
    assert "_Static_assert(sizeof(di_rec) == 64" in text
    assert shard.op_names()[:3] == ("MPI_Init", "MPI_Init_thread", "MPI_Finalize") and "MPI_Isend_c" in shard.op_names()


KILLED_WRITER = """
import os, signal, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(int(sys.argv[2])):
    os.write(fd, b"x" * (1 + i % 7))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_process_killed_after_thousands_of_records_keeps_every_one(tmp_path: Path) -> None:
    # 2500 writes: two appends of the staging area (1024 records each) and the rest still staged
    target, n = tmp_path / "out.dat", 2500
    proc = run(
        di_cmd(
            "record",
            "--io",
            "-o",
            str(tmp_path / "k.di"),
            "--",
            sys.executable,
            "-c",
            KILLED_WRITER,
            str(target),
            str(n),
        ),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 128 + 9, proc.stderr
    stats = read_file_stats(tmp_path / "k.di").filter(pl.col("file") == str(target)).row(0, named=True)
    assert stats["writes"] == n and stats["bytes_written"] == target.stat().st_size == sum(1 + i % 7 for i in range(n))
    writes = di.load(tmp_path / "k.di").events.filter(pl.col("name") == "write")
    assert writes.get_column("start_ns").is_sorted()


def _staged_file(path: Path, appended: np.ndarray, committed: int, staged: np.ndarray, staging: int = 8) -> None:
    """A thread file laid out as the shim writes it: slot 0 (t0 = committed), the staging slots, the appended records."""
    head = np.zeros(staging + 1, shard.RECORD)
    head["t0"][0] = committed
    head[1 : 1 + staged.size] = staged
    np.concatenate([head, appended]).tofile(path)


def test_staging_area_read_after_a_kill_at_any_point_of_an_append(tmp_path: Path) -> None:
    recs = _io_records(12)
    recs["t0"] = np.arange(12)
    cases = {  # (appended, committed, staged): what a kill leaves at each step of an append of records 4..7
        "before the pwrite": (recs[:4], 4, recs[4:8]),
        "pwrite cut short": (recs[:6], 4, recs[4:8]),
        "after the pwrite": (recs[:8], 4, recs[4:8]),
        "while zeroing": (recs[:8], 4, np.concatenate([np.zeros(2, shard.RECORD), recs[6:8]])),
        "after committed grew, staging again": (recs[:8], 8, recs[8:11]),
    }
    for name, (appended, committed, staged) in cases.items():
        path = tmp_path / f"{len(name)}.bin"
        _staged_file(path, appended, committed, staged)
        got, holes = shard.read_records(path, 8)
        assert holes == 0, name
        assert got["t0"].tolist() == list(range(max(appended.size, committed + staged.size))), name


def test_cupti_process_without_a_shim_rank_lands_on_the_unix_epoch_clock(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from di.capture import cupti
    from di.capture import cupti_records as records

    run_dir = tmp_path / "g.di"
    proc = run(
        di_cmd(
            "record", "--io", "-o", str(run_dir), "--", sys.executable, "-c", "open(__import__('os').devnull).close()"
        ),
        tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # a GPU process the shims did not see (another pid, no launcher rank): it gets a rank of its own
    cap = cupti.GpuCapture(run_dir / "raw")
    cap.stem = cap.stem.with_name(cap.stem.name.rsplit("-", 1)[0] + "-1")
    cap.header.update(pid=1, env_rank=-1, state="stopped")
    cap.write_header()
    real = cap.header["clock"]["realtime_ns"]
    kernel = SimpleNamespace(
        kind=10,
        start=real,
        end=real + 1000,
        correlation_id=1,
        device_id=0,
        context_id=1,
        stream_id=7,
        name="k",
        grid_x=1,
        grid_y=1,
        grid_z=1,
        block_x=1,
        block_y=1,
        block_z=1,
    )
    cap.append(records.to_records([kernel], lambda k: records.K_KERNEL if k == 10 else 0, cap._intern, lambda *_: "?"))
    trace, _ = ingest(run_dir)
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    start = trace.events.filter(pl.col("cat") == "kernel").get_column("start_ns").to_list()
    # rank 0's realtime offset and the GPU process's differ only by the clocks' reading jitter
    assert len(start) == 1 and abs(start[0] - real) < 50_000_000


def test_recorded_io_survives_a_write_to_otf2(threads_fork: tuple[Path, Path], tmp_path: Path) -> None:
    """Each recorded read/write/flush call becomes an OTF2 I/O operation (IoOperationBegin/Complete with its bytes and
    file) inside its region, and reading the archive back gives the recorded events again."""
    otf2 = pytest.importorskip("otf2")
    from di.convert.otf2.iolayout import FLUSH_NAMES, READ_NAMES, WRITE_NAMES

    _, run_dir = threads_fork
    trace = di.load(run_dir)
    ops = trace.events.filter(
        (pl.col("cat") == "io") & pl.col("name").cast(pl.String).is_in([*READ_NAMES, *WRITE_NAMES, *FLUSH_NAMES])
    )
    assert ops.height >= 8
    out = tmp_path / "io.otf2"
    di.save(trace, out)
    with otf2.reader.open(str(out)) as tr:
        records = [e for _, e in tr.events]
        begins = [e for e in records if type(e).__name__ == "IoOperationBegin"]
        moved = sum(e.bytes_result for e in records if type(e).__name__ == "IoOperationComplete")
        files = {h.file.name for h in tr.definitions.io_handles}
    assert len(begins) == ops.height
    assert moved == ops["bytes"].fill_null(0).sum()
    assert {json.loads(a)["file"] for a in ops["args"].to_list()} <= files
    back = di.load(out)
    cols = ["start_ns", "end_ns", "name", "cat", "src_cat", "bytes", "args"]

    def content(t: di.Trace) -> pl.DataFrame:
        ev = t.events.join(t.locations.select("loc", "rank"), on="loc").filter(pl.col("cat") == "io")
        return (
            ev.select("rank", *cols)
            .with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String))
            .sort("rank", *cols, nulls_last=True)
        )

    assert content(back).equals(content(trace))
