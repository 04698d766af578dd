"""The analysis di adds on `di convert` by default: marked, recognised on read, never stacked, never analyzed.

A trace di wrote with analysis tracks reads back to the program's own trace
exactly once the marked parts are dropped (:func:`di.analysis_parts.without_analysis`);
converting it again replaces the analysis; `di analyze` gives the same numbers
as on the raw trace. OTF2 archives carry the marks as groups, markers and metrics.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from test_analysis_tracks import ls_barr_with_analysis

import di
from di.analysis_parts import PATH_ARG, PROCESS, has_analysis, path_args, without_analysis
from di.cli import main
from di.demo import write_kineto_job
from di.trace import Trace
from di.viewers.analysis_tracks import TRACK, WAIT_TRACK, WAITS, with_analysis

TABLES = ("locations", "events", "messages", "collectives", "flows", "series", "samples")


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("job")
    write_kineto_job(folder, ranks=3, steps=3)
    return folder


def convert(src: Path | str, out: Path, *flags: str) -> Trace:
    assert main(["convert", str(src), "-o", str(out), *flags]) == 0
    return di.load(out)


def assert_same(a: Trace, b: Trace, skip_location_cols: tuple[str, ...] = ()) -> None:
    for name in TABLES:
        x, y = a.table(name), b.table(name)
        if name == "locations":
            x, y = x.drop(*skip_location_cols), y.drop(*skip_location_cols)
        assert x.equals(y), name


def path_tracks(trace: Trace) -> int:
    return trace.locations.filter((pl.col("process") == PROCESS) & (pl.col("name") == TRACK)).height


@pytest.mark.parametrize("ext", ["perfetto-trace", "json.gz"])
def test_viewer_formats_get_the_analysis_and_read_back_to_the_program(job, tmp_path, ext):
    raw = di.load(job)
    back = convert(job, tmp_path / f"job.{ext}")
    assert has_analysis(back) and path_tracks(back) == 1
    assert back.events.height > raw.events.height
    plain = convert(job, tmp_path / f"plain.{ext}", "--no-analysis")
    assert not has_analysis(plain)
    assert_same(without_analysis(back), plain)
    if ext == "perfetto-trace":  # exact in every column (Chrome JSON: see test_roundtrip.py for what it keeps)
        assert_same(plain, raw)


def test_otf2_analysis_drops_back_to_the_plain_archive(job, tmp_path):
    tracked = convert(job, tmp_path / "a" / "traces.otf2")
    plain = convert(job, tmp_path / "b" / "traces.otf2", "--no-analysis")
    assert has_analysis(tracked) and path_tracks(tracked) == 1 and not has_analysis(plain)
    assert_same(without_analysis(tracked), plain, skip_location_cols=("sort_index", "tid"))


def test_store_stays_raw_unless_asked(job, tmp_path):
    assert not has_analysis(convert(job, tmp_path / "raw.di"))
    assert path_tracks(convert(job, tmp_path / "asked.di", "--analysis")) == 1
    # a viewer file with analysis converted to a store loses the analysis, and only it
    tracked = tmp_path / "t.perfetto-trace"
    convert(job, tracked)
    assert_same(convert(tracked, tmp_path / "from_viewer.di"), di.load(job))


def test_converting_again_replaces_the_analysis(job, tmp_path):
    first = convert(job, tmp_path / "one.perfetto-trace")
    again = convert(tmp_path / "one.perfetto-trace", tmp_path / "two.perfetto-trace")
    assert path_tracks(again) == 1
    assert_same(again, first)
    chrome = convert(tmp_path / "two.perfetto-trace", tmp_path / "three.json.gz")
    assert path_tracks(chrome) == 1 and chrome.events.height == first.events.height


def test_analyze_ignores_the_analysis_tracks(job, tmp_path, capsys):
    tracked = tmp_path / "job.perfetto-trace"
    convert(job, tracked)
    docs = []
    for src in (job, tracked):
        capsys.readouterr()
        assert main(["analyze", str(src), "--window", "steps=1:", "--json", "-"]) == 0
        doc = json.loads(capsys.readouterr().out)
        docs.append({k: v for k, v in doc.items() if k not in ("inputs", "seconds")})
    assert docs[0] == docs[1]
    assert docs[0]["critical_path"]["summary"]["length_ns"] > 0


def test_path_flows_do_not_change_the_critical_path():
    """casita_4_mpi_ls_barr: the path crosses ranks, so the analysis adds user flows between program events."""
    trace, result, tracked = ls_barr_with_analysis()
    assert tracked.flows.height > trace.flows.height
    again = di.analyze(tracked)
    assert again.critical_path["summary"] == result.critical_path["summary"]
    assert again.critical_path["events"].equals(result.critical_path["events"])
    assert again.breakdown.equals(result.breakdown)
    stacked = with_analysis(tracked, again)
    assert_same(stacked, tracked)


def test_path_args_come_back_exactly():
    args = pl.Series("args", [None, "{}", '{"a":1}', '{"b": [1, 2]}', None, "not json"], dtype=pl.String)
    contrib = pl.Series("c", [5, 6, 7, 8, None, 9], dtype=pl.Int64)
    added = pl.DataFrame({"args": args, "c": contrib}).select(path_args(pl.col("args"), pl.col("c"))).to_series()
    assert added.to_list() == [
        '{"critical_path_ns":5}',
        '{ "critical_path_ns":6}',
        '{"a":1,"critical_path_ns":7}',
        '{"b": [1, 2],"critical_path_ns":8}',
        None,
        "not json",
    ]
    assert all(json.loads(a)[PATH_ARG] == c for a, c in zip(added.to_list()[:4], [5, 6, 7, 8]))
    locs = pl.DataFrame(
        {
            "loc": [0, 1],
            "rank": [0, 0],
            "kind": ["cpu_thread", "cpu_thread"],
            "name": ["main", TRACK],
            "process": ["python", PROCESS],
            "source": [0, 0],
        }
    )
    n = args.len()
    events = pl.DataFrame(
        {
            "loc": [0] * n + [1],
            "start_ns": list(range(n)) + [0],
            "end_ns": list(range(1, n + 1)) + [n],
            "name": ["f"] * n + ["f"],
            "cat": ["compute"] * (n + 1),
            "depth": [0] * (n + 1),
            "instant": [False] * (n + 1),
            "args": added.to_list() + ["{}"],
        }
    )
    trace = Trace.build(meta={}, locations=locs, events=events)
    program = without_analysis(trace)
    assert program.events.get_column("args").to_list() == args.to_list()
    assert program.locations.height == 1 and not has_analysis(program)


def test_path_args_found_by_key_in_reformatted_json():
    """Another tool rewrote the file: keys sorted or moved, spaces and line breaks; the mark is its key."""
    written = [
        '{"a": 1, "critical_path_ns": 7}',
        '{"critical_path_ns": 9, "z": [1, 2]}',
        '{\n  "critical_path_ns": 5\n}',
        '{"a": {"b": 1}, "critical_path_ns" : -3 , "c": "x"}',
        '{"critical_path_nsx": 1}',
        "{}",
    ]
    program = ['{"a": 1}', '{"z": [1, 2]}', None, '{"a": {"b": 1}, "c": "x"}', '{"critical_path_nsx": 1}', "{}"]
    n = len(written)
    locs = pl.DataFrame(
        {
            "loc": [0, 1],
            "rank": [0, 0],
            "kind": ["cpu_thread", "cpu_thread"],
            "name": ["main", TRACK],
            "process": ["python", PROCESS],
            "source": [0, 0],
        }
    )
    events = pl.DataFrame(
        {
            "loc": [0] * n + [1],
            "start_ns": list(range(n)) + [0],
            "end_ns": list(range(1, n + 1)) + [n],
            "name": ["f"] * (n + 1),
            "cat": ["compute"] * (n + 1),
            "depth": [0] * (n + 1),
            "instant": [False] * (n + 1),
            "args": written + ["{}"],
        }
    )
    back = without_analysis(Trace.build(meta={}, locations=locs, events=events)).events.get_column("args").to_list()
    assert back == program
    assert [json.loads(a) if a else a for a in back[:4]] == [{"a": 1}, {"z": [1, 2]}, None, {"a": {"b": 1}, "c": "x"}]


def test_otf2_groups_markers_and_metrics(tmp_path):
    job = tmp_path / "job"
    write_kineto_job(job, ranks=2, steps=3)
    out = tmp_path / "otf2" / "traces.otf2"
    convert(job, out)
    import otf2

    trace = di.load(job)
    result = di.analyze(trace, per_step=True)
    path_names = set(
        trace.events.get_column("name")
        .cast(pl.String)
        .gather(result.critical_path["events"].get_column("event"))
        .to_list()
    )
    with otf2.reader.open(str(out)) as reader:
        groups = {(g.name, str(g.group_type).rsplit(".", 1)[-1]): g for g in reader.definitions.groups}
        on_path = {r.name for r in groups[("Critical path", "REGIONS")].members}
        tracked = {loc.name for loc in groups[(PROCESS, "LOCATIONS")].members}
    assert on_path == path_names
    assert TRACK in tracked and "analysis" in tracked
    back = di.load(out)
    samples = back.samples.join(back.series, on="series")
    waits = result.wait_states.filter(pl.col("step").is_not_null()).group_by("rank").agg(pl.col("wait_ns").sum())
    for rank, wait_ns in waits.iter_rows():
        got = samples.filter(pl.col("name") == f"rank {rank} wait").get_column("value").sum()
        assert got == pytest.approx(wait_ns / 1e6)
    # the worst wait states: their own timeline (read back from the archive) and markers
    worst = result.wait_states.filter(pl.col("wait_ns") > 0).sort("wait_ns", descending=True).head(WAITS)
    wait_loc = back.locations.filter((pl.col("process") == PROCESS) & (pl.col("name") == WAIT_TRACK)).get_column("loc")
    shown = back.events.filter(pl.col("loc").is_in(wait_loc.implode()))
    assert shown.height == worst.height > 0
    assert (shown.get_column("end_ns") - shown.get_column("start_ns")).sum() == worst.get_column("wait_ns").sum()
    printer = shutil.which("otf2-marker")
    if printer:
        text = subprocess.run([printer, str(out)], capture_output=True, text=True, check=True).stdout
        segments = result.critical_path["segments"].filter(pl.col("end_ns") > pl.col("start_ns")).height
        assert text.count("MARKER ") == min(50, segments) + worst.height
        assert 'Category: "critical path"' in text and 'Category: "wait state"' in text
