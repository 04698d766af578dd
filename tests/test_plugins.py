"""Plugins: the example package (examples/di-memcpy-panel) installed with pip shows up in
`di plugins` and in the report; a plugin that raises on import is reported and skipped.

The example is installed with ``pip install --target`` into a temporary folder
(not into the shared environment) and put on PYTHONPATH of a fresh `di`
process, so its entry points resolve through its real dist-info.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from report_tables import read_page

import di
from di.demo import write_kineto_job

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "di-memcpy-panel"


def _write_broken_plugin(site: Path) -> None:
    """A distribution whose report panel raises on import, and a connector entry point of the wrong kind."""
    (site / "di_broken_plugin.py").write_text("raise RuntimeError('this plugin is broken on purpose')\n")
    (site / "di_wrong_kind.py").write_text("connector = 42\n")
    info = site / "di_broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: di-broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[di.report_panels]\nbroken = di_broken_plugin:panel\n\n[di.connectors]\nwrong = di_wrong_kind:connector\n"
    )


TOY_PLUGIN = """
from pathlib import Path

import polars as pl

from di.convert.registry import Connector
from di.trace import Trace


def read(path, **kw):
    # one line per slice after the TOYTRACE header: rank start_ns end_ns name
    rows = [line.split() for line in Path(path).read_text().splitlines()[1:] if line.strip()]
    ranks = sorted({int(r[0]) for r in rows})
    locations = {"loc": list(range(len(ranks))), "rank": ranks, "kind": ["cpu_thread"] * len(ranks), "source": [0] * len(ranks)}
    rows.sort(key=lambda r: (ranks.index(int(r[0])), int(r[1])))
    events = {"loc": [ranks.index(int(r[0])) for r in rows], "start_ns": [int(r[1]) for r in rows], "end_ns": [int(r[2]) for r in rows],
              "name": [r[3] for r in rows], "cat": ["compute"] * len(rows), "depth": [0] * len(rows), "instant": [False] * len(rows)}
    return Trace.build(meta={"world_size": len(ranks), "sources": [{"path": str(path), "format": "toy"}]}, locations=locations, events=events)


connector = Connector("toy", (".toytrace",), lambda path, head: head.startswith(b"TOYTRACE"), read, None)


def longest(trace, result):
    ev = trace.events.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("ns"))
    return {"slices": ev.sort("ns", descending=True).select(pl.col("name").cast(pl.String), "ns").head(3)}
"""


def _write_toy_plugin(site: Path) -> None:
    """A working connector and analysis, as a distribution found through its dist-info."""
    (site / "di_toy_plugin.py").write_text(TOY_PLUGIN)
    info = site / "di_toy_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: di-toy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[di.connectors]\ntoy = di_toy_plugin:connector\n\n[di.analyses]\nlongest = di_toy_plugin:longest\n"
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("wheel", reason="building the example needs setuptools and wheel (pip install wheel)")
    tmp = tmp_path_factory.mktemp("plugins")
    src = tmp / "src"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("*.egg-info", "build"))
    target = tmp / "site"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    _write_broken_plugin(target)
    _write_toy_plugin(target)
    return target


def di_run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "di", *args], capture_output=True, text=True, env=env, timeout=300)


def test_di_plugins_lists_the_example_and_the_broken_ones(site):
    proc = di_run(site, "plugins")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "di.report_panels" in out and "memcpy_bandwidth" in out and "di-memcpy-panel" in out and "loaded" in out
    assert "broken" in out and "this plugin is broken on purpose" in out
    assert "wrong" in out and "not a di.convert.registry.Connector" in out


def test_report_has_the_plugin_panel_and_survives_the_broken_one(site, tmp_path):
    job = tmp_path / "job"
    write_kineto_job(job, ranks=2, steps=3)
    out = tmp_path / "report.html"
    proc = di_run(site, "report", str(job), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "this plugin is broken on purpose" in proc.stdout, "the broken plugin is reported on the terminal"
    page = out.read_text()
    assert "Memcpy bandwidth per direction (plugin)" in page and "this plugin is broken on purpose" in page
    tables, _ = read_page(page)
    import polars as pl

    copies = di.load(job).events.filter(pl.col("cat") == "memcpy")
    assert sum(r["bytes"] for r in tables["memcpy_bandwidth"]) == copies.get_column("bytes").sum() > 0
    assert sum(r["copies"] for r in tables["memcpy_bandwidth"]) == copies.height
    assert tables["breakdown"], "the built-in panels are all still there"


def test_connector_and_analysis_plugins_run_in_di_analyze(site, tmp_path):
    toy = tmp_path / "job.toytrace"
    toy.write_text("TOYTRACE\n0 1000 5000 forward\n0 6000 7000 backward\n1 1500 9500 forward\n")
    proc = di_run(site, "analyze", str(toy), "--csv", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    import polars as pl

    longest = pl.read_csv(tmp_path / "out" / "longest_slices.csv")
    assert longest.rows() == [("forward", 8000), ("forward", 4000), ("backward", 1000)]
    assert pl.read_csv(tmp_path / "out" / "breakdown.csv").get_column("rank").unique().sort().to_list() == [0, 1]
    (tmp_path / "nothing.unknown").write_text("not a trace\n")
    proc = di_run(site, "info", str(tmp_path / "nothing.unknown"))
    assert proc.returncode == 2 and "toy (.toytrace)" in proc.stderr, (
        "the plugin's format is listed among the installed ones"
    )


def test_a_panel_that_raises_at_run_time_is_reported_on_the_page(tmp_path):
    from di.viewers.report import build_report

    job = tmp_path / "job"
    write_kineto_job(job, ranks=2, steps=2)
    trace = di.load(job)

    def crashes(ctx):
        raise ZeroDivisionError("panel bug")

    page, problems = build_report(
        trace, di.analyze(trace, per_step=True), plugins=False, extra_panels=[("crashes", crashes)]
    )
    assert problems == ["panel crashes failed: ZeroDivisionError: panel bug"]
    assert "panel bug" in page and read_page(page)[0]["breakdown"]


def test_unknown_group_is_an_error():
    from di.plugins import load_group

    with pytest.raises(ValueError, match="di.connectors"):
        load_group("di.viewers")
