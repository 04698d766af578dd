"""Outputs are never destructive: what di may replace, atomic swaps, writers killed at random
points and full disks (the old output still loads, unchanged)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import di
from di.errors import OutputError
from di.output import atomic_dir, atomic_write, claim, clean_leftovers, finish_swap, replace_parts, staged_name

FORMATS = ["x.di", "x.json.gz", "x.json", "x.pftrace", "x.otf2"]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[di.Trace, di.Trace]:
    """Two different small job traces (their event counts differ)."""
    from di.demo import write_kineto_job

    root = tmp_path_factory.mktemp("jobs")
    a = di.load(write_kineto_job(root / "a", ranks=2, steps=2))
    b = di.load(write_kineto_job(root / "b", ranks=2, steps=4))
    assert a.events.height != b.events.height
    return a, b


def _leftovers(folder: Path) -> list[str]:
    return sorted(
        p.name for p in folder.iterdir() if ".di-tmp." in p.name or ".di-old." in p.name or p.name.endswith(".di-swap")
    )


@pytest.mark.parametrize("name", FORMATS)
def test_di_replaces_its_own_output_and_nothing_else(
    traces: tuple[di.Trace, di.Trace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    a, b = traces
    monkeypatch.chdir(tmp_path)
    di.save(a, name)
    di.save(b, name)  # di's own output: replaced
    assert di.load(name).events.height == b.events.height
    assert _leftovers(tmp_path) == []
    # a file or folder of the user's under the same name is refused, and stays as it was
    user = tmp_path / "user" / name
    if name.endswith(".di"):
        user.mkdir(parents=True)
        (user / "thesis.txt").write_text("x")
    else:
        user.parent.mkdir()
        user.write_bytes(b'{"traceEvents":[]}' if ".json" in name else b"user data")
    with pytest.raises(OutputError, match="not .* that di wrote"):
        di.save(a, user)
    assert sorted(p.name for p in user.parent.rglob("*")) == sorted(
        [user.name] + (["thesis.txt"] if user.is_dir() else [])
    )
    if name.endswith((".di", ".otf2")):
        with pytest.raises(OutputError, match="not even with --force"):  # never a folder or an archive ...
            di.save(a, user, force=True)
        assert user.is_file() or (user / "thesis.txt").read_text() == "x"
    else:
        di.save(a, user, force=True)  # ... but --force replaces a file
        assert di.load(user).events.height == a.events.height


def test_never_the_current_directory_an_input_or_a_folder_holding_one(
    traces: tuple[di.Trace, di.Trace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = traces
    work = tmp_path / "s" / "i"
    work.mkdir(parents=True)
    (work / "keep.txt").write_text("x")
    monkeypatch.chdir(work)
    for target in (".", "..", str(tmp_path)):
        with pytest.raises(OutputError, match="current directory"):
            di.save(a, target, to="di")
    src = Path(a.meta["sources"][0]["path"])
    with pytest.raises(OutputError, match="input"):
        di.save(a, src.parent, to="di")
    with pytest.raises(OutputError, match="input"):
        claim(src, ours=lambda p: True, force=True, inputs=[src])
    assert (work / "keep.txt").read_text() == "x" and src.is_file()


def test_an_empty_folder_is_taken_and_modes_follow_the_umask(traces: tuple[di.Trace, di.Trace], tmp_path: Path) -> None:
    a, _ = traces
    (tmp_path / "empty.di").mkdir()
    old = os.umask(0o022)
    try:
        di.save(a, tmp_path / "empty.di")
        di.save(a, tmp_path / "new" / "deeper" / "x.json.gz")  # parents are made for every format
    finally:
        os.umask(old)
    assert (tmp_path / "empty.di" / "meta.json").is_file()
    assert (tmp_path / "empty.di").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "new" / "deeper" / "x.json.gz").stat().st_mode & 0o777 == 0o644


def test_gzip_header_names_the_target(traces: tuple[di.Trace, di.Trace], tmp_path: Path) -> None:
    di.save(traces[0], tmp_path / "job.json.gz")
    head = (tmp_path / "job.json.gz").read_bytes()[:64]
    assert b"job.json\x00" in head and b"tmp" not in head


def test_atomic_dir_keeps_entries_visible_and_swaps(tmp_path: Path) -> None:
    target = tmp_path / "run.di"
    (target / "raw").mkdir(parents=True)
    (target / "raw" / "shard.bin").write_bytes(b"1234")
    (target / "old.parquet").write_bytes(b"old")
    with atomic_dir(target, keep=("raw",)) as staged:
        assert (target / "raw" / "shard.bin").read_bytes() == b"1234"  # the old folder is untouched while staging
        assert os.path.samefile(staged / "raw" / "shard.bin", target / "raw" / "shard.bin")  # linked, not copied
        (staged / "new.parquet").write_bytes(b"new")
    assert sorted(p.name for p in target.iterdir()) == ["new.parquet", "raw"]
    assert (target / "raw" / "shard.bin").read_bytes() == b"1234" and _leftovers(tmp_path) == []
    with pytest.raises(RuntimeError), atomic_dir(target) as staged:
        (staged / "half.parquet").write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert sorted(p.name for p in target.iterdir()) == ["new.parquet", "raw"] and _leftovers(tmp_path) == []


def test_leftovers_of_dead_runs_are_removed_and_an_old_output_moved_aside_is_put_back(tmp_path: Path) -> None:
    target = tmp_path / "x.json.gz"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    staged = staged_name(target).with_name(staged_name(target).name.rsplit(".", 1)[0] + f".{dead}")
    staged.write_bytes(b"half")
    mine = staged_name(target)
    mine.write_bytes(b"in use")  # a live process's (ours) is left alone
    assert clean_leftovers(target) == [staged]
    assert mine.exists()
    mine.unlink()
    store = tmp_path / "y.di"
    aside = staged_name(store, "di-old").with_name(staged_name(store, "di-old").name.rsplit(".", 1)[0] + f".{dead}")
    aside.mkdir()
    (aside / "meta.json").write_text("{}")
    clean_leftovers(store)
    assert (store / "meta.json").read_text() == "{}" and not aside.exists()
    # a run killed while writing the journal of a part-by-part replacement leaves the journal's own staged file
    archive = tmp_path / "z.otf2"
    journal_tmp = tmp_path / f"..z.otf2.di-swap.{staged_name(archive).name.split('.', 3)[-1].rsplit('.', 1)[0]}.{dead}"
    journal_tmp.write_text("{")
    assert clean_leftovers(archive) == [journal_tmp] and _leftovers(tmp_path) == []


def test_replace_parts_finishes_after_a_kill_between_moves(tmp_path: Path) -> None:
    names = ["a", "a.def", "a.otf2"]
    for n in names:
        (tmp_path / n).write_text("old")
    staged = tmp_path / ".stage"
    staged.mkdir()
    for n in names:
        (staged / n).write_text("new")
    # the journal is written and the first part moved, then the writer dies
    (tmp_path / ".a.otf2.di-swap").write_text('{"staged": ".stage", "names": ["a", "a.def", "a.otf2"]}')
    (staged / ".old").mkdir()
    os.rename(tmp_path / "a", staged / ".old" / "a")
    os.rename(staged / "a", tmp_path / "a")
    os.rename(tmp_path / "a.def", staged / ".old" / "a.def")  # killed before the new .def moved in
    assert finish_swap(tmp_path / "a.otf2")
    assert [(tmp_path / n).read_text() for n in names] == ["new"] * 3
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    staged.mkdir()
    for n in names:
        (staged / n).write_text("newer")
    replace_parts(staged, tmp_path, names)
    assert [(tmp_path / n).read_text() for n in names] == ["newer"] * 3 and sorted(
        p.name for p in tmp_path.iterdir()
    ) == names


def test_atomic_write_leaves_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    path = tmp_path / "report.html"
    path.write_text("old")
    with pytest.raises(ValueError), atomic_write(path) as fh:
        fh.write(b"half")
        raise ValueError("failed")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


KILLED_WRITER = """
import sys, di
a, b, out = di.load(sys.argv[1]), di.load(sys.argv[2]), sys.argv[3]
print("ready", flush=True)
while True:
    for t in (a, b):
        di.save(t, out)
