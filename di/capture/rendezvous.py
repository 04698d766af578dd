"""How the ``di record`` processes of a per-rank recording meet, through files beside and in it.

Rank 0 prepares ``run.di/raw/`` and writes ``raw/run.json``; the others wait for it
(:func:`wait_for_setup`). Every rank reports its command's exit status in
``raw/exit-RANK.json`` (:func:`unreported` names the ranks that have not yet). One lock file
beside the recording, ``.run.di.ingesting``, elects the rank that ingests
(:func:`take_ingest_lock`; :mod:`di.capture.recover` takes the same lock); the recording is
ingested once its ``meta.json`` is written and no one holds the lock (:func:`ingested`).
Nothing here reads or writes the trace itself.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from di.errors import DIError

SETUP_TIMEOUT_S = 60.0  # other ranks wait this long for rank 0 to prepare raw/
START_SKEW_S = 10.0  # ranks start within this of each other (stale run.json detection)


def lock_path(run: Path) -> Path:
    """The ingest lock of recording ``run``: a hidden file beside it."""
    return run.parent / f".{run.name}.ingesting"


def ingested(run: Path) -> bool:
    """The recording's trace is written (and no rank is writing it)."""
    return (run / "meta.json").exists() and (run / "raw").is_dir() and not lock_path(run).exists()


def take_ingest_lock(run: Path) -> Path | None:
    """Create the ingest lock (host and pid inside); None when another live process holds it.

    A lock left by a dead process of this host is removed and taken.
    """
    path = lock_path(run)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                host, pid = path.read_text().split()
                if host == socket.gethostname() and not Path(f"/proc/{int(pid)}").exists():
                    path.unlink(missing_ok=True)
                    continue
            except (OSError, ValueError):
                pass
            return None
        with os.fdopen(fd, "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}\n")
        return path
    return None


def unreported(raw: Path, size: int) -> list[int] | None:
    """Ranks without an exit report; None while raw/ is away (another rank writing the trace)."""
    if not (raw / "run.json").exists():
        return None
    return [r for r in range(size) if not (raw / f"exit-{r}.json").exists()]


def wait_for_setup(path: Path, started: float) -> None:
    """Wait until rank 0 wrote ``path`` (raw/run.json) for this run: started at most START_SKEW_S
    before ``started`` (unix s), so an earlier recording's run.json is not taken for it.

    Raises:
        DIError: not written within SETUP_TIMEOUT_S.
    """
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if json.loads(path.read_text())["started_unix_s"] >= started - START_SKEW_S:
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.01)
    raise DIError(f"{path}: rank 0's di record did not prepare the recording within {SETUP_TIMEOUT_S:.0f} s")
