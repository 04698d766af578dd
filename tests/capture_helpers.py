"""Running real MPI jobs under ``di record`` in tests (small, with timeouts).

MPI comes from the environment: mpiexec and mpicc beside this Python (the
``mpich`` wheel) or on PATH, and mpi4py; tests skip with the reason when absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "programs"
RUN_TIMEOUT_S = 180  # 4 ranks on a shared 2-core machine


def tool(name: str) -> str:
    """An MPI tool beside this Python or on PATH; skips the test when absent."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if not found:
        pytest.skip(f"{name} not found (pip install mpich mpi4py)")
    return found


def need_mpi4py() -> None:
    pytest.importorskip("mpi4py", reason="mpi4py not installed")
    tool("mpiexec")


def env(**extra: str) -> dict[str, str]:
    """The environment for a recorded job: this repo's di first on PYTHONPATH."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [e.get("PYTHONPATH")])])
    e.update(extra)
    return e


def di_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "di", *args]


def run(argv: list[str], cwd: Path, timeout: int = RUN_TIMEOUT_S, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run argv, capturing output; fails the test with the output on a timeout."""
    try:
        return subprocess.run(argv, cwd=cwd, env=env(**extra_env), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"timed out after {timeout} s: {' '.join(argv)}\n{exc.stdout}\n{exc.stderr}")


def record_launcher(
    out: Path, job: list[str], *flags: str, np: int = 4, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    """``di record FLAGS -o out -- mpiexec -n NP JOB``."""
    return run(
        di_cmd("record", *flags, "-o", str(out), "--", tool("mpiexec"), "-n", str(np), *job), out.parent, **extra_env
    )


def record_per_rank(
    out: Path, job: list[str], *flags: str, np: int = 4, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    """``mpiexec -n NP di record FLAGS -o out -- JOB``."""
    return run(
        [tool("mpiexec"), "-n", str(np), *di_cmd("record", *flags, "-o", str(out), "--", *job)], out.parent, **extra_env
    )


def build_c_program(name: str, dest: Path) -> Path:
    """Compile tests/programs/NAME.c with mpicc into dest."""
    exe = dest / name
    subprocess.run([tool("mpicc"), "-O1", "-o", str(exe), str(PROGRAMS / f"{name}.c")], check=True, timeout=120)
    return exe
