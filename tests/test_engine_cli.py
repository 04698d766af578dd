"""`di analyze`: terminal summary, JSON that validates against schemas/analysis/v1, CSV, errors."""

from __future__ import annotations

import json

import polars as pl
import pytest

import di
from di.cli import main
from di.demo import write_kineto_job
from di.viewers.analysis import validate


@pytest.fixture(scope="module")
def demo_job(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    write_kineto_job(folder, ranks=4, steps=4)
    return folder


def test_analyze_json_csv_and_summary(demo_job, tmp_path, capsys):
    out = tmp_path / "result.json"
    assert (
        main(
            [
                "analyze",
                str(demo_job),
                "--window",
                "steps=:-1",
                "--steps",
                "--json",
                str(out),
                "--csv",
                str(tmp_path / "csv"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "Temporal breakdown" in printed and "Critical path" in printed and "Wait states" in printed
    doc = json.loads(out.read_text())
    validate(doc)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
    assert doc["window"] == "steps=:-1" and doc["per_step"]
    assert len({s["step"] for s in doc["steps"]}) == 3, "4 steps, the last one dropped"
    # the demo's rank 1 is the straggler: it makes the others wait at the allreduces
    caused = {r["rank"]: sum(r["wait_states"]["caused_ns"].values()) for r in doc["ranks"]}
    assert max(caused, key=caused.get) == 1 and caused[1] > 0
    steps_in_breakdown = {b["step"] for r in doc["ranks"] for b in r["breakdown"]}
    assert None in steps_in_breakdown and len(steps_in_breakdown) == 4
    assert doc["critical_path"]["summary"]["length_ns"] <= doc["critical_path"]["summary"]["window_span_ns"]
    for name in (
        "breakdown",
        "overlap",
        "imbalance",
        "wait_states",
        "steps",
        "critical_path_segments",
        "critical_path_by_rank",
    ):
        assert pl.read_csv(tmp_path / "csv" / f"{name}.csv").height >= 0
    assert pl.read_csv(tmp_path / "csv" / "breakdown.csv").height > 0


def test_analyze_json_to_stdout_matches_python_api(demo_job, capsys):
    assert main(["analyze", str(demo_job), "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    result = di.analyze(di.load(demo_job))
    ours = (
        result.breakdown.filter((pl.col("rank") == 2) & (pl.col("state") == "idle"))
        .sort("scope")
        .get_column("time_ns")
        .to_list()
    )
    theirs = sorted((b["scope"], b["time_ns"]) for b in doc["ranks"][2]["breakdown"] if b["state"] == "idle")
    assert ours == [t for _, t in theirs]


def test_a_slow_load_reports_its_time_on_stderr_not_in_the_json(demo_job, capsys, monkeypatch):
    """Loads over a second print how long they took; that line must not land in
    stdout, where ``--json -`` writes the result."""
    import itertools

    import di.cli.loading

    ticks = itertools.count(0.0, 5.0)  # every clock read is 5 s after the last
    monkeypatch.setattr(di.cli.loading.time, "monotonic", lambda: next(ticks))
    assert main(["analyze", str(demo_job), "--json", "-"]) == 0
    out, err = capsys.readouterr()
    validate(json.loads(out))
    assert "loaded" in err and "events in" in err


def test_time_window(demo_job):
    trace = di.load(demo_job)
    full = di.analyze(trace, analyses=("breakdown",)).breakdown
    part = di.analyze(trace, window="time=32ms:37ms", analyses=("breakdown",)).breakdown
    assert part.get_column("span_ns").max() <= 5_000_000 < full.get_column("span_ns").max()


@pytest.mark.parametrize("window", ["steps=a:b", "time=5", "rows=1:2", "time=1parsec:2"])
def test_bad_window_is_one_line_error(demo_job, window, capsys):
    assert main(["analyze", str(demo_job), "--window", window]) == 2
    err = capsys.readouterr().err
    assert "--window" in err and "Traceback" not in err


def test_schema_rejects_a_record_without_rank(demo_job, capsys):
    main(["analyze", str(demo_job), "--json", "-"])
    doc = json.loads(capsys.readouterr().out)
    del doc["ranks"][0]["rank"]
    with pytest.raises(di.SchemaError, match="ranks/0"):
        validate(doc)


def test_summary_written_to_a_file_keeps_every_column_whole(demo_job):
    """``di analyze X > summary.txt``: no window crops a file, so each table is as wide as its cells ask (here over
    80 columns), every row ends at the table's right border and no header wraps; an explicit ``COLUMNS`` is a
    terminal's width, which the tables keep to."""
    import os
    import subprocess
    import sys

    wide, narrow = (
        subprocess.run(
            [sys.executable, "-m", "di", "analyze", str(demo_job)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**{k: v for k, v in os.environ.items() if k != "COLUMNS"}, **columns},
        )
        for columns in ({}, {"COLUMNS": "80"})
    )
    assert wide.returncode == 0 and narrow.returncode == 0, wide.stderr + narrow.stderr
    rows = [line for line in wide.stdout.splitlines() if line[:1] in "│┃┏┡└"]
    assert max(map(len, rows)) > 80
    assert all(line[-1] in "│┃┓┩┘" for line in rows)
    assert any("vs fastest %" in line for line in rows)  # the step table's last header, on one line
    assert max(map(len, narrow.stdout.splitlines())) <= 80
