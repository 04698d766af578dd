"""Why the GPUs are idle (di.engine.gpu_idle): a job whose every gap has a known cause, the agreement with the
breakdown's idle time, HolisticTraceAnalysis's figures on shared traces, and the viewers."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from engine_jobs import MS, Job

import di
from di.engine.gpu_idle import CAUSES, KERNEL_WAIT_NS, gpu_idle, longest_gaps
from di.engine.window import prepare

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def known_job(steps: bool = False) -> Job:
    """One rank, one GPU with two streams; each gap built for one cause (times in ms):

    - [10, 12.5): the next kernel's launch starts at 12.1: host 2.1, launch 0.4;
    - [20, 22): the thread sat in cudaStreamSynchronize until 20.05, launched at 21.5: host_sync 1.5, launch 0.5;
    - [30, 30.02): the next kernel was launched at 23: kernel_wait 0.02 (20 us);
    - [40, 45): the next kernel (other stream) was launched at 24: queued 5;
    - [50, 52): a kernel with no launch: unknown 2; [55, 55.01): one more, 10 us: kernel_wait 0.01;
    - [56, 58): a copy without a launch flow inside the host's cudaMemcpy [57, 60]: host 1, launch 1.
    """
    job = Job()
    th, s7, s13 = job.thread(0), job.stream(0, 0, 7), job.stream(0, 0, 13)
    if steps:
        job.ev(th, 0, 21, "ProfilerStep#1", "step")
        job.ev(th, 21, 61, "ProfilerStep#2", "step")

    def launched(op: str, o0: float, l0: float, k0: float, k1: float, stream: int, name: str) -> int:
        job.ev(th, o0, max(l0 + 0.2, o0 + 0.3), op, "compute")
        call = job.ev(th, l0, l0 + 0.1, "cudaLaunchKernel", "cuda_api")
        kernel = job.ev(stream, k0, k1, name, "kernel")
        job.flow(call, kernel)
        return kernel

    launched("aten::mm", 0, 0.1, 0.3, 10, s7, "K1")
    launched("aten::add", 12, 12.1, 12.5, 20, s7, "K2")
    job.ev(th, 13.5, 20.05, "cudaStreamSynchronize", "sync")
    launched("aten::mul", 21, 21.5, 22, 30, s7, "K3")
    launched("aten::relu", 22.9, 23, 30.02, 40, s7, "K4")
    launched("aten::sub", 23.9, 24, 45, 50, s13, "K5")
    job.ev(s7, 52, 55, "K6", "kernel")
    job.ev(s7, 55.01, 56, "K7", "kernel")
    job.ev(th, 57, 60, "cudaMemcpy", "cuda_api")
    job.ev(s7, 58, 59, "Memcpy HtoD (Pageable -> Device)", "memcpy")
    return job


EXPECTED_MS = {
    "host": 2.1 + 1,
    "host_sync": 1.5,
    "launch": 0.4 + 0.5 + 1,
    "kernel_wait": 0.03,
    "queued": 5,
    "unknown": 2,
}
EXPECTED_GAPS = {"host": 2, "host_sync": 1, "launch": 3, "kernel_wait": 2, "queued": 1, "unknown": 1}


def test_every_cause_of_a_known_job() -> None:
    frame = prepare(known_job().build())
    got = gpu_idle(frame)
    assert got.get_column("cause").to_list() == list(CAUSES)
    assert dict(zip(got["cause"], got["time_ns"])) == {c: round(v * MS) for c, v in EXPECTED_MS.items()}
    assert dict(zip(got["cause"], got["gaps"])) == EXPECTED_GAPS
    assert got.get_column("idle_ns").unique().to_list() == [round(13.53 * MS)]
    assert got.get_column("span_ns").unique().to_list() == [round((59 - 0.3) * MS)]
    assert got.get_column("share").sum() == pytest.approx(1.0)
    assert KERNEL_WAIT_NS == 30_000  # the 20 us and 10 us gaps are under it, the others over

    gaps = longest_gaps(frame)
    first = gaps.row(0, named=True)
    assert (first["dur_ns"], first["cause"], first["next"], first["launch"], first["operator"]) == (
        5 * MS,
        "queued",
        "K5",
        "cudaLaunchKernel",
        "aten::sub",
    )
    host = gaps.filter(pl.col("start_ns") == 10 * MS).row(0, named=True)
    assert (host["cause"], host["next"], host["operator"]) == ("host", "K2", "aten::add")
    synced = gaps.filter(pl.col("start_ns") == 20 * MS).row(0, named=True)
    assert (synced["cause"], synced["operator"]) == ("host_sync", "aten::mul")
    copy = gaps.filter(pl.col("start_ns") == 56 * MS).row(0, named=True)
    assert (copy["launch"], copy["operator"]) == ("cudaMemcpy", None)
    assert gaps.filter(pl.col("next") == "K6").get_column("cause").to_list() == ["unknown"]
    assert gaps.get_column("dur_ns").to_list() == sorted(gaps.get_column("dur_ns").to_list(), reverse=True)


def test_no_sync_means_host_and_a_longer_wait_is_not_the_device_overhead() -> None:
    """Without the cudaStreamSynchronize the same gap is the host's; a 20 us gap counts as kernel_wait only under
    the threshold the analysis is given."""
    job = known_job()
    for e in job.events:  # the call stays (flows refer to events by position), as one that does not wait
        if e["name"] == "cudaStreamSynchronize":
            e.update(name="cudaGetDevice", cat="cuda_api")
    frame = prepare(job.build())
    got = dict(zip(*gpu_idle(frame).select("cause", "time_ns").to_dict(as_series=False).values()))
    assert got["host_sync"] == 0 and got["host"] == round((2.1 + 1 + 1.5) * MS)
    tight = dict(
        zip(*gpu_idle(frame, kernel_wait_ns=15_000).select("cause", "time_ns").to_dict(as_series=False).values())
    )
    assert tight["kernel_wait"] == round(0.01 * MS) and tight["queued"] == round(5.02 * MS)


def test_causes_sum_to_the_breakdown_idle_time_whole_and_per_step() -> None:
    trace = known_job(steps=True).build()
    result = di.analyze(trace, per_step=True)
    idle = (
        result.breakdown.filter((pl.col("state") == "idle") & (pl.col("scope") != "host"))
        .select("rank", "scope", "step", pl.col("time_ns").alias("breakdown_idle"))
        .filter(pl.col("breakdown_idle") > 0)
    )
    causes = result.gpu_idle.group_by("rank", "scope", "step").agg(pl.col("time_ns").sum(), pl.col("idle_ns").first())
    both = idle.join(causes, on=["rank", "scope", "step"], how="full", nulls_equal=True, coalesce=True)
    assert both.height == 3  # the window and its two steps
    assert both.get_column("breakdown_idle").to_list() == both.get_column("time_ns").to_list()
    assert both.get_column("idle_ns").to_list() == both.get_column("time_ns").to_list()
    window = result.gpu_idle.filter(pl.col("step").is_null())
    assert dict(zip(window["cause"], window["time_ns"])) == {c: round(v * MS) for c, v in EXPECTED_MS.items()}


def test_the_viewers_show_it(tmp_path: Path) -> None:
    from rich.console import Console

    from di.viewers.analysis import to_json, validate, write_csv
    from di.viewers.terminal import render

    result = di.analyze(known_job().build())
    doc = to_json(result, inputs=["known"])
    validate(doc)
    rows = doc["ranks"][0]["gpu_idle"]
    assert {r["cause"]: r["time_ns"] for r in rows}["queued"] == 5 * MS
    assert doc["gpu_idle_gaps"][0]["next"] == "K5"
    json.dumps(doc, allow_nan=False)
    files = {p.name for p in write_csv(result, tmp_path / "csv")}
    assert {"gpu_idle.csv", "gpu_idle_gaps.csv"} <= files
    assert pl.read_csv(tmp_path / "csv" / "gpu_idle.csv").get_column("time_ns").sum() == round(13.53 * MS)
    out = io.StringIO()
    render(result, Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    assert "Why the GPUs are idle" in text and "Longest GPU idle gaps" in text
    line = next(x for x in text.splitlines() if "gpu0" in x and "13.53" in x)
    assert line.split("│")[-2].strip() == "14.8"  # no launch: 2 of 13.53 ms, the last column not cut at 80 columns
    assert "37.0" in line  # queued: 5 of 13.53 ms


def test_short_names() -> None:
    from di.viewers.terminal import short_name

    assert (
        short_name("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_f16>(Params_68_7)") == "cutlass::Kernel2<…>(…)"
    )
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    assert short_name("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long)") == (
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(…)"
    )
    assert short_name("x" * 100, 10) == "x" * 9 + "…"
    assert short_name(None) == "—"


HTA_HOST_WAIT = {
    # HolisticTraceAnalysis 0.5.0 get_idle_time_breakdown (rank 0, its default 30 us kernel delay): host wait in
    # its integer microseconds and the number of gaps it counted there; no kernel wait or other time on these
    # single-stream traces
    "kineto/hta_amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": (8780, 15),
    "kineto/tracelens_h100_bert_small_with_stack.json.gz": (3653, 60),
}


@pytest.mark.parametrize("name", sorted(HTA_HOST_WAIT))
def test_holistic_trace_analysis_host_wait_on_one_stream(name: str) -> None:
    """On a GPU with one stream, host + host_sync + launch is HTA's host wait and the gaps are its gaps; HTA
    truncates each time to whole microseconds, which moves a gap by less than 2 us."""
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"shared test data absent: {path}")
    got = di.analyze(di.load(path), analyses=("gpu_idle",)).gpu_idle
    by = dict(zip(got["cause"], got["time_ns"]))
    us, gaps = HTA_HOST_WAIT[name]
    host_wait_us = (by["host"] + by["host_sync"] + by["launch"]) / 1000
    assert abs(host_wait_us - us) < 2 * gaps
    assert by["kernel_wait"] == by["queued"] == by["unknown"] == 0
    assert got.filter(pl.col("cause") == "launch").item(0, "gaps") == gaps


def test_nsight_cloverleaf_waits_on_its_syncs() -> None:
    """CloverLeaf's CUDA port synchronizes after its kernels: most of its GPU idle time follows a device wait."""
    path = SHARED / "nsys" / "cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite"
    if not path.exists():
        pytest.skip(f"shared test data absent: {path}")
    result = di.analyze(di.load(path), analyses=("breakdown", "gpu_idle"))
    got = result.gpu_idle
    top = got.sort("time_ns", descending=True).row(0, named=True)
    assert top["cause"] == "host_sync" and top["share"] > 0.5
    idle = result.breakdown.filter((pl.col("scope") == "gpu0") & (pl.col("state") == "idle")).item(0, "time_ns")
    assert got.get_column("time_ns").sum() == idle


