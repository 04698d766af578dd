"""How the ``di`` command ends: at once after its output is flushed and its ``atexit`` handlers ran
(the interpreter's teardown is skipped, issue 15); a program that calls :func:`di.cli.main` gets it back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO.parent / "shared" / "data" / "kineto" / "hta_trace_filter" / "sampled_rank-0.json.gz"

pytestmark = pytest.mark.skipif(not TRACE.exists(), reason="shared/data not present")

AS_THE_COMMAND = r"""
import atexit, sys
atexit.register(lambda: print("atexit ran", file=sys.stderr))
sys.argv = ["di", *sys.argv[1:]]
from di.cli import main
code = main()
print("main returned", file=sys.stderr)
sys.exit(code)
"""

AS_A_LIBRARY = r"""
import sys
from di.cli import main
code = main(sys.argv[1:])
print(f"main returned {code}", file=sys.stderr)
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_the_command_flushes_its_output_runs_atexit_and_ends_at_once() -> None:
    proc = _run(AS_THE_COMMAND, "info", str(TRACE))
    assert proc.returncode == 0, proc.stderr
    assert "4,811" in proc.stdout  # the whole table came out before the process ended
    assert "atexit ran" in proc.stderr
    assert "main returned" not in proc.stderr  # ended inside main, without the interpreter's teardown


def test_the_command_keeps_its_exit_code(tmp_path: Path) -> None:
    proc = _run(AS_THE_COMMAND, "info", str(tmp_path / "missing.json"))
    assert proc.returncode == 2
    assert "main returned" not in proc.stderr and "atexit ran" in proc.stderr


def test_a_program_calling_main_gets_it_back() -> None:
    proc = _run(AS_A_LIBRARY, "info", str(TRACE))
    assert proc.returncode == 0, proc.stderr
    assert "main returned 0" in proc.stderr and "4,811" in proc.stdout


@pytest.mark.parametrize(("closed", "missing", "code"), [(1, False, 0), (1, True, 2), (2, False, 0), (2, True, 2)])
def test_the_command_keeps_its_exit_code_with_stdout_or_stderr_closed(
    tmp_path: Path, closed: int, missing: bool, code: int
) -> None:
    """``di info x >&-`` (or ``2>&-``): Python's sys.stdout (sys.stderr) is None; the flush before the
    exit raised AttributeError there (a traceback and exit status 1 instead of the command's)."""
    target = str(tmp_path / "missing.json") if missing else str(TRACE)
    proc = subprocess.run(
        [sys.executable, "-m", "di", "info", target],
        stdout=subprocess.PIPE if closed == 2 else None,
        stderr=subprocess.PIPE if closed == 1 else None,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=lambda: os.close(closed),
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in (proc.stderr or "") + (proc.stdout or "")
