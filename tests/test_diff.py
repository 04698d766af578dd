"""`di diff A B`: each known difference found with its sign and size, JSON that validates, the page, CLI errors."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import kineto_file
from diff_jobs import ALLREDUCE_BYTES, RANKS, STEPS, job, ns, step_ms

import di
from di.cli import main
from di.viewers.diff import diff
from di.viewers.diff.collectives import BUSBW_FACTORS
from di.viewers.diff.document import to_json, validate


def row(df: pl.DataFrame, **key: object) -> dict:
    rows = df.filter(*(pl.col(k) == v for k, v in key.items())).to_dicts()
    assert len(rows) == 1, f"{key}: {len(rows)} rows"
    return rows[0]


@pytest.fixture(scope="module")
def slower():
    """A: the job; B: its GEMM kernel 2 ms -> 4 ms, and an op (aten::dropout, with its kernel) added."""
    return diff(job(gemm_ms=2.0), job(gemm_ms=4.0, dropout=True))


def test_step_time_grows_by_the_slower_kernel_and_the_added_op(slower):
    assert slower.step_stat("a", "count") == slower.step_stat("b", "count") == STEPS
    for stat in ("mean_ns", "p50_ns", "p90_ns"):
        assert slower.step_stat("a", stat) == ns(step_ms(2.0, False))
        assert slower.step_stat("b", stat) == ns(step_ms(4.0, True))
        assert slower.step_stat("delta", stat) == ns(2.0 + 0.4)


def test_the_slower_kernel_is_the_biggest_change_with_its_size(slower):
    k = slower.kernels
    gemm = row(k, name="gemm_128x128_kernel")
    n = STEPS * RANKS
    assert (gemm["status"], gemm["match"], gemm["a_count"], gemm["b_count"]) == ("changed", "name", n, n)
    assert gemm["a_total_ns"] == n * ns(2.0) and gemm["b_total_ns"] == n * ns(4.0)
    assert gemm["delta_ns"] == n * ns(2.0) and gemm["delta_mean_ns"] == ns(2.0)
    assert k.row(0, named=True)["name"] == "gemm_128x128_kernel", "sorted by |delta_ns|"
    assert row(k, name="ncclAllReduceKernel")["status"] == "same"


def test_the_added_op_and_its_kernel_are_added(slower):
    op = row(slower.ops, name="aten::dropout")
    assert (op["status"], op["a_count"], op["b_count"], op["a_total_ns"], op["b_total_ns"]) == (
        "added",
        0,
        STEPS * RANKS,
        0,
        STEPS * RANKS * ns(0.4),
    )
    assert op["a_mean_ns"] is None and op["b_mean_ns"] == ns(0.4)
    ker = row(slower.kernels, name="dropout_kernel")
    assert (ker["status"], ker["delta_ns"], ker["match"]) == ("added", STEPS * RANKS * ns(0.1), None)
    assert row(slower.ops, name="aten::linear")["status"] == "same"
    launches = row(slower.ops, name="cudaLaunchKernel")
    assert launches["delta_count"] == STEPS * RANKS, "one more launch per step and rank"


def test_gpu_time_by_launching_stack(slower):
    s = slower.kernel_stacks
    assert row(s, stack="aten::linear")["delta_ns"] == STEPS * RANKS * ns(2.0)
    assert row(s, stack="aten::dropout")["status"] == "added"
    assert row(s, stack="nccl:all_reduce")["names"] == ["ncclAllReduceKernel"]


def test_breakdown_overlap_and_critical_path_move_with_the_change(slower):
    gpu_compute = slower.breakdown.filter(pl.col("scope").str.starts_with("gpu") & (pl.col("state") == "compute"))
    assert gpu_compute.get_column("delta_ns").to_list() == [STEPS * (ns(2.0) + ns(0.1))] * RANKS
    assert set(slower.overlap.get_column("pair")) >= {"comm_compute", "cpu_gpu"}
    cp = slower.critical_path
    assert cp["a_length_ns"] > 0 and cp["delta_ns"] == cp["b_length_ns"] - cp["a_length_ns"] > 0
    assert slower.cp_by_category.get_column("delta_ns").sum() == cp["delta_ns"]


def test_collectives_by_op_and_size_with_nccl_tests_bandwidths(slower):
    c = row(slower.collectives, op="allreduce", bytes=ALLREDUCE_BYTES)
    assert (c["a_calls"], c["a_parts"], c["a_ranks"], c["a_mean_ns"]) == (STEPS, STEPS * RANKS, RANKS, ns(1.0))
    algbw = ALLREDUCE_BYTES / ns(1.0)
    assert c["a_algbw_gbps"] == pytest.approx(algbw)
    assert c["a_busbw_gbps"] == pytest.approx(algbw * 2 * (RANKS - 1) / RANKS)
    assert c["busbw_factor"] == BUSBW_FACTORS["allreduce"] == "2(n-1)/n"


def test_a_renamed_kernel_under_the_same_op_pairs_up():
    d = diff(job(), job(gemm_name="gemm_256x64_kernel"))
    old, new = row(d.kernels, name="gemm_128x128_kernel"), row(d.kernels, name="gemm_256x64_kernel")
    assert (old["status"], old["match"], old["matched_name"], old["match_stack"]) == (
        "removed",
        "op",
        "gemm_256x64_kernel",
        "aten::linear",
    )
    assert (new["status"], new["match"], new["matched_name"]) == ("added", "op", "gemm_128x128_kernel")
    assert row(d.kernel_stacks, stack="aten::linear")["status"] == "same", "the same GPU time under the same op"


def test_same_trace_has_no_change():
    a = job()
    d = diff(a, a)
    for df in (d.kernels, d.ops, d.kernel_stacks, d.collectives):
        assert set(df.get_column("status")) == {"same"}
    assert d.step_stat("delta", "mean_ns") == 0 and d.critical_path["delta_ns"] == 0


def test_json_validates_and_lists_kernels_by_abs_delta(slower):
    doc = to_json(slower, inputs=("a", "b"))
    validate(doc)
    doc = json.loads(json.dumps(doc))
    assert doc["steps"]["a"]["mean_ns"] == ns(step_ms(2.0, False)) and doc["steps"]["b"]["mean_ns"] == ns(
        step_ms(4.0, True)
    )
    deltas = [abs(k["delta_ns"]) for k in doc["kernels"]]
    assert deltas == sorted(deltas, reverse=True)
    first = doc["kernels"][0]
    assert {"name", "a_count", "b_count", "a_total_ns", "b_total_ns", "delta_ns"} <= set(first)
    assert doc["collectives"][0]["op"] == "allreduce" and "2(n-1)/n" in doc["bandwidth"]["busbw"]


def test_hta_trace_compare_pair():
    """HolisticTraceAnalysis's trace_compare data: B adds three CPU ops, one nccl:all_reduce
    annotation (67 us) and one 4 us elementwise kernel of A are gone; the steps are the same."""
    a = di.load(kineto_file("hta_trace_compare/base/base.json.gz"))
    b = di.load(kineto_file("hta_trace_compare/test/test.json.gz"))
    d = diff(a, b)
    assert d.step_stat("a", "count") == 2 and d.step_stat("delta", "mean_ns") == 0
    added = d.ops.filter(pl.col("status") == "added")
    assert dict(zip(added.get_column("name"), added.get_column("b_total_ns"))) == {
        "All2All_Pooled_Req": 311_000,
        "AddmmBackward0": 207_000,
        "CatBackward0": 11_000,
    }
    nccl = row(d.ops, name="nccl:all_reduce")
    assert (nccl["a_count"], nccl["b_count"], nccl["delta_ns"]) == (2, 1, -67_000)
    changed = d.kernels.filter(pl.col("status") != "same")
    assert changed.height == 1
    k = changed.row(0, named=True)
    assert k["name"].startswith("void at::native::vectorized_elementwise_kernel")
    assert (k["a_count"], k["b_count"], k["delta_ns"]) == (3, 2, -4_000)
    assert d.ops.row(0, named=True)["name"] == "All2All_Pooled_Req", "the biggest change first"
    validate(to_json(d, inputs=("base", "test")))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    a, b = folder / "a.di", folder / "b.di"
    di.save(job(), a)
    di.save(job(gemm_ms=4.0, dropout=True), b)
    return a, b


def test_cli_summary_json_and_page(stores, tmp_path, capsys):
    a, b = stores
    out, page = tmp_path / "d.json", tmp_path / "d.html"
    assert main(["diff", str(a), str(b), "--json", str(out), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert printed.index("Step time") < printed.index("Biggest changes") < printed.index("Kernels by name")
    assert "gemm_128x128" in printed and "busbw = algbw x factor" in printed
    doc = json.loads(out.read_text())
    validate(doc)
    assert doc["inputs"] == {"a": str(a), "b": str(b)} and doc["kernels"][0]["name"] == "gemm_128x128_kernel"
    text = page.read_text()
    assert (
        'data-table="kernels"' in text
        and 'data-table="collectives"' in text
        and "<script src" not in text
        and "<link" not in text
    )
    assert f'data-v="{STEPS * RANKS * ns(2.0)}"' in text, "the kernel's delta, exact in data-v"
    assert main(["diff", str(a), str(b), "--json", str(out)]) == 0, "di replaces its own JSON"
    capsys.readouterr()
    page.unlink()
    assert main(["diff", str(a), str(b), "--json", "-", "--html", str(page)]) == 0
    validate(json.loads(capsys.readouterr().out))
    assert page.is_file()


@pytest.mark.parametrize(
    "case",
    [
        "missing_a",
        "missing_b",
        "json_under_a_file",
        "html_not_ours",
        "json_is_input",
        "bad_window",
        "json_is_a_folder",
        "json_and_html_same_file",
    ],
)
def test_cli_errors_are_one_line_and_exit_2(case, stores, tmp_path, capsys):
    a, b = (str(p) for p in stores)
    blocker = tmp_path / "file.txt"
    blocker.write_text("user data")
    args = {
        "missing_a": [str(tmp_path / "nope.di"), b],
        "missing_b": [a, str(tmp_path / "nope.json")],
        "json_under_a_file": [a, b, "--json", str(blocker / "d.json")],
        "html_not_ours": [a, b, "--html", str(blocker)],
        "json_is_input": [a, b, "--json", a],
        "bad_window": [a, b, "--window", "steps=x"],
        "json_is_a_folder": [a, b, "--json", str(tmp_path)],
        "json_and_html_same_file": [a, b, "--json", str(tmp_path / "x"), "--html", str(tmp_path / "x")],
    }[case]
    assert main(["diff", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("di diff: error:") and "\n" not in err, err
    assert blocker.read_text() == "user data"
    assert not (tmp_path / "x").exists()


def test_launch_stacks_agree_with_a_plain_walk(tmp_path):
    """The vectorized walk up the parent chain gives, for every kernel of the Kineto demo job, the stack that
    a kernel-by-kernel walk gives (launch call -> enclosing events, step markers, CUDA API and Python left out)."""
    from di.demo import write_kineto_job
    from di.viewers.diff.names import (
        NO_LAUNCH,
        NO_OP,
        STACK_SEP,
        STACK_SKIP_CATS,
        launch_stacks,
    )

    write_kineto_job(tmp_path, ranks=2, steps=2, ops_per_step=6, seed=3)
    trace = di.load(tmp_path)
    ev = trace.events
    parent, cats = ev.get_column("parent").to_list(), ev.get_column("cat").cast(pl.String).to_list()
    names = ev.get_column("name").cast(pl.String).to_list()
    launched = {
        d: s
        for s, d, k in trace.flows.select("src", "dst", pl.col("kind").cast(pl.String)).iter_rows()
        if k == "launch"
    }
    streams = trace.locations.filter(pl.col("kind").cast(pl.String) == "gpu_stream").get_column("loc")
    gpu = ev.with_row_index("row").filter(
        pl.col("cat").cast(pl.String).is_in(["kernel", "memcpy", "memset", "nccl"])
        & pl.col("loc").is_in(streams.implode())
    )
    rows = gpu.get_column("row").to_numpy().astype("int64")

    def walk(row: int) -> str:
        if row not in launched:
            return NO_LAUNCH
        chain, cur = [], parent[launched[row]]
        while cur is not None:
            if cats[cur] not in STACK_SKIP_CATS:
                chain.append(names[cur])
            cur = parent[cur]
        return STACK_SEP.join(reversed(chain)) or NO_OP

    got = launch_stacks(trace, rows)
    assert got.get_column("stack").to_list() == [walk(int(r)) for r in rows]
    assert "aten::linear > aten::addmm" in got.get_column("stack").to_list()
    assert set(got.filter(pl.col("stack") == "aten::linear > aten::addmm").get_column("op")) == {"aten::addmm"}


def test_page_in_chromium(stores, tmp_path, capsys):
    """The diff page in headless Chromium (skips without one): no console errors, nothing fetched,
    and the kernels table read off the page equals the JSON."""
    from chromium_cdp import Browser, find_chromium

    exe = find_chromium()
    if exe is None:
        pytest.skip(
            "no Chromium on PATH (Debian: apt-get install chromium); the diff page was not checked in a browser"
        )
    a, b = stores
    page, out = tmp_path / "d.html", tmp_path / "d.json"
    assert main(["diff", str(a), str(b), "--html", str(page), "--json", str(out)]) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    read = """[...document.querySelector("table[data-table=kernels]").tBodies[0].rows].map(r =>
        [r.cells[0].textContent, Number(r.cells[7].dataset.v)])"""
    with Browser(exe) as br:
        url = br.open(page)
        rows = br.evaluate(read)
        assert br.console_problems() == []
        assert [u for u in br.requests() if u != url and not u.startswith("data:")] == []
    assert rows == [[k["name"], k["delta_ns"]] for k in doc["kernels"]]


def test_the_window_applies_to_both_runs():
    d = diff(job(gemm_ms=2.0), job(gemm_ms=4.0, dropout=True), window="steps=1:")
    assert d.window == "steps=1:" and d.step_stat("a", "count") == d.step_stat("b", "count") == STEPS - 1
    assert row(d.kernels, name="gemm_128x128_kernel")["delta_ns"] == (STEPS - 1) * RANKS * ns(2.0)
    assert row(d.collectives, op="allreduce")["a_calls"] == STEPS - 1
    assert d.notes == []
    uneven = diff(job(), job(steps=STEPS + 2))
    assert len(uneven.notes) == 1 and f"A has {STEPS} steps in the window and B {STEPS + 2}" in uneven.notes[0]
    assert (
        uneven.step_stat("delta", "mean_ns") == 0
        and row(uneven.kernels, name="gemm_128x128_kernel")["delta_mean_ns"] == 0
    )


TRAIN_LINE = (
    " iteration {i:>8}/    1000 | consumed samples: {s:>10} | elapsed time per iteration (ms): {ms:.1f} |"
    " learning rate: 1.500E-04 | global batch size:     8 | lm loss: 6.5E+00 | tokens per second: {tps:.1f} |"
)


def test_two_training_logs_differ_by_their_counters(tmp_path):
    """B's iterations take 1.25x A's and its throughput is 0.8x: the step time and both series say so."""
    paths = []
    for name, scale in (("a", 1.0), ("b", 1.25)):
        p = tmp_path / f"train_{name}.log"
        p.write_text(
            "\n".join(
                TRAIN_LINE.format(i=10 * (k + 1), s=80 * (k + 1), ms=1000 * scale, tps=8000 / scale) for k in range(6)
            )
            + "\n"
        )
        paths.append(p)
    d = diff(*(di.load(p) for p in paths))
    assert d.step_stat("b", "mean_ns") == 1.25 * d.step_stat("a", "mean_ns")
    tps = row(d.counters, name="tokens_per_s")
    assert (tps["unit"], tps["a_mean"], tps["b_mean"]) == ("tokens/s", 8000.0, 6400.0)
    assert tps["rel_mean"] == pytest.approx(-0.2)
    step = row(d.counters, name="step_time")
    assert step["rel_mean"] == pytest.approx(0.25) and step["a_samples"] == step["b_samples"] == 6
    assert row(d.counters, name="loss")["delta_mean"] == 0
    rel = [abs(r) for r in d.counters.get_column("rel_mean").drop_nulls().to_list()]
    assert rel == sorted(rel, reverse=True)
    doc = to_json(d, inputs=("a", "b"))
    validate(doc)
    assert {c["name"] for c in doc["counters"]} >= {"tokens_per_s", "step_time", "loss", "lr"}
    from di.viewers.diff.page import build_page

    assert 'data-table="counters"' in build_page(d)


def test_a_communicator_whose_traffic_moved_to_sockets_is_named(tmp_path):
    """The same 4-rank job twice: A's connections across nodes over InfiniBand, B's over TCP sockets."""
    from test_engine_communicators import nccl_log

    b_log = nccl_log(tmp_path)
    a_log = tmp_path / "ib.log"
    a_log.write_text(b_log.read_text().replace("NET/Socket/0", "NET/IB/0"))
    d = diff(di.load(a_log), di.load(b_log))
    (r,) = d.communicators.to_dicts()
    assert (r["nranks"], r["hosts"], r["a_comms"], r["b_comms"], r["changed"]) == (4, 2, 1, 1, True)
    assert (r["a_inter_node"], r["b_inter_node"]) == ("NET/IB/0 (2)", "NET/Socket/0 (2)")
    assert r["a_intra_node"] == r["b_intra_node"]
    validate(to_json(d, inputs=("a", "b")))
    same = diff(di.load(a_log), di.load(a_log)).communicators
    assert same.get_column("changed").to_list() == [False]


def test_launch_stack_under_a_deep_chain_of_python_frames():
    """A launch under 600 nested Python frames (a module's forward calls, as Kineto records them) between two
    operators: the stack keeps the operators, outermost first, and walks only them (the raw walk took 68 s and 8 GB
    on a real-shaped profile whose launches sit under 752 frames)."""
    import numpy as np
    from engine_jobs import Job

    from di.viewers.diff.names import launch_stacks

    job = Job()
    cpu, gpu = job.thread(0), job.stream(0)
    job.ev(cpu, 0, 100, "outer_op", "compute")
    for i in range(600):
        job.ev(cpu, 1 + i * 0.01, 99 - i * 0.01, f"module_{i}", "python")
    job.ev(cpu, 10, 90, "inner_op", "compute")
    for i in range(3):
        job.ev(cpu, 11 + i, 89 - i, f"frame_{i}", "python")
    call = job.ev(cpu, 20, 21, "cudaLaunchKernel", "cuda_api")
    kernel = job.ev(gpu, 30, 40, "gemm", "kernel")
    job.flow(call, kernel)
    trace = job.build()
    got = launch_stacks(trace, np.array([job.row[kernel]], np.int64))
    assert got.row(0) == ("outer_op > inner_op", "inner_op")


def test_overlap_rows_of_many_ranks_are_the_largest_changes_first() -> None:
    """20 ranks whose communication kernel (10 ms) overlaps 5 ms of compute in A and 5 - r/4 ms in B: the overlap
    table lists the 12 largest changes (rank 19's -47.5 points first) of the 19 (rank 0 is unchanged), saying the rest are in --json."""
    import io

    from engine_jobs import Job
    from rich.console import Console

    from di.viewers.diff.terminal import TOP, render

    def run(shift: float) -> di.Trace:
        j = Job()
        for rank in range(20):
            compute, comm = j.stream(rank, device=rank, stream=7), j.stream(rank, device=rank, stream=20)
            j.ev(compute, 0, 10, "gemm", "kernel")
            j.ev(comm, 5 + shift * rank, 15 + shift * rank, "ncclAllReduce", "nccl")
        return j.build()

    out = io.StringIO()
    render(diff(run(0.0), run(0.25)), Console(file=out, width=200, color_system=None))
    lines = out.getvalue().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Overlap"))
    top = next(i for i in range(start, len(lines)) if lines[i].startswith("┏"))
    end = next(i for i in range(top, len(lines)) if lines[i].startswith("└"))
    assert f"largest |Δ| first; {TOP} of 19 rows, all in --json" in " ".join(x.strip() for x in lines[start:top])
    rows = [[c.strip() for c in x.split("│")[1:-1]] for x in lines[top:end] if x.startswith("│")]
    assert [int(r[0]) for r in rows] == list(range(19, 19 - TOP, -1))
    assert {r[1] for r in rows} == {"comm_compute"}
    assert rows[0][2:] == ["50.0", "2.5", "-47.5"]
