"""Matrix work in `di diff A B`: run A is test_flops's two-rank job, run B the same job with its bf16 GEMM kernels
twice as slow. The work is the same, the rate while the kernels run drops by what the longer GEMM costs, and the
utilization over the (unchanged) steps stays: side by side in the JSON, the terminal and the page. A job run eight
times slower in every event on one rank loses most of its utilization there: the headline names that rank and GPU.
Traces without recorded shapes have no matrix work and no table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from test_flops import STEP_FLOP, STEP_US, STEPS, flops_job, kernel_us, write_job
from test_memory import kineto_job

import di
from di.viewers.diff import diff
from di.viewers.diff.document import validate
from di.viewers.diff.results import FLOPS_HEADLINE_POINTS, flops_headline

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32"
"""The bf16 GEMM kernel of :func:`test_flops.flops_job` (one per step, ``kernel_us(rank)["addmm"]`` long)."""
H100_BF16 = 989.4
"""The H100's dense bf16 peak (TFLOP/s), the peak of test_flops's job (bf16 does most of its work)."""
FLOP = STEP_FLOP * STEPS
"""Each rank's counted work over the window (the shapeless mm's is unknown)."""
STEPS_NS = (STEP_US - 1) * 1000 * STEPS
"""Each rank's steps summed (ns): the time the utilization is over."""
ORIGIN_US = 1_000_000
"""Where test_flops's job starts (us): :func:`scaled` keeps it."""
SLOWDOWN = 8
"""How much slower B's rank 1 is in the headline pair (a power of two: the scaled times stay whole ns)."""


def gpu_ns(rank: int, gemm: int = 1) -> int:
    """A rank's counted kernel time over the window (ns), its GEMM ``gemm`` times as long (the shapeless mm's
    kernel is not counted)."""
    us = kernel_us(rank)
    return 1000 * STEPS * (sum(us.values()) + (gemm - 1) * us["addmm"])


def slower_gemm(job: dict, factor: int = 2) -> dict:
    """``job`` with its bf16 GEMM kernels ``factor`` times as long (the steps as long as before)."""
    for e in job["traceEvents"]:
        if e["name"] == GEMM:
            e["dur"] *= factor
    return job


def scaled(job: dict, factor: float) -> dict:
    """``job`` with every event's start (from :data:`ORIGIN_US`) and duration times ``factor``: the same work on a
    machine ``1 / factor`` times as fast."""
    for e in job["traceEvents"]:
        e["ts"] = ORIGIN_US + (e["ts"] - ORIGIN_US) * factor
        if "dur" in e:
            e["dur"] *= factor
    return job


def write_ranks(folder: Path, jobs: list[dict]) -> Path:
    """One Kineto file per rank of ``jobs`` in ``folder`` (a run ``di diff`` loads as a folder)."""
    folder.mkdir()
    for rank, job in enumerate(jobs):
        (folder / f"rank{rank}.json").write_text(json.dumps(job))
    return folder


def run_diff(a: Path, b: Path, tmp: Path, columns: int = 80) -> tuple[str, dict, str]:
    """(terminal text, JSON document, HTML page) of ``di diff a b`` on a terminal ``columns`` wide."""
    out, page = tmp / "d.json", tmp / "d.html"
    done = subprocess.run(
        [sys.executable, "-m", "di", "diff", str(a), str(b), "--json", str(out), "--html", str(page), "--force"],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(columns)},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    doc = json.loads(out.read_text())
    validate(doc)
    return done.stdout, doc, page.read_text()


def flat(text: str) -> str:
    """``text`` with its runs of whitespace as one space (a line rich wrapped at the terminal's width is whole)."""
    return " ".join(text.split())


