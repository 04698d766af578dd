"""Running ``di analyze`` as a user does, in a fresh process, and reading what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from di.viewers.analysis import validate


def analyze_json(path: Path, out: Path) -> dict[str, Any]:
    """``di analyze PATH --json OUT`` (it must succeed): the document, validated against the schema, read strictly
    (a NaN or Infinity in it fails)."""
    done = subprocess.run(
        [sys.executable, "-m", "di", "analyze", str(path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr

    def no_constant(name: str) -> None:
        raise AssertionError(f"{name} in the analysis JSON")

    doc = json.loads(out.read_text(), parse_constant=no_constant)
    validate(doc)
    return doc


def analyze_text(path: Path) -> str:
    """What ``di analyze PATH`` prints."""
    done = subprocess.run(
        [sys.executable, "-m", "di", "analyze", str(path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


MPIEXEC = Path(sys.executable).parent / "mpiexec"
"""The mpich wheel's mpiexec (tests that need it skip without it)."""


def one_and_many(trace: Any, tmp: Path, processes: int, ranks_per_group: int, *extra: str) -> tuple[dict, dict]:
    """The analysis JSON of ``trace`` from one process (a single-file store) and from ``mpiexec -n processes`` (a
    store partitioned ``ranks_per_group`` ranks a group); ``extra``: more ``di analyze`` options."""
    from di.store import write_store

    single, parted = tmp / "single.di", tmp / "parted.di"
    write_store(trace, single)
    write_store(trace, parted, partitioned=True, ranks_per_group=ranks_per_group)
    docs = []
    for store, n in ((single, None), (parted, processes)):
        out = tmp / f"{n}.json"
        cmd = [sys.executable, "-m", "di", "analyze", str(store), "--json", str(out), *extra]
        cmd = cmd if n is None else [str(MPIEXEC), "-n", str(n), *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        docs.append(json.loads(out.read_text()))
    return docs[0], docs[1]


def run_di(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """``di ARGS`` in a fresh process in ``cwd``, on a terminal ``columns`` wide (its output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "di", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(columns)},
    )


def analyze_outputs(files: list[Path], tmp: Path) -> tuple[str, dict[str, Any], Path]:
    """``di analyze FILES --json --csv`` on an 80-column terminal (it must succeed): what it printed, the JSON
    document and the CSV folder."""
    done = run_di("analyze", *map(str, files), "--json", str(tmp / "a.json"), "--csv", str(tmp / "csv"), cwd=tmp)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads((tmp / "a.json").read_text()), tmp / "csv"
