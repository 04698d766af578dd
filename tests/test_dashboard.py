"""`di dashboard DIR`: the run index and its summary cache (in-process), the HTTP endpoints
(http.client: Host/Origin checks, a broken run, a run added while serving, reports with the
example plugin's panel, diffs, Perfetto), and the page in real headless Chromium.

Runs are small: a 2-rank, 2-step Kineto job stored as ``runK.di`` and copies of it, a broken
store (corrupt meta.json), the Kineto folder itself. The summary cache goes to a temporary
XDG_CACHE_HOME. Chromium tests skip with the reason when no Chromium is installed.
"""

from __future__ import annotations

import http.client
import json
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

import di
from di.demo import write_kineto_job
from di.viewers.dashboard import DashboardServer, RunIndex, find_runs
from di.viewers.dashboard import summary as summaries
from di.viewers.dashboard.runs import wait_for

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_SRC = REPO / "examples" / "di-memcpy-panel" / "src"
WAIT_S = 240.0


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    """A small stored run to copy: runK.di."""
    tmp = tmp_path_factory.mktemp("dash-job")
    write_kineto_job(tmp / "kineto", ranks=2, steps=2)
    di.save(di.load(tmp / "kineto"), tmp / "runK.di")
    return tmp


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    return tmp_path / "xdg-cache" / "di" / "dashboard"


def make_runs(job: Path, folder: Path) -> Path:
    folder.mkdir()
    for name in ("runA.di", "runB.di"):
        shutil.copytree(job / "runK.di", folder / name)
    shutil.copytree(job / "kineto", folder / "kineto")
    (folder / "broken.di").mkdir()
    (folder / "broken.di" / "meta.json").write_text('{"format": "di-trace", "schema_version": ')
    return folder


@pytest.fixture
def example_plugin(tmp_path, monkeypatch):
    """The example plugin (examples/di-memcpy-panel) registered as an entry point of di.report_panels."""
    from di.plugins import load_group

    site = tmp_path / "site"
    info = site / "di_memcpy_panel-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: di-memcpy-panel\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[di.report_panels]\nmemcpy_bandwidth = di_memcpy_panel:panel\n")
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.syspath_prepend(str(site))
    assert [p.name for p in load_group("di.report_panels", refresh=True).ok] == ["memcpy_bandwidth"]
    yield
    monkeypatch.undo()
    sys.modules.pop("di_memcpy_panel", None)
    load_group("di.report_panels", refresh=True)


# --- the index and the cache, in-process -------------------------------------------------------


def test_find_runs_keeps_runs_and_leaves_out_the_rest(job, tmp_path):
    folder = make_runs(job, tmp_path / "runs")
    shutil.copy(job / "kineto" / "rank-0.json", folder / "single.json")
    (folder / "runA.di.analysis.perfetto-trace").write_bytes(b"x")  # di view's cached conversion of runA.di
    (folder / "notes.txt").write_text("not a trace")
    (folder / ".hidden.di").mkdir()
    (folder / ".runC.di.di-tmp.host.1").mkdir()
    (folder / "empty").mkdir()
    (folder / "job.otf2").write_bytes(b"x")
    (folder / "job.def").write_bytes(b"x")
    (folder / "job").mkdir()
    assert [p.name for p in find_runs(folder)] == [
        "broken.di",
        "job.otf2",
        "kineto",
        "runA.di",
        "runB.di",
        "single.json",
    ]


