"""OTF2 I/O records: read as ``io`` events and instants, written back as IoOperation records.

No shared archive holds I/O records (see ../shared/data/README.md), so the
archive here is written by the official ``otf2`` writer (real library, real
files) the way Score-P records I/O: ISO C I/O regions holding
IoOperationBegin/Complete, handle management and seek records, plus a
non-blocking operation, a cancelled one, one never completed and one
completion without a begin. Counts are compared with the official reader's.
"""

from __future__ import annotations

import collections
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import assert_valid

import di
from di.convert.otf2.writer import write_otf2
from di.trace import Trace

otf2 = pytest.importorskip("otf2")
OTF2_PRINT = shutil.which("otf2-print")
FILE = "/scratch/run 1/out.dat"


def _io_archive(tmp_path: Path) -> Path:
    from otf2.enums import (
        IoAccessMode,
        IoCreationFlag,
        IoOperationFlag,
        IoOperationMode,
        IoParadigmClass,
        IoSeekOption,
        RegionRole,
    )

    with otf2.writer.open(str(tmp_path / "io"), timer_resolution=10**9) as w:
        d = w.definitions
        root = d.system_tree_node("node")
        group = d.location_group("rank 0", system_tree_parent=root)
        main = d.region("main")
        fwrite = d.region("fwrite", region_role=RegionRole.FILE_IO)
        fread = d.region("fread", region_role=RegionRole.FILE_IO)
        isoc = d.io_paradigm("ISOC", "ISO C I/O", IoParadigmClass.SERIAL, otf2.IoParadigmFlag.NONE)
        file = d.io_regular_file(FILE, scope=root)
        handle = d.io_handle("out.dat", file=file, io_paradigm=isoc)
        ev = w.event_writer("thread", group=group)
        ev.enter(10, main)
        ev.io_create_handle(12, handle, IoAccessMode.READ_WRITE, IoCreationFlag.CREATE, otf2.IoStatusFlag.NONE)
        ev.enter(20, fwrite)
        ev.io_operation_begin(21, handle, IoOperationMode.WRITE, IoOperationFlag.NONE, 4096, 1)
        ev.io_operation_complete(29, handle, 4000, 1)
        ev.leave(30, fwrite)
        ev.io_seek(31, handle, 0, IoSeekOption.FROM_START, 0)
        ev.enter(40, fread)
        ev.io_operation_begin(41, handle, IoOperationMode.READ, IoOperationFlag.NON_BLOCKING, 100, 2)
        ev.io_operation_issued(42, handle, 2)
        ev.io_operation_test(43, handle, 2)
        ev.io_operation_complete(48, handle, 100, 2)
        ev.leave(50, fread)
        ev.io_operation_begin(60, handle, IoOperationMode.FLUSH, IoOperationFlag.NON_BLOCKING, 0, 3)
        ev.io_operation_cancelled(62, handle, 3)
        ev.io_operation_begin(70, handle, IoOperationMode.WRITE, IoOperationFlag.NONE, 8, 4)  # never completed
        ev.io_operation_complete(75, handle, 8, 5)  # no begin with matching id 5
        ev.io_destroy_handle(80, handle)
        ev.leave(90, main)
    return tmp_path / "io" / "traces.otf2"


def _official_counts(anchor: Path) -> collections.Counter[str]:
    with otf2.reader.open(str(anchor)) as tr:
        return collections.Counter(type(event).__name__ for _, event in tr.events)


def test_io_records_become_io_events_with_bytes_mode_and_file(tmp_path: Path) -> None:
    anchor = _io_archive(tmp_path)
    official = _official_counts(anchor)
    trace = assert_valid(di.load(anchor))
    ops = trace.events.filter(pl.col("src_cat") == "otf2/io_operation")
    assert ops.height == official["IoOperationBegin"] == 4
    assert (ops["cat"] == "io").all()
    t0 = trace.events["start_ns"].min()  # the official writer records a realtime clock: times relative to main's Enter
    rows = {r["start_ns"] - t0 + 10: {**r, "end_ns": r["end_ns"] - t0 + 10} for r in ops.iter_rows(named=True)}
    write = rows[21]
    assert (write["name"], write["end_ns"], write["bytes"]) == ("write", 29, 4000)  # bytes transferred
    assert json.loads(write["args"]) == {
        "mode": "write",
        "handle": "out.dat",
        "file": FILE,
        "paradigm": "ISOC",
        "bytes_requested": 4096,
    }
    read = rows[41]
    assert (read["name"], read["end_ns"], read["bytes"]) == ("read", 48, 100)
    assert json.loads(read["args"])["operation_flags"] == 1  # NON_BLOCKING
    flush = rows[60]
    assert (flush["name"], flush["end_ns"], flush["bytes"]) == ("flush", 62, 0)
    assert json.loads(flush["args"])["cancelled"] is True
    lost = rows[70]
    assert (lost["end_ns"], lost["bytes"]) == (70, None)  # never completed: ends where it starts, bytes unknown
    # each operation sits in the region that issued it
    parents = trace.events["name"].cast(pl.String).gather(ops["parent"]).to_list()
    assert parents == ["fwrite", "fread", "main", "main"]
    instants = trace.events.filter(pl.col("instant") & (pl.col("cat") == "io"))
    wanted = ["IoCreateHandle", "IoSeek", "IoOperationIssued", "IoOperationTest", "IoDestroyHandle"]
    assert sorted(instants["name"].cast(pl.String).to_list()) == sorted(wanted)
    assert all(official[n] == 1 for n in wanted)
    seek = json.loads(instants.filter(pl.col("name") == "IoSeek")["args"].item())
    assert seek == {"handle": 0, "offset_requested": 0, "offset_result": 0}
    dropped = trace.meta["sources"][0]["dropped"]
    assert dropped == {"I/O completions without a begin": 1, "I/O operations never completed": 1}  # nothing unsupported
    assert any("I/O operations never completed (1)" in w for w in trace.meta["warnings"])
    assert any("I/O completions without a begin (1)" in w for w in trace.meta["warnings"])


