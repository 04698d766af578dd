"""The schema check of result documents on witness rows (di.document_check) agrees with jsonschema on the whole
document: on valid documents of real analyses and diffs, and on each of several hundred with one value, one key
or one row broken somewhere in a long table."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
from diff_jobs import job
from engine_jobs import late_allreduce

import di
from di.document_check import _reduced, _validator, validate_document
from di.engine import analyze
from di.viewers.analysis import to_json
from di.viewers.diff import diff
from di.viewers.diff.document import to_json as diff_json

BAD_VALUES: tuple[Any, ...] = (-1, -0.5, 1.5, 2.0, 1e300, "x", None, True, [], {}, 10**20)


@pytest.fixture(scope="module")
def documents() -> dict[str, tuple[str, dict[str, Any]]]:
    late = late_allreduce(late_rank=3, late_ms=30, ranks=8, steps=2).build()
    gpu = job(steps=3)
    return {
        "late": ("analysis", to_json(analyze(late, per_step=True), inputs=["late.di"])),
        "gpu": ("analysis", to_json(analyze(gpu, per_step=True), inputs=["gpu.di"])),
        "diff": ("diff", diff_json(diff(gpu, job(steps=3, gemm_ms=3.0)), inputs=("a.di", "b.di"))),
    }


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value that is not an object or array."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


def _rows(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every object that is a row of an array."""
    out = []
    if isinstance(value, dict):
        out += [p for k, v in value.items() for p in _rows(v, (*path, k))]
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += ([(*path, i)] if isinstance(v, dict) else []) + _rows(v, (*path, i))
    return out


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path[:-1]:
        doc = doc[p]
    return doc


def _verdicts(family: str, doc: dict[str, Any]) -> tuple[bool, bool]:
    schema, validator = _validator(family)
    return validator.is_valid(_reduced(doc, schema, schema)), validator.is_valid(doc)


@pytest.mark.parametrize("name", ["late", "gpu", "diff"])
def test_valid_documents_pass_and_are_reduced(documents, name: str) -> None:
    family, doc = documents[name]
    schema, _ = _validator(family)
    assert _verdicts(family, doc) == (True, True)
    validate_document(doc, family, "test")
    assert len(_leaves(_reduced(doc, schema, schema))) < len(_leaves(doc)) / 2


@pytest.mark.parametrize("name", ["late", "gpu", "diff"])
def test_one_broken_value_is_found_as_jsonschema_finds_it(documents, name: str) -> None:
    """100 documents, each with one leaf value replaced (a negative time, a fraction in an integer column, a
    string where a number goes, a null where none is allowed ...): the reduced check and the whole one agree on
    every one, and on a good share of them (over 15) the document is invalid: the mutations reach the constraints."""
    family, doc = documents[name]
    rng = random.Random(16)
    leaves = _leaves(doc)
    invalid = 0
    for _ in range(100):
        path, bad = rng.choice(leaves), rng.choice(BAD_VALUES)
        broken = copy.deepcopy(doc)
        _at(broken, path)[path[-1]] = bad
        reduced, whole = _verdicts(family, broken)
        assert reduced == whole, (path, bad)
        invalid += not whole
    assert invalid > 15


@pytest.mark.parametrize("name", ["late", "gpu", "diff"])
def test_a_row_missing_a_key_or_with_one_more_is_found(documents, name: str) -> None:
    family, doc = documents[name]
    rng = random.Random(7)
    rows = _rows(doc)
    for _ in range(40):
        path = rng.choice(rows)
        broken = copy.deepcopy(doc)
        row = _at(broken, path)[path[-1]]
        if rng.random() < 0.5 and row:
            del row[rng.choice(sorted(row))]
        else:
            row["unexpected"] = 1
        assert _verdicts(family, broken)[0] == _verdicts(family, broken)[1], path


def test_the_error_names_the_row_that_is_wrong(documents) -> None:
    family, doc = documents["late"]
    broken = copy.deepcopy(doc)
    rank = next(r for r in broken["ranks"] if r["rank"] == 7)
    rank["breakdown"][2]["share"] = 1.5
    where = f"ranks/{broken['ranks'].index(rank)}/breakdown/2/share"
    with pytest.raises(di.SchemaError, match=f"test at {where}: 1.5 is greater than the maximum of 1"):
        validate_document(broken, family, "test")


def test_a_partitioned_store_manifest_is_checked_on_its_witnesses(tmp_path) -> None:
    """meta.json of a store of 40 one-rank groups (arrays of rank lists and of row counts): the reduced check and
    the whole one agree on it and on each of 60 copies with one value broken."""
    import json

    from di.document_check import _reduced
    from di.schema import _meta_validator, json_schema
    from di.store import write_store

    write_store(late_allreduce(ranks=40, steps=2).build(), tmp_path / "p.di", partitioned=True, ranks_per_group=1)
    meta = json.loads((tmp_path / "p.di" / "meta.json").read_text())
    assert len(meta["partitions"]["groups"]) == 40
    schema, validator = json_schema("meta"), _meta_validator()
    reduced = _reduced(meta, schema, schema)
    assert len(_leaves(reduced["partitions"])) < 20 < len(_leaves(meta["partitions"]))
    assert validator.is_valid(reduced) and validator.is_valid(meta)
    rng = random.Random(3)
    leaves = [p for p in _leaves(meta) if p[0] == "partitions"]
    for _ in range(60):
        path, bad = rng.choice(leaves), rng.choice(BAD_VALUES)
        broken = copy.deepcopy(meta)
        _at(broken, path)[path[-1]] = bad
        assert validator.is_valid(_reduced(broken, schema, schema)) == validator.is_valid(broken), (path, bad)
    broken = copy.deepcopy(meta)
    broken["partitions"]["groups"][17] = [17, "x"]
    with pytest.raises(di.SchemaError, match="meta.json at partitions/groups/17/1: 'x' is not of type 'integer'"):
        di.schema.validate_meta(broken)
