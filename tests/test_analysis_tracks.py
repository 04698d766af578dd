"""`di convert --analysis`: the critical path, wait and imbalance tracks in Perfetto's real trace processor."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import OTF2

import di
from di.cli import main
from di.demo import write_kineto_job
from di.engine import Analysis
from di.trace import Trace
from di.viewers.analysis_tracks import TRACK, with_analysis
from tests.trace_processor import WasmTraceProcessor, engine_problem

PATH_SLICES = (
    "select count(*) as n, sum(s.dur) as total from slice s join thread_track tt on s.track_id = tt.id "
    f"join thread th using(utid) where th.name = '{TRACK}'"
)
ERRORS = "select name from stats where value > 0 and severity in ('error', 'data_loss')"


@pytest.fixture(scope="module")
def tp():
    if engine_problem() is not None:
        pytest.skip(engine_problem())
    with WasmTraceProcessor() as engine:
        yield engine


def test_demo_tracks_in_the_trace_processor(tp, tmp_path):
    job = tmp_path / "job"
    write_kineto_job(job, ranks=4, steps=4)
    out = tmp_path / "job.perfetto-trace"
    assert main(["convert", str(job), "--analysis", "-o", str(out)]) == 0
    result = di.analyze(di.load(job), per_step=True)
    tp.reset()
    tp.load(out)
    assert tp.query(ERRORS) == []
    row = tp.query(PATH_SLICES)[0]
    assert row["total"] == result.critical_path["summary"]["length_ns"] > 0
    assert row["n"] == result.critical_path["segments"].filter(pl.col("end_ns") > pl.col("start_ns")).height
    assert (
        tp.scalar("select count(*) from args where key like '%critical_path_ns%'")
        == result.critical_path["events"].height
    )
    # rank 1 is the demo's straggler: it waits least; the wait counter per step equals the wait states
    waits = result.wait_states.filter(pl.col("rank") == 3).group_by("step").agg(pl.col("wait_ns").sum()).sort("step")
    got = tp.query(
        "select c.value as v from counter c join counter_track t on c.track_id = t.id where t.name = 'rank 3 wait' order by c.ts"
    )
    want = {s: w / 1e6 for s, w in waits.iter_rows()}
    steps = sorted(result.steps.filter(pl.col("rank") == 3).get_column("step").to_list())
    assert [r["v"] for r in got] == pytest.approx([want.get(s, 0.0) for s in steps])


def ls_barr_with_analysis() -> tuple[Trace, Analysis, Trace]:
    """casita_4_mpi_ls_barr (its critical path crosses ranks): (trace, its analysis, trace with the analysis tracks)."""
    archive = OTF2 / "casita_4_mpi_ls_barr" / "traces.otf2"
    if not archive.exists():
        pytest.skip("shared test data absent: otf2/casita_4_mpi_ls_barr not found under ../shared/data")
    trace = di.load(archive)
    result = di.analyze(trace)
    return trace, result, with_analysis(trace, result)


def test_cross_rank_path_has_flows(tp, tmp_path):
    trace, result, tracked = ls_barr_with_analysis()
    tracked.validate()
    added = tracked.flows.filter(pl.col("src_cat") == "critical_path")
    ranks = tracked.locations.select("loc", "rank")
    ev = tracked.events.with_row_index("row").join(ranks, on="loc").select(pl.col("row").cast(pl.Int64), "rank")
    hops = added.join(ev, left_on="src", right_on="row").join(ev, left_on="dst", right_on="row", suffix="_dst")
    assert hops.height > 0 and (hops.get_column("rank") != hops.get_column("rank_dst")).all()
    plain = tmp_path / "plain.perfetto-trace"
    di.save(trace, plain)
    tp.reset()
    tp.load(plain)
    flows_before = tp.scalar("select count(*) from flow")
    out = tmp_path / "path.perfetto-trace"
    di.save(tracked, out)
    tp.reset()
    tp.load(out)
    assert tp.query(ERRORS) == []
    assert tp.query(PATH_SLICES)[0]["total"] == result.critical_path["summary"]["length_ns"]
    assert tp.scalar("select count(*) from flow") == flows_before + added.height
    first = json.loads(tracked.events.filter(pl.col("src_cat") == "critical_path").get_column("args")[0])
    assert {"rank", "event", "contrib_ns"} <= set(first)


def test_view_prepares_the_trace_with_the_analysis_tracks(tmp_path):
    from di.viewers.perfetto_ui import cached_trace, prepare_trace

    job = tmp_path / "job"
    write_kineto_job(job, ranks=2, steps=3)
    plain, _ = prepare_trace(job)
    tracked, converted = prepare_trace(job, analysis=True)
    assert converted and tracked == cached_trace(job.resolve(), analysis=True) != plain
    names = set(di.load(tracked).locations.get_column("name").drop_nulls().to_list())
    assert TRACK in names and TRACK not in set(di.load(plain).locations.get_column("name").drop_nulls().to_list())


def test_shared_kineto_job_path_total(tp, tmp_path):
    """hta_trace_filter: 2 ranks with NCCL; its path crosses GPU gaps (a category outside the trace vocabulary)."""
    from conftest import KINETO

    folder = KINETO / "hta_trace_filter"
    if not folder.is_dir():
        pytest.skip("shared test data absent: kineto/hta_trace_filter not found under ../shared/data")
    trace = di.load(folder)
    result = di.analyze(trace, per_step=True)
    tracked = with_analysis(trace, result)
    tracked.validate()
    out = tmp_path / "job.perfetto-trace"
    di.save(tracked, out)
    tp.reset()
    tp.load(out)
    assert tp.query(ERRORS) == []
    assert tp.query(PATH_SLICES)[0]["total"] == result.critical_path["summary"]["length_ns"] > 0
    assert tp.scalar("select count(distinct t.name) from counter_track t where t.name like 'rank % imbalance'") == 2


def test_otf2_for_vampir_carries_the_path_and_the_metrics(tmp_path):
    job = tmp_path / "job"
    write_kineto_job(job, ranks=2, steps=3)
    out = tmp_path / "otf2" / "traces.otf2"
    assert main(["convert", str(job), "--analysis", "-o", str(out)]) == 0
    back = di.load(out)
    result = di.analyze(di.load(job), per_step=True)
    loc = back.locations.filter(pl.col("name") == TRACK).get_column("loc")
    assert loc.len() == 1
    path = back.events.filter(pl.col("loc") == loc[0])
    assert (path.get_column("end_ns") - path.get_column("start_ns")).sum() == result.critical_path["summary"][
        "length_ns"
    ]
    assert {"rank 0 wait", "rank 1 wait", "rank 0 imbalance", "rank 1 imbalance"} <= set(
        back.series.get_column("name").to_list()
    )


def test_the_tracks_need_only_their_analyses(tmp_path):
    """`di convert` runs only NEEDS: the tracks equal those made from every analysis, and overlap is not run."""
    from di.viewers.analysis_tracks import NEEDS

    job = tmp_path / "job"
    write_kineto_job(job, ranks=4, steps=3)
    trace = di.load(job)
    some = di.analyze(trace, per_step=True, analyses=NEEDS)
    assert some.overlap is None and some.critical_path is not None
    full = with_analysis(trace, di.analyze(trace, per_step=True))
    mine = with_analysis(trace, some)
    assert mine.events.height > trace.events.height and mine.series.height > trace.series.height
    assert mine.meta == full.meta
    for name, frame in full.tables().items():
        assert mine.tables()[name].equals(frame), name
