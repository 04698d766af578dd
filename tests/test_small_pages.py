"""numpy's huge-page advice is off inside di.load, di.save and di.analyze, and restored after (issue 16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import di
from di import process


def test_load_save_and_analyze_run_in_small_pages_and_restore_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from di.convert import registry
    from di.demo import write_kineto_job

    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    write_kineto_job(tmp_path / "job", ranks=2, steps=2)
    seen: list[bool] = []

    def advice() -> bool:
        before = process._huge_pages(False)  # reads the setting, then puts it back
        process._huge_pages(before)
        return before

    load, save = registry.load_paths, registry.save_path

    def watched_load(*a: Any, **k: Any) -> Any:
        seen.append(advice())
        return load(*a, **k)

    def watched_save(*a: Any, **k: Any) -> Any:
        seen.append(advice())
        return save(*a, **k)

    monkeypatch.setattr(registry, "load_paths", watched_load)
    monkeypatch.setattr(registry, "save_path", watched_save)
    for initially in (True, False):
        process._huge_pages(initially)
        try:
            trace = di.load(tmp_path / "job")
            di.save(trace, tmp_path / "job.di", force=True)
            with process.small_pages():  # nested: the outer block still holds it off
                di.analyze(trace)
                assert advice() is False
            assert advice() is initially
            with pytest.raises(FileNotFoundError):  # a failed call restores it too
                di.load(tmp_path / "missing.json")
            assert advice() is initially
        finally:
            process._huge_pages(True)
    assert len(seen) == 6 and not any(seen)


def test_an_explicit_environment_setting_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    process._huge_pages(True)
    with process.small_pages():
        before = process._huge_pages(True)
    assert before is True
