"""canonical -> Perfetto protobuf -> canonical keeps every slice, counter sample and flow, with identical ns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import di
from di.schema import polars_schema
from di.trace import Trace
from conftest import trace_doc, write_json
from tests.perfetto_cases import generated_job, shared_cases

EVENT_COLS = list(polars_schema("events"))
FLOW_KEY = ["src", "dst", "kind", "id", "src_cat"]


def assert_same(a: Trace, b: Trace) -> None:
    """Every table of ``b`` equals ``a``'s (flows and samples compared as sets / per series)."""
    for col in EVENT_COLS:
        assert b.events.get_column(col).equals(a.events.get_column(col)), col
    assert b.flows.sort(FLOW_KEY).select(FLOW_KEY).equals(a.flows.sort(FLOW_KEY).select(FLOW_KEY))
    assert b.messages.sort("send", "recv").equals(a.messages.sort("send", "recv"))
    assert b.collectives.equals(a.collectives)
    assert b.samples.equals(a.samples.sort("series", maintain_order=True))
    assert b.series.equals(a.series)
    assert b.locations.equals(a.locations)
    assert b.meta["clock"] == a.meta["clock"] and b.meta["sources"] == a.meta["sources"]


def round_trip(trace: Trace, tmp_path: Path, name: str = "t.perfetto-trace") -> Trace:
    di.save(trace, tmp_path / name)
    back = di.load(tmp_path / name)
    back.validate()
    return back


@pytest.mark.parametrize("path", shared_cases())
def test_shared_trace_round_trip(path: Path, tmp_path: Path) -> None:
    trace = di.load(path)
    assert_same(trace, round_trip(trace, tmp_path))


def test_generated_job_round_trip(tmp_path: Path) -> None:
    trace = generated_job(tmp_path / "job")
    back = round_trip(trace, tmp_path, "job.pftrace")
    assert_same(trace, back)
    assert back.messages.height == trace.messages.height > 0 and back.samples.height == trace.samples.height > 0


def _small(events: list[tuple[int, int, int, str]], **tables: object) -> Trace:
    """A one-rank trace: (loc, start_ns, end_ns, name) events on two CPU threads."""
    locs = pl.DataFrame(
        {"loc": [0, 1], "rank": [0, 0], "kind": ["cpu_thread", "cpu_thread"], "tid": [10, 11], "source": [0, 0]}
    )
    from di.nesting import nest

    ev = (
        pl.DataFrame(events, schema=["loc", "start_ns", "end_ns", "name"], orient="row")
        .with_columns(
            cat=pl.lit("compute"),
            instant=pl.col("start_ns") == pl.col("end_ns"),
        )
        .sort(["loc", "start_ns", "end_ns"], descending=[False, False, True], maintain_order=True)
    )
    depth, parent = nest(*(ev.get_column(c).to_numpy().astype(np.int64) for c in ("loc", "start_ns", "end_ns")))
    ev = ev.with_columns(depth=pl.Series(depth), parent=pl.Series(parent).replace(-1, None))
    return Trace.build(meta={}, locations=locs, events=ev, **tables)  # type: ignore[arg-type]


def test_negative_times_and_overlaps_come_back(tmp_path: Path) -> None:
    t = _small(
        [
            (0, -5_000, 1_000, "a"),
            (0, -4_000, 2_000, "overlaps a"),
            (0, -3_000, -3_000, "instant"),
            (0, 2_000, 2_000, "at a's end"),
            (1, -10, 10, "b"),
        ],
        flows=pl.DataFrame({"src": [1], "dst": [4], "kind": ["user"], "id": [7]}),
    )
    back = round_trip(t, tmp_path)
    assert_same(t, back)
    assert back.events.get_column("start_ns").to_list() == [-5_000, -4_000, -3_000, 2_000, -10]


def test_unsorted_events_are_written_in_canonical_order(tmp_path: Path) -> None:
    t = _small([(0, 0, 100, "a"), (0, 10, 20, "b")], flows=pl.DataFrame({"src": [0], "dst": [1], "kind": ["sync"]}))
    shuffled = Trace(
        **{
            **t.tables(),
            "events": t.events.reverse(),
            "flows": t.flows.with_columns(src=pl.lit(1, pl.Int64), dst=pl.lit(0, pl.Int64)),
        },
        meta=t.meta,
    )
    back = round_trip(shuffled, tmp_path)
    assert back.events.get_column("name").to_list() == ["a", "b"]
    assert back.flows.select("src", "dst", "kind").rows() == [(0, 1, "sync")]


def test_strings_survive_exactly(tmp_path: Path) -> None:
    names = ["ünïcødé ✓", 'quote " and \\ backslash', "tab\tnew\nline", "\x7f"]
    t = _small([(0, i * 10, i * 10 + 5, n) for i, n in enumerate(names)])
    t = Trace(
        **{
            **t.tables(),
            "events": t.events.with_columns(
                args=pl.Series(['{"k": "v"}', None, "{}", '{"x":[1,2.5e300,null]}']),
                corr=pl.Series([None, -3, 2**62, 0]),
                bytes=pl.Series([0, None, 7, 1 << 40]),
                src_cat=pl.Series(["x", None, "cpu_op", "x"]).cast(pl.Categorical),
            ),
        },
        meta=t.meta,
    )
    assert_same(t, round_trip(t, tmp_path))


def test_large_trace_spans_several_buffers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from di.convert.perfetto import writer

    monkeypatch.setattr(writer, "BUFFER_BYTES", 4096)
    n = 2_000
    start = np.arange(n, dtype=np.int64) * 100
    t = _small([(k % 2, int(s), int(s) + 50 + (k % 3) * 100, f"e{k % 7}") for k, s in enumerate(start)])
    assert_same(t, round_trip(t, tmp_path))


def test_more_names_than_the_first_tables_hold(tmp_path: Path) -> None:
    """60,000 distinct event names, past three quarters of the first symbol table (65,536): the decoder grows its
    tables between packets and goes on, without decoding the file again, and every event keeps its name."""
    from di.convert.perfetto.decode import ST_SYMBOLS_FULL, STAT_NAMES, count_packets, decode_packets
    from di.convert.symbols import FIRST_CAPACITY, new_table

    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": f"kernel_{i % 60_000}_{'x' * (i % 7)}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 1,
        }
        for i in range(80_000)
    ]
    trace = di.load(write_json(tmp_path, "names.json", trace_doc(*events)))
    back = round_trip(trace, tmp_path, "names.pftrace")
    assert_same(trace, back)
    buf = np.fromfile(tmp_path / "names.pftrace", dtype=np.uint8)
    stats = np.zeros(len(STAT_NAMES) + 1, dtype=np.int64)
    *_, sym = decode_packets(buf, count_packets(buf)[0], new_table(FIRST_CAPACITY), stats)
    assert stats[ST_SYMBOLS_FULL] == 0 and sym[1].size > FIRST_CAPACITY and sym[3][0] > 60_000
