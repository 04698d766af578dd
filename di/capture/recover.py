"""Recordings without a complete trace, and what ``di record`` may replace.

A directory ``RUN.di/`` is a *recording* when its ``raw/`` holds di's capture files (a
shard header with ``"format": "di-shard"``, or ``di record``'s ``run.json``). It *needs
an ingest* (:func:`pending`) when it holds no complete trace of those shards: no di
``meta.json`` (the job or its ``di record`` was killed before or while ingesting), or
one written from other shards than those now in ``raw/`` (``meta.json``'s
``capture.raw_files``, the count, total size and latest mtime of raw/'s files when they
were read, no longer matches: a rank appended records, or reported its exit, after a
failed rank's ``di record`` ingested). :func:`ingest_pending`, which loading calls
(:func:`di.convert.registry.expand`, so ``di.load`` and every CLI command), ingests such
a recording under the ingest lock beside it (waiting for another process that holds
it), unless its ``di record`` is still running, and says so through the ``di`` logger
(the CLI prints it as a note on stderr). Shards that an older di's killed ingest left
hidden beside the recording (``.RUN.di.raw-PID``) are moved back into ``raw/`` when it
has none, else reported the same way.

``di record -o RUN.di`` writes only into a directory that is absent, empty, a di store
or a recording (:func:`check_output`, by :func:`di.output.claim`), never the current
directory or one that holds it, and replaces only what di wrote there
(:func:`remove_recording`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from di.capture import shard
from di.errors import DIError

DI_FILES = (
    "meta.json",
    "io_files.parquet",
    "locations.parquet",
    "events.parquet",
    "messages.parquet",
    "collectives.parquet",
    "flows.parquet",
    "series.parquet",
    "samples.parquet",
    "comms.parquet",
    "comm_links.parquet",
    "jobs.parquet",
)
"""The files of a recording's store that di writes (di.schema.TABLES, meta.json, the I/O table)."""
LOCK_WAIT_S = 600.0  # how long a load waits for another process's ingest of the same recording
LOCK_POLL_S = 0.1

log = logging.getLogger("di")


