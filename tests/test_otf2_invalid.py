"""Bad OTF2 input: a one-line FormatError, or a loaded trace whose warnings count what was lost.

Each case damages a copy of a real archive (casita_4_mpi_ls_barr: 4 ranks,
one location each) in a temporary directory, or writes a small archive with
the official ``otf2`` writer.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_valid, otf2_archive

import di
from di.convert.otf2.archive import (
    LOCATION_WITHOUT_EVENT_FILE,
    LOCATION_WITHOUT_LOCAL_DEFINITIONS,
    TRUNCATED_EVENT_FILE,
)
from di.convert.provenance import END_BEFORE_START_REPAIRED, FLOW_END_WITHOUT_START
from di.errors import FormatError, UnknownFormatError

otf2 = pytest.importorskip("otf2")


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """A fresh copy of casita_4_mpi_ls_barr; returns its anchor file."""
    src = otf2_archive("casita_4_mpi_ls_barr").parent
    shutil.copytree(src, tmp_path / "a")
    return tmp_path / "a" / "traces.otf2"


def _dropped(trace: di.Trace) -> dict[str, int]:
    return trace.meta["sources"][-1]["dropped"]


def test_missing_global_definitions_is_a_one_line_error(archive: Path) -> None:
    archive.with_suffix(".def").unlink()
    with pytest.raises(FormatError, match=r"traces\.otf2: global definitions traces\.def missing") as info:
        di.load(archive)
    assert "\n" not in str(info.value)


def test_missing_event_file_loads_the_rest_and_says_so(archive: Path) -> None:
    full = di.load(archive)
    rank2 = full.locations.filter(full.locations["tid"] == 2)["loc"].item()
    on_rank2 = full.events.filter(full.events["loc"] == rank2).height
    (archive.parent / "traces" / "2.evt").unlink()
    trace = assert_valid(di.load(archive))
    assert _dropped(trace)[LOCATION_WITHOUT_EVENT_FILE] == 1
    assert any("2.evt missing" in w for w in trace.meta["warnings"])
    assert on_rank2 > 0 and trace.events.height == full.events.height - on_rank2  # rank 2's regions gone, the rest kept
    assert any("without a matching" in w for w in trace.meta["warnings"])


def test_missing_local_definitions_loads_without_clock_offsets_and_says_so(archive: Path) -> None:
    (archive.parent / "traces" / "1.def").unlink()
    trace = assert_valid(di.load(archive))
    assert _dropped(trace)[LOCATION_WITHOUT_LOCAL_DEFINITIONS] == 1
    assert any(
        "1.def: local definitions missing; clock offsets of location 1 not applied" in w for w in trace.meta["warnings"]
    )
    assert trace.events.height == 48


def test_truncated_event_file_keeps_what_was_read(archive: Path) -> None:
    evt = archive.parent / "traces" / "3.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])
    trace = assert_valid(di.load(archive))
    dropped = _dropped(trace)
    assert dropped[TRUNCATED_EVENT_FILE] == 1
    assert dropped["regions entered and never left"] >= 1
    assert any("3.evt unreadable after" in w for w in trace.meta["warnings"])
    assert 0 < trace.events.height < 48


def test_anchor_that_points_nowhere_is_a_one_line_error(tmp_path: Path) -> None:
    lone = tmp_path / "lone.otf2"
    shutil.copy(otf2_archive("casita_4_mpi_ls_barr"), lone)
    with pytest.raises(FormatError, match=r"lone\.otf2: global definitions lone\.def missing"):
        di.load(lone)
    (tmp_path / "lone.def").write_bytes(b"")
    with pytest.raises(FormatError, match=r"lone\.otf2: OTF2 library could not open the archive"):
        di.load(lone)


def test_not_an_anchor_file(tmp_path: Path) -> None:
    fake = tmp_path / "fake.otf2"
    fake.write_bytes(b"not an otf2 anchor at all")
    with pytest.raises((FormatError, UnknownFormatError)):
        di.load(fake)
    with pytest.raises(FormatError, match="not an OTF2 anchor file"):
        from di.convert.otf2.reader import read_otf2

        read_otf2(fake)


def test_directory_with_two_anchors_asks_for_one(tmp_path: Path, archive: Path) -> None:
    shutil.copy(archive, archive.parent / "other.otf2")
    from di.convert.otf2.reader import read_otf2

    with pytest.raises(FormatError, match="2 anchor files"):
        read_otf2(archive.parent)


def _unbalanced(tmp_path: Path) -> Path:
    """An archive with one Leave without Enter and one Enter never left, written by the official writer."""
    with otf2.writer.open(str(tmp_path / "unbalanced"), timer_resolution=10**9) as w:
        root = w.definitions.system_tree_node("node")
        group = w.definitions.location_group("rank 0", system_tree_parent=root)
        main = w.definitions.region("main")
        work = w.definitions.region("work")
        ev = w.event_writer("thread", group=group)
        ev.leave(5, work)  # no Enter before it
        ev.enter(10, main)
        ev.enter(20, work)
        ev.leave(30, work)
        ev.enter(40, work)  # never left
        ev.leave(50, work)  # leaves 'work' ...
        # ... and 'main' is never left
        ev.enter(60, work)
        ev.leave(70, work)
    return tmp_path / "unbalanced" / "traces.otf2"


def test_unbalanced_enter_leave_is_counted(tmp_path: Path) -> None:
    trace = assert_valid(di.load(_unbalanced(tmp_path)))
    dropped = _dropped(trace)
    assert dropped["Leave records without an Enter"] == 1
    assert dropped["regions entered and never left"] == 1
    names = trace.events["name"].to_list()
    assert names.count("work") == 3 and names.count("main") == 1
    main = trace.events.filter(trace.events["name"] == "main")
    assert main["end_ns"].item() - main["start_ns"].item() == 70 - 10  # closed at the location's last record
    assert any("regions entered and never left (1)" in w for w in trace.meta["warnings"])


def test_cli_reports_a_broken_archive_on_one_line(archive: Path) -> None:
    archive.with_suffix(".def").unlink()
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "di", "info", str(archive)],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    assert "global definitions traces.def missing" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_otf2_librarys_own_error_prints_do_not_reach_stderr(tmp_path: Path) -> None:
    from di.demo import write_kineto_job

    archive = tmp_path / "a.otf2"
    di.save(di.load(write_kineto_job(tmp_path / "k", ranks=2, steps=2)), archive)
    with open(archive.with_suffix(".def"), "r+b") as fh:  # a corrupt record inside the definitions
        fh.seek(200)
        fh.write(b"garbage")
    proc = subprocess.run([sys.executable, "-m", "di", "info", str(archive)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "[OTF2]" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"di info: error: {archive}")


# Found by fuzzing (tests/test_fuzz.py, bench/fuzz.py)


def test_anchor_declaring_more_properties_than_it_holds_is_refused_at_once(archive: Path) -> None:
    """The OTF2 library allocated and walked 2**30 property slots for 10-60 s before failing (fuzz: a near-hang)."""
    import time

    from di.convert.otf2.archive import anchor_problem

    data = archive.read_bytes()
    assert anchor_problem(data) is None
    at = (
        data.index(b"\0", data.index(b"\0", data.index(b"\0", data.index(b"\0", 2) + 1 + 39) + 1) + 1) + 1
    )  # after 3 strings
    archive.write_bytes(data[:at] + (1 << 30).to_bytes(4, "little") + data[at + 4 :])
    started = time.perf_counter()
    with pytest.raises(
        FormatError, match=r"traces\.otf2: damaged OTF2 anchor file: it declares 1,073,741,824 properties"
    ):
        di.load(archive)
    assert time.perf_counter() - started < 5


def test_damaged_definitions_leave_one_line_on_stderr(archive: Path) -> None:
    """The OTF2 library printed one '[OTF2] ... error' line per problem to stderr: di info's error was not one line."""
    defs = archive.with_suffix(".def")
    data = bytearray(defs.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xff" * 8
    defs.write_bytes(bytes(data))
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "di", "info", str(archive)],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode in (0, 2) and "[OTF2]" not in proc.stderr
    assert proc.returncode == 0 or len(proc.stderr.strip().splitlines()) == 1


