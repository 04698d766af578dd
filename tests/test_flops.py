"""Matrix work and its rate against the GPU's peak (di.engine.flops): a Kineto job whose operators' shapes, kernels
and GPU are known by construction, read through the Kineto reader; the shared H100 trace checked against its own
file; the viewers; one process against several."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from analyze_cli import analyze_outputs, run_di
from conftest import KINETO

import di
from di.engine.flops import device_bandwidth, device_peak, flops_tables
from di.engine.window import prepare

STEP_US = 10_000
STEPS = 4
H100 = "NVIDIA H100 80GB HBM3"
TRACELENS = KINETO / "tracelens_h100_bert_small_with_stack.json.gz"

# the work of one call, counted by hand (a multiply-add is 2)
ADDMM = 2 * 4096 * 1024 * 512  # [4096, 1024] @ [1024, 512]
BMM = 2 * 8 * 256 * 64 * 256  # [8, 256, 64] @ [8, 64, 256]
SDPA = 2 * 2 * 16 * 1024 * 1024 * (64 + 64)  # q k^T and p v, b=2 h=16 s=1024 d=64
SDPA_BWD = 2 * 2 * 16 * 1024 * 1024 * (3 * 64 + 2 * 64)  # scores again, dV, dP, dQ, dK
CONV = 2 * 8 * 128 * 64 * 3 * 3 * 56 * 56  # N K C R S out_h out_w: 3x3, stride 1, padding 1 keeps 56x56
CONV_BWD = 2 * CONV  # input and weight gradients, no bias gradient
STRIDED_CONV = 2 * 8 * 128 * 64 * 3 * 3 * 28 * 28  # stride 2, padding 1: (56 + 2 - 2 - 1) // 2 + 1 = 28
STEP_FLOP = ADDMM + BMM + SDPA + SDPA_BWD + CONV + CONV_BWD + STRIDED_CONV
BF16_FLOP = ADDMM + SDPA + SDPA_BWD


def kernel_us(rank: int) -> dict[str, int]:
    """Each operator's kernel time; rank 1's GEMM is twice as slow (a straggler's slow GEMM)."""
    return {
        "addmm": 10 * (1 + rank),
        "bmm": 5,
        "sdpa": 40,
        "sdpa_bwd": 100,
        "conv": 20,
        "conv_bwd": 50,
        "strided": 8,
    }


def flops_job(rank: int, *, device_name: str | None = H100, steps: int = STEPS) -> dict:
    """One rank's training steps as PyTorch's profiler writes them with ``record_shapes=True``: each operator on
    thread 1 launches one kernel on stream 7 (a ``cudaLaunchKernel`` inside it, an ``ac2g`` flow to the kernel).

    Per step: ``aten::linear`` > ``aten::addmm`` (bf16 4096x1024 @ 1024x512) > an ``aten::mm`` some backend nests in it
    (counted as its addmm); ``aten::matmul`` > ``aten::bmm`` (fp32); flash attention forward and backward (bf16);
    a 3x3 ``aten::convolution`` (fp32, stride 1 and one of stride 2) and its backward (input and weight gradients);
    and an ``aten::mm`` recorded without shapes.
    """
    events: list[dict] = []
    corr = [rank * 1_000_000]
    us = kernel_us(rank)

    def op(name: str, t0: float, t1: float, args: dict | None = None, cat: str = "cpu_op", tid: int = 1) -> None:
        e = {"ph": "X", "cat": cat, "name": name, "pid": 100 + rank, "tid": tid, "ts": t0, "dur": t1 - t0}
        if args is not None:
            e["args"] = args
        events.append(e)

    def launch(t: float, kernel: str, dur: float) -> None:
        corr[0] += 1
        c = corr[0]
        op("cudaLaunchKernel", t, t + 2, {"correlation": c}, cat="cuda_runtime")
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": 7,
                "ts": t + 3,
                "dur": dur,
                "args": {"correlation": c, "device": 0, "stream": 7},
            }
        )
        events.append({"ph": "s", "id": c, "pid": 100 + rank, "tid": 1, "ts": t, "cat": "ac2g", "name": "ac2g"})
        events.append({"ph": "f", "id": c, "pid": 0, "tid": 7, "ts": t + 3, "cat": "ac2g", "name": "ac2g", "bp": "e"})

    def shaped(dims: list, types: list, concrete: list | None = None) -> dict:
        args = {"Input Dims": dims, "Input type": types}
        if concrete is not None:
            args["Concrete Inputs"] = concrete
        return args

    bf, f32 = "c10::BFloat16", "float"
    for k in range(steps):
        t = 1_000_000 + k * STEP_US
        op(f"ProfilerStep#{k + 1}", t, t + STEP_US - 1, cat="user_annotation")
        op("aten::linear", t + 100, t + 200, shaped([[4096, 1024], [512, 1024], [512]], [bf, bf, bf]))
        op(
            "aten::addmm",
            t + 110,
            t + 190,
            shaped([[512], [4096, 1024], [1024, 512], [], []], [bf, bf, bf, "Scalar", "Scalar"]),
        )
        op("aten::mm", t + 120, t + 180, shaped([[4096, 1024], [1024, 512]], [bf, bf]))
        launch(t + 130, "sm90_xmma_gemm_bf16bf16_bf16f32", us["addmm"])
        op("aten::matmul", t + 300, t + 400, shaped([[8, 256, 64], [8, 64, 256]], [f32, f32]))
        op("aten::bmm", t + 310, t + 390, shaped([[8, 256, 64], [8, 64, 256]], [f32, f32]))
        launch(t + 320, "ampere_sgemm_128x64_nn", us["bmm"])
        qkv = [[2, 16, 1024, 64]] * 3
        op(
            "aten::_scaled_dot_product_flash_attention",
            t + 500,
            t + 600,
            shaped([*qkv, [], [], [], []], [bf] * 3 + ["Scalar"] * 4, ["", "", "", "0.", "False", "False", ""]),
        )
        launch(t + 510, "flash_fwd_kernel", us["sdpa"])
        conv_args = ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
        op(
            "aten::convolution",
            t + 700,
            t + 800,
            shaped([[8, 64, 56, 56], [128, 64, 3, 3], []], [f32, f32, ""], conv_args),
        )
        launch(t + 710, "cudnn::implicit_convolve_sgemm", us["conv"])
        strided_args = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
        op(
            "aten::convolution",
            t + 850,
            t + 900,
            shaped([[8, 64, 56, 56], [128, 64, 3, 3], []], [f32, f32, ""], strided_args),
        )
        launch(t + 860, "cudnn::implicit_convolve_sgemm", us["strided"])
        op("aten::mm", t + 950, t + 990, {"External id": 7})
        launch(t + 960, "gemv2T_kernel", 3)
        # the backward on the autograd thread's operators (here thread 1 too, one launch thread)
        op(
            "aten::_scaled_dot_product_flash_attention_backward",
            t + 5000,
            t + 5200,
            shaped([[2, 16, 1024, 64], *qkv, [2, 16, 1024, 64], [2, 16, 1024]], [bf] * 5 + ["float"], None),
        )
        launch(t + 5010, "flash_bwd_kernel", us["sdpa_bwd"])
        bwd_args = ["", "", "", "[0]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"]
        op(
            "aten::convolution_backward",
            t + 5300,
            t + 5500,
            shaped([[8, 128, 56, 56], [8, 64, 56, 56], [128, 64, 3, 3]], [f32] * 3, bwd_args),
        )
        launch(t + 5310, "cudnn::wgrad_alg0_engine", us["conv_bwd"])
    doc: dict = {"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}
    if device_name is not None:
        doc["deviceProperties"] = [{"id": 0, "name": device_name, "computeMajor": 9, "computeMinor": 0, "numSms": 132}]
    return doc


def write_job(tmp: Path, **kw) -> list[Path]:
    files = []
    for rank in (0, 1):
        f = tmp / f"rank{rank}.json"
        f.write_text(json.dumps(flops_job(rank, **kw)))
        files.append(f)
    return files


def test_work_rates_and_peaks_of_a_known_job(tmp_path: Path) -> None:
    trace = di.load(write_job(tmp_path))
    rates, ops = flops_tables(prepare(trace), per_step=True)
    whole = rates.filter(pl.col("step").is_null()).sort("rank")
    assert whole.get_column("device_name").to_list() == [H100, H100]
    assert whole.get_column("calls").to_list() == [8 * STEPS, 8 * STEPS]  # the nested mm is its addmm's
    assert whole.get_column("unknown_calls").to_list() == [STEPS, STEPS]
    assert whole.get_column("flop").to_list() == [STEP_FLOP * STEPS] * 2
    assert whole.get_column("peak_dtype").to_list() == ["bf16", "bf16"]  # bf16 does most of the work
    assert whole.get_column("peak_tflops").to_list() == [989.4, 989.4]
    time_ns = (STEP_US - 1) * 1000 * STEPS
    assert whole.get_column("time_ns").to_list() == [time_ns, time_ns]
    for r in whole.iter_rows(named=True):
        gpu_ns = 1000 * sum(v for v in kernel_us(r["rank"]).values()) * STEPS  # not the shapeless mm's
        assert r["gpu_ns"] == gpu_ns
        assert r["achieved_tflops"] == pytest.approx(STEP_FLOP * STEPS / gpu_ns / 1000)
        assert r["flop_rate_tflops"] == pytest.approx(STEP_FLOP * STEPS / time_ns / 1000)
        assert r["utilization"] == pytest.approx(STEP_FLOP * STEPS / time_ns / 1000 / 989.4)
    steps = rates.filter(pl.col("step").is_not_null())
    assert steps.height == 2 * STEPS and set(steps.get_column("flop").to_list()) == {STEP_FLOP}

    def row(rank: int, op: str, **match) -> dict:
        sel = ops.filter((pl.col("rank") == rank) & (pl.col("op") == op))
        for k, v in match.items():
            sel = sel.filter(pl.col(k) == v)
        assert sel.height == 1, (op, match, sel)
        return sel.row(0, named=True)

    gemm0, gemm1 = row(0, "aten::addmm"), row(1, "aten::addmm")
    assert gemm0["flop_per_call"] == ADDMM and gemm0["calls"] == STEPS and gemm0["dtype"] == "bf16"
    assert gemm0["tflops"] == pytest.approx(ADDMM / 10_000 / 1000)  # 429.5 TFLOP/s
    assert gemm0["of_peak"] == pytest.approx(ADDMM / 10_000 / 1000 / 989.4)
    assert gemm1["tflops"] == pytest.approx(gemm0["tflops"] / 2)  # the straggler's GEMM at half the rate
    assert gemm0["dims"] == "[[512],[4096,1024],[1024,512],[],[]]"
    # the roofline: the least traffic of a call (its non-empty inputs and its output) at the dtype's size
    gemm_bytes = (512 + 4096 * 1024 + 1024 * 512 + 4096 * 512) * 2
    assert gemm0["bytes_per_call"] == gemm_bytes and gemm0["intensity"] == pytest.approx(ADDMM / gemm_bytes)
    assert (gemm0["bound"], gemm0["attainable_tflops"]) == ("compute", 989.4)  # 315 flop/B x 3.35 TB/s > peak
    strided = row(0, "aten::convolution", flop_per_call=STRIDED_CONV)
    strided_bytes = (8 * 64 * 56 * 56 + 128 * 64 * 3 * 3 + 8 * 128 * 28 * 28) * 4
    assert strided["bytes_per_call"] == strided_bytes and strided["bound"] == "memory"
    assert strided["attainable_tflops"] == pytest.approx(STRIDED_CONV / strided_bytes * 3.35)
    assert strided["of_attainable"] == pytest.approx(strided["tflops"] / strided["attainable_tflops"])
    bmm = row(0, "aten::bmm")
    assert (bmm["flop_per_call"], bmm["dtype"], bmm["peak_dtype"], bmm["peak_tflops"]) == (BMM, "fp32", "fp32", 66.9)
    assert row(0, "aten::_scaled_dot_product_flash_attention")["flop_per_call"] == SDPA
    assert row(0, "aten::_scaled_dot_product_flash_attention_backward")["flop_per_call"] == SDPA_BWD
    conv = row(0, "aten::convolution", flop_per_call=CONV)
    assert (conv["peak_dtype"], conv["peak_tflops"]) == ("tf32", 494.7)  # cuDNN runs fp32 convolutions on TF32
    assert row(0, "aten::convolution", flop_per_call=STRIDED_CONV)["gpu_ns"] == 8_000 * STEPS
    assert row(0, "aten::convolution_backward")["flop_per_call"] == CONV_BWD
    shapeless = row(0, "aten::mm")
    assert shapeless["flop"] is None and shapeless["tflops"] is None and shapeless["gpu_ns"] == 3_000 * STEPS
    assert "aten::linear" not in ops.get_column("op").to_list() and "aten::matmul" not in ops.get_column("op").to_list()
    # the breakdown and imbalance tell the same story: rank 1's GPU computes longer by its slow GEMM's extra time
    imb = di.analyze(trace, analyses=("breakdown", "imbalance")).imbalance
    gpu = imb.filter(pl.col("step").is_null() & (pl.col("side") == "gpu") & (pl.col("state") == "compute")).row(
        0, named=True
    )
    extra_ns = (kernel_us(1)["addmm"] - kernel_us(0)["addmm"]) * 1000 * STEPS
    assert (gpu["max_rank"], gpu["max_ns"] - gpu["min_ns"]) == (1, extra_ns)
    # by GPU time, largest first, per rank
    for rank in (0, 1):
        gpu = ops.filter(pl.col("rank") == rank).get_column("gpu_ns").to_list()
        assert gpu == sorted(gpu, reverse=True)


def test_unknown_gpu_keeps_the_rates_without_a_peak(tmp_path: Path) -> None:
    trace = di.load(write_job(tmp_path, device_name="Some Future Accelerator"))
    rates, ops = flops_tables(prepare(trace))
    assert rates.get_column("peak_tflops").null_count() == rates.height
    assert rates.get_column("utilization").null_count() == rates.height
    assert rates.get_column("achieved_tflops").null_count() == 0
    assert ops.get_column("tflops").drop_nulls().len() > 0
    no_name = di.load(write_job(tmp_path, device_name=None))
    assert flops_tables(prepare(no_name))[0].get_column("device_name").null_count() == 2


def test_peaks_by_device_name() -> None:
    assert device_peak("NVIDIA H100 80GB HBM3", "bf16") == 989.4
    assert device_peak("NVIDIA H100 PCIe", "bf16") == 756.0
    assert device_peak("NVIDIA H100 NVL", "fp8") == 1670.5
    assert device_peak("NVIDIA A100-SXM4-80GB", "fp32") == 19.5
    assert device_peak("NVIDIA A100-PG509-200", "tf32") == 156.0
    assert device_peak("NVIDIA L4", "bf16") == 121.0 and device_peak("NVIDIA L40S", "bf16") == 362.05
    assert device_peak("AMD Instinct MI300X", "bf16") == 1307.4 and device_peak("AMD Instinct MI210", "bf16") == 181.0
    assert device_peak("NVIDIA A40", "tf32") == 74.8 and device_peak("Tesla T4", "fp16") == 65.0
    assert device_peak("NVIDIA A30", "bf16") == 165.0
    assert device_bandwidth("NVIDIA A100-SXM4-80GB") == 2.039 and device_bandwidth("NVIDIA A100-PG509-200") == 1.555
    assert device_bandwidth("NVIDIA H200") == 4.8 and device_bandwidth("Some Future Accelerator") is None
    assert device_peak("Tesla V100-SXM2-32GB", "bf16") is None  # no bf16 on Volta
    assert device_peak("ARTEMIS", "bf16") is None and device_peak(None, "bf16") is None


def test_a_window_of_steps_counts_its_steps(tmp_path: Path) -> None:
    trace = di.load(write_job(tmp_path))
    result = di.analyze(trace, window="steps=1:3")
    whole = result.flops.filter(pl.col("step").is_null() & (pl.col("rank") == 0)).row(0, named=True)
    assert whole["flop"] == 2 * STEP_FLOP and whole["time_ns"] == 2 * (STEP_US - 1) * 1000


def test_damaged_shapes_are_unknown_not_wrong(tmp_path: Path) -> None:
    """A quoted size, a float size and a shape list that is a string: the call is counted with unknown work, never
    with a work made of the digits it could read; the other operators keep theirs."""
    doc = flops_job(0, steps=1)
    by_name = {e["name"]: e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"}
    by_name["aten::bmm"]["args"]["Input Dims"] = [[8, "256", 64], [8, 64, 256]]
    by_name["aten::_scaled_dot_product_flash_attention"]["args"]["Input Dims"] = "[[2, 16, 1024"
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::mm",
            "pid": 100,
            "tid": 1,
            "ts": 1_005_600,
            "dur": 5,
            "args": {"Input Dims": [[4.5, 2], [2, 3]]},
        }
    )
    f = tmp_path / "damaged.json"
    f.write_text(json.dumps(doc))
    rates, ops = flops_tables(prepare(di.load(f)))
    flop = {(r["op"], r["flop_per_call"]) for r in ops.iter_rows(named=True)}
    assert (
        ("aten::addmm", ADDMM) in flop
        and ("aten::convolution", CONV) in flop
        and ("aten::convolution_backward", CONV_BWD) in flop
    )
    for op in ("aten::bmm", "aten::_scaled_dot_product_flash_attention"):
        assert ops.filter(pl.col("op") == op).get_column("flop").to_list() == [None]
    assert (
        rates.row(0, named=True)["unknown_calls"] == 3
    )  # bmm, attention, the shapeless mm (the float mm ran no kernel)
    assert ops.filter(pl.col("dims") == "[[4.5,2],[2,3]]").get_column("flop").to_list() == [None]
    out = subprocess.run([sys.executable, "-m", "di", "analyze", str(f)], capture_output=True, text=True)
    assert out.returncode == 0 and "Traceback" not in out.stderr and "Matrix work" in out.stdout


