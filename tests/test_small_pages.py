"""numpy's huge-page advice is off inside di.load, di.save and di.analyze where the host takes back the guest's free
memory, and restored after; elsewhere numpy's own advice holds (issue 16)."""

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
    monkeypatch.setattr(process, "free_memory_reported", lambda: True)
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
    monkeypatch.setattr(process, "free_memory_reported", lambda: True)
    process._huge_pages(True)
    with process.small_pages():
        before = process._huge_pages(True)
    assert before is True


def test_a_machine_that_keeps_its_free_memory_keeps_numpys_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    monkeypatch.setattr(process, "free_memory_reported", lambda: False)
    for initially in (True, False):
        process._huge_pages(initially)
        try:
            with process.small_pages():
                inside = process._huge_pages(initially)
            assert inside is initially
        finally:
            process._huge_pages(True)


def _virtio(root: Path, name: str, device: str, features: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "device").write_text(device + "\n")
    (root / name / "features").write_text(features + "\n")


def test_free_page_reporting_is_read_from_the_virtio_balloons_feature_bits(tmp_path: Path) -> None:
    """A sysfs stand-in: the balloon (device 0x0005) with bit 5 set reports free pages; bit 5 clear, another
    device with bit 5 set, or no virtio bus at all (a machine of its own) do not."""
    bits = "0110010100" + "0" * 118  # bits 1, 2, 5 and 7, as this project's Firecracker VM shows
    reporting = tmp_path / "reporting"
    _virtio(reporting, "virtio1", "0x0002", bits)
    _virtio(reporting, "virtio0", "0x0005", bits)
    assert process.free_memory_reported(reporting)
    without = tmp_path / "without"
    _virtio(without, "virtio0", "0x0005", "0110000100" + "0" * 118)
    _virtio(without, "virtio1", "0x0001", bits)  # a network device: its bit 5 means something else
    assert not process.free_memory_reported(without)
    assert not process.free_memory_reported(tmp_path / "no-virtio-bus")
