"""The optional events columns lifted out of ``args`` (Kineto's ids: ``ext_id``, ``seq``, ...) through Perfetto:
written as integer debug annotations named by their args keys, read back into their columns, not into ``args``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import di
from di.nesting import nest
from di.schema import optional_schema
from di.trace import Trace

pb = pytest.importorskip(
    "perfetto.protos.perfetto.trace.perfetto_trace_pb2", reason="the perfetto package is not installed"
)
BEGIN, END, INSTANT = 1, 2, 3


def _trace(n: int = 8, **lifted: list[int | None]) -> Trace:
    """n events on two CPU threads (nested pairs, every fourth an instant), every third with args; ``lifted``:
    optional id columns by name, cycled over the events."""
    locs = pl.DataFrame({"loc": [0, 1], "rank": [0, 0], "kind": ["cpu_thread"] * 2, "tid": [10, 11], "source": [0, 0]})
    k = np.arange(n)
    start = (k // 2) * 1_000 + (k % 2) * 100
    ev = pl.DataFrame(
        {
            "loc": (k >= n // 2).astype(np.int64),
            "start_ns": start,
            "end_ns": np.where(k % 4 == 3, start, start + 500 - (k % 2) * 300),
            "name": [f"op{i % 5}" for i in range(n)],
            "cat": ["compute"] * n,
            "instant": k % 4 == 3,
            "args": [f'{{"i":{i}}}' if i % 3 == 0 else None for i in range(n)],
            **{
                col: pl.Series([values[i % len(values)] for i in range(n)], dtype=pl.Int64)
                for col, values in lifted.items()
            },
        }
    ).sort(["loc", "start_ns", "end_ns"], descending=[False, False, True], maintain_order=True)
    depth, parent = nest(*(ev.get_column(c).to_numpy().astype(np.int64) for c in ("loc", "start_ns", "end_ns")))
    ev = ev.with_columns(depth=pl.Series(depth), parent=pl.Series(parent).replace(-1, None))
    return Trace.build(meta={}, locations=locs, events=ev)


def _round_trip(trace: Trace, path: Path) -> Trace:
    di.save(trace, path)
    back = di.load(path)
    back.validate()
    return back


IDS = {
    "ext_id": [7, None, -3, 2**62, None],
    "seq": [None, 1, None],
    "ev_idx": [0, 1, 2, 3],
    "rf_id": [None, None, 1 << 40],
    "py_parent": [5, None],
}
"""Some values null, one column (``py_id``) absent; negative and wide values."""


def test_lifted_ids_come_back_per_event(tmp_path: Path) -> None:
    trace = _trace(**IDS)
    back = _round_trip(trace, tmp_path / "t.pftrace")
    assert back.events.columns == trace.events.columns and "py_id" not in back.events.columns
    for col in trace.events.columns:  # the round trip keeps the rows in order
        assert back.events.get_column(col).equals(trace.events.get_column(col)), col
    assert back.events.get_column("args").null_count() == trace.events.get_column("args").null_count() > 0


def test_without_lifted_ids_no_column_comes_back(tmp_path: Path) -> None:
    back = _round_trip(_trace(), tmp_path / "t.pftrace")
    assert not set(optional_schema("events")) & set(back.events.columns)
    all_null = _trace(ext_id=[None])
    assert "ext_id" in all_null.events.columns
    assert "ext_id" not in _round_trip(all_null, tmp_path / "n.pftrace").events.columns


def test_one_kernel_specialisation_with_and_without_lifted_ids(tmp_path: Path) -> None:
    from di.convert.perfetto import encode

    di.save(_trace(), tmp_path / "a.pftrace")
    di.save(_trace(**IDS), tmp_path / "b.pftrace")
    di.save(_trace(seq=[1]), tmp_path / "c.pftrace")
    assert len(encode.encode_events.signatures) == 1


def test_lifted_ids_span_several_write_buffers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from di.convert.perfetto import writer

    monkeypatch.setattr(writer, "BUFFER_BYTES", 4096)
    trace = _trace(3_000, **IDS)
    back = _round_trip(trace, tmp_path / "t.pftrace")
    for col in IDS:
        assert back.events.get_column(col).equals(trace.events.get_column(col)), col


def test_written_as_integer_annotations_on_begin_packets(tmp_path: Path) -> None:
    """Each id is an int_value annotation of its BEGIN (or INSTANT) packet, its name interned once per sequence."""
    trace = _trace(**IDS)
    di.save(trace, tmp_path / "t.pftrace")
    parsed = pb.Trace()
    parsed.ParseFromString((tmp_path / "t.pftrace").read_bytes())
    names: dict[int, dict[int, str]] = {}
    found: list[dict[str, int]] = []
    for p in parsed.packet:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & 1:
            names[seq] = {}
        for entry in p.interned_data.debug_annotation_names:
            assert entry.iid not in names[seq]
            names[seq][entry.iid] = entry.name
        anns = {names[seq][a.name_iid]: a for a in p.track_event.debug_annotations}
        if p.track_event.type == END:
            assert not anns
        elif p.track_event.type in (BEGIN, INSTANT):
            found.append({k: a.int_value for k, a in anns.items() if a.HasField("int_value") and k != "bytes"})
    keys = {"ext_id": "External id", "seq": "Sequence number", "ev_idx": "Ev Idx", "rf_id": "Record function id"}
    keys["py_parent"] = "Python parent id"
    want = [
        {keys[c]: v for c, v in row.items() if v is not None} for row in trace.events.select(list(IDS)).rows(named=True)
    ]
    assert sorted(tuple(sorted(d.items())) for d in found) == sorted(tuple(sorted(d.items())) for d in want)


def _foreign() -> bytes:
    """A Perfetto-SDK-shaped trace whose slices carry ids as other producers' integer annotations."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    b = TraceProtoBuilder()

    def packet(ts: int, flags: int = 2):
        p = b.add_packet()
        p.trusted_packet_sequence_id = 3
        p.sequence_flags = flags
        p.timestamp = ts
        p.track_event.track_uuid = 101
        return p

    d = b.add_packet()
    d.trusted_packet_sequence_id = 3
    d.track_descriptor.uuid = 101
    d.track_descriptor.thread.pid = 1
    d.track_descriptor.thread.tid = 2
    p = packet(1_000, flags=1)
    p.interned_data.debug_annotation_names.add(iid=1, name="External id")
    p.track_event.type = BEGIN
    p.track_event.name = "aten::mm"
    p.track_event.debug_annotations.add(name_iid=1, int_value=42)  # interned name
    p.track_event.debug_annotations.add(name="Sequence number", uint_value=9)
    p.track_event.debug_annotations.add(name="Ev Idx", string_value="not an integer")
    p.track_event.debug_annotations.add(name="Python id", uint_value=2**64 - 1)  # past int64: stays in args
    p.track_event.debug_annotations.add(name="batch", int_value=3)
    packet(2_000).track_event.type = END
    p = packet(3_000)
    p.track_event.type = BEGIN
    p.track_event.name = "aten::add"
    p.track_event.debug_annotations.add(name="External id", int_value=43)
    p.track_event.debug_annotations.add(name="External id", int_value=44)  # a key again: the first is the column's
    packet(4_000).track_event.type = END
    p = packet(5_000)
    p.track_event.type = INSTANT
    p.track_event.name = "mark"
    return b.serialize()