def section(text: str, title: str) -> list[str]:
    """The lines of a terminal table from its title to its bottom border."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("└"))
    return lines[start : end + 1]


@pytest.fixture(scope="module")
def slower_gemm_diff(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, str]:
    tmp = tmp_path_factory.mktemp("flops_diff")
    (tmp / "a").mkdir()
    write_job(tmp / "a")
    b = write_ranks(tmp / "b", [slower_gemm(flops_job(rank)) for rank in (0, 1)])
    return run_diff(tmp / "a", b, tmp)


@pytest.fixture(scope="module")
def slower_rank_diff(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, str]:
    """A: both ranks 8 times as fast as test_flops's job; B: rank 1 as fast as the job itself. (The job's GPU is busy
    for a small part of each step, so its utilization is small: only compressed this much does it lose 2 points, its
    achieved rate then above an H100's peak. The numbers are arithmetic, not a real GPU's.)"""
    tmp = tmp_path_factory.mktemp("flops_headline")
    fast = [scaled(flops_job(rank), 1 / SLOWDOWN) for rank in (0, 1)]
    a = write_ranks(tmp / "a", fast)
    b = write_ranks(tmp / "b", [fast[0], flops_job(1)])
    return run_diff(a, b, tmp, columns=200)


def test_json_has_the_same_work_and_a_lower_achieved_rate(slower_gemm_diff: tuple[str, dict, str]) -> None:
    _, doc, _ = slower_gemm_diff
    assert [(r["rank"], r["device"]) for r in doc["flops"]] == [(0, 0), (1, 0)]
    for r in doc["flops"]:
        rank = r["rank"]
        assert r["a_flop"] == r["b_flop"] == FLOP, "the same shapes: the same work"
        assert (r["a_gpu_ns"], r["b_gpu_ns"]) == (gpu_ns(rank), gpu_ns(rank, gemm=2))
        assert r["b_gpu_ns"] - r["a_gpu_ns"] == 1000 * STEPS * kernel_us(rank)["addmm"]
        a_rate, b_rate = FLOP / gpu_ns(rank) / 1000, FLOP / gpu_ns(rank, gemm=2) / 1000
        assert (r["a_achieved_tflops"], r["b_achieved_tflops"]) == (pytest.approx(a_rate), pytest.approx(b_rate))
        assert r["rel_achieved"] == pytest.approx(gpu_ns(rank) / gpu_ns(rank, gemm=2) - 1)
        utilization = FLOP / STEPS_NS / 1000 / H100_BF16
        assert r["a_utilization"] == r["b_utilization"] == pytest.approx(utilization), "the steps are as long"
        assert r["delta_utilization"] == 0
        assert r["a_peak_dtype"] == r["b_peak_dtype"] == "bf16"
        assert r["a_device_name"] == r["b_device_name"] == "NVIDIA H100 80GB HBM3"
    rank0 = doc["flops"][0]
    assert rank0["rel_achieved"] == pytest.approx(-40 / 972), "rank 0: 932 us of kernels a step, 40 us more"


def test_terminal_table_fits_80_columns(slower_gemm_diff: tuple[str, dict, str]) -> None:
    text, _, _ = slower_gemm_diff
    table = section(text, "Matrix work per GPU")
    assert all(len(line) <= 80 for line in table)
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table if line.startswith("│")]
    assert rows == [["0", "0", "0.5", "0.5", "+0.0", "199", "191"], ["1", "0", "0.5", "0.5", "+0.0", "191", "177"]]
    assert "Matrix work (rank" not in text, "utilization unchanged: no headline"


def test_page_has_the_section_with_exact_values(slower_gemm_diff: tuple[str, dict, str]) -> None:
    _, doc, page = slower_gemm_diff
    assert 'data-table="flops"' in page and "Matrix work" in page
    assert f'data-v="{FLOP}"' in page and f'data-v="{gpu_ns(1, gemm=2)}"' in page
    assert f'data-v="{doc["flops"][1]["b_achieved_tflops"]!r}"' in page
    assert f'data-v="{doc["flops"][0]["rel_achieved"]!r}"' in page
    assert "Matrix work of rank" not in page


def test_a_rank_much_slower_is_a_headline(slower_rank_diff: tuple[str, dict, str]) -> None:
    """Rank 1 of B takes 8 times as long for the same work: its utilization is an eighth of A's (3.8 % to 0.5 % of
    the bf16 peak, 3.3 points, over the headline's 2); rank 0 did not change."""
    text, doc, page = slower_rank_diff
    rows = {r["rank"]: r for r in doc["flops"]}
    utilization = FLOP / STEPS_NS / 1000 / H100_BF16
    fast = rows[1]
    assert fast["a_flop"] == fast["b_flop"] == FLOP
    assert fast["a_utilization"] == pytest.approx(SLOWDOWN * utilization)
    assert fast["b_utilization"] == pytest.approx(utilization)
    assert fast["delta_utilization"] == pytest.approx(-(SLOWDOWN - 1) * utilization)
    assert abs(fast["delta_utilization"]) >= FLOPS_HEADLINE_POINTS
    assert fast["b_achieved_tflops"] == pytest.approx(FLOP / gpu_ns(1) / 1000)
    assert fast["a_achieved_tflops"] == pytest.approx(SLOWDOWN * FLOP / gpu_ns(1) / 1000)
    assert rows[0]["delta_utilization"] == 0 and rows[0]["rel_achieved"] == 0
    line = "Matrix work (rank 1, GPU 0): utilization 3.8% → 0.5% of the bf16 peak, achieved 1,529 → 191 TFLOP/s"
    assert line in text
    assert text.index("Matrix work (rank 1") < text.index("Kernels by name")
    hint = (
        "Matrix work of rank 1 GPU 0: utilization 3.8 → 0.5 % of the bf16 peak (-3.3 points), achieved 1,529 → 191 "
        "TFLOP/s."
    )
    assert hint in page


