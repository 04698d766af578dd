"""Shared helpers: where the real test traces live, writing small documents, validation.

Real traces come from ``../shared/data`` next to the repository (see its README);
tests that need them skip when it is absent, so a fresh clone still passes.
Test modules import the plain helpers with ``from conftest import ...``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
"""../shared/data beside the repository (real traces written by other tools)."""

KINETO = DATA / "kineto"
"""PyTorch profiler (Kineto) Chrome-JSON traces; see DATA/README.md."""

OTF2 = DATA / "otf2"
"""Score-P OTF2 archives, one folder each with ``traces.otf2``; see DATA/README.md."""

NO_DATA = f"shared test data absent: {KINETO.name}/ not found under ../shared/data"


def kineto_files() -> list[Path]:
    """Every ``*.json`` / ``*.json.gz`` under ../shared/data/kineto, sorted; [] when absent."""
    if not KINETO.is_dir():
        return []
    return sorted(p for p in KINETO.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


def otf2_archives() -> list[Path]:
    """The anchor file of every archive under ../shared/data/otf2, sorted; [] when absent."""
    return sorted(OTF2.glob("*/traces.otf2")) if OTF2.is_dir() else []


def otf2_archive(name: str) -> Path:
    """One archive's anchor file by folder name; skips the test when it is absent."""
    path = OTF2 / name / "traces.otf2"
    if not path.exists():
        pytest.skip(f"shared test data absent: otf2/{name} not found under ../shared/data")
    return path


def kineto_id(path: Path) -> str:
    """A short test id for a Kineto file: its path under KINETO."""
    return path.relative_to(KINETO).as_posix()


def kineto_file(relative: str) -> Path:
    """One Kineto file by its path under KINETO; skips the test when it is absent."""
    path = KINETO / relative
    if not path.exists():
        pytest.skip(f"{NO_DATA} (needs {relative})")
    return path


def is_execution_trace(path: Path) -> bool:
    """PyTorch *execution* traces (``*_et.json.gz``) are JSON graphs, not Chrome traces."""
    return path.name.endswith(("_et.json", "_et.json.gz"))


def write_json(tmp_path: Path, name: str, obj_or_text: Any, gz: bool = False) -> Path:
    """Write a JSON document (an object, or text / bytes as is) to ``tmp_path / name``.

    With ``gz`` the bytes are gzip-compressed (the name is kept as given).
    """
    if isinstance(obj_or_text, bytes):
        data = obj_or_text
    elif isinstance(obj_or_text, str):
        data = obj_or_text.encode()
    else:
        data = json.dumps(obj_or_text).encode()
    if gz:
        data = gzip.compress(data)
    path = tmp_path / name
    path.write_bytes(data)
    return path


def trace_doc(*events: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A Chrome trace document in object format."""
    return {"traceEvents": list(events), **top}


def assert_valid(trace: Any) -> Any:
    """Validate ``trace`` against the JSON Schemas (raises SchemaError) and return it."""
    trace.validate()
    return trace


@pytest.fixture
def kineto() -> Path:
    """The Kineto data folder; skips when ../shared/data is absent."""
    if not KINETO.is_dir():
        pytest.skip(NO_DATA)
    return KINETO


@pytest.fixture
def load_valid():
    """``di.load`` that validates every trace it returns (tests use it for what they load)."""
    import di

    def load(*args: Any, **kw: Any) -> Any:
        return assert_valid(di.load(*args, **kw))

    return load
