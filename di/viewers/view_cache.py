"""Where ``di view`` keeps the Perfetto protobuf it converts a trace to, and converting it once.

The converted file goes beside the trace (``NAME.perfetto-trace``, or
``NAME.analysis.perfetto-trace`` with the analysis tracks), where the user
finds it. When that folder is not writable (a read-only mount, another
user's folder) it goes to the per-user cache folder instead
(``$XDG_CACHE_HOME/di/view/`` or ``~/.cache/di/view/``), named by a hash of
the input's resolved path plus its name, so that two inputs of one name
never share a file. Either file is written atomically
(:mod:`di.convert.atomic`, through the Perfetto writer), and reused while it
is at least as new as the input (for a directory: every file in it).
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path
from typing import Any

TRACE_SUFFIXES = (".perfetto-trace", ".pftrace")
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)
"""OSError numbers that mean the folder beside the trace takes no new file."""
HASH_CHARS = 16
"""Hex digits of the SHA-256 of the input's resolved path in a cache file's name (64 bits)."""


def cached_trace(path: Path, analysis: bool = False) -> Path:
    """Where the Perfetto protobuf of ``path`` is cached beside it: ``NAME.perfetto-trace``
    (``NAME.analysis.perfetto-trace`` with the analysis tracks)."""
    return path.with_name(path.name + (".analysis" if analysis else "") + ".perfetto-trace")


def user_cache_dir() -> Path:
    """The per-user folder for converted traces: ``$XDG_CACHE_HOME/di/view`` (an absolute
    XDG_CACHE_HOME only, as the XDG spec says) or ``~/.cache/di/view``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "di" / "view"


def user_cached_trace(path: Path, analysis: bool = False) -> Path:
    """Where the Perfetto protobuf of ``path`` is cached in :func:`user_cache_dir`:
    ``HASH-NAME[.analysis].perfetto-trace``, HASH from the resolved path of ``path``."""
    digest = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:HASH_CHARS]
    return user_cache_dir() / cached_trace(Path(f"{digest}-{path.name}"), analysis).name


def prepare_trace(path: str | Path, analysis: bool = False, *, max_input_size: Any = None) -> tuple[Path, bool]:
    """The Perfetto protobuf to serve for ``path``, converting it when needed.

    A ``.perfetto-trace``/``.pftrace`` file is served as it is; anything else
    di reads is converted to :func:`cached_trace` (or, where its folder is not
    writable, :func:`user_cached_trace`) unless such a file is at least as new
    as the input. With ``analysis`` the engine's results are added as tracks
    (:mod:`di.viewers.analysis_tracks`).

    Args:
        path: the trace.
        analysis: add the analysis tracks.
        max_input_size: as for :func:`di.load`.

    Returns:
        (file to serve, True when it was converted now).

    Raises:
        FileNotFoundError, FormatError, UnknownFormatError: as :func:`di.load`.
        OSError: neither folder takes the converted file.
    """
    import di

    src = Path(path)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    if src.is_file() and src.name.endswith(TRACE_SUFFIXES):
        return src, False
    key = src.resolve() if src.is_dir() else src
    beside, mine = cached_trace(key, analysis), user_cached_trace(src, analysis)
    inputs = [p for p in src.rglob("*") if p.is_file()] if src.is_dir() else [src]
    newest = max((p.stat().st_mtime for p in inputs), default=0.0)
    for out in (beside, mine):
        if out.exists() and out.stat().st_mtime >= newest:
            return out, False
    from di.analysis_parts import without_analysis
    from di.viewers.analysis_tracks import NEEDS, with_analysis

    trace = without_analysis(di.load(src, max_input_size=max_input_size))
    if analysis:
        trace = with_analysis(trace, di.analyze(trace, per_step=True, analyses=NEEDS))
    if os.access(beside.parent, os.W_OK):
        try:
            di.save(trace, beside)
            return beside, True
        except OSError as exc:
            if exc.errno not in NOT_WRITABLE:
                raise
    mine.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    di.save(trace, mine)
    return mine, True
