"""The optional id columns (Kineto's ids lifted out of ``args``: ``ext_id``, ``seq``, ...) through OTF2: each is an
INT64 attribute ``di.<column>`` on the Enter of the events that have a value, defined only when the trace has the
column, and reads back into the column; a column the trace lacks stays absent, and ``args`` is unchanged."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import di
from di import schema
from di.convert.otf2 import emit
from di.trace import Trace
from tests.conftest import assert_valid

T0 = 1_700_000_000_000_000_000  # ns since the epoch
LOCATIONS = {
    "loc": [0, 1],
    "rank": [0, 0],
    "host": ["node-a", "node-a"],
    "pid": [4242, 4242],
    "tid": [4242, 7],
    "kind": ["cpu_thread", "gpu_stream"],
    "device": [None, 0],
    "stream": [None, 7],
    "name": ["main", "stream 7"],
    "process": ["python", "python"],
    "source": [0, 0],
}
LIFTED = {  # ev_idx left out: a column the trace lacks
    "ext_id": [11, 12, None, 12, 11, None],
    "seq": [None, 5, None, None, None, None],
    "rf_id": [2**40, None, 3, None, None, -1],
    "py_id": [None, None, 0, None, None, None],
    "py_parent": [None, None, 9, None, None, None],
}


def _events(lifted: dict[str, list[int | None]]) -> dict[str, list[object]]:
    """A step with a launch and a python function on the CPU; on the stream two kernels overlapping without nesting
    (two lanes in OTF2: the events are emitted out of row order)."""
    rows = [
        (0, 0, 1_000, "aten::mm", "compute", '{"Input Dims":[[2,3],[3,4]]}'),
        (0, 100, 200, "cudaLaunchKernel", "cuda_api", None),
        (0, 300, 400, "train.py(12): step", "python", '{"Python module id":0}'),
        (1, 300, 700, "gemm", "kernel", '{"grid":[1,1,1]}'),
        (1, 500, 900, "gemm_2", "kernel", None),
        (1, 950, 950, "marker", "user", None),
    ]
    return {
        "loc": [r[0] for r in rows],
        "start_ns": [T0 + r[1] for r in rows],
        "end_ns": [T0 + r[2] for r in rows],
        "name": [r[3] for r in rows],
        "cat": [r[4] for r in rows],
        "depth": [0, 1, 1, 0, 1, 0],  # as di.nesting nests a partial overlap: under the event it overlaps
        "parent": [None, 0, 0, None, 3, None],
        "corr": [None, 77, None, 77, None, None],
        "instant": [False] * 5 + [True],
        "args": [r[5] for r in rows],
        **lifted,
    }


def _trace(lifted: dict[str, list[int | None]]) -> Trace:
    meta = {"clock": {"unit": "ns", "domain": "unix_epoch"}}
    return assert_valid(Trace.build(meta=meta, locations=LOCATIONS, events=_events(lifted)))


def _round_trip(trace: Trace, path: Path) -> Trace:
    di.save(trace, path)
    return assert_valid(di.load(path))


def test_lifted_ids_come_back_per_event_and_an_absent_column_stays_absent(tmp_path: Path) -> None:
    trace = _trace(LIFTED)
    assert [c for c in trace.events.columns if c in schema.optional_schema("events")] == list(LIFTED)
    back = _round_trip(trace, tmp_path / "t.otf2")
    assert back.events.columns == trace.events.columns  # ev_idx absent; the others in schema order
    assert back.events.equals(trace.events)  # every id, null or not, at its event; args texts unchanged
    assert back.events.get_column("args").to_list() == _events({})["args"]


def test_a_trace_without_them_reads_back_without_them(tmp_path: Path) -> None:
    trace = _trace({})
    back = _round_trip(trace, tmp_path / "t.otf2")
    assert not set(back.events.columns) & set(schema.optional_schema("events"))
    assert back.events.equals(trace.events)


def test_an_all_null_column_is_not_written(tmp_path: Path) -> None:
    trace = _trace({"ext_id": [None] * 6, "seq": LIFTED["seq"]})
    back = _round_trip(trace, tmp_path / "t.otf2")
    assert "ext_id" not in back.events.columns
    assert back.events.equals(trace.events.drop("ext_id"))


def test_one_kernel_specialisation_writes_traces_with_and_without_them(tmp_path: Path) -> None:
    for i, lifted in enumerate(({}, LIFTED, {"seq": LIFTED["seq"]})):
        di.save(_trace(lifted), tmp_path / f"t{i}.otf2")
    assert len(emit.emit_events.signatures) == 1


def test_other_readers_see_the_ids_as_int64_attributes_of_the_enter(tmp_path: Path) -> None:
    otf2 = pytest.importorskip("otf2")
    trace = _trace(LIFTED)
    di.save(trace, tmp_path / "t.otf2")
    got: dict[tuple[str, int], dict[str, int]] = {}
    with otf2.reader.open(str(tmp_path / "t.otf2")) as tr:
        defined = {a.name for a in tr.definitions.attributes}
        for _, ev in tr.events:
            if type(ev).__name__ == "Enter":
                attrs = {a.name: v for a, v in (ev.attributes or {}).items() if a.name.startswith("di.")}
                got[(ev.region.name, ev.time)] = attrs
    assert {f"di.{c}" for c in LIFTED} <= defined and "di.ev_idx" not in defined
    ev = trace.events.with_columns(pl.col("name").cast(pl.String))
    for row in ev.iter_rows(named=True):
        attrs = got[(row["name"], row["start_ns"])]  # unix_epoch: ticks are the ns
        ids = ("corr", *LIFTED)
        assert {k: v for k, v in attrs.items() if k[3:] in ids} == {
            f"di.{c}": row[c] for c in ids if row[c] is not None
        }, row["name"]
