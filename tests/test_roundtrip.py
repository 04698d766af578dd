"""Kineto JSON -> di store -> Chrome JSON -> di keeps every slice, flow and counter exactly."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import di
from tests.conftest import kineto_files

EVENT_COLS = ["loc", "start_ns", "end_ns", "name", "cat", "depth", "parent", "corr", "bytes", "instant", "args"]


def _files() -> list[object]:
    files = kineto_files()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/data is absent"))]
    return [pytest.param(p, id=p.name) for p in files if "_et." not in p.name]


@pytest.mark.parametrize("path", _files())
def test_kineto_store_chrome_round_trip(path: Path, tmp_path: Path) -> None:
    original = di.load(path)
    di.save(original, tmp_path / "a.di")
    stored = di.load(tmp_path / "a.di")
    di.save(stored, tmp_path / "a.json.gz")
    back = di.load(tmp_path / "a.json.gz")
    back.validate()
    for col in EVENT_COLS:
        assert back.events.get_column(col).equals(original.events.get_column(col)), col
    key = ["src", "dst", "kind", "id"]
    assert back.flows.sort(key).select(key).equals(original.flows.sort(key).select(key))
    assert back.samples.equals(original.samples)
    assert back.series.select("name", "unit").equals(original.series.select("name", "unit"))
    assert back.locations.select("loc", "rank", "kind", "device", "stream").equals(
        original.locations.select("loc", "rank", "kind", "device", "stream")
    )


def test_merged_ranks_round_trip(tmp_path: Path) -> None:
    files = [p for p in kineto_files() if p.parent.name == "hta_trace_filter"]
    if len(files) != 2:
        pytest.skip("../shared/data/kineto/hta_trace_filter is absent")
    job = di.load(files)
    di.save(job, tmp_path / "job.json")
    back = di.load(tmp_path / "job.json")
    assert back.ranks == [0, 1]
    assert back.events.select(EVENT_COLS).equals(job.events.select(EVENT_COLS))
    per_rank = back.locations.filter(pl.col("kind") == "gpu_stream").group_by("loc").agg(pl.col("rank").n_unique())
    assert (per_rank.get_column("rank") == 1).all()


def test_merged_job_file_keeps_flows_collectives_and_counter_timelines(tmp_path: Path) -> None:
    """A job di wrote as one Chrome file: correlation ids repeat on every rank, so launch flows stay within
    a rank; each rank keeps its own collectives, matched across ranks; counter-only timelines come back
    once (not also as a per-process counter timeline)."""
    from di.demo import write_kineto_job
    from di.viewers.analysis_tracks import with_analysis

    write_kineto_job(tmp_path / "job", ranks=3, steps=2)
    job = di.load(tmp_path / "job")
    job = with_analysis(job, di.analyze(job, per_step=True))  # adds counter-only timelines (wait, imbalance)
    di.save(job, tmp_path / "job.json")
    back = di.load(tmp_path / "job.json")
    key = ["src", "dst", "kind", "id"]
    assert back.flows.sort(key).select(key).equals(job.flows.sort(key).select(key))
    assert back.collectives.sort("event").equals(job.collectives.sort("event"))
    assert back.locations.select("loc", "rank", "kind", "name", "process").equals(
        job.locations.select("loc", "rank", "kind", "name", "process")
    )
    assert back.series.equals(job.series) and back.samples.equals(job.samples)