def test_summaries_are_cached_per_run_and_recomputed_only_when_it_changes(job, tmp_path, cache):
    folder = make_runs(job, tmp_path / "runs")
    index = RunIndex(folder)
    try:
        runs = {r.name: r for r in wait_for(index, WAIT_S)}
    finally:
        index.close()
    assert index.computed == 4
    a = runs["runA.di"].summary
    assert a["error"] is None and a["ranks"] == 2 and a["gpus"] == 2 and a["steps"] == 2
    assert a["step_ns"]["mean"] > 0 and a["step_ns"]["p50"] <= a["step_ns"]["p90"]
    assert a["bottleneck"]["state"] != "idle" and 0 < a["bottleneck"]["share"] <= 1
    states = a["breakdown"]["states"]
    assert a["bottleneck"]["state"] == max((s for s in states if s != "idle"), key=states.get)
    assert a["cp_top"]["category"] and a["cp_length_ns"] > 0 and a["time"].startswith("20")
    assert runs["kineto"].summary["step_ns"] == a["step_ns"]  # the folder it was stored from
    assert runs["broken.di"].state == "error" and runs["broken.di"].summary["error"]
    # the cache lives in the per-user folder, never beside the runs
    assert sorted(p.name for p in cache.iterdir()) == sorted(summaries.cache_file(folder / n).name for n in runs)
    assert sorted(p.name for p in folder.iterdir()) == sorted(runs)
    # a new index (a restart) reads every summary from the cache
    index = RunIndex(folder)
    try:
        again = {r.name: r for r in index.scan()}
        assert all(r.summary is not None for r in again.values()) and index.computed == 0
        assert again["runA.di"].summary == a
        # a changed run (its meta rewritten) is summarised again; the others are not
        meta = folder / "runB.di" / "meta.json"
        doc = json.loads(meta.read_text())
        doc["command"] = "torchrun --nproc-per-node 2 train.py --lr 0.1"
        meta.write_text(json.dumps(doc, indent=1))
        changed = {r.name: r for r in wait_for(index, WAIT_S)}
        assert index.computed == 1 and changed["runB.di"].summary["command"] == doc["command"]
    finally:
        index.close()


def test_a_stale_or_foreign_cache_file_is_not_used(job, tmp_path, cache):
    folder = make_runs(job, tmp_path / "runs")
    run = folder / "runA.di"
    sig = summaries.signature(run)
    summaries.write_cached(run, sig, {"name": "runA.di", "error": None, "steps": 99})
    assert summaries.read_cached(run, sig)["steps"] == 99
    assert summaries.read_cached(run, [sig[0], sig[1] + 1, sig[2]]) is None
    summaries.cache_file(run).write_text("{not json")
    assert summaries.read_cached(run, sig) is None


# --- the HTTP server ---------------------------------------------------------------------------


class Client:
    """Bounded requests to the dashboard (every one with a timeout)."""

    def __init__(self, port: int) -> None:
        self.port = port

    def get(
        self, path: str, headers: dict[str, str] | None = None, method: str = "GET"
    ) -> tuple[int, dict[str, str], bytes]:
        c = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=600
        )  # a first conversion compiles the Perfetto writer
        try:
            c.request(method, path, headers=headers or {})
            r = c.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            c.close()

    def runs(self) -> dict:
        status, _, body = self.get("/api/runs")
        assert status == 200
        return json.loads(body)


@pytest.fixture
def served(job, tmp_path, cache):
    folder = make_runs(job, tmp_path / "runs")
    server = DashboardServer(folder, port=0, perfetto_port=0)
    server.start()
    try:
        wait_for(server.index, WAIT_S)
        yield server, Client(server.port), folder
    finally:
        server.close()


def test_requests_must_name_this_server_and_come_from_its_own_pages(served):
    server, c, _ = served
    for path in ("/", "/api/runs", "/report?run=runA.di"):
        assert c.get(path, {"Host": f"evil.example:{server.port}"})[0] == 421
        assert c.get(path, {"Host": "127.0.0.1:1"})[0] == 421
        assert c.get(path, {"Origin": "https://evil.example"})[0] == 403
        assert c.get(path, {"Sec-Fetch-Site": "cross-site"})[0] == 403
    status, headers, body = c.get(
        "/",
        {
            "Host": f"localhost:{server.port}",
            "Origin": f"http://localhost:{server.port}",
            "Sec-Fetch-Site": "same-origin",
        },
    )
    assert status == 200 and b"di dashboard" in body
    assert not any(h.startswith("access-control-") for h in headers)  # no CORS: no other origin reads an answer
    assert (
        "frame-ancestors 'self'" in headers["content-security-policy"]
        and headers["x-content-type-options"] == "nosniff"
    )
    assert b"http://" not in body.replace(b"http://www.w3.org/2000/svg", b"")  # nothing fetched from the network
    assert c.get("/api/runs", method="PUT")[0] == 405
    assert c.get("/nothing")[0] == 404
    assert c.get("/report?run=../runA.di")[0] == 404 and c.get("/report?run=" + str(served[2] / "runA.di"))[0] == 404