"""


@pytest.mark.parametrize("name", FORMATS)
def test_writer_killed_at_random_points_leaves_old_or_new_output(
    traces: tuple[di.Trace, di.Trace], tmp_path: Path, name: str
) -> None:
    a, b = traces
    sa, sb = tmp_path / "a.di", tmp_path / "b.di"
    di.save(a, sa)
    di.save(b, sb)
    out = tmp_path / "out" / name
    di.save(a, out)
    heights = {a.events.height, b.events.height}
    rng = random.Random(f"kill-{name}")
    for _ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, str(sa), str(sb), str(out)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert di.load(out).events.height in heights  # the old output or the new one, complete
    di.save(a, out)  # the next writer clears what the killed ones left
    assert di.load(out).events.height == a.events.height
    assert _leftovers(out.parent) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """A 3 MiB tmpfs (root only); skipped with the reason where it cannot be mounted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a small tmpfs to fill: {done.stderr.strip() or 'mount failed'}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("name", FORMATS)
def test_full_disk_keeps_the_old_output(traces: tuple[di.Trace, di.Trace], small_disk: Path, name: str) -> None:
    a, b = traces
    out = small_disk / name
    di.save(a, out)
    before = di.load(out).events.height
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as fh:  # leave less room than the new output needs
        try:
            while True:
                fh.write(b"\1" * 65536)
        except OSError:
            pass
    os.truncate(filler, max(filler.stat().st_size - 16384, 0))
    with pytest.raises((OSError, di.DIError)):
        di.save(b, out)
    filler.unlink()
    assert di.load(out).events.height == before
    assert _leftovers(small_disk) == []


def test_otf2_markers_are_part_of_the_archive(
    traces: tuple[di.Trace, di.Trace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from di.cli import main

    monkeypatch.chdir(tmp_path)
    di.save(traces[0], "src.di")
    assert main(["convert", "src.di", "-o", "x.otf2"]) == 0  # with the analysis: markers
    assert (tmp_path / "x.marker").is_file()
    di.save(traces[1], "x.otf2")  # the program's events only: no markers, and none left behind
    assert not (tmp_path / "x.marker").exists() and di.load("x.otf2").events.height == traces[1].events.height
    assert _leftovers(tmp_path) == []


def test_a_recording_is_never_replaced_by_a_conversion(traces: tuple[di.Trace, di.Trace], tmp_path: Path) -> None:
    """Its raw/ shards cannot be made again: only `di record --ingest` (which keeps them) rewrites a recording."""
    from di.store import write_store

    run = tmp_path / "run.di"
    (run / "raw").mkdir(parents=True)
    (run / "raw" / "run.json").write_text("{}")
    (run / "raw" / "mpi-0.bin").write_bytes(b"shard")
    with pytest.raises(OutputError, match="is a di recording"):
        di.save(traces[0], run)
    assert (run / "raw" / "mpi-0.bin").read_bytes() == b"shard"
    write_store(traces[0], run, keep=("raw",))  # what ingest does
    assert (run / "raw" / "mpi-0.bin").read_bytes() == b"shard" and (run / "meta.json").is_file()
    with pytest.raises(OutputError, match="is a di recording"):
        di.save(traces[1], run)
