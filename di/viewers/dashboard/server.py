"""The dashboard's HTTP server: the page, the runs as JSON, reports, diffs, Perfetto, on 127.0.0.1 only.

Endpoints (GET and HEAD unless said):

- ``/``: the page (:mod:`di.viewers.dashboard.page`), one document with inline CSS and JS.
- ``/api/runs``: rescans the folder (:meth:`RunIndex.scan`) and returns
  ``{"folder", "runs": [summary + name + state], "pending", "plugins", "plugin_problems"}``.
- ``/report?run=NAME``: the run's ``di report`` page, rendered on request.
- ``/diff?a=NAME&b=NAME``: the ``di diff`` page of two runs (B - A).
- ``POST /api/perfetto?run=NAME``: converts the run for Perfetto (:func:`di.viewers.view_cache.prepare_trace`,
  cached as ``di view`` caches it) and serves it with ``di view``'s server
  (:class:`di.viewers.perfetto_ui.TraceServer`, port 9001 as the Perfetto UI
  expects) until the UI has fetched it; returns ``{"url", "command"}`` or
  ``{"error", "command"}`` (``command``: the ``di view`` line that does the same).

Runs are named by their entry in the folder, and only names of the last scan
are served: no request reaches a path outside the folder. The rules on
every request, as ``di view``'s:

- **Host** must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (else 421: DNS rebinding).
- **Origin**, when sent, must be this server's (else 403); no CORS header is ever sent,
  so no other origin reads an answer.
- **Sec-Fetch-Site**, when sent, must be ``same-origin`` or ``none`` (else 403): a page of another
  site cannot make the dashboard render or convert anything with an ``<img>`` or a form.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from di.viewers.dashboard.pages import PageCache, diff_page, error_page, report_page
from di.viewers.dashboard.runs import RunIndex
from di.viewers.perfetto_ui import CLIENT_GONE, HOST, LOCAL_NAMES
from di.viewers.perfetto_ui import DEFAULT_PORT as PERFETTO_PORT

DEFAULT_PORT = 8765
"""The dashboard's default port on 127.0.0.1."""
PERFETTO_LINGER_S = 600.0
"""How long a run stays served for the Perfetto UI when the UI never fetches it."""
SAME_SITE = ("same-origin", "none")
"""Sec-Fetch-Site values accepted: the dashboard's own page, or the user typing the URL."""


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer

    def log_message(self, format: str, *args: Any) -> None:  # library code never prints
        return

    def _allowed(self) -> HTTPStatus | None:
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in {f"{n}:{self.server.port}" for n in LOCAL_NAMES}:
            return HTTPStatus.MISDIRECTED_REQUEST
        origin = self.headers.get("Origin")
        if origin is not None and origin not in self.server.own_origins:
            return HTTPStatus.FORBIDDEN
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in SAME_SITE:
            return HTTPStatus.FORBIDDEN
        return None

    def _send(self, status: HTTPStatus, body: bytes, ctype: str, *, head: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "SAMEORIGIN")
        self.send_header("Referrer-Policy", "no-referrer")
        if ctype.startswith("text/html"):
            self.send_header(
                "Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                "img-src data:; connect-src 'self'; frame-src 'self'; frame-ancestors 'self'; form-action 'none'",
            )
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _html(self, status: HTTPStatus, text: str, head: bool = False) -> None:
        self._send(status, text.encode("utf-8"), "text/html; charset=utf-8", head=head)

    def _json(self, status: HTTPStatus, doc: Any, head: bool = False) -> None:
        self._send(status, json.dumps(doc).encode(), "application/json", head=head)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def do_GET(self) -> None:
        self._get(head=False)

    def _get(self, *, head: bool) -> None:
        refused = self._allowed()
        if refused is not None:
            return self._send(refused, b"", "text/plain", head=head)
        url = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        srv = self.server
        if url.path == "/":
            from di.viewers.dashboard.page import PAGE

            return self._html(HTTPStatus.OK, PAGE, head)
        if url.path == "/api/runs":
            return self._json(HTTPStatus.OK, srv.runs_doc(), head)
        if url.path == "/report":
            run = srv.index.get(q.get("run", ""))
            if run is None:
                return self._html(
                    HTTPStatus.NOT_FOUND, error_page("di dashboard", f"no run named {q.get('run', '')!r}: rescan"), head
                )
            return self._render(
                ("report", run.name, tuple(run.signature)),
                f"report of {run.name}",
                lambda: report_page(run, max_input_size=srv.index.max_input_size),
                head,
            )
        if url.path == "/diff":
            a, b = srv.index.get(q.get("a", "")), srv.index.get(q.get("b", ""))
            if a is None or b is None:
                return self._html(
                    HTTPStatus.NOT_FOUND,
                    error_page("di dashboard", "pick two runs of the list (a run was not found: rescan)"),
                    head,
                )
            return self._render(
                ("diff", a.name, tuple(a.signature), b.name, tuple(b.signature)),
                f"diff of {a.name} and {b.name}",
                lambda: diff_page(a, b, max_input_size=srv.index.max_input_size),
                head,
            )
        return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain", head=head)

    def _render(self, key: tuple[Any, ...], what: str, render: Callable[[], str], head: bool) -> None:
        import di

        try:
            page = self.server.pages.get(key, render)
        except (di.DIError, OSError, ValueError, MemoryError) as exc:
            return self._html(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                error_page(f"di dashboard: {what}", f"{type(exc).__name__}: {exc}"),
                head,
            )
        except Exception as exc:  # noqa: BLE001 (a bug in a viewer or a plugin: the page says so, the server goes on)
            text = f"internal error (a bug in di, please report it): {type(exc).__name__}: {exc}"
            return self._html(HTTPStatus.INTERNAL_SERVER_ERROR, error_page(f"di dashboard: {what}", text), head)
        self._html(HTTPStatus.OK, page, head)

    def do_POST(self) -> None:
        refused = self._allowed()
        if refused is not None:
            return self._send(refused, b"", "text/plain")
        url = urlsplit(self.path)
        if url.path != "/api/perfetto":
            return self._send(HTTPStatus.NOT_FOUND, b"not found", "text/plain")
        run = self.server.index.get(parse_qs(url.query).get("run", [""])[0])
        if run is None:
            return self._json(HTTPStatus.NOT_FOUND, {"error": "no such run: rescan"})
        doc = self.server.open_in_perfetto(run.path)
        self._json(HTTPStatus.OK if "url" in doc else HTTPStatus.UNPROCESSABLE_ENTITY, doc)

    def _not_allowed(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"", "text/plain")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed


