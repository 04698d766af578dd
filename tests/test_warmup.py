"""``di warmup``: every task runs in worker processes and the command reports each."""

from __future__ import annotations

import pytest

from di.cli import main
from di.warmup import TASKS, warmup


def test_warmup_runs_every_task_in_dependency_order() -> None:
    seen: list[str] = []
    done = warmup(jobs=2, report=lambda name, s: seen.append(name))
    assert set(done) == set(TASKS) and sorted(seen) == sorted(TASKS)
    for name, (_, deps) in TASKS.items():
        assert all(seen.index(d) < seen.index(name) for d in deps)


def test_the_cli_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["warmup", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "compiling di's kernels into" in out and all(name in out for name in TASKS)
