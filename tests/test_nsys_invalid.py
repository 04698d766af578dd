"""Bad Nsight Systems input: a one-line FormatError naming the file, never a traceback.

Truncated, corrupt (fuzzed bytes) and non-nsys SQLite files, files that are not
SQLite at all, and ``.nsys-rep`` reports with and without an ``nsys`` binary
(a small fake ``nsys`` that behaves like ``nsys export --type sqlite --output OUT IN``).
"""

from __future__ import annotations

import os
import random
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_valid

import di
from di.errors import FormatError
from tests import nsys_cases as cases


def _one_line_error(path: Path, match: str) -> None:
    with pytest.raises(FormatError, match=match) as info:
        di.load(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "di", *args], capture_output=True, text=True, env=env, check=False)


def test_not_sqlite_and_empty_files(tmp_path: Path) -> None:
    (tmp_path / "text.sqlite").write_text("hello\n")
    _one_line_error(tmp_path / "text.sqlite", "not an SQLite database.*nsys export --type sqlite")
    (tmp_path / "empty.sqlite").write_bytes(b"")
    _one_line_error(tmp_path / "empty.sqlite", "not an SQLite database")


def test_sqlite_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    con = sqlite3.connect(tmp_path / "other.sqlite")
    con.execute("CREATE TABLE t (a INTEGER)")
    con.commit()
    con.close()
    _one_line_error(tmp_path / "other.sqlite", "not an Nsight Systems export")


def test_truncated_exports(tmp_path: Path) -> None:
    full = cases.build(tmp_path / "full.sqlite").read_bytes()
    for cut in (100, 1024, len(full) // 2, len(full) - 512):
        p = tmp_path / f"cut{cut}.sqlite"
        p.write_bytes(full[:cut])
        try:
            assert_valid(di.load(p))  # what SQLite still reads is a valid trace
        except FormatError as exc:
            assert "\n" not in str(exc) and str(p) in str(exc)


def test_fuzzed_exports_load_or_fail_in_one_line(tmp_path: Path) -> None:
    full = bytearray(cases.build(tmp_path / "full.sqlite").read_bytes())
    rng = random.Random(20)
    outcomes = {"loaded": 0, "refused": 0}
    for i in range(40):
        data = bytearray(full)
        for _ in range(rng.choice((1, 8, 64))):
            at = rng.randrange(100, len(data))  # past the header: the page contents
            data[at] = rng.randrange(256)
        p = tmp_path / f"fuzz{i}.sqlite"
        p.write_bytes(bytes(data))
        try:
            assert_valid(di.load(p))
            outcomes["loaded"] += 1
        except FormatError as exc:
            assert "\n" not in str(exc) and str(p) in str(exc)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and outcomes["loaded"] > 0


def test_cli_says_one_line_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "bad.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    done = _cli("info", str(tmp_path / "bad.sqlite"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "bad.sqlite" in done.stderr


def _fake_nsys(folder: Path, works: bool = True) -> Path:
    """An ``nsys`` that 'exports' by copying the SQLite file stored beside the .nsys-rep (REP.sqlite-src)."""
    folder.mkdir()
    script = folder / "nsys"
    body = (
        (
            'out=""; while [ $# -gt 1 ]; do case "$1" in --output) out="$2"; shift 2;; *) shift;; esac; done\n'
            'cp "$1.sqlite-src" "$out"\n'
        )
        if works
        else 'echo "nsys: cannot open report" >&2; exit 1\n'
    )
    script.write_text('#!/bin/sh\n[ "$1" = export ] || exit 3\n' + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder


def test_nsys_rep_is_exported_with_nsys_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "report.3.nsys-rep"
    rep.write_bytes(b"not a real report")
    cases.build(tmp_path / "report.3.nsys-rep.sqlite-src")
    monkeypatch.setenv("PATH", f"{_fake_nsys(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    t = assert_valid(di.load(rep))
    assert t.ranks == [3] and t.events.height > 0
    assert t.meta["sources"][0]["path"] == str(rep)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bin",
        "report.3.nsys-rep",
        "report.3.nsys-rep.sqlite-src",
    ]  # nothing left beside


def test_nsys_rep_without_nsys_says_how_to_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "job.nsys-rep"
    rep.write_bytes(b"x")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    _one_line_error(rep, r"needs the nsys binary.*nsys export --type sqlite --output job\.sqlite job\.nsys-rep")


def test_nsys_rep_whose_export_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rep = tmp_path / "job.nsys-rep"
    rep.write_bytes(b"x")
    monkeypatch.setenv("PATH", f"{_fake_nsys(tmp_path / 'bin', works=False)}{os.pathsep}{os.environ['PATH']}")
    _one_line_error(rep, r"nsys export failed \(exit 1\): nsys: cannot open report")


def test_file_names_with_uri_characters(tmp_path: Path) -> None:
    path = cases.build(tmp_path / "run%20#1?.sqlite")
    assert assert_valid(di.load(path)).events.height > 0
