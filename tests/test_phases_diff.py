"""Training phases in `di diff A B`: run A is test_phases's two-rank job (rank 1 loads data for 2,500 µs a step, rank
0 for 500 µs), run B the same job with rank 1's ``enumerate(DataLoader)#...`` regions ended :data:`SAVED_US` sooner.
Every later event keeps its time, so rank 1's data phase loses exactly that much host time, all of it time its GPU
sat idle, and nothing else moves: side by side in the JSON, the terminal and the page, and the headline names rank
1's data phase. A run that names no phase of a rank has nulls on its side; one that names the rank's other phases has
0 in the missing one."""

from __future__ import annotations

from pathlib import Path

import diff_jobs
import polars as pl
import pytest
from report_tables import read_page
from test_flops_diff import flat, run_diff, section, write_ranks
from test_phases import DATA_US, STEP_US, STEPS, expected, phases_job, write_job

import di
from di.engine.phases import PHASES
from di.viewers.diff import diff
from di.viewers.diff.results import PHASES_HEADLINE_SHARE, phases_headline

SAVED_US = 2_000
"""How much sooner each of B's rank-1 data-loading regions ends (µs): 2,500 → 500, rank 0's length."""
DATA_REGION = "enumerate(DataLoader)#"
"""The start of the names of PyTorch's data-loading regions in test_phases's job."""
TIME_NS = STEPS * (STEP_US - 1) * 1000
"""Each rank's steps summed (ns): the time the shares are of, the same in A and B."""
SAVED_NS = STEPS * SAVED_US * 1000
"""Rank 1's data phase's host time (and GPU idle time) saved over the window (ns)."""


def shorter_data(rank: int, saved_us: int = SAVED_US) -> dict:
    """test_phases's job of ``rank`` with its data-loading regions ``saved_us`` shorter (their starts and every other
    event as they were)."""
    job = phases_job(rank)
    for e in job["traceEvents"]:
        if e["name"].startswith(DATA_REGION):
            e["dur"] -= saved_us
    return job


def without(rank: int, prefixes: tuple[str, ...]) -> dict:
    """test_phases's job of ``rank`` without the events whose names start with one of ``prefixes``."""
    job = phases_job(rank)
    job["traceEvents"] = [e for e in job["traceEvents"] if not str(e.get("name", "")).startswith(prefixes)]
    return job


def want(rank: int, phase: str, side: str) -> dict[str, int]:
    """host and idle (ns) of a rank's phase over the window in run ``side`` ("a" or "b")."""
    got = expected(rank)[phase]
    cut = SAVED_NS if side == "b" and (rank, phase) == (1, "data") else 0
    return {"host": got["host"] - cut, "idle": got["idle"] - cut}


@pytest.fixture(scope="module")
def shorter_data_diff(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, str]:
    tmp = tmp_path_factory.mktemp("phases_diff")
    write_job(tmp / "a")
    b = write_ranks(tmp / "b", [phases_job(0), shorter_data(1)])
    return run_diff(tmp / "a", b, tmp)


def test_json_has_every_phase_and_rank_1s_data_phase_shorter(shorter_data_diff: tuple[str, dict, str]) -> None:
    _, doc, _ = shorter_data_diff
    assert [(r["rank"], r["phase"]) for r in doc["phases"]] == [(rank, p) for rank in DATA_US for p in PHASES]
    for r in doc["phases"]:
        a, b = want(r["rank"], r["phase"], "a"), want(r["rank"], r["phase"], "b")
        assert (r["a_host_ns"], r["b_host_ns"]) == (a["host"], b["host"])
        assert (r["a_gpu_idle_ns"], r["b_gpu_idle_ns"]) == (a["idle"], b["idle"])
        assert r["a_time_ns"] == r["b_time_ns"] == TIME_NS
        assert r["a_host_share"] == pytest.approx(a["host"] / TIME_NS)
        assert r["b_host_share"] == pytest.approx(b["host"] / TIME_NS)
        if (r["rank"], r["phase"]) == (1, "data"):
            assert r["delta_host_ns"] == r["delta_gpu_idle_ns"] == -SAVED_NS == -8_000_000
            assert (r["a_host_ns"], r["b_host_ns"]) == (10_000_000, 2_000_000)
        else:
            assert r["delta_host_ns"] == r["delta_gpu_idle_ns"] == 0, (r["rank"], r["phase"])
    assert doc["steps"]["delta"]["mean_ns"] == 0, "the steps keep their times"


def test_headline_names_rank_1s_data_phase(shorter_data_diff: tuple[str, dict, str]) -> None:
    """8 ms saved over 40 ms of steps: 20 % of the step, over the headline's 5."""
    text, _, page = shorter_data_diff
    line = (
        "Training phase (rank 1, data): host 10.000 → 2.000 ms (-8.000 ms), 25.0% → 5.0% of its steps; GPUs idle in "
        "it 10.000 → 2.000 ms"
    )
    assert line in flat(text)
    assert text.index("Training phase (rank 1") < text.index("Kernels by name")
    assert f"<li>{line}.</li>" in page  # the page says the terminal's sentence


def test_terminal_table_lists_the_change_within_80_columns(shorter_data_diff: tuple[str, dict, str]) -> None:
    text, _, _ = shorter_data_diff
    table = section(text, "Training phases that changed")
    assert all(len(line) <= 80 for line in table)
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table if line.startswith("│")]
    assert rows == [["1", "data", "10.000", "2.000", "-8.000", "25.0→5.0", "-8.000"]], "only what changed"