def test_args_that_are_not_json_are_read_field_by_field() -> None:
    """A connector's args text that is not JSON (a cut line) still gives the fields it holds; a field that is not
    of its type is null in that row only."""
    from di.engine.flops import _shapes

    args = pl.Series(
        [
            '{"Input Dims": [[4, 8], [8, 2]], "Input type": ["float", "float"], "Concrete Inputs": ["", "[1, 1]"]',
            '{"Input Dims": [[4, "8"], [8, 2]], "Input type": ["c10::Half"]}',
            '{"Input Dims": [[2, 3], [3, 5]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}',
        ]
    )
    got = _shapes(args)
    assert got.get_column("shape").to_list() == [[[4, 8], [8, 2]], None, [[2, 3], [3, 5]]]
    assert got.get_column("types").to_list() == [["float", "float"], ["c10::Half"], ["c10::BFloat16", "c10::BFloat16"]]
    assert got.get_column("concrete").to_list() == [["", "[1, 1]"], None, None]
    assert got.get_column("dims").to_list()[1] == '[[4, "8"], [8, 2]]'


def test_shared_trace_against_its_own_file() -> None:
    """TraceLens' H100 BERT trace: each counted operator's work from the file's Input Dims, and its GPU time from the
    kernels whose correlation id a runtime call inside it holds, computed here from the JSON alone."""
    if not TRACELENS.exists():
        pytest.skip("shared data absent")
    doc = json.loads(gzip.decompress(TRACELENS.read_bytes()))
    evs = doc["traceEvents"]
    kernel_dur = {e["args"]["correlation"]: e["dur"] for e in evs if e.get("cat") == "kernel"}
    launches = [
        e for e in evs if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    ]
    want_flop, want_gpu_us, calls = 0, 0.0, 0
    for e in evs:
        if e.get("cat") != "cpu_op":
            continue
        dims = e.get("args", {}).get("Input Dims")
        if e["name"] == "aten::addmm":
            (_, (m, k), (_, n), *_) = dims
            want_flop += 2 * m * k * n
        elif e["name"] == "aten::_scaled_dot_product_flash_attention":
            (b, h, s_q, d), (_, _, s_k, _), (_, _, _, d_v) = dims[:3]
            want_flop += 2 * b * h * s_q * s_k * (d + d_v)
        else:
            continue
        calls += 1
        t0, t1 = e["ts"], e["ts"] + e["dur"]
        for c in launches:
            if c["tid"] == e["tid"] and t0 <= c["ts"] < t1 and c["args"]["correlation"] in kernel_dur:
                want_gpu_us += kernel_dur[c["args"]["correlation"]]
    rates, ops = flops_tables(prepare(di.load(TRACELENS)))
    r = rates.row(0, named=True)
    assert (r["device_name"], r["peak_dtype"], r["calls"]) == (H100, "bf16", calls)
    assert r["flop"] == want_flop == ops.get_column("flop").sum()
    assert r["gpu_ns"] == pytest.approx(want_gpu_us * 1000, abs=calls)  # whole ns per kernel
    assert r["utilization"] == pytest.approx(r["flop"] / r["time_ns"] / 1000 / 989.4)


