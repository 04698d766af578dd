"""``import di`` stays light, and the command line answers --version and --help."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

import di
from di import cli

HEAVY = ("numba", "polars", "pyarrow", "orjson", "otf2", "_otf2")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)


def test_import_di_is_light() -> None:
    code = "import sys, di; print(' '.join(m for m in %r if m in sys.modules))" % (HEAVY,)
    proc = run(sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"import di pulled in: {proc.stdout.strip()}"


def test_public_api_is_exported() -> None:
    for name in di.__all__:
        assert getattr(di, name) is not None, name
    assert issubclass(di.FormatError, di.DIError) and issubclass(di.SchemaVersionError, di.DIError)


def test_di_version() -> None:
    script = Path(sys.executable).with_name("di")
    if not script.exists():
        pytest.skip("the 'di' console script is not installed beside this Python")
    proc = run(str(script), "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"di {di.__version__}"


def test_python_m_di_help() -> None:
    proc = run(sys.executable, "-m", "di", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: di" in proc.stdout and "example" in proc.stdout
    for command in _subcommands():
        assert command in proc.stdout


def _subcommands() -> list[str]:
    parser = cli._parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


@pytest.mark.parametrize("command", _subcommands())
def test_every_subcommand_help_shows_an_example(command: str) -> None:
    proc = run(sys.executable, "-m", "di", command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"usage: di {command}" in proc.stdout
    assert "example" in proc.stdout and f"di {command} " in proc.stdout.split("example", 1)[1]


def test_no_command_is_a_usage_error() -> None:
    proc = run(sys.executable, "-m", "di")
    assert proc.returncode == 2 and "usage: di" in proc.stderr and "Traceback" not in proc.stderr