def test_foreign_integer_annotations_named_by_args_keys_become_columns(tmp_path: Path) -> None:
    path = tmp_path / "sdk.pftrace"
    path.write_bytes(_foreign())
    t = di.load(path)
    t.validate()
    ev = t.events.sort("start_ns")
    assert ev.get_column("ext_id").to_list() == [42, 43, None]
    assert ev.get_column("seq").to_list() == [9, None, None]
    assert not {"ev_idx", "py_id", "rf_id", "py_parent"} & set(ev.columns)
    assert ev.get_column("args").to_list() == [
        f'{{"Ev Idx":"not an integer","Python id":{2**64 - 1},"batch":3}}',
        '{"External id":44}',
        None,
    ]


def test_perfettos_trace_processor_reads_the_ids_as_slice_args(tmp_path: Path) -> None:
    """Perfetto's own trace processor finds each id as the integer arg ``debug.<key>`` of its slice."""
    from tests.trace_processor import WasmTraceProcessor, engine_problem

    if engine_problem() is not None:
        pytest.skip(engine_problem() or "")
    trace = _trace(**IDS)
    di.save(trace, tmp_path / "t.pftrace")
    with WasmTraceProcessor() as tp:
        tp.load(tmp_path / "t.pftrace")
        rows = tp.query(
            "select s.ts, a.int_value as v from slice s join args a using (arg_set_id) "
            "where a.key = 'debug.External id' order by s.ts, s.depth"
        )
    ev = trace.events.filter(pl.col("ext_id").is_not_null()).sort("start_ns", "depth")
    assert [(r["ts"], r["v"]) for r in rows] == ev.select("start_ns", "ext_id").rows()