class DashboardServer(ThreadingHTTPServer):
    """The dashboard of one folder of runs, on 127.0.0.1.

    Args:
        folder: the folder of runs.
        port: TCP port, 0..65535 (0: a free one, see :attr:`port`).
        perfetto_port: where "Open in Perfetto" serves a run (9001: what ui.perfetto.dev fetches from).
        ui_root: a local Perfetto UI to serve with it (offline), as ``di view --offline``.
        max_input_size: as for :func:`di.load`, for every run.
        on_error: called with one line when a request fails for another reason than its client going away.

    Raises:
        FileNotFoundError: no such folder. OSError: the port is taken.
    """

    daemon_threads = True

    def __init__(
        self,
        folder: str | Path,
        *,
        port: int = DEFAULT_PORT,
        perfetto_port: int = PERFETTO_PORT,
        ui_root: Path | None = None,
        max_input_size: Any = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.index = RunIndex(folder, max_input_size=max_input_size)
        self.pages = PageCache()
        self.perfetto_port, self.ui_root, self.on_error = perfetto_port, ui_root, on_error
        self._perfetto: Any = None
        self._perfetto_stop = threading.Event()
        self._perfetto_lock = threading.Lock()
        try:
            super().__init__((HOST, port), _Handler)
        except OSError:
            self.index.close()
            raise
        self.own_origins = {f"http://{n}:{self.port}" for n in LOCAL_NAMES}
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    def ssh_line(self) -> str:
        """The ``ssh -L`` command that forwards the dashboard from this machine (and the Perfetto port)."""
        host = socket.gethostname()
        return f"ssh -L {self.port}:127.0.0.1:{self.port} -L {self.perfetto_port}:127.0.0.1:{self.perfetto_port} {host}"

    def runs_doc(self) -> dict[str, Any]:
        """What ``/api/runs`` answers (rescans first)."""
        from di.plugins import load_group

        runs = self.index.scan()
        panels = load_group("di.report_panels")
        return {
            "folder": str(self.index.folder.resolve()),
            "runs": [r.as_json() for r in runs],
            "pending": sum(r.summary is None for r in runs),
            "plugins": [p.name for p in panels.ok],
            "plugin_problems": [f"plugin {p.name} ({p.value}) skipped: {p.error}" for p in panels.failed],
        }

    def open_in_perfetto(self, path: Path) -> dict[str, str]:
        """Convert ``path`` (cached) and serve it for the Perfetto UI; ``{"url", "command"}`` or ``{"error", "command"}``."""
        import shlex

        import di
        from di.viewers.perfetto_ui import TraceServer, prepare_trace

        command = f"di view {shlex.quote(str(path))}"
        try:
            trace, _ = prepare_trace(path, analysis=True, max_input_size=self.index.max_input_size)
        except (di.DIError, OSError, ValueError, MemoryError) as exc:
            return {"error": f"cannot convert {path.name}: {exc}", "command": command}
        with self._perfetto_lock:
            self._stop_perfetto()
            try:
                srv = TraceServer(trace, port=self.perfetto_port, ui_root=self.ui_root, on_error=self.on_error)
            except OSError as exc:
                return {
                    "error": f"cannot listen on 127.0.0.1:{self.perfetto_port} ({exc.strerror}); is di view running? "
                    "Stop it, or run the command",
                    "command": command,
                }
            srv.start()
            stop = threading.Event()
            self._perfetto, self._perfetto_stop = srv, stop
        threading.Thread(target=self._end_perfetto, args=(srv, stop), name="di-dashboard-perfetto", daemon=True).start()
        return {"url": srv.ui_url, "command": command}

    def _end_perfetto(self, srv: Any, stop: threading.Event) -> None:
        """Close ``srv`` once the UI has fetched the trace (as ``di view`` ends), after
        :data:`PERFETTO_LINGER_S` without a fetch, or when another run replaces it."""
        deadline = time.monotonic() + PERFETTO_LINGER_S
        while not srv.fetched.wait(0.2):
            if stop.is_set() or time.monotonic() > deadline:
                break
        if srv.fetched.is_set() and not stop.is_set():
            srv.wait(timeout_s=60)
        with self._perfetto_lock:
            if self._perfetto is srv:
                self._stop_perfetto()

    def _stop_perfetto(self) -> None:
        """Close the Perfetto server (the caller holds ``_perfetto_lock``)."""
        if self._perfetto is not None:
            self._perfetto_stop.set()
            self._perfetto.close()
            self._perfetto = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, CLIENT_GONE) and self.on_error is not None:
            self.on_error(
                f"a request from {client_address[0]}:{client_address[1]} failed ({type(exc).__name__}: {exc})"
            )

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="di-dashboard", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving, release the ports, stop the summaries' thread."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()
        with self._perfetto_lock:
            self._stop_perfetto()
        self.index.close()