def test_viewers(tmp_path: Path) -> None:
    files = write_job(tmp_path)
    text, doc, _ = analyze_outputs(files, tmp_path)
    assert "Matrix work" in text and "Matrix operators by GPU time" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "sdpa flash" in text and "conv" in text
    rank0 = doc["ranks"][0]["flops"]
    assert [r["flop"] for r in rank0 if r["step"] is None] == [STEP_FLOP * STEPS]
    assert {r["op"] for r in doc["flops_ops"]} >= {"aten::addmm", "aten::convolution_backward"}
    with open(tmp_path / "csv" / "flops_ops.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert int(next(r for r in rows if r["op"] == "aten::addmm" and r["rank"] == "0")["flop_per_call"]) == ADDMM
    assert (tmp_path / "csv" / "flops.csv").exists()


def test_no_shapes_no_rows(tmp_path: Path) -> None:
    from test_memory import kineto_job

    f = tmp_path / "plain.json"
    f.write_text(json.dumps(kineto_job(0)))
    result = di.analyze(di.load(f))
    assert result.flops.height == 0 and result.flops_ops.height == 0
    out = subprocess.run([sys.executable, "-m", "di", "analyze", str(f)], capture_output=True, text=True)
    assert out.returncode == 0 and "Matrix work" not in out.stdout


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists(), reason="mpiexec of the mpich wheel absent")
def test_under_mpiexec_the_same_answer(tmp_path: Path) -> None:
    """Each process reads its ranks of a partitioned store; the rows equal one process's."""
    from test_parallel import analysis, stores

    single, parted = stores(di.load(write_job(tmp_path)), tmp_path, ranks_per_group=1)
    one = analysis(single, tmp_path, None, "--steps")
    assert [r["flop"] for rank in one["ranks"] for r in rank["flops"] if r["step"] is None] == [STEP_FLOP * STEPS] * 2
    assert analysis(parted, tmp_path, 2, "--steps") == one