def _di_raw(raw: Path) -> bool:
    """Whether ``raw`` holds di's capture files (a shard header, or di record's run.json)."""
    if not raw.is_dir():
        return False
    try:
        info = json.loads((raw / "run.json").read_text())
        if isinstance(info, dict) and info.get("form") in ("launcher", "per_rank"):
            return True
    except (OSError, ValueError):
        pass
    try:
        for p in raw.iterdir():
            if shard.HEADER.match(p.name):
                with open(p, "rb") as fh:
                    if b'"di-shard"' in fh.read(256):
                        return True
    except OSError:
        return False
    return False


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a ``di record`` recording (see the module doc)."""
    return _di_raw(Path(path) / "raw")


def check_output(run: Path) -> None:
    """Refuse an output ``di record`` must not write (the module doc says which).

    Raises:
        OutputError: one line naming ``run`` and why.
    """
    from di.errors import OutputError
    from di.output import claim
    from di.store import is_store

    claim(run, ours=lambda p: is_store(p) or is_recording(p), what="a di recording or store", whole=True)
    raw = run / "raw"
    if os.path.lexists(raw) and not _di_raw(raw) and (not raw.is_dir() or any(raw.iterdir())):
        raise OutputError(raw, "is not di's raw capture folder; move it away or choose another -o")


def remove_recording(run: Path) -> None:
    """Remove what di wrote at ``run`` (checked by :func:`check_output`): the store's files,
    ``raw/``, and raw/ directories hidden beside it by killed ingests of older di versions."""
    try:
        if run.is_dir():
            for name in DI_FILES:
                (run / name).unlink(missing_ok=True)
            if (run / "raw").is_dir():
                shutil.rmtree(run / "raw")
        for old in hidden_raws(run):
            shutil.rmtree(old)
    except OSError as exc:
        raise DIError(f"{exc.filename or run}: cannot replace the old recording: {exc.strerror}") from None


def hidden_raws(run: Path) -> list[Path]:
    """``.RUN.raw-PID`` directories of di shards beside ``run`` whose process is gone, oldest first."""
    found = []
    for p in run.parent.glob(f".{run.name}.raw-*"):
        pid = p.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _alive(int(pid)) and _di_raw(p):
            found.append(p)
    return sorted(found, key=lambda p: p.stat().st_mtime_ns)


def _alive(pid: int, needle: bytes = b"") -> bool:
    """Whether process ``pid`` of this host runs (and its command line holds ``needle``)."""
    try:
        return needle in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def recover_hidden(run: Path) -> None:
    """Move the newest hidden raw/ (:func:`hidden_raws`) back into a recording without one;
    say what is left hidden."""
    hidden = hidden_raws(run)
    if hidden and not (run / "raw").exists():
        newest = hidden.pop()
        try:
            run.mkdir(exist_ok=True)
            newest.rename(run / "raw")
        except OSError as exc:
            raise DIError(f"{newest}: cannot move these shards back to {run / 'raw'}: {exc.strerror}") from None
        log.warning("%s: moved the shards a killed ingest had hidden in %s back to raw/", run, newest.name)
    for old in hidden:
        log.warning(
            "%s: older shards hidden by a killed ingest, not used; remove the folder if they are not needed", old
        )


def pending(run: Path) -> str | None:
    """Why recording ``run`` needs an ingest (a phrase), or None when its trace is complete
    or it is no recording."""
    from di.store import META, is_store

    raw = run / "raw"
    if not _di_raw(raw):
        return None
    if not is_store(run):
        return "holds raw capture shards but no trace"
    try:
        meta = json.loads((run / META).read_text())
        seen = (meta.get("capture") or {}).get("raw_files")
    except (OSError, ValueError, AttributeError):
        return "holds raw capture shards and an unreadable meta.json"
    now = shard.raw_fingerprint(raw)
    if seen is None:  # written by a di that did not note its shards: compare times
        return "its raw/ shards are newer than its trace" if now["mtime_ns"] > (run / META).stat().st_mtime_ns else None
    return "its raw/ shards changed after its trace was written" if seen != now else None


def _recorder(run: Path) -> str | None:
    """'host H pid P' of the di record still recording ``run`` on this host, else None."""
    try:
        who = json.loads((run / "raw" / "run.json").read_text()).get("recorder") or {}
        host, pid = who["host"], int(who["pid"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if host != socket.gethostname() or pid == os.getpid() or not _alive(pid, b"record"):
        return None
    return f"host {host} pid {pid}"


def _lock(run: Path) -> Path:
    """Take the ingest lock of ``run``, waiting up to LOCK_WAIT_S for a live holder."""
    from di.capture.record import _lock_path, _take_ingest_lock

    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            lock = _take_ingest_lock(run)
        except OSError as exc:
            raise DIError(f"{exc.filename or run}: cannot take the ingest lock: {exc.strerror}") from None
        if lock is not None:
            return lock
        if time.monotonic() > deadline:
            raise DIError(
                f"{_lock_path(run)}: another di has been ingesting {run} for {LOCK_WAIT_S:.0f} s; "
                "remove this file if that process is gone"
            )
        time.sleep(LOCK_POLL_S)


def ingest_recording(run: Path, console: Any = None, *, only_pending: bool = False) -> Any:
    """Ingest recording ``run`` under its lock, its hidden shards recovered first; the trace
    (``only_pending``: only when :func:`pending` says it needs it, else None).

    Raises:
        DIError: its di record is still running, or the trace cannot be written there.
        FormatError: no raw shards.
    """
    from di.capture.record import ingest_run

    run = Path(run)
    recover_hidden(run)
    if only_pending and pending(run) is None:
        return None
    who = _recorder(run)
    if who:
        raise DIError(f"{run}: still being recorded by di record ({who}); wait for the job to end")
    lock = _lock(run)
    try:
        reason = pending(run)  # another process may have ingested it while we waited for the lock
        if only_pending:
            if reason is None:
                return None
            log.warning("%s: %s; ingesting it", run, reason)
        return ingest_run(run, console)
    except OSError as exc:
        raise DIError(f"{exc.filename or run}: cannot write the trace of this recording: {exc.strerror}") from None
    finally:
        lock.unlink(missing_ok=True)


def ingest_pending(path: Path) -> bool:
    """Ingest recording ``path`` when it needs it (:func:`pending`), saying so through the
    ``di`` logger; whether it did.

    Raises:
        DIError: its di record is still running, or the trace cannot be written there.
    """
    run = Path(path)
    if not run.is_dir() and not hidden_raws(run):
        return False
    return ingest_recording(run, only_pending=True) is not None