def test_a_run_against_itself_has_no_headline(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    write_job(tmp_path / "a")
    text, doc, page = run_diff(tmp_path / "a", tmp_path / "a", tmp_path)
    assert [(r["delta_utilization"], r["rel_achieved"]) for r in doc["flops"]] == [(0, 0), (0, 0)]
    assert "Matrix work (rank" not in text and "Matrix work of rank" not in page
    assert "Matrix work per GPU" in text and 'data-table="flops"' in page


def test_headline_needs_two_points_of_utilization() -> None:
    def table(a: float | None, b: float | None) -> pl.DataFrame:
        return pl.DataFrame(
            {"rank": [0, 1], "device": [0, 0], "a_utilization": [0.3, a], "b_utilization": [0.3, b]},
            schema={"rank": pl.Int32, "device": pl.Int32, "a_utilization": pl.Float64, "b_utilization": pl.Float64},
        ).with_columns((pl.col("b_utilization") - pl.col("a_utilization")).alias("delta_utilization"))

    assert flops_headline(table(0.5, 0.48))["rank"] == 1
    assert flops_headline(table(0.25, 0.27))["delta_utilization"] == pytest.approx(0.02)
    assert flops_headline(table(0.5, 0.485)) is None
    assert flops_headline(table(0.1, 0.4))["delta_utilization"] == pytest.approx(0.3)
    assert flops_headline(table(None, 0.4)) is None, "a GPU without a known peak has no change to rate"


def test_traces_without_shapes_have_no_matrix_work(tmp_path: Path) -> None:
    jobs = []
    for leak_mib in (8, 0):
        job = kineto_job(0, steps=STEPS, leak_mib=leak_mib)
        job["distributedInfo"]["world_size"] = 1
        jobs.append(tmp_path / f"run{leak_mib}.json")
        jobs[-1].write_text(json.dumps(job))
    text, doc, page = run_diff(*jobs, tmp_path)
    assert doc["flops"] == []
    assert "Matrix work" not in text and 'data-table="flops"' not in page
    assert diff(di.load(jobs[0]), di.load(jobs[1])).flops.height == 0


def test_a_gpu_in_one_run_only_has_nulls_on_the_other_side(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    write_job(tmp_path / "a")
    b = write_ranks(tmp_path / "b", [flops_job(0)])
    f = diff(di.load(tmp_path / "a"), di.load(b)).flops
    gone = f.filter(pl.col("rank") == 1).row(0, named=True)
    assert gone["a_flop"] == FLOP and gone["b_flop"] is None
    assert gone["delta_utilization"] is None and gone["rel_achieved"] is None
    assert flops_headline(f) is None
    assert f.filter(pl.col("rank") == 0).get_column("delta_utilization").item() == 0


def test_profiles_without_shapes_have_no_matrix_rows(tmp_path: Path) -> None:
    """Both runs recorded their matrix operators without shapes: no row of unknowns on either side."""
    doc = flops_job(0)
    for e in doc["traceEvents"]:
        e.get("args", {}).pop("Input Dims", None)
    f = tmp_path / "plain.json"
    f.write_text(json.dumps(doc))
    assert diff(di.load(f), di.load(f)).flops.height == 0
