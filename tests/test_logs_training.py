"""Training logs: Megatron, DeepSpeed, HF Trainer, torchtitan, JSON Lines, MLPerf, and a failed run.

Hand-built lines whose answer is known by construction, then the real logs of
../shared/data/logs/training (skipped when absent).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

LOGS = DATA / "logs"


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    return path


def series(trace: di.Trace) -> dict[str, tuple[str | None, list[float]]]:
    s = trace.series.join(trace.samples, on="series").sort("series", "ts_ns")
    return {
        name: (g.get_column("unit")[0], g.get_column("value").to_list())
        for (name,), g in s.group_by("name", maintain_order=True)
    }


def load(tmp_path: Path, name: str, text: str) -> di.Trace:
    p = tmp_path / name
    p.write_text(text)
    trace = di.load(p)
    trace.validate()
    return trace


MEGATRON = """\
some launcher chatter
 iteration       10/    1000 | consumed samples:           40 | elapsed time per iteration (ms): 2000.0 | learning rate: 0.000E+00 | global batch size:     4 | loss scale: 8388608.0 |
 iteration       20/    1000 | consumed samples:           80 | elapsed time per iteration (ms): 1000.0 | learning rate: 3.750E-05 | global batch size:     4 | lm loss: 1.203115E+01 | grad norm: 16.999 |
