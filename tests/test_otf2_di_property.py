"""An OTF2 archive di wrote reads back as the trace it was: di's archive property (di.convert.otf2.ditrace)
restores the locations (host, pid, tid, device, stream; the lanes of one location merged), the series and
the meta; a damaged property is ignored and said, and the archive reads as any producer's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import di
from di.convert.otf2.ditrace import PROPERTY
from di.convert.restore import RECOMPUTED_META
from di.trace import Trace
from tests.conftest import KINETO, assert_valid

T0 = 1_700_000_000_000_000_000  # ns since the epoch
CLOCK = {
    "unit": "ns",
    "domain": "unix_epoch",
    "sync": "mpi_ping_pong_linear",
    "offsets": {"1": {"offset_ns": -55, "at_ns": 5_000, "drift_ppm": 0.02, "rtt_ns": 1452, "measurements": 2}},
}
LOCATIONS = {
    "loc": [0, 1, 2, 3],
    "rank": [0, 0, 1, 1],
    "host": ["node-a", "node-a", "node-b", "node-b"],
    "pid": [4242, 4242, 5151, 5151],
    "tid": [4242, 7, 5151, 7],
    "kind": ["cpu_thread", "gpu_stream", "cpu_thread", "gpu_stream"],
    "device": [None, 3, None, 5],
    "stream": [None, 7, None, 7],
    "name": ["main", "stream 7", "main", "stream 7"],
    "process": ["python", "python", "python", "python"],
    "source": [0, 0, 0, 0],
}


def _trace() -> Trace:
    """Two ranks; on rank 0's stream two kernels overlap without nesting (two lanes in OTF2); a series on
    rank 0's busy thread (a metric location of its own in OTF2) and one without samples."""
    rows = [
        (0, 0, 1_000, "step", "user"),
        (0, 100, 200, "cudaLaunchKernel", "cuda_api"),
        (1, 300, 700, "gemm", "kernel"),
        (1, 500, 900, "allreduce_kernel", "nccl"),
        (2, 0, 1_200, "step", "user"),
        (3, 400, 800, "gemm", "kernel"),
    ]
    events = {
        "loc": [r[0] for r in rows],
        "start_ns": [T0 + r[1] for r in rows],
        "end_ns": [T0 + r[2] for r in rows],
        "name": [r[3] for r in rows],
        "cat": [r[4] for r in rows],
        "depth": [0, 1, 0, 1, 0, 0],  # as di.nesting nests a partial overlap: under the event it overlaps
        "parent": [None, 0, None, 2, None, None],
        "instant": [False] * len(rows),
    }
    series = {"series": [0, 1], "loc": [0, 0], "name": ["rss", "gpu power"], "unit": ["bytes", "W"]}
    samples = {"series": [0, 0, 0], "ts_ns": [T0 + 10, T0 + 500, T0 + 990], "value": [1e6, 2e6, 1.5e6]}
    meta = {
        "clock": CLOCK,
        "world_size": 2,
        "command": "mpiexec -n 2 python train.py",
        "capture": {"exit_code": 0, "options": {"mpi": True}},
        "hosts": ["node-a", "node-b"],
        "warnings": ["rank 1: 3 records lost"],
    }
    return assert_valid(Trace.build(meta=meta, locations=LOCATIONS, events=events, series=series, samples=samples))


def _kept(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k not in RECOMPUTED_META}


def _same(back: Trace, trace: Trace) -> None:
    for name in ("locations", "events", "messages", "collectives", "series", "samples"):
        assert getattr(back, name).equals(getattr(trace, name)), name
    key = ["src", "dst", "kind", "id"]
    assert back.flows.sort(key).equals(trace.flows.sort(key))
    assert _kept(back.meta) == _kept(trace.meta)


def test_lanes_devices_series_and_meta_come_back(tmp_path: Path) -> None:
    trace = _trace()
    di.save(trace, tmp_path / "t.otf2")
    names = {loc["name"] for loc in _otf2_locations(tmp_path / "t.otf2")}
    assert {"stream 7 lane 1", "main metrics"} <= names  # what OTF2 needs: a lane and a metric location
    back = assert_valid(di.load(tmp_path / "t.otf2"))
    _same(back, trace)
    assert back.meta["clock"]["sync"] == "mpi_ping_pong_linear" and back.meta["capture"]["exit_code"] == 0
    per_device = di.analyze(back, analyses=("breakdown",)).breakdown.filter(pl.col("scope").str.starts_with("gpu"))
    assert set(per_device.get_column("device").drop_nulls().to_list()) == {3, 5}


def test_reading_it_twice_is_the_same(tmp_path: Path) -> None:
    """di -> OTF2 -> di -> OTF2 -> di: the second archive reads back as the first."""
    trace = _trace()
    di.save(trace, tmp_path / "a.otf2")
    di.save(di.load(tmp_path / "a.otf2"), tmp_path / "b.otf2")
    _same(assert_valid(di.load(tmp_path / "b.otf2")), trace)


