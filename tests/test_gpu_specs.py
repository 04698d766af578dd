"""A user's GPU peaks (di.engine.gpu_specs, the JSON file DI_GPU_SPECS names): a GPU di's tables do not know gets a
utilization and a roofline, a known one the user's figures first, and a broken file is a one-line error naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from analyze_cli import MPIEXEC, one_and_many
from test_flops import STEP_FLOP, STEP_US, STEPS, write_job

import di
from di.engine.flops import flops_tables
from di.engine.gpu_specs import ENV
from di.engine.window import prepare

RTX = "NVIDIA GeForce RTX 4090"


def specs(tmp_path: Path, entries: object) -> Path:
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(entries))
    return path


def whole_rates(files: list[Path]) -> pl.DataFrame:
    rates, _ = flops_tables(prepare(di.load(files)))
    return rates.filter(pl.col("step").is_null()).sort("rank")


def test_an_unknown_gpu_gets_the_users_peak_and_bandwidth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = write_job(tmp_path, device_name=RTX)
    assert whole_rates(files).get_column("utilization").to_list() == [None, None]
    monkeypatch.setenv(
        ENV, str(specs(tmp_path, [{"name": "RTX 4090", "peak_tflops": {"bf16": 165.2}, "bandwidth_tbps": 1.008}]))
    )
    rates = whole_rates(files)
    time_ns = (STEP_US - 1) * 1000 * STEPS
    assert rates.get_column("peak_tflops").to_list() == [165.2, 165.2]
    assert rates.get_column("utilization").to_list() == pytest.approx([STEP_FLOP * STEPS / time_ns / 1000 / 165.2] * 2)
    _, ops = flops_tables(prepare(di.load(files)))
    gemm = ops.filter((pl.col("rank") == 0) & (pl.col("op") == "aten::addmm")).row(0, named=True)
    # the roofline's slope is the user's bandwidth: attainable = min(peak, intensity x 1.008 TB/s)
    assert gemm["attainable_tflops"] == pytest.approx(min(165.2, gemm["intensity"] * 1.008))


def test_the_users_figure_comes_before_the_table_and_missing_dtypes_keep_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A power-capped H100: bf16 at 700 TFLOP/s; fp32, which the entry leaves out, keeps the datasheet's 66.9."""
    from di.engine.flops import device_bandwidth, device_peak

    monkeypatch.setenv(ENV, str(specs(tmp_path, [{"name": "h100", "peak_tflops": {"bf16": 700}}])))
    assert device_peak("NVIDIA H100 80GB HBM3", "bf16") == 700.0
    assert device_peak("NVIDIA H100 80GB HBM3", "fp32") == 66.9
    assert device_bandwidth("NVIDIA H100 80GB HBM3") == 3.35
    assert device_peak("NVIDIA A100-SXM4-80GB", "bf16") == 312.0
    rates = whole_rates(write_job(tmp_path))
    assert rates.get_column("peak_tflops").to_list() == [700.0, 700.0]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"name": "x"}), "expected a JSON list"),
        (json.dumps([{"name": "RTX", "peak_tflops": {"bf17": 1}}]), "unknown dtypes ['bf17']"),
        (json.dumps([{"name": "RTX", "peak_tflops": {"bf16": -1}}]), "peak_tflops.bf16 must be a positive number"),
        (json.dumps([{"name": "(", "peak_tflops": {"bf16": 1}}]), "is not a regular expression"),
        (json.dumps([{"name": "RTX"}]), "gives neither"),
        (None, "cannot read the GPU specs that DI_GPU_SPECS names"),
    ],
)
def test_a_broken_file_is_one_line_naming_it(tmp_path: Path, content: str | None, says: str) -> None:
    """``di analyze`` exits 2 with one line naming the file and what is wrong (None: the file does not exist)."""
    files = write_job(tmp_path, device_name=RTX)
    path = tmp_path / "gpus.json"
    if content is not None:
        path.write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "di", "analyze", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, ENV: str(path)},
    )
    assert done.returncode == 2, done.stderr
    # the load's timing note ('loaded N events in S s', printed when a load takes over a second on a busy machine) is
    # progress, not part of the error
    lines = [x for x in done.stderr.strip().splitlines() if not x.startswith("loaded ")]
    assert len(lines) == 1 and str(path) in lines[0] and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_dashboard_summaries_made_with_other_peaks_are_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached run summary holds a utilization computed with the peaks then in force: another file, or none, is a
    cache miss."""
    from di.viewers.dashboard.summary import read_cached, signature, write_cached

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = write_job(tmp_path, device_name=RTX)[0]
    sig = signature(run)
    monkeypatch.setenv(ENV, str(specs(tmp_path, [{"name": "RTX", "peak_tflops": {"bf16": 165.2}}])))
    write_cached(run, sig, {"flop_utilization": 0.1})
    assert read_cached(run, sig) == {"flop_utilization": 0.1}
    monkeypatch.delenv(ENV)
    assert read_cached(run, sig) is None


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec of the mpich wheel absent")
def test_every_mpiexec_process_reads_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(specs(tmp_path, [{"name": "RTX 4090", "peak_tflops": {"bf16": 165.2}}])))
    one, many = one_and_many(di.load(write_job(tmp_path, device_name=RTX)), tmp_path, 2, 1)
    peaks = [[r["peak_tflops"] for r in rank["flops"]] for rank in one["ranks"]]
    assert peaks == [[165.2], [165.2]]
    assert [rank["flops"] for rank in many["ranks"]] == [rank["flops"] for rank in one["ranks"]]
