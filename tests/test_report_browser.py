"""`di report` pages in real headless Chromium: no console errors, no requests, sortable tables,
and the numbers read off the rendered page equal `di analyze --json`.

Skips with the reason when no Chromium is installed (Debian: apt-get install chromium).
Set DI_REPORT_SCREENSHOTS=DIR to keep a full-page screenshot of each report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from chromium_cdp import Browser, find_chromium
from conftest import KINETO, OTF2
from test_report import check_against_json, recorded_job  # noqa: F401 (a fixture: a 4-rank MPI job recorded with I/O and counters)

from di.cli import main
from di.demo import write_kineto_job

READ_TABLES = """(() => {
  const tables = {}, keys = {};
  const val = (el) => { const v = el.dataset.v; if (v === undefined || v === "") { const t = el.textContent.trim(); return t === "—" ? null : t; } return Number(v); };
  document.querySelectorAll("table[data-table]").forEach(t => {
    const cols = [...t.querySelectorAll("thead th")].map(th => th.dataset.col);
    tables[t.dataset.table] = [...t.tBodies[0].rows].map(r => Object.fromEntries([...r.cells].map((c, i) => [cols[i], val(c)])));
  });
  document.querySelectorAll("[data-key]").forEach(e => { keys[e.dataset.key] = val(e); });
  return {tables, keys};
})()"""


@pytest.fixture(scope="module")
def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium); the report was not checked in a browser")
    return exe


def sources(tmp: Path, recorded: Path) -> dict[str, str]:
    demo = tmp / "demo"
    write_kineto_job(demo, ranks=4, steps=4)
    found = {"demo": str(demo), "recorded": str(recorded)}
    for name, p in (("kineto", KINETO / "hta_trace_filter"), ("otf2", OTF2 / "casita_2_cuda_simple" / "traces.otf2")):
        if p.exists():
            found[name] = str(p)
    return found


def test_reports_render_in_chromium(chromium, recorded_job, tmp_path, capsys):  # noqa: F811 (pytest passes the fixture by name)
    shots = os.environ.get("DI_REPORT_SCREENSHOTS")
    checked = []
    for name, src in sources(tmp_path, recorded_job).items():
        page = tmp_path / f"{name}.html"
        assert main(["report", src, "-o", str(page), "--no-plugins"]) == 0
        capsys.readouterr()
        assert main(["analyze", src, "--json", "-"]) == 0
        doc = json.loads(capsys.readouterr().out)
        with Browser(chromium) as b:
            url = b.open(page)
            got = b.evaluate(READ_TABLES)
            assert b.console_problems() == [], name
            # data: URLs (the heat maps' inline PNGs) are decoded in place, not fetched
            assert [u for u in b.requests() if u != url and not u.startswith("data:")] == [], (
                f"{name}: the page fetched something"
            )
            check_against_json(got["tables"], got["keys"], doc)
            # sorting: click a numeric header twice (ascending, then descending)
            table = "breakdown"
            b.evaluate(f'document.querySelector("table[data-table={table}] th[data-col=span_ns]").click()')
            asc = b.evaluate(
                f'[...document.querySelector("table[data-table={table}]").tBodies[0].rows].map(r => Number(r.cells[2].dataset.v))'
            )
            b.evaluate(f'document.querySelector("table[data-table={table}] th[data-col=span_ns]").click()')
            desc = b.evaluate(
                f'[...document.querySelector("table[data-table={table}]").tBodies[0].rows].map(r => Number(r.cells[2].dataset.v))'
            )
            assert asc == sorted(asc) and desc == sorted(desc, reverse=True)
            assert b.console_problems() == []
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                b.screenshot(Path(shots) / f"report-{name}.png")
        checked.append(name)
    assert {"demo", "recorded"} <= set(checked)


def test_the_browser_check_sees_errors_and_requests(chromium, tmp_path):
    """The harness itself: a page that logs an error, throws and fetches an image is caught on all three."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png"><script>console.error("boom"); null.x;</script></body></html>'
    )
    with Browser(chromium) as b:
        url = b.open(bad)
        problems = b.console_problems()
        assert any("boom" in p for p in problems) and any(p.startswith("exception") for p in problems)
        assert "http://127.0.0.1:9/x.png" in [u for u in b.requests() if u != url]
