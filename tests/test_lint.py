"""The house lint and format (ruff, configured in pyproject.toml) hold on the whole tree, as the README's test command runs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list[str]:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.is_file() else shutil.which("ruff")
    if not found:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    return [found]


def test_ruff_check_finds_nothing() -> None:
    done = subprocess.run(
        [*_ruff(), "check", "--no-cache", "di", "tests", "bench", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tree_is_formatted() -> None:
    done = subprocess.run(
        [*_ruff(), "format", "--check", "di", "tests", "bench", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, "run `ruff format di tests bench examples`:\n" + done.stdout + done.stderr
