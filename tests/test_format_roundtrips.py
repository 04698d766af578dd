"""Every real trace in ../shared/data, written by di in each format and read back, is the trace it was:
every table equal (flows as a set: their order is the reader's) and the meta, but for what the tables give."""

from __future__ import annotations

from pathlib import Path

import pytest

import di
from di.convert.restore import RECOMPUTED_META
from di.schema import TABLES as SCHEMA_TABLES
from tests.conftest import DATA, kineto_files, otf2_archives

FORMATS = (".di", ".otf2", ".pftrace", ".json.gz")
TABLES = tuple(t for t in SCHEMA_TABLES if t != "flows")  # flows are compared as a set


def _inputs() -> list[object]:
    paths = [
        *(p for p in kineto_files() if "_et." not in p.name),
        *otf2_archives(),
        *sorted((DATA / "nsys").rglob("*.sqlite")),
    ]
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/data is absent"))]
    return [pytest.param(p, id=str(p.relative_to(DATA))) for p in paths]


@pytest.fixture(scope="module", params=_inputs())
def original(request: pytest.FixtureRequest) -> di.Trace:
    return di.load(request.param)


@pytest.mark.parametrize("ext", FORMATS)
def test_written_and_read_back_it_is_the_same_trace(original: di.Trace, ext: str, tmp_path: Path) -> None:
    di.save(original, tmp_path / f"t{ext}")
    back = di.load(tmp_path / f"t{ext}")
    back.validate()
    for name in TABLES:
        assert getattr(back, name).equals(getattr(original, name)), name
    key = ["src", "dst", "kind", "id"]
    assert back.flows.sort(key).equals(original.flows.sort(key))
    kept = {k: v for k, v in original.meta.items() if k not in RECOMPUTED_META}
    assert {k: v for k, v in back.meta.items() if k not in RECOMPUTED_META} == kept
