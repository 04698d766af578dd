"""Training phases (di.engine.phases): Kineto jobs whose data loading, forward, backward, optimizer and the time after
the last backward are known by construction, read through the Kineto reader; Lightning's nesting of the phases; a
rank that names its own forward; the viewers; one process against several."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest
from analyze_cli import MPIEXEC, analyze_outputs, one_and_many, run_di
from report_tables import read_page, run_report, section_hints

import di
from di.engine.phases import PHASES, phases
from di.engine.window import prepare

STEP_US = 10_000
STEPS = 4
DATA_US = {0: 500, 1: 2_500}
"""Each rank's data loading per step: rank 1 waits for its batches (the job's straggler)."""

# per step and phase: host, GPU and GPU-idle time and kernels in µs, counted from the job's construction below
FORWARD = {"host": 100 + 50, "gpu": 300 + 100, "idle": 23, "kernels": 2}
BACKWARD = {"host": 200, "gpu": 600, "idle": 23, "kernels": 1}
OPTIMIZER = {"host": 300 + 20, "gpu": 3 * 10, "idle": 300 + 20 - 3 * 10, "kernels": 3}
OTHER = {"host": 415, "gpu": 0, "idle": 2, "kernels": 0}


def phases_job(rank: int, *, lightning: bool = False, own_forward: bool = False) -> dict:
    """One rank's steps as PyTorch's profiler writes them; thread 1 is the main thread, thread 2 autograd's, stream 7
    the GPU; each launch is a ``cudaLaunchKernel`` with an ``ac2g`` flow to its kernel. Per step, from its start t:

    - ``ProfilerStep#k`` over the step and a ``train.py(30): train_step`` Python frame around the phases
      (containers: neither counts);
    - data: ``enumerate(DataLoader)#...__next__`` for DATA_US[rank], no GPU work;
    - forward (no marker: the work before the backward): ``aten::linear`` [f, f+100) launching a 300 µs kernel at
      f+23 and ``aten::relu`` [f+110, f+160) one of 100 µs queued behind it: host 150, GPU [f+23, f+423) 400, idle
      [f, f+23);
    - backward on thread 2: ``autograd::engine::evaluate_function: AddmmBackward0`` [b, b+200) around
      ``AddmmBackward0`` > ``aten::mm`` launching a 600 µs kernel at b+23: host 200, GPU 600, idle [b, b+23);
    - after the last backward, on thread 1: ``cudaDeviceSynchronize`` [b+210, b+625), the kernel running until b+623:
      other, host 415, idle 2;
    - optimizer: ``Optimizer.step#AdamW.step`` [o, o+300) around ``aten::_foreach_add_`` launching three 10 µs
      kernels, and ``Optimizer.zero_grad#AdamW.zero_grad`` [o+310, o+330): host 320, GPU 30, idle 290.

    ``lightning``: the forward and backward run inside Lightning's ``[LightningModule]Model.optimizer_step``
    [f-5, o+300) under ``[Strategy]SingleDeviceStrategy.training_step`` and ``[Strategy]...backward`` regions on
    thread 1 (the backward's nodes still on thread 2), and the optimizer's own regions as above.
    ``own_forward``: the forward's operators inside a user ``forward`` range [f, f+160).
    """
    pid = 100 + rank
    events: list[dict] = []
    corr = [rank * 1_000_000]

    def region(name: str, t0: float, t1: float, cat: str = "cpu_op", tid: int = 1) -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": t0, "dur": t1 - t0})

    def launch(t: float, start: float, dur: float, tid: int = 1) -> None:
        corr[0] += 1
        c = corr[0]
        region("cudaLaunchKernel", t, t + 2, cat="cuda_runtime", tid=tid)
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"kernel_{dur}",
                "pid": 0,
                "tid": 7,
                "ts": start,
                "dur": dur,
                "args": {"correlation": c, "device": 0, "stream": 7},
            }
        )
        events.append({"ph": "s", "id": c, "pid": pid, "tid": tid, "ts": t, "cat": "ac2g", "name": "ac2g"})
        events.append({"ph": "f", "id": c, "pid": 0, "tid": 7, "ts": start, "cat": "ac2g", "name": "ac2g", "bp": "e"})

    for k in range(STEPS):
        t = 1_000_000 + k * STEP_US
        d = DATA_US[rank]
        f = t + 10 + d + 10
        b = f + 500
        o = b + 700
        region(f"ProfilerStep#{k}", t, t + STEP_US - 1, cat="user_annotation")
        region("train.py(30): train_step", t + 5, o + 340, cat="python_function")
        region("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t + 10, t + 10 + d, "user_annotation")
        if lightning:
            region("[LightningModule]Model.optimizer_step", f - 5, o + 300, cat="user_annotation")
            region("[Strategy]SingleDeviceStrategy.training_step", f - 2, f + 165, cat="user_annotation")
            region("[Strategy]SingleDeviceStrategy.backward", b - 5, b + 205, cat="user_annotation")
        if own_forward:
            region("forward", f, f + 160, cat="user_annotation")
        region("aten::linear", f, f + 100)
        launch(f + 20, f + 23, 300)
        region("aten::relu", f + 110, f + 160)
        launch(f + 120, f + 323, 100)
        region("autograd::engine::evaluate_function: AddmmBackward0", b, b + 200, tid=2)
        region("AddmmBackward0", b + 5, b + 195, tid=2)
        region("aten::mm", b + 10, b + 190, tid=2)
        launch(b + 20, b + 23, 600, tid=2)
        region("cudaDeviceSynchronize", b + 210, b + 625, cat="cuda_runtime")
        region("Optimizer.step#AdamW.step", o, o + 300, cat="user_annotation")
        region("aten::_foreach_add_", o + 10, o + 290)
        for at in (20, 100, 180):
            launch(o + at, o + at + 3, 10)
        region("Optimizer.zero_grad#AdamW.zero_grad", o + 310, o + 330, cat="user_annotation")
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank, "world_size": len(DATA_US)},
        "traceEvents": events,
    }


def write_job(folder: Path, **kw: bool) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for rank in DATA_US:
        path = folder / f"rank{rank}.json"
        path.write_text(json.dumps(phases_job(rank, **kw)))
        files.append(path)
    return files


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_job(tmp_path_factory.mktemp("phases"))


def table_of(files: list[Path], per_step: bool = False) -> pl.DataFrame:
    return phases(prepare(di.load([str(f) for f in files])), per_step=per_step)


def expected(rank: int, steps: int = STEPS) -> dict[str, dict[str, int]]:
    """Per phase, host_ns, gpu_ns, gpu_idle_ns and kernels of ``steps`` of the rank's steps."""
    data = {"host": DATA_US[rank], "gpu": 0, "idle": DATA_US[rank], "kernels": 0}
    per = {"data": data, "forward": FORWARD, "backward": BACKWARD, "optimizer": OPTIMIZER, "other": OTHER}
    us = {"host": 1000, "gpu": 1000, "idle": 1000, "kernels": 1}
    return {p: {k: v * steps * us[k] for k, v in per[p].items()} for p in per}


def measured(table: pl.DataFrame, rank: int, step: int | None = None) -> dict[str, dict[str, int]]:
    rows = table.filter(
        (pl.col("rank") == rank) & (pl.col("step").is_null() if step is None else pl.col("step") == step)
    )
    return {
        r["phase"]: {"host": r["host_ns"], "gpu": r["gpu_ns"], "idle": r["gpu_idle_ns"], "kernels": r["kernels"]}
        for r in rows.iter_rows(named=True)
    }


def test_each_phase_has_the_time_the_job_was_built_with(job: list[Path]) -> None:
    table = table_of(job, per_step=True)
    for rank in DATA_US:
        assert measured(table, rank) == expected(rank)
        for step in range(STEPS):
            assert measured(table, rank, step) == expected(rank, steps=1)
    whole = table.filter(pl.col("step").is_null())
    assert whole.get_column("time_ns").unique().to_list() == [STEPS * (STEP_US - 1) * 1000]
    assert table.get_column("phase").to_list()[:5] == list(PHASES)  # in the order of a step
    rank1 = whole.filter((pl.col("rank") == 1) & (pl.col("phase") == "data")).row(0, named=True)
    assert rank1["host_share"] == pytest.approx(2_500 / (STEP_US - 1))
    assert rank1["gpu_share"] == 0.0


def test_a_window_of_steps_holds_those_steps_only(job: list[Path]) -> None:
    trace = di.load([str(f) for f in job])
    result = di.analyze(trace, window="steps=1:3", analyses=("phases",))
    assert measured(result.phases, 0) == expected(0, steps=2)


def test_per_step_rows_of_a_job_without_steps_are_none_not_an_error(tmp_path: Path) -> None:
    """Ranks with phase markers but no ProfilerStep: the window's rows per rank, no rows per step (the empty per-step
    table, whose columns came in another order, failed to join the window's)."""
    tmp_path.mkdir(exist_ok=True)
    files = []
    for rank in DATA_US:
        job = phases_job(rank)
        job["traceEvents"] = [e for e in job["traceEvents"] if not e["name"].startswith("ProfilerStep#")]
        files.append(tmp_path / f"rank{rank}.json")
        files[-1].write_text(json.dumps(job))
    table = table_of(files, per_step=True)
    assert table.height and table.get_column("step").null_count() == table.height
    assert list(table.columns) == list(table_of(files).columns)
    for rank in DATA_US:  # marked phases as in a stepped job; without steps no forward (the work before a backward)
        got, want = measured(table, rank), expected(rank)
        assert "forward" not in got and {p: got[p] for p in ("data", "backward", "optimizer")} == {
            p: want[p] for p in ("data", "backward", "optimizer")
        }


def test_lightning_optimizer_step_keeps_only_its_own_time(tmp_path: Path) -> None:
    """Lightning's ``optimizer_step`` holds the closure's forward and backward: it keeps the time outside them, and
    the regions' gaps around the operators are their phases' time."""
    table = table_of(write_job(tmp_path, lightning=True))
    got = measured(table, 0)
    opt_step = (300 + 700 + 500 + 5) - (165 + 2) - (200 + 10)  # [f-5, o+300) less training_step and backward regions
    assert got["optimizer"]["host"] == STEPS * 1000 * (opt_step + 20)  # zero_grad lies outside it
    assert got["forward"]["host"] == STEPS * 1000 * (165 + 2)  # training_step [f-2, f+165) holds the operators
    assert got["backward"]["host"] == STEPS * 1000 * (200 + 10)  # the strategy's region [b-5, b+205) holds the node
    assert got["forward"]["gpu"] == STEPS * 1000 * FORWARD["gpu"]
    assert got["backward"]["kernels"] == STEPS * BACKWARD["kernels"]
    assert "other" not in got or got["other"]["host"] == 0  # the synchronization lies inside optimizer_step


def test_a_rank_naming_its_forward_leaves_unmarked_work_to_other(tmp_path: Path) -> None:
    table = table_of(write_job(tmp_path, own_forward=True))
    got = measured(table, 0)
    assert got["forward"]["host"] == STEPS * 1000 * 160
    assert got["forward"]["gpu"] == STEPS * 1000 * FORWARD["gpu"]
    assert got["other"]["host"] == STEPS * 1000 * OTHER["host"]


def test_a_rank_without_gpu_work_has_null_gpu_times(tmp_path: Path) -> None:
    doc = phases_job(0)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("pid") != 0 and e.get("cat") != "ac2g"]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(doc))
    table = table_of([path])
    assert table.get_column("gpu_ns").null_count() == table.height
    assert table.get_column("gpu_idle_ns").null_count() == table.height
    assert measured(table, 0)["data"]["host"] == STEPS * DATA_US[0] * 1000


