"""Slurm tables: sacct -P, squeue with \\x1f separators, sacct's fixed-width default."""

from __future__ import annotations

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


def test_sacct_parsable_with_times_gives_job_steps_and_failures(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobID|JobName|State|Start|End|NodeList\n"
        "42|train|FAILED|2025-01-02T03:00:00|2025-01-02T04:00:00|n[01-02]\n"
        "42.0|python|CANCELLED by 7|2025-01-02T03:00:05|2025-01-02T04:00:00|n[01-02]\n"
        "43|next|PENDING|Unknown|Unknown|None assigned\n"
    )
    trace = di.load(path)
    trace.validate()
    jobs = trace.meta["sources"][0]["info"]["slurm"]["jobs"]
    assert [j["jobid"] for j in jobs] == ["42", "42.0", "43"] and jobs[0]["nodelist"] == "n[01-02]"
    steps = trace.events.filter(pl.col("cat") == "step").sort("start_ns")
    assert steps.get_column("name").to_list() == ["slurm 42", "slurm 42.0"]
    assert steps.row(0, named=True)["end_ns"] - steps.row(0, named=True)["start_ns"] == 3600 * 10**9
    assert sorted(trace.events.filter(pl.col("instant")).get_column("name").to_list()) == [
        "slurm CANCELLED",
        "slurm FAILED",
    ]


def test_real_slurm_tables() -> None:
    p = di.load(need("slurm/sacct_parsable_P_psc_bridges_2018.txt")).meta["sources"][0]
    assert len(p["info"]["slurm"]["jobs"]) == 269 and p["dropped"] == {}
    fixed = di.load(need("slurm/sacct_default_fixedwidth_psc_bridges_2018_first1500lines.txt")).meta["sources"][0][
        "info"
    ]["slurm"]
    assert fixed["jobs"][1]["jobid"] == "1933171.ext+" and fixed["truncated"] > 0
    sq = di.load(need("slurm/squeue_unit_separator_non_utf8_job_name.txt"))
    src = sq.meta["sources"][0]
    assert src["info"]["garbled_lines"] == {"lines with bytes that are not UTF-8": 1}
    assert src["info"]["slurm"]["jobs"][0]["jobid"] == "123" and sq.events.height == 1