def test_runs_are_listed_with_a_broken_one_and_new_ones_appear(served, job):
    _, c, folder = served
    doc = c.runs()
    runs = {r["name"]: r for r in doc["runs"]}
    assert set(runs) == {"broken.di", "kineto", "runA.di", "runB.di"} and doc["pending"] == 0
    assert runs["broken.di"]["state"] == "error" and "broken.di" in runs["broken.di"]["error"]
    assert runs["runA.di"]["state"] == "ok" and runs["runA.di"]["ranks"] == 2 and runs["runA.di"]["step_ns"]["mean"] > 0
    name = "new run & #1 ü.di"  # while the server runs; a name that needs quoting in a URL
    shutil.copytree(job / "runK.di", folder / name)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        new = {r["name"]: r for r in c.runs()["runs"]}.get(name)
        if new is not None and new["state"] != "pending":
            break
        time.sleep(0.2)
    assert new["state"] == "ok" and new["step_ns"] == runs["runA.di"]["step_ns"]
    status, _, body = c.get("/report?run=" + quote(name, safe=""))
    assert status == 200 and "di report: new run &amp; #1 ü.di" in body.decode()
    shutil.rmtree(folder / name)
    assert name not in {r["name"] for r in c.runs()["runs"]}


def test_report_of_a_run_has_the_panels_and_the_plugins(served, example_plugin):
    _, c, _ = served
    assert c.runs()["plugins"] == ["memcpy_bandwidth"]
    status, headers, body = c.get("/report?run=runA.di")
    page = body.decode()
    assert status == 200 and headers["content-type"].startswith("text/html")
    for section in ("summary", "breakdown", "critical_path", "memcpy_bandwidth"):
        assert f'<section id="{section}">' in page, section
    status, _, body = c.get("/report?run=broken.di")
    assert status == 422 and b"broken.di" in body


def test_diff_of_two_runs_is_di_diffs_page(served):
    _, c, _ = served
    status, _, body = c.get("/diff?a=runA.di&b=kineto")
    page = body.decode()
    assert status == 200 and "di diff: runA.di → kineto" in page and 'data-table="steps"' in page
    assert c.get("/diff?a=runA.di&b=broken.di")[0] == 422
    assert c.get("/diff?a=runA.di")[0] == 404


def test_open_in_perfetto_serves_the_run_as_di_view_does(served):
    server, c, folder = served
    status, _, body = c.get("/api/perfetto?run=runA.di", {"Origin": "https://ui.perfetto.dev"}, method="POST")
    assert status == 403
    status, _, body = c.get("/api/perfetto?run=runA.di", method="POST")
    doc = json.loads(body)
    assert (
        status == 200
        and doc["url"].startswith("https://ui.perfetto.dev/#!/?url=")
        and doc["command"].startswith("di view ")
    )
    trace = server._perfetto
    t = http.client.HTTPConnection("127.0.0.1", trace.port, timeout=60)
    t.request(
        "GET", "/" + trace.trace_name, headers={"Host": f"127.0.0.1:{trace.port}", "Origin": "https://ui.perfetto.dev"}
    )
    r = t.getresponse()
    assert r.status == 200 and len(r.read()) > 1000
    t.close()
    # the conversion di view caches beside the run is not listed as a run of its own
    assert (folder / "runA.di.analysis.perfetto-trace").exists()
    assert "runA.di.analysis.perfetto-trace" not in {r["name"] for r in c.runs()["runs"]}
    status, _, body = c.get("/api/perfetto?run=broken.di", method="POST")
    assert status == 422 and "broken.di" in json.loads(body)["command"]


def test_cli_refuses_a_missing_folder(tmp_path, capsys):
    from di.cli import main

    assert main(["dashboard", str(tmp_path / "missing"), "--no-browser"]) == 2
    assert "missing" in capsys.readouterr().err


# --- the page in headless Chromium -------------------------------------------------------------

