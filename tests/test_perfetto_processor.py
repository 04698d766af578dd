"""Perfetto's real trace processor (WebAssembly under Node.js) imports di's protobuf traces.

For every shared trace and a generated 8-rank job with GPU streams, counters
and flows: zero import errors in ``stats``, and the slice, track, counter and
flow counts equal the canonical trace's; slice times and flow ends match too.
Skips with the reason when node or the wasm engine is missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import di
from di.trace import Trace
from tests.perfetto_cases import expected, generated_job, shared_cases
from tests.trace_processor import WasmTraceProcessor, engine_problem

pytestmark = pytest.mark.skipif(engine_problem() is not None, reason=engine_problem() or "")

ERRORS = "select name, idx, severity, source, value from stats where value > 0 and severity in ('error', 'data_loss')"


@pytest.fixture(scope="module")
def tp() -> Iterator[WasmTraceProcessor]:
    with WasmTraceProcessor() as engine:
        yield engine


def _rows(tp: WasmTraceProcessor, sql: str, cols: tuple[str, ...]) -> np.ndarray:
    rows = tp.query(sql)
    return np.array([[r[c] for c in cols] for r in rows], dtype=np.int64).reshape(len(rows), len(cols))


def check_imported(tp: WasmTraceProcessor, trace: Trace, path: Path) -> None:
    """The trace processor's view of ``path`` (di's protobuf of ``trace``) equals the trace."""
    want = expected(trace)
    tp.reset()
    tp.load(path)
    assert tp.query(ERRORS) == []
    assert tp.scalar("select count(*) from slice") == want.slices
    assert tp.scalar("select count(*) from counter") == want.samples
    assert tp.scalar("select count(*) from flow") == want.flows
    data_tracks = "select count(*) from (select track_id from slice union select track_id from counter)"
    assert tp.scalar(data_tracks) == want.data_tracks
    assert tp.scalar("select count(*) from track") == want.data_tracks + want.processes
    assert tp.scalar("select count(*) from process where pid > 0") == want.processes
    times = _rows(tp, "select ts, dur from slice order by ts, dur", ("ts", "dur"))
    assert np.array_equal(times, want.slice_times)
    flows = _rows(
        tp,
        "select o.ts as a, i.ts as b from flow f join slice o on f.slice_out = o.id "
        "join slice i on f.slice_in = i.id order by a, b",
        ("a", "b"),
    )
    assert np.array_equal(flows, want.flow_starts)


@pytest.mark.parametrize("path", shared_cases())
def test_shared_trace_imports_exactly(tp: WasmTraceProcessor, path: Path, tmp_path: Path) -> None:
    trace = di.load(path)
    out = tmp_path / "trace.perfetto-trace"
    di.save(trace, out)
    check_imported(tp, trace, out)


def test_generated_job_with_counters_and_flows_imports_exactly(tp: WasmTraceProcessor, tmp_path: Path) -> None:
    trace = generated_job(tmp_path / "job")
    assert trace.samples.height and trace.messages.height and trace.flows.height and len(trace.ranks) == 8
    out = tmp_path / "job.pftrace"
    di.save(trace, out)
    check_imported(tp, trace, out)
    units = {r["name"]: r["unit"] for r in tp.query("select distinct name, unit from counter_track")}
    assert units == {"GPU power": "W", "GPU utilization": "%", "GPU memory used": "bytes", "NVLink TX": "B/s"}
    names = {r["name"] for r in tp.query("select distinct name from track where name like 'rank % / GPU % / stream %'")}
    assert "rank 3 / GPU 3 / stream 7" in names
    pids = [r["pid"] for r in tp.query("select pid from process where pid > 0 order by pid")]
    assert len(pids) == len(set(pids)) == 8
    interned = tp.query("select count(distinct name) as n from slice")[0]["n"]
    assert interned == trace.events.get_column("name").n_unique()