@pytest.fixture
def di_archive(tmp_path: Path) -> Path:
    """A 1-rank demo job written by di's OTF2 writer: di.flows_in and di.op attributes."""
    from di.demo import write_kineto_job

    paths = write_kineto_job(tmp_path / "job", ranks=1, steps=2, ops_per_step=3, straggler=None)
    di.save(di.load(paths[0]), tmp_path / "out" / "job.otf2")
    return tmp_path / "out" / "job.otf2"


def _edit_def(anchor: Path, old: bytes, new: bytes) -> None:
    defs = anchor.with_suffix(".def")
    data = defs.read_bytes()
    assert len(old) == len(new) and old in data
    defs.write_bytes(data.replace(old, new))


@pytest.mark.parametrize("compiled", [False, True])
def test_flows_in_attribute_that_is_not_json(di_archive: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """fuzz: ComputeError from json_decode in flows_frame; the same with the kernel reading the sound texts."""
    from di.convert.otf2 import events

    if compiled:
        monkeypatch.setattr(events, "FLOW_TEXTS_COMPILED", 0)
    whole = di.load(di_archive)
    _edit_def(di_archive, b'[{"l":0,"k":7,', b'[{"l":0,"k":7R')
    _edit_def(di_archive, b'"t":"launch","i":4001', b'"t":"bogus!","i":4001')
    t = assert_valid(di.load(di_archive))
    assert 0 < t.flows.height == whole.flows.height - 2
    assert t.meta["sources"][-1]["dropped"][FLOW_END_WITHOUT_START] == 2


def test_collective_op_attribute_missing(di_archive: Path) -> None:
    """The di.op attribute's definition renamed: the ops come from the records (fuzz: nulls in collectives.op)."""
    _edit_def(di_archive, b"di.op", b"di.oq")
    t = assert_valid(di.load(di_archive))
    assert t.collectives.get_column("op").to_list() == ["allreduce", "allreduce"]


def test_leave_before_its_enter(tmp_path: Path) -> None:
    """Damaged timestamps: a Leave earlier than its Enter (fuzz: a trace with end_ns < start_ns returned).
    The writer refuses time going backwards, so the Leave's timestamp record is patched in the event file."""
    with otf2.writer.open(str(tmp_path / "back"), timer_resolution=10**9) as w:
        root = w.definitions.system_tree_node("node")
        group = w.definitions.location_group("rank 0", system_tree_parent=root)
        work = w.definitions.region("work")
        ev = w.event_writer("thread", group=group)
        for enter, leave in ((50, 60), (70, 80)):
            ev.enter(enter, work)
            ev.leave(leave, work)
    (evt,) = (tmp_path / "back" / "traces").glob("*.evt")
    stamp = b"\x05" + (80).to_bytes(8, "little")  # OTF2's timestamp record: 0x05, then 8 bytes
    assert evt.read_bytes().count(stamp) == 1
    evt.write_bytes(evt.read_bytes().replace(stamp, b"\x05" + (65).to_bytes(8, "little")))
    t = assert_valid(di.load(tmp_path / "back" / "traces.otf2"))
    (s0, _), *_ = rows = t.events.select("start_ns", "end_ns").rows()
    assert [(s - s0, e - s0) for s, e in rows] == [(0, 10), (20, 20)]
    assert t.meta["sources"][-1]["dropped"][END_BEFORE_START_REPAIRED] == 1