@pytest.mark.parametrize(
    "name",
    [
        "hta_critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
        "hta_mtia_inference_trace/mtia_inference_rank_0.json.gz",
    ],
)
def test_a_kineto_profile_through_otf2_has_the_same_analysis(name: str, tmp_path: Path) -> None:
    """Real profiles whose streams need lanes in OTF2 (simple_add: 1; MTIA: 10); before the property,
    the lanes read back as streams of their own without device, and the critical path changed."""
    path = KINETO / name
    if not path.exists():
        pytest.skip("../shared/data is absent")
    trace = di.load(path)
    di.save(trace, tmp_path / "k.otf2")
    back = assert_valid(di.load(tmp_path / "k.otf2"))
    assert len(_otf2_locations(tmp_path / "k.otf2")) > trace.locations.height
    _same(back, trace)
    a, b = di.analyze(trace), di.analyze(back)
    for field in ("breakdown", "overlap", "gpu_idle", "flops"):
        assert getattr(b, field).equals(getattr(a, field)), field
    assert b.critical_path["summary"] == a.critical_path["summary"]
    assert b.critical_path["segments"].equals(a.critical_path["segments"])


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (b'"format":"di-otf2"', b'"format":"di-otfX"', "not di-otf2 version 1"),
        (b'"format":"di-otf2"', b'"format":"di-otf\xba"', "not UTF-8 JSON"),  # fuzz: UnicodeDecodeError
        (b'"written":[0,', b'"written":[9,', "written or series name locations it does not define"),
        (b'"kind":["cpu_thread"', b'"kind":["cpu_threaX"', "locations:"),
    ],
)
def test_a_damaged_property_is_ignored_and_said(tmp_path: Path, old: bytes, new: bytes, said: str) -> None:
    trace = _trace()
    di.save(trace, tmp_path / "t.otf2")
    anchor = tmp_path / "t.otf2"
    data = anchor.read_bytes()
    assert data.count(old) == 1
    anchor.write_bytes(data.replace(old, new))
    back = assert_valid(di.load(anchor))
    warning = next(w for w in back.meta["warnings"] if PROPERTY in w)
    assert said in warning and "read as the archive defines them" in warning
    # the archive's own locations: the lane and the metric location are timelines of their own
    assert back.locations.height == len(_otf2_locations(anchor)) and back.events.height == trace.events.height


def test_an_archive_without_the_property_reads_as_before(tmp_path: Path) -> None:
    """Score-P's archives have no such property: their locations are the archive's."""
    from tests.conftest import otf2_archive

    path = otf2_archive("casita_4_mpi_ls_barr")
    trace = di.load(path)
    assert trace.locations.height == len(_otf2_locations(path))
    assert not any(PROPERTY in w for w in trace.meta["warnings"])


def test_a_single_file_keeps_its_meta_and_parts_with_one_clock_keep_it(tmp_path: Path) -> None:
    """di.load of one file keeps the meta its reader restored (clock sync, command, capture); a job of
    files with one and the same clock keeps that clock, files with different ones a plain clock."""
    trace = _trace()
    di.save(trace, tmp_path / "a.pftrace")
    assert _kept(di.load(tmp_path / "a.pftrace").meta) == _kept(trace.meta)
    other = replace(trace, locations=trace.locations.with_columns(pl.col("rank") + 2))
    di.save(other, tmp_path / "b.pftrace")
    job = di.load([tmp_path / "a.pftrace", tmp_path / "b.pftrace"])
    assert job.ranks == [0, 1, 2, 3] and job.meta["clock"] == CLOCK
    unsynced = other.with_meta({**other.meta, "clock": {**CLOCK, "offsets": {}}})
    di.save(unsynced, tmp_path / "c.pftrace")
    job = di.load([tmp_path / "a.pftrace", tmp_path / "c.pftrace"])
    assert job.meta["clock"] == {"unit": "ns", "domain": "unix_epoch", "sync": None}


def _otf2_locations(anchor: Path) -> list[dict[str, Any]]:
    """The archive's own location definitions (the official reader)."""
    import otf2

    with otf2.reader.open(str(anchor)) as reader:
        return [{"name": loc.name, "type": str(loc.type)} for loc in reader.definitions.locations]


def test_two_series_of_one_name_on_one_location_are_said(tmp_path: Path) -> None:
    """OTF2 holds them as one metric member: the archive's series are kept and the property's series said."""
    trace = _trace()
    twice = replace(trace, series=trace.series.with_columns(pl.lit("rss").alias("name")))
    di.save(twice, tmp_path / "t.otf2")
    back = assert_valid(di.load(tmp_path / "t.otf2"))
    assert back.series.get_column("name").to_list() == ["rss"] and back.samples.height == trace.samples.height
    assert any("two series of one name on one location" in w for w in back.meta["warnings"])


def test_two_files_of_one_rank_are_named_by_the_files_given(tmp_path: Path) -> None:
    """The sources di restores name where a trace came from; a rank clash names the files the user gave."""
    from di.errors import FormatError

    trace = replace(_trace(), meta={**_trace().meta, "sources": [{"path": "run/rank-0.json", "format": "kineto"}]})
    di.save(trace, tmp_path / "a.otf2")
    di.save(trace, tmp_path / "b.pftrace")
    with pytest.raises(FormatError, match=r"b\.pftrace.*rank 0 is also in .*a\.otf2"):
        di.load([tmp_path / "a.otf2", tmp_path / "b.pftrace"])
