"""DeepIntrospect (di): one canonical trace for distributed deep-learning jobs.

Public API::

    trace = di.load("rank-*.json.gz")     # any supported format, sniffed from content
    di.save(trace, "job.di")              # format from the extension, as `di convert`
    events = di.scan("job.di")["events"]  # polars LazyFrames for batch scripts
    result = di.analyze(trace, window="steps=:-1")  # breakdown, overlap, imbalance, waits, critical path
    with di.region("forward"): ...        # a user event under `di record` (a no-op elsewhere)

``import di`` stays light: numba, polars and the connectors load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from di.errors import (
    DIError,
    FormatError,
    InputTooLargeError,
    MissingDependencyError,
    OutputError,
    SchemaError,
    SchemaVersionError,
    UnknownFormatError,
)
from di.region import region

__version__ = "0.1.0"

# numba's cache of di's kernels goes to a per-user directory when this package
# is read-only (sets NUMBA_CACHE_DIR then; see di.jitcache), before numba loads
from di.jitcache import configure as _configure_jit_cache

_configure_jit_cache()

if TYPE_CHECKING:
    import polars as pl

    from di.engine import Analysis
    from di.trace import Trace

__all__ = [
    "__version__",
    "load",
    "save",
    "scan",
    "analyze",
    "region",
    "Trace",
    "DIError",
    "FormatError",
    "InputTooLargeError",
    "UnknownFormatError",
    "SchemaError",
    "SchemaVersionError",
    "MissingDependencyError",
    "OutputError",
]


def load(path_or_paths: Any, **opts: Any) -> Trace:
    """Load one trace, or several per-rank files merged into one job trace.

    Args:
        path_or_paths: a file, a ``.di`` store, a directory of trace files, a glob
            pattern, or a list of any of these. The format is sniffed from content.
        **opts: connector options, e.g. ``rank=3`` (the rank of a single file
            that carries none), ``ranks=[...]`` (one per file), ``max_input_size``
            (the most bytes one file may be or decompress to: bytes or a text such
            as ``"4G"``; 0 for no limit; default half the memory available now,
            see :mod:`di.inputsize`).

    Returns:
        The canonical :class:`di.trace.Trace`.

    Raises:
        FileNotFoundError: a path does not exist.
        UnknownFormatError: no connector recognised a file.
        FormatError: a connector recognised the file but could not read it.
        InputTooLargeError: a file is (or decompresses to) more than ``max_input_size``
            bytes (a :class:`FormatError`).
        DIError: a ``di record`` recording holds shards but no complete trace (it is then
            ingested first, :mod:`di.capture.recover`) and cannot be ingested now.
    """
    from di.convert.registry import load_paths
    from di.process import small_pages

    with small_pages():
        return load_paths(path_or_paths, **opts)


def save(trace: Trace, path: Any, *, to: str | None = None, force: bool = False) -> None:
    """Write a trace; the format comes from the extension (or ``to``), as ``di convert``.

    ``.di`` is the canonical store; ``.json``/``.json.gz`` Chrome Trace Event JSON.
    The trace is validated against the JSON Schemas first. The output is written
    beside ``path`` and swapped in whole; an existing ``path`` is replaced only
    when di wrote it (``force``: also a file di did not write; never a folder).

    Raises:
        OutputError: ``path`` is not di's to replace (or is an input, or the current directory).
        OSError: the file system refused (full disk, permission, read-only).
    """
    from di.convert.registry import save_path
    from di.process import small_pages

    with small_pages():
        save_path(trace, path, to=to, force=force)


def scan(path: Any) -> dict[str, pl.LazyFrame]:
    """Lazy polars frames over a ``.di`` store's tables, for batch scripts."""
    from di.store import scan_store

    return scan_store(path)


def analyze(trace: Trace, *, window: Any = None, per_step: bool = False, **opts: Any) -> Analysis:
    """Run the analyses (breakdown, overlap, imbalance, wait states, critical path).

    Args:
        trace: a trace from :func:`load`.
        window: ``"steps=:-1"`` (a slice of steps), ``"time=T0:T1"`` or None for all.
        per_step: also report the per-rank metrics per step.
        **opts: ``analyses=(...)`` to run only some.

    Returns:
        :class:`di.engine.Analysis` whose fields are polars DataFrames (int64 ns).
    """
    from di.engine import analyze as run
    from di.process import small_pages

    with small_pages():
        return run(trace, window=window, per_step=per_step, **opts)


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from di.trace import Trace

        return Trace
    raise AttributeError(f"module 'di' has no attribute {name!r}")
