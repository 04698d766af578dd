"""Which files to load, the rank each one falls back to, and loading them into one job trace.

:func:`expand` turns files, stores, directories and globs into the files to read;
:func:`rank_hint` gives a file whose content names no rank one (option, file name,
position); :func:`load_paths` reads each with the connector
:func:`di.convert.registry.connector_for` finds, collects the per-file failures and
reports them together, then merges the traces (text logs beside traces are aligned and
joined) and runs the connectors' ``link`` over the job. :mod:`di.convert.registry`
re-exports these names; this module imports it inside the functions that need it.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from di.errors import FormatError, UnknownFormatError
from di.trace import Trace

# "rank-3", "rank_3", "trace.rank3.json", not "frank3" nor a longer number's tail
RANK_IN_NAME = re.compile(r"(?<![a-z])rank[-_]?(\d+)(?!\d)", re.IGNORECASE)


def expand(path_or_paths: Any) -> list[Path]:
    """Files to load: each item a file, a store, a directory of trace files, or a glob.

    A ``di record`` recording that holds shards but no complete trace (its job or ingest
    was killed) is ingested first (:func:`di.capture.recover.ingest_pending`).
    """
    from di.convert.registry import connectors, installed

    items: Iterable[Any] = [path_or_paths] if isinstance(path_or_paths, (str, os.PathLike)) else path_or_paths
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if (p / "raw").is_dir() or not (p.exists() or any(ch in str(item) for ch in "*?[")):
            from di.capture.recover import ingest_pending

            ingest_pending(p)
        if p.is_dir() and not (p / "meta.json").exists():
            found = sorted(
                f
                for f in p.iterdir()
                if f.is_file() and any(f.name.endswith(e) for c in connectors() for e in c.extensions)
            )
            if not found:
                raise UnknownFormatError(f"{p}: directory holds no trace files; installed: {installed()}")
            out.extend(found)
        elif not p.exists() and any(ch in str(item) for ch in "*?["):
            matches = sorted(Path(m) for m in glob.glob(str(item)))
            if not matches:
                raise FileNotFoundError(f"{item}: no file matches this pattern")
            out.extend(matches)
        else:
            out.append(p)
    return out


def rank_hint(
    path: Path, position: int, ranks: list[int] | None, rank: int | None, count: int
) -> tuple[int | None, str]:
    """Fallback rank of a file whose content names none: option, file name, position."""
    if ranks is not None:
        return ranks[position], "option"
    if rank is not None and count == 1:
        return rank, "option"
    match = RANK_IN_NAME.search(path.name)
    if match:
        return int(match.group(1)), "file_name"
    return position, ("single" if count == 1 else "position")


def load_paths(
    path_or_paths: Any,
    *,
    rank: int | None = None,
    ranks: list[int] | None = None,
    progress: Any = None,
    max_input_size: int | str | None = None,
) -> Trace:
    """Load and merge; see :func:`di.load`. Per-file failures are collected and
    reported together. ``max_input_size`` bounds each file's (decompressed) bytes:
    None the default limit, 0 none (:func:`di.inputsize.limit_bytes`)."""
    from di.inputsize import limit_bytes

    limit = limit_bytes(max_input_size)
    paths = expand(path_or_paths)
    if ranks is not None and len(ranks) != len(paths):
        raise ValueError(f"{len(ranks)} ranks given for {len(paths)} files")
    traces, used = _read_paths(paths, rank, ranks, progress, limit)
    if len(traces) == 1 and paths[0].is_dir():
        return traces[0]
    return join_job(traces, used, paths)


def _read_paths(
    paths: list[Path], rank: int | None, ranks: list[int] | None, progress: Any, limit: Any
) -> tuple[list[Trace], list[Any]]:
    """Every file read (in order) and the connector found for each, failed reads included.

    Raises:
        The one failure, or a FormatError naming them all.
    """
    traces, failures, used = [], [], []
    for i, p in enumerate(paths):
        try:
            trace, conn = read_one(p, i, len(paths), rank, ranks, limit)
            traces.append(trace)
            used.append(conn)
        except (FormatError, UnknownFormatError, FileNotFoundError) as exc:
            failures.append(exc)
        if progress is not None:
            progress(i + 1, len(paths))
    if failures:
        if len(failures) == 1:
            raise failures[0]
        raise FormatError(f"{len(failures)} of {len(paths)} files", "; ".join(str(f) for f in failures))
    return traces, used


def read_one(
    path: Path, position: int, count: int, rank: int | None, ranks: list[int] | None, limit: Any
) -> tuple[Trace, Any]:
    """One input file, read as the ``position``-th of ``count`` inputs (its rank hint), and its connector."""
    from di.convert.registry import CONNECTORS, connector_for

    conn = connector_for(path)
    hint, source = rank_hint(path, position, ranks, rank, count)
    own = {"max_input_bytes": limit} if conn in CONNECTORS else {}  # plugins' readers take no limit
    if conn.name == "di":
        return conn.read(path, **own), conn
    return conn.read(path, rank=hint, rank_source=source, source=0, **own), conn


def join_job(traces: list[Trace], used: list[Any], paths: list[Path]) -> Trace:
    """The traces as one job (two claiming one rank refused, naming the files), linked by each connector that read
    two or more of the files."""
    from di.merge import check_ranks, merge

    check_ranks(traces, [str(p) for p in paths])
    if len(traces) > 1:
        from di.convert.logs.combine import combine  # text logs beside traces: aligned and joined

        job = combine(traces)
    else:
        job = merge(traces)
    for conn in dict.fromkeys(used):
        if conn.link is not None and used.count(conn) > 1:
            job = conn.link(job)
    return job