def test_report_panel(tmp_path: Path) -> None:
    trace = known_job().build()
    store = tmp_path / "known.di"
    di.save(trace, store)
    out = tmp_path / "r.html"
    done = subprocess.run(
        [sys.executable, "-m", "di", "report", str(store), "-o", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert 'data-table="gpu_idle"' in page and 'data-table="gpu_idle_gaps"' in page
    assert "is idle 23 % of its span, 37 % of it queued" in page


def test_diff_shows_the_causes_that_changed(tmp_path: Path) -> None:
    """B is A without the device wait: the gap after it moves from host_sync to host, the total unchanged."""
    from rich.console import Console

    from di.viewers.diff import diff
    from di.viewers.diff.document import to_json as diff_json, validate as diff_validate
    from di.viewers.diff.results import gpu_idle_totals
    from di.viewers.diff.terminal import render as diff_render

    after = known_job()
    for e in after.events:
        if e["name"] == "cudaStreamSynchronize":
            e.update(name="cudaGetDevice", cat="cuda_api")
    d = diff(known_job().build(), after.build())
    tot = {r["cause"]: r["delta_ns"] for r in gpu_idle_totals(d.gpu_idle).iter_rows(named=True)}
    assert tot["host_sync"] == -round(1.5 * MS) and tot["host"] == round(1.5 * MS)
    assert sum(tot.values()) == 0
    doc = diff_json(d, inputs=("a", "b"))
    diff_validate(doc)
    assert {r["cause"] for r in doc["gpu_idle"]} == set(CAUSES)
    out = io.StringIO()
    diff_render(d, Console(file=out, width=100, color_system=None), names=("a", "b"))
    assert "Why the GPUs are idle" in out.getvalue() and "-1.50" in out.getvalue()


def test_analysis_track_per_gpu_survives_a_round_trip(tmp_path: Path) -> None:
    """The longest gaps become a timeline per GPU in the viewers' trace; reading the file back, the analysis
    parts come out whole and the program's trace is as it was."""
    from di.analysis_parts import PROCESS, without_analysis
    from di.viewers.analysis_tracks import GPU_IDLE_TRACK, NEEDS, with_analysis

    trace = known_job().build()
    shown = with_analysis(trace, di.analyze(trace, per_step=True, analyses=NEEDS))
    out = tmp_path / "known.pftrace"
    di.save(shown, out)
    back = di.load(out)
    locs = back.locations.filter(pl.col("process") == PROCESS)
    track = locs.filter(pl.col("name") == f"{GPU_IDLE_TRACK} gpu0")
    assert track.height == 1
    slices = back.events.filter(pl.col("loc") == track.item(0, "loc")).sort("start_ns")
    assert slices.height == 7  # every gap of the job
    assert slices.filter(pl.col("start_ns") == 40 * MS).item(0, "name") == "GPU idle: queued"
    assert (slices.get_column("end_ns") - slices.get_column("start_ns")).sum() == round(13.53 * MS)
    assert json.loads(slices.filter(pl.col("start_ns") == 10 * MS).item(0, "args"))["operator"] == "aten::add"
    assert without_analysis(back).events.height == trace.events.height


def test_the_work_after_a_gap_is_the_one_launched_first() -> None:
    """Of the works that start where a gap ends, the one whose launch started first; launched ones before the
    others; among unlaunched ones the lowest row. Checked on rows stored out of time order, in two groups."""
    import numpy as np

    from di.engine.gpu_idle import _next_work

    #                  row: 0   1   2   3   4   5   6   7   8  9
    start = np.array([50, 10, 10, 10, 0, 10, 10, 0, 3, 5], np.int64)
    group = np.array([0, 0, 0, 0, 0, 1, 1, 1, -1, -1], np.int64)
    launch = np.array([-1, -1, 9, 8, -1, -1, -1, -1, -1, -1], np.int64)
    rows = np.arange(8, dtype=np.int64)
    got = _next_work(np.array([0, 0, 1]), np.array([10, 50, 10]), rows, group, start, launch)
    assert got.tolist() == [3, 0, 5]  # launched at 3 beats launched at 5 and unlaunched row 1; row 5 before row 6
    launch[3] = -1
    assert _next_work(np.array([0]), np.array([10]), rows, group, start, launch).tolist() == [2]