def test_page_table_holds_the_exact_values(shorter_data_diff: tuple[str, dict, str]) -> None:
    _, doc, page = shorter_data_diff
    tables, _ = read_page(page)
    rows = tables["phases"]
    assert [(r["rank"], r["phase"]) for r in rows] == [(r["rank"], r["phase"]) for r in doc["phases"]]
    columns = {
        "a_host_ns": "a_host_ns",
        "b_host_ns": "b_host_ns",
        "delta_host_ns": "delta_host_ns",
        "a_host %": "a_host_share",
        "b_host %": "b_host_share",
        "a_gpu_idle_ns": "a_gpu_idle_ns",
        "b_gpu_idle_ns": "b_gpu_idle_ns",
        "delta_gpu_idle_ns": "delta_gpu_idle_ns",
    }
    for shown, kept in zip(rows, doc["phases"]):
        assert {col: shown[col] for col in columns} == {col: kept[key] for col, key in columns.items()}
    data = next(r for r in rows if (r["rank"], r["phase"]) == (1, "data"))
    assert (data["a_host_ns"], data["b_host_ns"], data["delta_gpu_idle_ns"]) == (10_000_000, 2_000_000, -SAVED_NS)


def test_a_run_against_itself_has_no_change(tmp_path: Path) -> None:
    write_job(tmp_path / "a")
    text, doc, page = run_diff(tmp_path / "a", tmp_path / "a", tmp_path)
    assert len(doc["phases"]) == len(DATA_US) * len(PHASES)
    assert {(r["delta_host_ns"], r["delta_gpu_idle_ns"]) for r in doc["phases"]} == {(0, 0)}
    assert "Training phases: no change" in text and "Training phase (rank" not in text
    assert 'data-table="phases"' in page and "data phase: host time" not in page


def test_a_phase_one_run_lacks_is_zero_and_a_rank_without_markers_null(tmp_path: Path) -> None:
    """B's rank 1 loads no data (no DataLoader regions: its other phases are named, so its data time is 0, and the
    headline); C's rank 1 has no marker at all (its phases are unknown: nulls on C's side, and no headline)."""
    write_job(tmp_path / "a")
    a = di.load(tmp_path / "a")
    b = write_ranks(tmp_path / "b", [phases_job(0), without(1, (DATA_REGION,))])
    table = diff(a, di.load(b)).phases
    data = table.filter((pl.col("rank") == 1) & (pl.col("phase") == "data")).row(0, named=True)
    assert (data["a_host_ns"], data["b_host_ns"], data["delta_host_ns"]) == (10_000_000, 0, -10_000_000)
    assert (data["b_gpu_idle_ns"], data["b_host_share"], data["in_b"]) == (0, 0.0, True)
    assert phases_headline(table)["delta_host_ns"] == -10_000_000
    markers = (DATA_REGION, "autograd::", "Optimizer.")
    c = write_ranks(tmp_path / "c", [phases_job(0), without(1, markers)])
    table = diff(a, di.load(c)).phases
    rank1 = table.filter(pl.col("rank") == 1)
    assert rank1.get_column("phase").to_list() == list(PHASES), "A's rows stay"
    for col in ("b_host_ns", "b_gpu_idle_ns", "b_host_share", "b_time_ns", "delta_host_ns", "delta_gpu_idle_ns"):
        assert rank1.get_column(col).null_count() == rank1.height, col
    assert not rank1.get_column("in_b").any()
    assert phases_headline(table) is None, "rank 0 did not change; rank 1's change is unknown"


def test_traces_without_phase_markers_have_no_phases() -> None:
    d = diff(diff_jobs.job(), diff_jobs.job(gemm_ms=3.0))
    assert d.phases.height == 0 and phases_headline(d.phases) is None


def test_headline_needs_five_percent_of_the_ranks_step() -> None:
    def table(a_ns: int | None, b_ns: int | None) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "rank": [0, 1, 1],
                "phase": ["data", "backward", "data"],
                "a_host_ns": [1_000, 5_000, a_ns],
                "b_host_ns": [1_000, 5_000, b_ns],
                "a_time_ns": [100_000, 100_000, 100_000],
            },
            schema={
                "rank": pl.Int32,
                "phase": pl.String,
                "a_host_ns": pl.Int64,
                "b_host_ns": pl.Int64,
                "a_time_ns": pl.Int64,
            },
        ).with_columns((pl.col("b_host_ns") - pl.col("a_host_ns")).alias("delta_host_ns"))

    assert PHASES_HEADLINE_SHARE == 0.05
    assert phases_headline(table(20_000, 25_000))["phase"] == "data", "5,000 ns of a 100,000 ns step: 5 %"
    assert phases_headline(table(20_000, 15_000))["delta_host_ns"] == -5_000
    assert phases_headline(table(20_000, 24_999)) is None
    assert phases_headline(table(None, 40_000)) is None, "a run without the rank's phases has no change to rate"
    grown = table(20_000, 30_000).with_columns(pl.Series("b_host_ns", [1_000, 15_000, 30_000]))
    grown = grown.with_columns((pl.col("b_host_ns") - pl.col("a_host_ns")).alias("delta_host_ns"))
    tie = phases_headline(grown)
    assert (tie["rank"], tie["phase"]) == (1, "data"), "a tie: the earlier phase of a step (not the first by name)"
