"""Nsight Systems reports of many ranks: one report per rank merged into one job.

The rank comes from --rank, the file name (``rank-N``, ``report.N`` as
``nsys profile -o report.%q{OMPI_COMM_WORLD_RANK}`` writes it) or the
environment recorded in the report; ``di info`` says which.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import DATA, assert_valid

import di
from di.errors import FormatError
from tests import nsys_cases as cases

CLOVER = DATA / "nsys" / "cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite"


def _copies(tmp_path: Path, *names: str) -> list[Path]:
    if not CLOVER.exists():
        pytest.skip("shared test data absent: nsys/cloverleaf/ not found under ../shared/data")
    out = []
    for n in names:
        shutil.copyfile(CLOVER, tmp_path / n)
        out.append(tmp_path / n)
    return out


@pytest.mark.parametrize("names", [("rank-0.sqlite", "rank-1.sqlite"), ("report.0.sqlite", "report.1.sqlite")])
def test_two_copies_named_by_rank_merge_into_one_job(tmp_path: Path, names: tuple[str, str]) -> None:
    one = di.load(_copies(tmp_path, "single.sqlite")[0])
    job = assert_valid(di.load(_copies(tmp_path, *names)))
    assert job.ranks == [0, 1]
    assert [s["rank_source"] for s in job.meta["sources"]] == ["file_name", "file_name"]
    assert job.events.height == 2 * one.events.height and job.flows.height == 2 * one.flows.height
    for r in (0, 1):  # both on the one (epoch) clock: the same times as the single report
        locs = job.locations.filter(pl.col("rank") == r).get_column("loc")
        ev = job.events.filter(pl.col("loc").is_in(locs.implode()))
        assert ev.get_column("start_ns").sort().equals(one.events.get_column("start_ns").sort())
    assert job.meta["clock"]["domain"] == "unix_epoch"
    # the copy named rank 1 recorded PMI_RANK=0: said, the name wins
    assert any("rank 1 (file_name) differs from PMI_RANK=0" in w for w in job.meta["warnings"])


def test_rank_from_the_recorded_environment(tmp_path: Path) -> None:
    a = cases.build(tmp_path / "a.sqlite", env={"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"})
    b = cases.build(tmp_path / "b.sqlite", env={"SLURM_PROCID": "1", "SLURM_NTASKS": "4"})
    job = assert_valid(di.load([a, b]))
    assert job.ranks == [1, 3] and job.meta["world_size"] == 4
    src = {s["rank"]: s for s in job.meta["sources"]}
    assert src[3]["rank_source"] == "metadata" and src[3]["info"]["rank_variable"] == "OMPI_COMM_WORLD_RANK"
    assert src[1]["info"]["rank_variable"] == "SLURM_PROCID"


def test_rank_option_wins_and_same_rank_twice_is_refused(tmp_path: Path) -> None:
    a = cases.build(tmp_path / "a.sqlite", env={"PMI_RANK": "2"})
    t = di.load(a, rank=5)
    assert t.ranks == [5] and t.meta["sources"][0]["rank_source"] == "option"
    b = cases.build(tmp_path / "b.sqlite", env={"PMI_RANK": "2"})
    with pytest.raises(FormatError, match="rank 2 is also in .*--ranks"):
        di.load([a, b])
    assert di.load([a, b], ranks=[0, 1]).ranks == [0, 1]


def test_di_info_says_where_each_rank_came_from(tmp_path: Path) -> None:
    a = cases.build(tmp_path / "report.0.sqlite")
    b = cases.build(tmp_path / "x.sqlite", env={"PMI_RANK": "1"})
    out = subprocess.run(
        [sys.executable, "-m", "di", "info", str(a), str(b)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "250"},  # one table row per source
    ).stdout
    assert "file_name" in out and "metadata (PMI_RANK)" in out


def test_convert_a_folder_of_reports(tmp_path: Path) -> None:
    for r in range(3):
        cases.build(tmp_path / f"report.{r}.sqlite")
    job = assert_valid(di.load(tmp_path))
    assert job.ranks == [0, 1, 2]


def test_one_report_of_a_whole_mpirun_gives_each_process_its_mpi_rank(tmp_path: Path) -> None:
    path = cases.add_mpi(cases.build(tmp_path / "report.7.sqlite"), {cases.GTID: 0, cases.GTID2: 1})
    t = assert_valid(di.load(path))
    assert t.ranks == [0, 1] and t.meta["sources"][0]["rank_source"] == "metadata"  # MPI_RANKS before the file name
    assert t.meta["sources"][0]["info"]["rank_variable"] == "MPI_RANKS"
    by_pid = dict(t.locations.select("pid", "rank").unique().iter_rows())
    assert by_pid == {cases.PID: 0, cases.PID2: 1}
    mpi = t.events.filter(pl.col("src_cat") == "mpi").join(t.locations.select("loc", "rank"), on="loc")
    calls = mpi.select(pl.col("rank"), pl.col("name").cast(pl.String), "cat", "bytes").rows()
    assert Counter(calls) == Counter(
        [
            (r, cases.MPI_STRINGS[row[3]], _cat(cases.MPI_STRINGS[row[3]]), row[6])
            for r in (0, 1)
            for row in cases.EXCHANGE[r]
        ]
    )
    send = mpi.filter(pl.col("name") == "MPI_Send").sort("start_ns").get_column("args")[0]
    assert '"tag":7' in send and '"remote rank":1' in send


def _cat(name: str) -> str:
    return (
        "other"
        if name in ("MPI_Init", "MPI_Comm_rank")
        else "mpi_coll"
        if name in ("MPI_Allreduce", "MPI_Barrier")
        else "mpi_p2p"
    )


def test_mpi_ranks_of_one_process_per_report_merge(tmp_path: Path) -> None:
    a = cases.add_mpi(cases.build(tmp_path / "a.sqlite"), {cases.GTID: 2})
    b = cases.add_mpi(cases.build(tmp_path / "b.sqlite"), {cases.GTID: 3})
    job = assert_valid(di.load([a, b]))
    assert job.ranks == [2, 3]
