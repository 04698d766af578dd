"""`di analyze runs/*.di --csv out/`: one row per trace and rank, equal to each trace's own analysis."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import OTF2

import di
from di.cli import main
from di.demo import write_kineto_job
from di.viewers.batch import FILE


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    for ranks in (2, 4):
        src = folder / f"kineto{ranks}"
        write_kineto_job(src, ranks=ranks, steps=3)
        di.save(di.load(src), folder / f"job{ranks}.di")
    return folder


def test_many_stores_give_one_row_per_trace_and_rank(runs, tmp_path, capsys):
    assert main(["analyze", str(runs / "*.di"), "--csv", str(tmp_path)]) == 0
    assert "one row per trace and rank" in capsys.readouterr().out
    table = pl.read_csv(tmp_path / FILE)
    assert table.select("trace", "rank").rows() == [(str(runs / "job2.di"), r) for r in range(2)] + [
        (str(runs / "job4.di"), r) for r in range(4)
    ]
    result = di.analyze(di.load(runs / "job4.di"))
    b = result.breakdown.filter((pl.col("rank") == 3) & (pl.col("scope") != "host"))
    row = table.filter((pl.col("trace") == str(runs / "job4.di")) & (pl.col("rank") == 3)).row(0, named=True)
    assert row["idle_ns"] == b.filter(pl.col("state") == "idle").get_column("time_ns").sum()
    causes = [c for c in table.columns if c.startswith("gpu_idle_")]
    assert len(causes) == 6 and sum(row[c] for c in causes) == row["idle_ns"] > 0
    assert row["cp_length_ns"] == result.critical_path["summary"]["length_ns"]
    assert row["waited_ns"] == result.wait_states.filter(pl.col("rank") == 3).get_column("wait_ns").sum()


def test_batch_flag_treats_each_input_as_a_trace(runs, tmp_path, capsys):
    archive = OTF2 / "casita_4_mpi_ls_barr" / "traces.otf2"
    inputs = [str(runs / "kineto2"), str(runs / "kineto4")] + ([str(archive)] if archive.exists() else [])
    assert main(["analyze", "--batch", *inputs, "--csv", str(tmp_path)]) == 0
    table = pl.read_csv(tmp_path / FILE)
    sizes = dict(table.group_by("trace").len().iter_rows())
    assert sizes[inputs[0]] == 2 and sizes[inputs[1]] == 4
    if archive.exists():
        assert sizes[str(archive)] == 4


def test_batch_refuses_json(runs, tmp_path, capsys):
    assert main(["analyze", str(runs / "*.di"), "--json", str(tmp_path / "x.json")]) == 2
    assert "--csv" in capsys.readouterr().err