def _table_dump(trace: Trace) -> dict[str, pl.DataFrame]:
    return {
        name: df.with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String)) for name, df in trace.tables().items()
    }


def test_io_round_trip_otf2_di_otf2_di_keeps_every_event(tmp_path: Path) -> None:
    first = assert_valid(di.load(_io_archive(tmp_path)))
    out = tmp_path / "rt.otf2"
    write_otf2(first, out)
    official = _official_counts(out)
    assert (
        official["IoOperationBegin"] == 4
        and official["IoOperationComplete"] == 3
        and official["IoOperationCancelled"] == 1
    )
    again = assert_valid(di.load(out))
    for name, df in _table_dump(first).items():
        if name != "locations":
            assert _table_dump(again)[name].equals(df), name
    # written back completed (0 bytes): reading di's archive drops nothing, its sources are the first read's
    assert again.meta["sources"] == first.meta["sources"]
    assert "I/O operations never completed" in first.meta["sources"][0]["dropped"]


def _captured_io() -> Trace:
    """A trace shaped like `di record`'s POSIX/ISO C I/O events (names, src_cat posix_io, args file/fd/offset)."""
    names = ["main", "open", "write", "pread", "fwrite", "fflush", "close"]
    n = len(names)
    args = [None] + [json.dumps({"file": FILE if i % 2 else "/tmp/b.txt", "fd": 3}) for i in range(1, n)]
    ev = pl.DataFrame(
        {
            "loc": np.zeros(n, np.uint32),
            "start_ns": [0, 10, 20, 30, 40, 50, 60],
            "end_ns": [100, 15, 25, 35, 45, 55, 65],
            "name": names,
            "cat": ["user"] + ["io"] * (n - 1),
            "src_cat": [None] + ["posix_io"] * (n - 1),
            "depth": [0] + [1] * (n - 1),
            "parent": [None] + [0] * (n - 1),
            "bytes": [None, None, 512, 64, 10, None, None],
            "instant": [False] * n,
            "args": args,
        }
    )
    loc = pl.DataFrame(
        {
            "loc": np.zeros(1, np.uint32),
            "rank": [0],
            "host": ["h"],
            "kind": ["cpu_thread"],
            "name": ["main thread"],
            "source": [0],
        }
    )
    return Trace.build(meta={"clock": {"unit": "ns", "domain": "relative", "sync": None}}, locations=loc, events=ev)


def test_captured_io_is_written_as_io_operations_and_reads_back_unchanged(tmp_path: Path) -> None:
    trace = _captured_io()
    out = tmp_path / "cap.otf2"
    write_otf2(trace, out)
    official = _official_counts(out)
    assert official["IoOperationBegin"] == official["IoOperationComplete"] == 4  # write, pread, fwrite, fflush
    with otf2.reader.open(str(out)) as tr:
        modes = [str(e.mode).rsplit(".", 1)[-1] for _, e in tr.events if type(e).__name__ == "IoOperationBegin"]
        paradigms = sorted(p.identification for p in tr.definitions.io_paradigms)
        files = sorted(f.name for f in tr.definitions.io_files)
    assert modes == ["WRITE", "READ", "WRITE", "FLUSH"]
    assert paradigms == ["ISOC", "POSIX"] and files == sorted([FILE, "/tmp/b.txt"])
    back = assert_valid(di.load(out))
    assert _table_dump(back)["events"].equals(_table_dump(trace)["events"])


@pytest.mark.skipif(
    OTF2_PRINT is None,
    reason="otf2-print not installed (Debian package otf2-tools); the official Python reader checks instead",
)
def test_otf2_print_reads_the_io_records_we_wrote(tmp_path: Path) -> None:
    out = tmp_path / "cap.otf2"
    write_otf2(_captured_io(), out)
    proc = subprocess.run([OTF2_PRINT, str(out)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    kinds = collections.Counter(line.split()[0] for line in proc.stdout.splitlines() if line[:1].isupper())
    assert kinds["IO_OPERATION_BEGIN"] == kinds["IO_OPERATION_COMPLETE"] == 4
    defs = subprocess.run([OTF2_PRINT, "-G", str(out)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert defs.count("IO_HANDLE ") == 4 and defs.count("IO_PARADIGM ") == 2 and FILE in defs  # (file, paradigm) pairs