def test_terminal_json_csv_and_report(job: list[Path], tmp_path: Path) -> None:
    text, doc, csv_dir = analyze_outputs(job, tmp_path)
    ranks = {r["rank"]: r for r in doc["ranks"]}
    data = next(p for p in ranks[1]["phases"] if p["phase"] == "data" and p["step"] is None)
    assert data["gpu_idle_ns"] == STEPS * DATA_US[1] * 1000
    with open(csv_dir / "phases.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {(int(r["rank"]), r["phase"]) for r in rows} == {(r, p) for r in DATA_US for p in PHASES}
    assert "Training phases" in text
    assert "Rank 1's GPUs sat idle 10.00 ms (25.0% of its steps) in its data phase." in text
    page = run_report(job, tmp_path)
    tables, _ = read_page(page)
    row = next(r for r in tables["phases"] if r["rank"] == 1 and r["phase"] == "data")
    assert row["GPU idle (ms)"] == STEPS * DATA_US[1] * 1000
    hints = section_hints(page, "phases")
    assert any("Rank 1" in h and "data phase" in h and "num_workers" in h for h in hints)


def test_the_demo_phases_are_its_regions(tmp_path: Path) -> None:
    """``di demo``'s ranks record only their MPI and I/O calls between forward/backward/optimizer ranges: each
    phase's host time is its ranges', the computation between the calls included."""
    done = run_di("demo", "--ranks", "2", "--steps", "2", "-o", "demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    trace = di.load(str(tmp_path / "demo"))
    table = phases(prepare(trace)).filter(pl.col("step").is_null())
    ev = trace.events
    for rank in table.get_column("rank").unique().to_list():
        locs = trace.locations.filter(pl.col("rank") == rank).get_column("loc")
        for phase in ("forward", "backward"):
            ranges = ev.filter(pl.col("loc").is_in(locs.implode()) & (pl.col("name").cast(pl.String) == phase))
            want = (ranges.get_column("end_ns") - ranges.get_column("start_ns")).sum()
            got = table.filter((pl.col("rank") == rank) & (pl.col("phase") == phase)).get_column("host_ns").item()
            assert got == want > 0


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec of the mpich wheel absent")
def test_under_mpiexec_the_same_answer(job: list[Path], tmp_path: Path) -> None:
    """Each process reads its ranks of a partitioned store; the rows equal one process's."""
    one, many = one_and_many(di.load([str(f) for f in job]), tmp_path, 2, 1, "--steps")
    assert [r["phases"] for r in one["ranks"]] == [r["phases"] for r in many["ranks"]]
    assert all(len(r["phases"]) == len(PHASES) * (STEPS + 1) for r in one["ranks"])


def test_batch_table_has_each_phases_time(job: list[Path]) -> None:
    from di.viewers.batch import rank_rows

    rows = {r["rank"]: r for r in rank_rows("job", di.analyze(di.load([str(f) for f in job]))).iter_rows(named=True)}
    for rank in DATA_US:
        want = expected(rank)
        for phase in PHASES:
            assert rows[rank][f"phase_{phase}_ns"] == want[phase]["host"]
            assert rows[rank][f"phase_{phase}_gpu_idle_ns"] == want[phase]["idle"]


def test_batch_table_leaves_unknown_phases_null(tmp_path: Path) -> None:
    """A rank without any phase marker has no phase times (null, not 0)."""
    from di.viewers.batch import rank_rows

    doc = phases_job(0)
    marks = ("enumerate(", "autograd::", "Optimizer.")  # the job's markers; its steps stay
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith(marks)]
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(doc))
    result = di.analyze(di.load(path))
    assert result.phases is not None and result.phases.height == 0
    row = rank_rows("plain", result).row(0, named=True)
    assert all(row[f"phase_{p}_ns"] is None for p in PHASES)


def test_dashboard_summary_has_the_slowest_ranks_data_wait(job: list[Path]) -> None:
    from di.viewers.dashboard.summary import data_wait_share

    result = di.analyze(di.load([str(f) for f in job]))
    assert data_wait_share(result) == pytest.approx(DATA_US[1] / (STEP_US - 1))
    assert data_wait_share(di.analyze(di.load(job[0]))) == pytest.approx(DATA_US[0] / (STEP_US - 1))


def test_report_names_the_rank_whose_phase_is_longer_than_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three ranks, one loading data five times longer: the report says where its extra time is."""
    monkeypatch.setitem(DATA_US, 2, 500)
    page = run_report(write_job(tmp_path / "three"), tmp_path)
    hints = section_hints(page, "phases")
    want = "Rank 1 spends 25.0% of its steps in its data phase against a median of 5.0% over the ranks"
    assert any(want in h for h in hints), hints
