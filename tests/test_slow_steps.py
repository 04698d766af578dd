"""What happened in the slow steps (di.engine.slow_steps), from what a training log says about its steps' phases
(di.convert.logs.training_phases): Megatron's timers, evaluations and checkpoint saves; on the shared logs and on
logs whose answer is known by construction."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from analyze_cli import MPIEXEC, analyze_json, analyze_text, one_and_many
from conftest import DATA

import di
from di.engine.slow_steps import COLUMNS

TRAINING = DATA / "logs" / "training"
MS = 1_000_000


def need(name: str) -> Path:
    path = TRAINING / name
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/training/{name} not found under ../shared/data")
    return path


def megatron_log(slow: dict[int, tuple[float, dict[str, float]]], between: dict[int, list[str]]) -> str:
    """A Megatron log (no timestamps) of ten logged intervals of ten iterations: 100 ms per iteration, timers
    forward 40, backward 50, optimizer 5, batch-generator 5 ms, except ``slow[k]`` = (ms per iteration, timers
    changed) for interval k (1-based); ``between[k]``: lines printed after interval k's lines."""
    out = []
    for k in range(1, 11):
        ms, changed = slow.get(k, (100.0, {}))
        timers = {"forward-compute": 40.0, "backward-compute": 50.0, "optimizer": 5.0, "batch-generator": 5.0} | changed
        out.append(
            f" iteration {10 * k:8d}/    1000 | consumed samples: {40 * k:12d} | elapsed time per iteration (ms): {ms:.1f}"
            " | learning rate: 1.000E-04 | global batch size:     4 | lm loss: 9.000000E+00 | loss scale: 1.0 |"
            " number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
        out.append("time (ms) | " + " | ".join(f"{n}: {v:.2f}" for n, v in timers.items()))
        out.extend(between.get(k, []))
    return "\n".join(out) + "\n"


STALL = {6: (300.0, {"batch-generator": 200.0})}
"""Interval 6 (iteration 60) waits 200 ms per iteration for data."""
SAVE_AND_EVAL = {
    8: [
        " saving checkpoint at iteration       80 to checkpoints/gpt",
        "  successfully saved checkpoint at iteration       80 to checkpoints/gpt",
        "-" * 60,
        " validation loss at iteration 80 | lm loss value: 8.500000E+00 | lm loss PPL: 4.914769E+03 | ",
        "-" * 60,
    ]
}
"""After iteration 80's line: a checkpoint save and an evaluation, which interval 9 (iteration 90) pays for."""


def test_megatron_timers_and_evaluations_on_the_shared_logs() -> None:
    """Every timer of the shared Megatron-DeepSpeed log is a series with its 12 intervals' values at their iteration
    line's step end; the one evaluation is an instant at the end of iteration 100, where the slow interval 110
    begins, and its losses are samples."""
    trace = di.load(need("megatron_deepspeed_ds0.7.3_gpt3moe_nccl2.10.3_2022.log"))
    trace.validate()
    s = trace.samples.join(trace.series.select("series", "name", "unit"), on="series")
    timers = s.filter(pl.col("name").cast(pl.String).str.ends_with("-time"))
    per_name = dict(timers.group_by("name").len().iter_rows())
    assert {n: per_name[n] for n in ("forward-compute-time", "optimizer-time", "batch-generator-time")} == {
        "forward-compute-time": 12,
        "optimizer-time": 12,
        "batch-generator-time": 12,
    }
    assert per_name["load-checkpoint-time"] == 1 and set(timers.get_column("unit")) == {"ms"}
    steps = trace.events.filter(pl.col("cat") == "step").select("name", "start_ns", "end_ns")
    end = dict(steps.select(pl.col("name").cast(pl.String), "end_ns").iter_rows())
    opt = timers.filter(pl.col("name") == "optimizer-time").sort("ts_ns")
    assert opt.row(0, named=True)["value"] == 309.28 and opt.row(0, named=True)["ts_ns"] == end["iteration 10"]
    fwd = timers.filter((pl.col("name") == "forward-compute-time") & (pl.col("value") == 618.09))
    assert fwd.get_column("ts_ns").to_list() == [end["iteration 110"]]
    evals = trace.events.filter(pl.col("instant") & (pl.col("name") == "evaluation"))
    assert evals.get_column("start_ns").to_list() == [end["iteration 100"]]
    val = s.filter(pl.col("name").cast(pl.String).is_in(["val_loss", "val_ppl"])).sort("name")
    assert val.get_column("value").to_list() == [9.082474, 8799.707]
    # the TP4PP4 log's pipeline timers and its two evaluations
    tp = di.load(need("megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out"))
    tps = tp.samples.join(tp.series.select("series", "name"), on="series")
    recv = tps.filter(pl.col("name") == "forward-recv-time").sort("ts_ns").get_column("value")
    assert recv.len() == 20 and recv[0] == 527.58
    assert tp.events.filter(pl.col("instant") & (pl.col("name") == "evaluation")).height == 2


def test_the_shared_logs_slow_steps_say_why() -> None:
    """Interval 10 of the Megatron-DeepSpeed log is slow by its first optimizer step (309 ms against 14), interval
    110 by the evaluation it holds (whose forward passes doubled forward-compute); the TP4PP4 log's first interval
    by its pipeline's first receive."""
    result = di.analyze(di.load(need("megatron_deepspeed_ds0.7.3_gpt3moe_nccl2.10.3_2022.log")))
    rows = {r["step"]: r for r in result.slow_steps.iter_rows(named=True)}
    assert sorted(rows) == [10, 110] and result.slow_steps.schema == pl.Schema(COLUMNS)
    assert rows[10]["marks"] is None and rows[10]["grew"] == "optimizer-time 309.3 ms (median 14.04)"
    assert rows[110]["marks"] == "evaluation"
    assert rows[110]["grew"].startswith("forward-compute-time 618.1 ms (median 308.6)")
    tp = di.analyze(di.load(need("megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out"))).slow_steps
    assert tp.get_column("step").to_list() == [10]
    assert tp.get_column("grew")[0].startswith("forward-recv-time 527.6 ms (median 126.4)")


def test_a_data_stall_and_a_checkpoint_are_told_in_their_steps(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(megatron_log(STALL | {9: (250.0, {})}, SAVE_AND_EVAL))
    trace = di.load(path)
    assert trace.meta["sources"][0]["dropped"] == {"unknown lines (no log family understood them)": 2}  # the rules
    result = di.analyze(trace)
    rows = result.slow_steps.select("step", "duration_ns", "slowdown", "marks", "grew").rows()
    assert rows == [
        (60, 3000 * MS, 2.0, None, "batch-generator-time 200.0 ms (median 5.0)"),
        (90, 2500 * MS, 1.5, "checkpoint save, evaluation", None),
    ]
    st = result.step_times.row(0, named=True)
    assert (st["slow_steps"], st["slowest_step"], st["median_ns"]) == (2, 60, 1000 * MS)
    text = analyze_text(path)
    assert "batch-generator-time" in text and "checkpoint save" in text
    doc = analyze_json(path, tmp_path / "a.json")
    assert [(r["step"], r["marks"], r["grew"]) for r in doc["slow_steps"]] == [(s, m, g) for s, _, _, m, g in rows]
    import subprocess
    import sys

    csv = tmp_path / "csv"
    done = subprocess.run(
        [sys.executable, "-m", "di", "analyze", str(path), "--csv", str(csv)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(csv / "slow_steps.csv").select("step", "marks").rows() == [
        (60, None),
        (90, "checkpoint save, evaluation"),
    ]
    report = tmp_path / "r.html"
    done = subprocess.run(
        [sys.executable, "-m", "di", "report", str(path), "-o", str(report)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    page = report.read_text()
    table = page[page.index('data-table="slow_steps"') :]
    table = table[: table.index("</table>")]
    assert "batch-generator-time 200.0 ms (median 5.0)" in table and "checkpoint save, evaluation" in table


def test_marks_every_step_has_are_not_news_and_no_slow_step_no_rows(tmp_path: Path) -> None:
    """An evaluation after every interval explains nothing; a job without slow steps has no rows."""
    every = {
        k: [f" validation loss at iteration {10 * k} | lm loss value: 8.0 | lm loss PPL: 2980.9 |"] for k in range(10)
    }
    path = tmp_path / "train.log"
    path.write_text(megatron_log(STALL, every))
    rows = di.analyze(di.load(path)).slow_steps
    assert rows.select("step", "marks").rows() == [(60, None)]
    path.write_text(megatron_log({}, {}))
    assert di.analyze(di.load(path)).slow_steps.height == 0


def test_newer_megatron_timers_and_other_producers_marks(tmp_path: Path) -> None:
    """Megatron's (min, max) layout gives the maximum; HF Trainer's evaluation and save lines are marks."""
    path = tmp_path / "train.log"
    text = megatron_log({}, {}).splitlines()
    block = [
        "(min, max) time across ranks (ms):",
        "    forward-backward ...............................: (1083.59, 1083.82)",
        "    batch-generator ................................: (0.91, 1.20)",
    ]
    path.write_text("\n".join([*text[:2], *block, *text[2:]]) + "\n")
    trace = di.load(path)
    s = trace.samples.join(trace.series.select("series", "name"), on="series")
    got = dict(
        s.filter(pl.col("name").is_in(["forward-backward-time", "batch-generator-time"]))
        .group_by("name")
        .agg(pl.col("value").max())
        .iter_rows()
    )
    assert got == {
        "forward-backward-time": 1083.82,
        "batch-generator-time": 5.0,
    }  # 1.20 from the block, 5.0 from the lines
    hf = tmp_path / "hf.log"
    hf.write_text(
        "[INFO|trainer.py:1143] 2021-05-25 06:38:26,284 >> ***** Running training *****\n"
        "{'loss': 3.1, 'learning_rate': 5e-05, 'epoch': 0.1}\n"
        "[INFO|trainer.py:2000] 2021-05-25 06:40:00,000 >> ***** Running Evaluation *****\n"
        "[INFO|trainer.py:1900] 2021-05-25 06:41:00,000 >> Saving model checkpoint to out/checkpoint-500\n"
    )
    marks = di.load(hf).events.filter(pl.col("instant")).sort("start_ns").select("name", "start_ns").rows()
    assert marks == [("evaluation", 1621924800 * 10**9), ("checkpoint save", 1621924860 * 10**9)]


@pytest.mark.skipif(not MPIEXEC.is_file(), reason="mpiexec (the mpich wheel) not installed")
def test_slow_steps_under_mpiexec_equal_one_process(tmp_path: Path) -> None:
    """Two ranks' logs merged, each rank with its own slow steps: two processes give what one does."""
    (tmp_path / "train.rank0.log").write_text(megatron_log(STALL | {9: (250.0, {})}, SAVE_AND_EVAL))
    (tmp_path / "train.rank1.log").write_text(megatron_log({3: (250.0, {"optimizer": 150.0})}, {}))
    trace = di.load([tmp_path / "train.rank0.log", tmp_path / "train.rank1.log"])
    one, many = one_and_many(trace, tmp_path, 2, 1)
    assert one["slow_steps"] == many["slow_steps"]
    assert [(r["rank"], r["step"]) for r in one["slow_steps"]] == [(0, 60), (0, 90), (1, 30)]
    assert one["slow_steps"][2]["grew"] == "optimizer-time 150.0 ms (median 5.0)"
    one, many = one_and_many(late_sender_job().build(), tmp_path / "job", 2, 1)
    assert one["slow_steps"] == many["slow_steps"] and len(one["slow_steps"]) == 2
    assert one["slow_steps"][1]["states"] == "host comm 102.0 ms (median 2.0)"


def test_a_step_slow_by_its_own_work_and_one_that_waited_are_told_apart() -> None:
    """Rank 0 computes 200 ms in step 5 (100 elsewhere) before it sends; rank 1 computes 99 ms and waits in
    MPI_Recv for the rest. Rank 0's slow step grew its host cpu, rank 1's its host comm; the wait states name the
    late sender, and the straggler job's one slow step grew its cpu."""
    from test_engine_step_times import straggler_job

    job = late_sender_job()
    result = di.analyze(job.build())
    rows = {r["rank"]: r for r in result.slow_steps.iter_rows(named=True)}
    assert [(r["rank"], r["step"]) for r in rows.values()] == [(0, 5), (1, 5)]
    assert rows[0]["states"] == "host cpu 200.0 ms (median 100.0)"
    assert rows[1]["states"] == "host comm 102.0 ms (median 2.0)"
    late = result.wait_states.filter(pl.col("kind") == "late_sender")
    assert late.filter(pl.col("wait_ns") > 50 * MS).select("rank", "cause_rank").rows() == [(1, 0)]
    straggler = di.analyze(straggler_job().build()).slow_steps
    assert straggler.select("rank", "step", "states").rows() == [(2, 7, "host cpu 200.0 ms (median 110.0)")]


def late_sender_job():  # noqa: ANN201
    """Two ranks, ten steps: rank 0 computes 100 ms (200 in step 5) then sends; rank 1 computes 99 ms, then receives."""
    from engine_jobs import Job

    job = Job()
    cpu = [job.thread(0), job.thread(1)]
    t = 0.0
    for step in range(10):
        work = 200.0 if step == 5 else 100.0
        send = job.ev(cpu[0], t + work, t + work + 1, "MPI_Send", "mpi_p2p")
        recv = job.ev(cpu[1], t + 99, t + work + 1, "MPI_Recv", "mpi_p2p")
        job.message(send, recv)
        job.ev(cpu[0], t, t + work, "compute", "compute")
        job.ev(cpu[1], t, t + 99, "compute", "compute")
        for rank in (0, 1):
            job.ev(cpu[rank], t, t + work + 1, f"ProfilerStep#{step}", "step")
        t += work + 1
    return job


def test_deepspeed_timers_belong_to_the_step_line_before_them(tmp_path: Path) -> None:
    """DeepSpeed prints ``step=N`` and then its ``time (ms) |`` breakdown, a few ms later by its own timestamp: the
    timers are step N's. Step 6 waits 300 ms for its optimizer step (30 ms in the others)."""
    out, t = [], 0.0
    for step in range(1, 11):
        t += 1.3 if step == 6 else 1.0
        stamp = f"[2023-10-12 10:00:{t:06.3f}".replace(".", ",")
        out.append(
            f"{stamp}] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped=0, lr=[1e-05], mom=[(0.9, 0.95)]"
        )
        late = f"[2023-10-12 10:00:{t + 0.004:06.3f}".replace(".", ",")
        opt = 300.0 if step == 6 else 30.0
        out.append(
            f"{late}] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: 400.00 | "
            f"bwd_microstep: 500.00 | step_microstep: {opt:.2f}"
        )
    path = tmp_path / "ds.log"
    path.write_text("\n".join(out) + "\n")
    trace = di.load(path)
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    s = trace.samples.join(trace.series.select("series", "name"), on="series")
    opt = s.filter(pl.col("name") == "step_microstep-time").sort("ts_ns")
    assert opt.height == 10  # step 1's line opens the first step: its timers sit at that line
    ends = dict(zip(steps.get_column("name").cast(pl.String), steps.get_column("end_ns")))
    assert opt.filter(pl.col("value") == 300.0).get_column("ts_ns").to_list() == [ends["step 6"]]
    rows = di.analyze(trace).slow_steps.select("step", "grew").rows()
    assert rows == [(6, "step_microstep-time 300.0 ms (median 30.0)")]


def test_points_fall_in_their_step_without_pairing_every_point_with_every_step() -> None:
    """300,000 instants over 2,000 steps of one rank (and a rank without steps): each point's step is the one
    np.searchsorted gives, for both closures. A join on the rank with a range filter pairs 600 million rows first."""
    import numpy as np

    from di.engine.slow_steps import _in_steps

    rng = np.random.default_rng(5)
    starts = np.arange(2000, dtype=np.int64) * 1000
    steps = pl.DataFrame(
        {"rank": np.zeros(2000, np.int64), "step": np.arange(2000), "start_ns": starts, "end_ns": starts + 1000}
    )
    t = rng.integers(-500, 2_000_500, 300_000)
    points = pl.DataFrame({"r": np.where(np.arange(t.size) % 10 == 0, 1, 0), "t": t})
    mine = (points.get_column("r") == 0).to_numpy()
    tt = np.sort(t[mine])
    for closed in (False, True):
        got = _in_steps(steps, points, ends_closed=closed).sort("t", "step").get_column("step").to_list()
        if closed:  # step k holds (1000 k, 1000 k + 1000]
            want = (-(-tt // 1000) - 1)[(tt > 0) & (tt <= 2_000_000)]
        else:  # step k holds [1000 k, 1000 k + 1000)
            want = (tt // 1000)[(tt >= 0) & (tt < 2_000_000)]
        assert got == want.tolist(), closed
