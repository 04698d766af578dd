"""The report's matrix-work panel (di.viewers.report.flops) on test_flops' Kineto job with known work, kernel times
and a slow rank: the tables' exact values equal the JSON, the hints past their thresholds, no panel without shapes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_tables import read_page, run_report, section_hints
from test_flops import ADDMM, H100, STEP_FLOP, STEPS, flops_job, write_job


def test_known_job(tmp_path: Path) -> None:
    files = write_job(tmp_path)
    page = run_report(files, tmp_path)
    tables, _ = read_page(page)
    rows = {r["rank"]: r for r in tables["flops"]}
    assert rows[0]["TFLOP"] == rows[1]["TFLOP"] == STEP_FLOP * STEPS
    assert rows[0]["device"] == H100 and rows[0]["peak TFLOP/s"] == 989.4 and rows[0]["peak dtype"] == "bf16"
    done = subprocess.run(
        [sys.executable, "-m", "di", "analyze", *map(str, files), "--json", str(tmp_path / "a.json")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    for rank in doc["ranks"]:
        want = next(r for r in rank["flops"] if r["step"] is None)
        got = rows[rank["rank"]]
        assert got["utilization"] == pytest.approx(want["utilization"])
        assert got["achieved TFLOP/s"] == pytest.approx(want["achieved_tflops"])
        assert got["kernel time (ms)"] == want["gpu_ns"]
    assert len(tables["flops_steps"]) == 2 * STEPS
    ops = [r for r in tables["flops_ops"] if r["rank"] == 0 and r["operator"] == "aten::addmm"]
    assert [r["TFLOP per call"] for r in ops] == [ADDMM]
    assert ops[0]["input shapes"] == "512 4096x1024 1024x512"
    found = section_hints(page, "flops")
    assert any(h.startswith("Rank 0 GPU 0 does its matrix work at") for h in found)
    slow = [h for h in found if h.startswith("Rank 1 runs addmm")]
    assert slow and "against 429 on rank 0" in slow[0] and "at 215 TFLOP/s" in slow[0]
    assert not any(h.startswith("Rank 0 runs") for h in found)  # the fast rank is not named slow


def test_fp32_work_and_an_unknown_gpu(tmp_path: Path) -> None:
    """A GPU di has no peak for gets the rates and a hint saying so; fp32 matrix work gets its hint."""
    doc = flops_job(0, device_name="Some Future Accelerator")
    for e in doc["traceEvents"]:
        types = e.get("args", {}).get("Input type")
        if types:
            e["args"]["Input type"] = ["float" if t == "c10::BFloat16" else t for t in types]
    f = tmp_path / "fp32.json"
    f.write_text(json.dumps(doc))
    page = run_report([f], tmp_path)
    found = section_hints(page, "flops")
    assert any("No peak is known for Some Future Accelerator" in h for h in found)
    assert any(h.startswith("Rank 0 GPU 0: 100% of the matrix work runs in fp32") for h in found)
    tables, _ = read_page(page)
    assert tables["flops"][0]["utilization"] is None and tables["flops"][0]["peak dtype"] == "fp32"


def test_no_panel_without_shapes(tmp_path: Path) -> None:
    from test_memory import kineto_job

    f = tmp_path / "plain.json"
    f.write_text(json.dumps(kineto_job(0)))
    assert '<section id="flops"' not in run_report([f], tmp_path)


def test_shared_trace_names_its_short_gemm(tmp_path: Path) -> None:
    """TraceLens' H100 BERT: most matrix-kernel time is 17 GEMMs of 141x512 by 512x512, each 5.8 us, far under even
    their roofline: the hint says so, with the numbers of the operator table."""
    from test_flops import TRACELENS

    if not TRACELENS.exists():
        pytest.skip("shared data absent")
    page = run_report([TRACELENS], tmp_path)
    (hint,) = section_hints(page, "flops")
    tables, _ = read_page(page)
    gemm = next(r for r in tables["flops_ops"] if r["input shapes"] == "512 141x512 512x512")
    assert gemm["bound"] == "memory" and gemm["calls"] == 17
    assert f"{100 * gemm['of roofline']:.1f}% of its roofline" in hint and "5.8 us per kernel" in hint
    assert hint.startswith("Rank 0 GPU 0 does its matrix work at 0.2% of its bf16 peak")
