"""Every CLI command against every fault of its environment: one line on stderr, exit code 2,
nothing of the user's lost; an internal error is one line naming the log with its traceback.

Faults on an output: a read-only file system, a full disk, a path under a file (not a
directory), a path that exists and is not di's, a file path that is an empty folder.
Faults on an input: a path that does not exist. The commands run in this process
(``di.cli.main``), which is the whole CLI but the interpreter; one bug and one full
disk also run as a real ``di`` process.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import di
from di.cli import EXIT_BUG, EXIT_INPUT, main

OUTPUT_FAULTS = ["read_only", "full_disk", "under_a_file", "not_di", "folder_for_file"]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from di.demo import write_kineto_job

    folder = tmp_path_factory.mktemp("job") / "k"
    write_kineto_job(folder, ranks=2, steps=2)
    return folder


def _mount(where: Path, *options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(("size=2m", *options)), "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs for this fault: {done.stderr.strip() or 'mount failed'}")


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    made: list[Path] = []

    def mount(name: str, *options: str) -> Path:
        where = tmp_path / name
        _mount(where, *options)
        made.append(where)
        return where

    yield mount
    for where in reversed(made):
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(disk: Path) -> None:
    with open(disk / "filler", "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\1" * 65536)
        except OSError:
            pass


# command -> (argv with {out} for the output and {job} for the input, is the output a folder)
COMMANDS: dict[str, tuple[list[str], bool]] = {
    "convert-di": (["convert", "{job}", "-o", "{out}.di"], True),
    "convert-chrome": (["convert", "{job}", "-o", "{out}.json.gz"], False),
    "convert-perfetto": (["convert", "{job}", "-o", "{out}.pftrace"], False),
    "convert-otf2": (["convert", "{job}", "-o", "{out}.otf2"], False),
    "analyze-json": (["analyze", "{job}", "--json", "{out}.json"], False),
    "analyze-csv": (["analyze", "{job}", "--csv", "{out}"], True),
    "report": (["report", "{job}", "-o", "{out}.html"], False),
    "diff-json": (["diff", "{job}", "{job}", "--json", "{out}.json"], False),
    "diff-html": (["diff", "{job}", "{job}", "--html", "{out}.html"], False),
    "demo-kineto": (["demo", "--kineto", "--ranks", "2", "--steps", "1", "-o", "{out}"], True),
    "demo": (["demo", "--ranks", "2", "--steps", "1", "-o", "{out}.di"], True),
    "record": (["record", "--io", "-o", "{out}.di", "--", sys.executable, "-c", "pass"], True),
}
SLOW_TO_FILL = {"demo", "record"}  # they would run their job before the disk is found full


def _cases() -> Iterator[tuple[str, str]]:
    for command, (_, folder) in COMMANDS.items():
        for fault in OUTPUT_FAULTS:
            if fault == "full_disk" and command in SLOW_TO_FILL:
                continue
            if fault == "folder_for_file" and folder:
                continue
            yield command, fault


def _argv(command: str, out: str, job: Path) -> list[str]:
    return [a.format(out=out, job=job) for a in COMMANDS[command][0]]


def _one_error_line(err: str, command: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"di {command.split('-')[0]}: error: "), err
    return lines[0]


@pytest.mark.parametrize(("command", "fault"), list(_cases()))
def test_output_fault_is_one_line_and_exit_2(
    command: str, fault: str, job: Path, tmp_path: Path, mounts: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = tmp_path / "work"
    base.mkdir()
    expect = {
        "read_only": "Read-only file system",
        "full_disk": "No space left on device",
        "under_a_file": "Not a directory",
        "not_di": "that di wrote|not a di recording",
        "folder_for_file": "Is a directory",
    }[fault]
    if fault == "read_only":
        out = str(mounts("ro", "ro") / "out")
    elif fault == "full_disk":
        disk = mounts("full")
        _fill(disk)
        out = str(disk / "out")
    elif fault == "under_a_file":
        (base / "file").write_text("user data")
        out = str(base / "file" / "out")
    else:
        out = str(base / "out")
    argv = _argv(command, out, job)
    flag = next(f for f in ("-o", "--json", "--csv", "--html") if f in argv)
    target = Path(argv[argv.index(flag) + 1])
    if fault == "not_di":
        if COMMANDS[command][1]:
            target.mkdir()
            (target / "thesis.txt").write_text("x")
        else:
            target.write_text("user data")
    elif fault == "folder_for_file":
        target.mkdir()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_INPUT, err
    line = _one_error_line(err, command)
    assert re.search(expect, line), line
    if fault == "not_di":
        assert (target / "thesis.txt").read_text() == "x" if target.is_dir() else target.read_text() == "user data"
        assert str(target) in line
    if fault == "under_a_file":
        assert (base / "file").read_text() == "user data"


@pytest.mark.parametrize("command", ["convert", "info", "analyze", "report", "view"])
def test_missing_input_is_one_line_and_exit_2(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.json")
    argv = {
        "convert": ["convert", missing, "-o", str(tmp_path / "x.di")],
        "info": ["info", missing],
        "analyze": ["analyze", missing],
        "report": ["report", missing, "-o", str(tmp_path / "r.html")],
        "view": ["view", missing, "--no-browser"],
    }[command]
    assert main(argv) == EXIT_INPUT
    line = _one_error_line(capsys.readouterr().err, command)
    assert "nope.json" in line
    assert not (tmp_path / "x.di").exists() and not (tmp_path / "r.html").exists()


def test_a_bug_is_one_line_naming_the_log_with_its_traceback(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import di.engine

    def broken(*args: object, **kw: object) -> None:
        raise TypeError("an internal inconsistency")

    monkeypatch.setattr(di.engine, "analyze", broken)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["analyze", str(job)]) == EXIT_BUG
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "internal error (a bug in di, please report it): TypeError: an internal inconsistency" in err
    log = Path(err.strip().rsplit("the traceback is in ", 1)[1])
    assert log.parent == tmp_path / "state" / "di"
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and "in broken" in text and f"command: di analyze {job}" in text


def test_a_bug_log_falls_back_when_the_state_folder_is_unwritable(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import di.engine

    monkeypatch.setattr(di.engine, "analyze", lambda *a, **k: 1 / 0)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "file"))  # not a folder: the temp folder takes the log
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert main(["analyze", str(job)]) == EXIT_BUG
    err = capsys.readouterr().err
    log = Path(err.strip().rsplit("the traceback is in ", 1)[1])
    assert log.parent == tmp_path / "tmp" and "ZeroDivisionError" in log.read_text()


def test_full_disk_in_a_real_process(job: Path, mounts: Callable[..., Path], tmp_path: Path) -> None:
    disk = mounts("full")
    di.save(di.load(job), disk / "x.pftrace")
    before = (disk / "x.pftrace").read_bytes()
    _fill(disk)
    proc = subprocess.run(
        [sys.executable, "-m", "di", "convert", str(job), "-o", str(disk / "x.pftrace")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == EXIT_INPUT, proc.stderr
    line = _one_error_line(proc.stderr, "convert")
    assert "No space left on device" in line
    assert (disk / "x.pftrace").read_bytes() == before
    assert sorted(p.name for p in disk.iterdir()) == ["filler", "x.pftrace"]


def test_a_reader_closing_stdout_early_is_quiet(job: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "di", "info", str(job), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -0` would
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err and "error" not in err, err