Traceback (most recent call last):
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
"""


def test_megatron_iterations_without_timestamps_and_the_error(tmp_path: Path) -> None:
    trace = load(tmp_path, "train.out", MEGATRON)
    s = series(trace)
    assert s["step_time"] == ("ms", [2000.0, 1000.0])
    assert s["loss"] == (None, [12.03115])  # the first interval printed no loss
    assert s["lr"][1] == [0.0, 3.75e-05] and s["grad_norm"][1] == [16.999]
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    # 10 iterations of 2 s, then 10 of 1 s, back to back from 0
    assert steps.select("name", "start_ns", "end_ns").rows() == [
        ("iteration 10", 0, 20_000_000_000),
        ("iteration 20", 20_000_000_000, 30_000_000_000),
    ]
    errors = trace.events.filter(pl.col("instant") & (pl.col("cat") == "other")).get_column("name").to_list()
    assert "OutOfMemoryError" in errors and "Traceback" in errors
    assert trace.meta["clock"]["domain"] == "relative"
    assert trace.meta["sources"][0]["dropped"] == {"unknown lines (no log family understood them)": 1}


def test_deepspeed_step_lines_with_timestamps_give_timed_steps_and_units(tmp_path: Path) -> None:
    text = "".join(
        f"[2023-04-18 01:46:{s:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={10 * k}, skipped=0, lr=[1e-05, 1e-05], mom=[(0.9, 0.95)]\n"
        f"[2023-04-18 01:46:{s:02d},100] [INFO] [timer.py:199:stop] epoch=0/micro_step={20 * k}/global_step={10 * k}, "
        f"RunningAvgSamplesPerSec=170.5, CurrSamplesPerSec=171.0, MemAllocated=3.96GB, MaxMemAllocated=22.95GB\n"
        for k, s in ((1, 0), (2, 10), (3, 30))
    )
    text += "[2023-04-18 01:46:31,000] [INFO] [loss_scaler.py:181:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step.\n"
    trace = load(tmp_path, "ds.log", "\x1b[32m" + text)
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    s = series(trace)
    assert s["memory_allocated"] == ("GB", [3.96] * 3) and s["samples_per_s"] == ("samples/s", [171.0] * 3)
    assert s["lr"] == (None, [1e-05] * 3)
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    assert steps.get_column("name").to_list() == ["step 20", "step 30"]
    assert (steps.get_column("end_ns") - steps.get_column("start_ns")).to_list() == [10_000_000_000, 20_000_000_000]
    assert trace.events.filter(pl.col("name") == "overflow skip").height == 1


def test_hf_titan_jsonl_and_mllog_lines(tmp_path: Path) -> None:
    hf = (
        "{'loss': 2.5, 'learning_rate': 5e-05, 'epoch': 0.1}\n" * 2
        + "{'train_runtime': 919.1, 'train_samples_per_second': 1.088}\n"
    )
    s = series(load(tmp_path, "hf.out", hf))
    assert s["loss"] == (None, [2.5]) and s["train_runtime"] == ("s", [919.1])  # once per rank printed, once kept
    titan = "".join(
        f"[rank0]:[titan] 2025-01-01 12:00:0{k},000 - root - INFO - \x1b[31mstep: {k}  \x1b[32mloss:  {9 - k}.5  \x1b[33m"
        f"memory: 41.2GiB(52.1%)  tps: 1,234  tflops: 98.7  mfu: 31.6%\x1b[39m\n"
        for k in (1, 2)
    )
    t = load(tmp_path, "titan.log", titan)
    s = series(t)
    assert s["tokens_per_s"] == ("tokens/s", [1234.0, 1234.0]) and s["mfu"] == ("%", [31.6, 31.6])
    assert s["memory"] == ("GiB", [41.2, 41.2]) and s["loss"][1] == [8.5, 7.5]
    assert t.events.filter(pl.col("cat") == "step").get_column("name").to_list() == ["step 2"]
    jl = "".join(json.dumps({"step": k, "loss": 3.0 - k, "tokens_per_second": 100.0 * k}) + "\n" for k in (1, 2, 3))
    s = series(load(tmp_path, "metrics.log", jl))
    assert s["loss"][1] == [2.0, 1.0, 0.0] and s["tokens_per_s"][0] == "tokens/s"
    ml = "".join(
        f':::MLLOG {{"namespace": "", "time_ms": {1000 + 500 * i}, "event_type": "{e}", "key": "{key}", "value": {v}, '
        f'"metadata": {{"file": "t.py", "lineno": 1, "epoch_num": 1}}}}\n'
        for i, (e, key, v) in enumerate(
            (
                ("INTERVAL_START", "epoch_start", "null"),
                ("POINT_IN_TIME", "eval_accuracy", 0.75),
                ("INTERVAL_END", "epoch_stop", "null"),
            )
        )
    )
    t = load(tmp_path, "mlperf.log", ml)
    assert series(t)["eval_accuracy"][1] == [0.75]
    step = t.events.filter(pl.col("cat") == "step")
    assert step.select("name", "start_ns", "end_ns").rows() == [("epoch 1", 1_000_000_000, 2_000_000_000)]


def test_real_megatron_deepspeed_log_has_steps_series_and_nccl() -> None:
    trace = di.load(need("training/megatron_deepspeed_ds0.7.3_gpt3moe_nccl2.10.3_2022.log"))
    trace.validate()
    src = trace.meta["sources"][0]
    assert src["format"] == "log:nccl+training"
    s = series(trace)
    assert s["step_time"][0] == "ms" and len(s["step_time"][1]) >= 10
    assert s["loss"][1][0] == pytest.approx(10.69112)
    assert (
        trace.events.filter(pl.col("cat") == "step")
        .get_column("name")
        .cast(pl.String)
        .str.starts_with("iteration")
        .all()
    )
    assert trace.comms.height > 0 and trace.comm_links.height > 0
    # NCCL's lines take the time of the nearest timestamped line, so both families share the epoch clock
    assert trace.meta["clock"]["domain"] == "unix_epoch" and src["info"]["nccl"]["time"] == "nearest_line_timestamp"
    assert trace.meta["time_range"]["end_ns"] - trace.meta["time_range"]["start_ns"] < 86_400 * 10**9


@pytest.mark.parametrize(
    "name",
    [
        "deepspeed_chat_sft_opt1.3b_2023.log",
        "deepspeed_dpo_ds0.16.2_8gpu_2025.log",
        "deepspeed_chat_rlhf_step3_custom_e2e_2023.log",
        "hf_trainer_deepspeed0.3.17_gpt2_4node_2021.out",
        "megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out",
    ],
)
def test_real_training_logs_load_with_series(name: str) -> None:
    trace = di.load(need(f"training/{name}"))
    trace.validate()
    assert trace.samples.height > 0
    assert trace.meta["sources"][0]["dropped"]["unknown lines (no log family understood them)"] > 0


def test_real_failed_slurm_run_has_its_error() -> None:
    trace = di.load(need("training/megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out"))
    assert "slurmstepd: error" in trace.events.filter(pl.col("instant")).get_column("name").to_list()


def test_a_non_ascii_key_does_not_shift_its_value(tmp_path: Path) -> None:
    """A pair is cut at its ':' by a byte offset: cut by characters, two non-ASCII letters in the key moved the cut
    two characters into the value ("Verlust_öä: 1.5" read 0.5)."""
    trace = load(tmp_path, "titan.log", "step: 10  loss: 2.0000  Verlust_\u00f6\u00e4: 1.5  mem: 3.25GiB\n")
    got = series(trace)
    assert got["loss"][1] == [2.0]
    assert got["verlust"][1] == [1.5]
    assert got["mem"] == ("GiB", [3.25])  # the unit after the value, cut at bytes too


def test_each_shape_of_value_is_read_with_its_unit(tmp_path: Path) -> None:
    """Bare numbers are cast as they are; a value with spaces or '[' before it, a ',' in or after it, or a unit
    after it is cut first: each shape reads its number and unit, whatever its neighbours on the line."""
    text = "".join(
        f"[2023-04-18 01:46:{s:02d},100] [INFO] [timer.py:199:stop] epoch=0/micro_step={2 * k}/global_step={k}, "
        f"RunningAvgSamplesPerSec=1,170.5, CurrSamplesPerSec=inf, MemAllocated=3.96GB, MaxMemAllocated=  22.95GiB, "
        f"e2e_latency={k}.5s, tflops=[98.7, mfu=31.6%, grad_norm=nan\n"
        for k, s in ((10, 0), (20, 10))
    )
    s = series(load(tmp_path, "ds.log", text))
    assert s["samples_per_s_avg"] == ("samples/s", [1170.5, 1170.5])  # a ',' in the number and one after it
    assert s["samples_per_s"] == ("samples/s", [float("inf")] * 2)
    assert s["memory_allocated"] == ("GB", [3.96, 3.96]) and s["memory_allocated_max"] == ("GiB", [22.95, 22.95])
    assert s["step_time"] == ("s", [10.5, 20.5]) and s["tflops"] == ("TFLOP/s", [98.7, 98.7])
    assert s["mfu"] == ("%", [31.6, 31.6]) and s["micro_step"] == (None, [20.0, 40.0])
    assert s["epoch"] == (None, [0.0, 0.0]) and all(v != v for v in s["grad_norm"][1])  # nan
    assert "global_step" not in s  # a step key indexes the samples


def test_rank_tags_kinds_and_repeated_pairs(tmp_path: Path) -> None:
    """A line's rank is its first whole ``[Rank N]`` tag (after a tag that is none, with leading zeros too); a line
    with two kinds' markers is the first kind's (Megatron before DeepSpeed); a pair repeated on lines of two ranks
    (read once per distinct pair) gives a sample on each line, at its own rank and time."""
    text = (
        "[2024-01-01 10:00:00,000] [INFO] [Rank x] then [Rank 3] step=1, skipped=0, lr=[0.5], loss=2.0\n"
        "[2024-01-01 10:00:01,000] [INFO] [Rank 000000000007] step=1, skipped=0, lr=[0.5], loss=2.0\n"
        "[2024-01-01 10:00:02,000] [INFO] [Rank 3] step=2, skipped=0, lr=[0.5], loss=2.0\n"
        " iteration        1/      10 | elapsed time per iteration (ms): 100.0 | step=1, skipped=0 | lm loss: 1.5 |\n"
    )
    trace = load(tmp_path, "ds.log", text)
    info = trace.meta["sources"][0]["info"]["training"]
    assert info["producers"] == {"deepspeed": 3, "megatron": 1}
    got = (
        trace.series.join(trace.locations.select("loc", "rank"), on="loc")
        .join(trace.samples, on="series")
        .filter(pl.col("name").is_in(["loss", "lr"]))
        .sort("name", "rank", "ts_ns")
        .group_by("name", "rank", maintain_order=True)
        .agg(((pl.col("ts_ns") - 1_704_103_200 * 10**9) // 10**9).alias("s"), "value")
    )
    assert got.rows() == [
        ("loss", 3, [0, 2, 2], [2.0, 2.0, 1.5]),  # the Megatron line has no tag: the tagging rank, the time before
        ("loss", 7, [1], [2.0]),
        ("lr", 3, [0, 2], [0.5, 0.5]),
        ("lr", 7, [1], [0.5]),
    ]


@pytest.mark.parametrize("name", ["deepspeed_chat_sft_opt1.3b_2023.log", "deepspeed_dpo_ds0.16.2_8gpu_2025.log"])
def test_real_deepspeed_timer_values_equal_the_lines(name: str) -> None:
    """Each pair reads its own value, though pairs are cut once per distinct text (thousands of distinct numbers
    here): every timer line's CurrSamplesPerSec, RunningAvgSamplesPerSec and MemAllocated, as a plain regex reads
    them, is a sample of its series, no more, no less."""
    import re

    path = need(f"training/{name}")
    text = path.read_text(errors="replace")
    s = series(di.load(path))
    for key, name_ in (
        ("CurrSamplesPerSec", "samples_per_s"),
        ("RunningAvgSamplesPerSec", "samples_per_s_avg"),
        ("MemAllocated", "memory_allocated"),
    ):
        want = [float(v) for v in re.findall(rf"\b{key}=([-+\d.eE]+)", text)]
        assert len(want) > 40
        assert sorted(s[name_][1]) == sorted(want), key