def test_batch_table_has_each_ranks_work_and_utilization(tmp_path: Path) -> None:
    from di.viewers.batch import rank_rows

    result = di.analyze(di.load(write_job(tmp_path)))
    rows = {r["rank"]: r for r in rank_rows("job", result).iter_rows(named=True)}
    time_ns = (STEP_US - 1) * 1000 * STEPS
    for rank in (0, 1):
        assert rows[rank]["flop"] == STEP_FLOP * STEPS
        assert rows[rank]["flop_utilization"] == pytest.approx(STEP_FLOP * STEPS / time_ns / 1000 / 989.4)


def test_dashboard_summary_has_the_utilization(tmp_path: Path) -> None:
    from di.viewers.dashboard.summary import summarize

    files = write_job(tmp_path)
    time_ns = (STEP_US - 1) * 1000 * STEPS
    assert summarize(files[0])["flop_utilization"] == pytest.approx(STEP_FLOP * STEPS / time_ns / 1000 / 989.4)
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    assert summarize(write_job(unknown, device_name=None)[0])["flop_utilization"] is None


def test_matrix_rate_per_step_as_a_counter_track(tmp_path: Path) -> None:
    """di convert's analysis tracks: per rank a "matrix TFLOP/s" counter sampled at each step start, the step's work
    over the step's time."""
    out = tmp_path / "t.pftrace"
    done = subprocess.run(
        [sys.executable, "-m", "di", "convert", *map(str, write_job(tmp_path)), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    trace = di.load(out)
    series = trace.series.filter(pl.col("name").str.ends_with("matrix TFLOP/s"))
    assert sorted(series.get_column("name").to_list()) == ["rank 0 matrix TFLOP/s", "rank 1 matrix TFLOP/s"]
    values = trace.samples.filter(pl.col("series").is_in(series.get_column("series").implode())).get_column("value")
    assert values.len() == 2 * STEPS
    assert values.to_list() == pytest.approx([STEP_FLOP / ((STEP_US - 1) * 1000) / 1000] * (2 * STEPS), rel=1e-6)


def test_the_kineto_demo_has_matrix_work(tmp_path: Path) -> None:
    """``di demo --kineto`` records its GEMMs' shapes and its GPUs' name, as a profiler with record_shapes does."""
    done = run_di("demo", "--kineto", "-o", "demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rates, ops = flops_tables(prepare(di.load(tmp_path / "demo")))
    gemm = 2 * 2048 * 1024 * 1024
    assert set(ops.get_column("op")) == {"aten::addmm", "aten::mm"}
    assert set(ops.get_column("flop_per_call")) == {gemm} and set(ops.get_column("dtype")) == {"bf16"}
    whole = rates.filter(pl.col("step").is_null())
    assert whole.height == 4 and set(whole.get_column("device_name")) == {H100}
    assert whole.get_column("flop").to_list() == (whole.get_column("calls") * gemm).to_list()
    assert all(50 < r < 200 for r in whole.get_column("achieved_tflops"))  # a 4.3 GFLOP GEMM in about 42 us


def test_a_profile_without_shapes_says_so_in_one_line(tmp_path: Path) -> None:
    """PyTorch's default (record_shapes=False): the matrix operators are counted as calls of unknown work, the
    terminal and the report say in one line how to record them, and no table of dashes is printed."""
    from report_tables import run_report

    from di.viewers.batch import rank_rows

    files = []
    for rank in (0, 1):
        doc = flops_job(rank)
        for e in doc["traceEvents"]:
            e.get("args", {}).pop("Input Dims", None)
        files.append(tmp_path / f"r{rank}.json")
        files[-1].write_text(json.dumps(doc))
    result = di.analyze(di.load(files))
    whole = result.flops.filter(pl.col("step").is_null())
    assert whole.get_column("flop").to_list() == [None, None]
    assert whole.get_column("unknown_calls").to_list() == whole.get_column("calls").to_list() == [8 * STEPS] * 2
    assert whole.get_column("achieved_tflops").null_count() == 2 and whole.get_column("utilization").null_count() == 2
    assert [r["flop"] for r in rank_rows("job", result).iter_rows(named=True)] == [None, None]
    out = run_di("analyze", *map(str, files), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Matrix work: 64 matrix-operator calls (matmul, conv, attention) were recorded without" in " ".join(
        out.stdout.split()
    )
    assert "Matrix operators by GPU time" not in out.stdout
    page = run_report(files, tmp_path)
    section = page[page.index('<section id="flops"') :]
    assert (
        "record_shapes=True" in section[: section.index("</section>")]
        and "<table" not in section[: section.index("</section>")]
    )


def test_input_elements_against_python() -> None:
    """Each call's input elements: the product of every input's sizes, summed over the inputs with an axis; a scalar
    (``[]``) or null input adds nothing, a null size is skipped (polars' ``product``), a null shape stays null, and
    products wrap in int64 as polars' do. Checked against plain Python over calls of every such kind."""
    from di.engine.flops.shapes import input_elements

    rng = np.random.default_rng(7)
    rows: list[list[list[int | None] | None] | None] = [None, [], [[]], [None], [[3, None, 5]], [[2**40] * 2]]
    for _ in range(3000):
        rows.append(
            [
                None
                if rng.random() < 0.03
                else [
                    None if rng.random() < 0.02 else int(rng.choice([0, 1, 3, 1024, 4096]))
                    for _ in range(rng.integers(0, 5))
                ]
                for _ in range(rng.integers(0, 6))
            ]
        )

    def wrap(v: int) -> int:
        return (v + 2**63) % 2**64 - 2**63

    def want(shape: list[list[int | None] | None] | None) -> int | None:
        if shape is None:
            return None
        total = 0
        for sizes in shape:
            if sizes:
                product = 1
                for size in sizes:
                    product = wrap(product * (1 if size is None else size))
                total = wrap(total + product)
        return total

    got = input_elements(pl.Series("shape", rows, dtype=pl.List(pl.List(pl.Int64))))
    assert got.to_list() == [want(r) for r in rows]
    assert got.to_list()[:6] == [None, 0, 0, 0, 15, wrap(2**80) * 2]