WAIT_UNTIL = """new Promise((ok, fail) => { const t0 = Date.now(); (function poll() {
  let v; try { v = (%s); } catch (e) { v = null; }
  if (v) ok(v); else if (Date.now() - t0 > %d) fail(new Error("timed out: %s")); else setTimeout(poll, 100); })(); })"""


def wait_until(b, expr: str, timeout_ms: int = 180000):
    return b.evaluate(WAIT_UNTIL % (expr, timeout_ms, expr.replace('"', "'").replace("\\", "")[:60]))


def test_the_page_in_chromium_lists_runs_opens_a_report_and_a_diff(served, example_plugin):
    sys.path.insert(0, str(Path(__file__).parent))
    from chromium_cdp import Browser, find_chromium

    exe = find_chromium()
    if exe is None:
        pytest.skip(
            "no Chromium on PATH (Debian: apt-get install chromium); the dashboard was not checked in a browser"
        )
    server, _, _ = served
    with Browser(exe) as b:
        b.call("Page.navigate", url=server.url)
        b.wait_for("Page.loadEventFired")
        names = wait_until(
            b,
            '(document.querySelectorAll("#runs tbody tr").length === 4 && !document.querySelector("#runs tr.pending")) && '
            '[...document.querySelectorAll("#runs tbody tr")].map(r => r.dataset.run)',
        )
        assert sorted(names) == ["broken.di", "kineto", "runA.di", "runB.di"]
        assert "error" in b.evaluate("document.querySelector(\"tr[data-run='broken.di']\").className")
        assert "memcpy_bandwidth" in b.evaluate('document.getElementById("plugins").textContent')
        assert b.evaluate('document.querySelectorAll("svg[data-plot=step] circle").length') == 3
        assert b.evaluate('document.querySelectorAll("svg[data-plot=breakdown] rect").length') > 3
        # sort by name, then filter
        b.evaluate('document.querySelector("th[data-col=name]").click()')
        assert b.evaluate('[...document.querySelectorAll("#runs tbody tr")].map(r => r.dataset.run)') == sorted(names)
        b.evaluate('const f = document.getElementById("filter"); f.value = "runB"; f.dispatchEvent(new Event("input"))')
        assert b.evaluate('[...document.querySelectorAll("#runs tbody tr")].map(r => r.dataset.run)') == ["runB.di"]
        b.evaluate('const g = document.getElementById("filter"); g.value = ""; g.dispatchEvent(new Event("input"))')
        # a report, loaded on demand into the frame, with the plugin's panel
        b.evaluate("document.querySelector(\"tr[data-run='runA.di'] button[data-action=report]\").click()")
        sections = wait_until(
            b,
            # the whole page, not its first sections: the frame's document is shown while it is parsed
            'document.getElementById("frame").contentDocument.readyState === "complete" && '
            'document.getElementById("frame").contentDocument.querySelector("section#summary") && '
            '[...document.getElementById("frame").contentDocument.querySelectorAll("section")].map(s => s.id)',
        )
        assert {"summary", "breakdown", "memcpy_bandwidth"} <= set(sections)
        # a diff of two runs picked as A and B
        b.evaluate("document.querySelector(\"tr[data-run='runA.di'] input[data-pick=a]\").click()")
        b.evaluate("document.querySelector(\"tr[data-run='kineto'] input[data-pick=b]\").click()")
        assert b.evaluate('document.getElementById("compare").disabled') is False
        b.evaluate('document.getElementById("compare").click()')
        title = wait_until(
            b,
            'document.getElementById("frame").contentDocument.querySelector("table[data-table=steps]") && '
            'document.getElementById("frame").contentDocument.title',
        )
        assert title == "di diff: runA.di → kineto"
        assert b.console_problems() == []
        own = f"http://127.0.0.1:{server.port}/"
        assert [u for u in b.requests() if not u.startswith(own) and not u.startswith(("data:", "about:"))] == []
        # phone width: nothing sticks out of the page sideways (the table scrolls in its box)
        b.call("Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=2, mobile=True)
        assert b.evaluate("document.documentElement.scrollWidth") <= 390
        assert b.evaluate('getComputedStyle(document.querySelector("th[data-col=command]")).display') == "none"
