"""The runs of a dashboard: which entries of a folder are runs, and their summaries kept current.

A **run** is an entry directly inside the folder that ``di`` loads: a ``.di``
store (a folder with ``meta.json``, or a recording's ``raw/run.json``), a
folder of trace files (per-rank Kineto JSON, a Score-P archive with
``traces.otf2``), or a trace file whose name ends in a connector's extension
(``.json``, ``.json.gz``, ``.otf2``, ``.perfetto-trace``, ``.pftrace``, and
those of ``di.connectors`` plugins). Left out: hidden names and di's
temporaries, the Perfetto conversions ``di view`` caches beside a run
(``RUN.perfetto-trace``, ``RUN.analysis.perfetto-trace``), the ``.def`` and
folder parts of an OTF2 archive ``X.otf2``, and anything else.

:meth:`RunIndex.scan` lists the folder and compares each run's signature
(:func:`di.viewers.dashboard.summary.signature`: a few ``stat`` calls) with
what it knows: an unchanged run keeps its summary, a changed or new one
takes its summary from the cache file when that matches, else it is queued
and summarised by one background thread (state ``pending`` until then).
So a rescan costs a directory listing and a ``stat`` per file, and new runs
appear without a restart.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from di.viewers.dashboard import summary as summaries

VIEW_CACHE_SUFFIXES = (".analysis.perfetto-trace", ".perfetto-trace")
"""Names ``di view`` gives the conversion it caches beside a trace (:mod:`di.viewers.view_cache`)."""


@dataclass
class Run:
    """One run: its path, signature and summary (None while pending)."""

    name: str
    path: Path
    signature: list[int]
    summary: dict[str, Any] | None = None

    @property
    def state(self) -> str:
        """``pending``, ``ok`` or ``error``."""
        if self.summary is None:
            return "pending"
        return "error" if self.summary.get("error") else "ok"

    def as_json(self) -> dict[str, Any]:
        base = {"name": self.name, "state": self.state}
        return {**(self.summary or {}), **base}


def _extensions() -> tuple[str, ...]:
    from di.convert.registry import connectors

    return tuple(e for c in connectors() for e in c.extensions if e != ".di")


def find_runs(folder: Path) -> list[Path]:
    """The runs directly inside ``folder`` (see the module docstring), sorted by name.

    Raises:
        FileNotFoundError: ``folder`` does not exist; NotADirectoryError: it is a file.
    """
    exts = _extensions()
    entries = {e.name: e for e in os.scandir(folder) if not e.name.startswith(".") and ".di-tmp." not in e.name}
    otf2_parts = {n[: -len(".otf2")] for n in entries if n.endswith(".otf2") and not entries[n].is_dir()}
    out = []
    for name, e in sorted(entries.items()):
        path = Path(e.path)
        if e.is_dir():
            if name in otf2_parts:
                continue
            if _is_run_folder(path, exts):
                out.append(path)
        elif e.is_file() and name.endswith(exts) and not _view_cache(name, entries):
            out.append(path)
    return out


def _is_run_folder(path: Path, exts: tuple[str, ...]) -> bool:
    if (
        path.name.endswith(".di")
        or (path / "meta.json").is_file()
        or (path / "raw" / "run.json").is_file()
        or (path / "traces.otf2").is_file()
    ):
        return True
    try:
        return any(f.is_file() and f.name.endswith(exts) for f in os.scandir(path))
    except OSError:
        return False


def _view_cache(name: str, entries: dict[str, Any]) -> bool:
    """True for ``RUN.perfetto-trace``/``RUN.analysis.perfetto-trace`` beside a run named RUN."""
    return any(name.endswith(s) and name[: -len(s)] in entries for s in VIEW_CACHE_SUFFIXES)


class RunIndex:
    """The runs of one folder with their summaries, summarised in the background.

    Args:
        folder: the folder of runs.
        max_input_size: as for :func:`di.load`, for every run.

    Use :meth:`scan` for the current list, :meth:`get` for one run, :meth:`close` at the end.
    """

    def __init__(self, folder: str | os.PathLike[str], *, max_input_size: Any = None) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder (give the folder that holds the runs)")
        self.max_input_size = max_input_size
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()
        self._todo: queue.Queue[str | None] = queue.Queue()
        self._idle = threading.Event()
        self._idle.set()
        self.computed = 0
        """Summaries computed (not read from the cache) since this index was made."""
        self._thread = threading.Thread(target=self._work, name="di-dashboard-summaries", daemon=True)
        self._thread.start()

    def scan(self) -> list[Run]:
        """Rescan the folder (see the module docstring); the runs sorted by name."""
        found = find_runs(self.folder)
        fresh: dict[str, Run] = {}
        queued = []
        for path in found:
            try:
                sig = summaries.signature(path)
            except OSError:  # removed while listing
                continue
            with self._lock:
                old = self._runs.get(path.name)
            if old is not None and old.signature == sig:
                fresh[path.name] = old
                continue
            run = Run(path.name, path, sig, summaries.read_cached(path, sig))
            fresh[path.name] = run
            if run.summary is None:
                queued.append(path.name)
        with self._lock:
            self._runs = fresh
        for name in queued:
            with self._lock:  # with _work's check, so that "idle" is never set while a run is queued
                self._todo.put(name)
                self._idle.clear()
        return list(fresh.values())

    def get(self, name: str) -> Run | None:
        """The run named ``name`` as of the last scan (never a path outside the folder)."""
        with self._lock:
            return self._runs.get(name)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until every queued summary is computed; False on timeout."""
        return self._idle.wait(timeout_s)

    def close(self) -> None:
        """Stop the background thread (after the summary it is computing)."""
        self._todo.put(None)
        self._thread.join(timeout=60)

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._todo.empty():
                    self._idle.set()
            name = self._todo.get()
            if name is None:
                self._idle.set()
                return
            with self._lock:
                run = self._runs.get(name)
            if run is None or run.summary is not None:
                continue
            s = summaries.summarize(run.path, max_input_size=self.max_input_size)
            self.computed += 1
            try:
                unchanged = summaries.signature(run.path) == run.signature
            except OSError:
                unchanged = False
            if unchanged:  # a run rewritten meanwhile is summarised again at the next scan
                summaries.write_cached(run.path, run.signature, s)
                run.summary = s
            else:
                run.summary = {**s, "error": s.get("error") or "the run changed while it was read; rescan"}
                run.signature = []


def wait_for(index: RunIndex, timeout_s: float) -> list[Run]:
    """Scan until no run is pending (tests, bench); returns the runs."""
    deadline = time.monotonic() + timeout_s
    runs = index.scan()
    while any(r.summary is None for r in runs) and time.monotonic() < deadline:
        index.wait(max(0.0, min(0.5, deadline - time.monotonic())))
        runs = index.scan()
    return runs
