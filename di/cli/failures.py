"""How the ``di`` command ends on an error: the exit codes, the one line on stderr of a library or environment
error (:func:`_fail`, :func:`_os_text`), and an internal error's line naming the log file that holds its
traceback (:func:`_bug`, :func:`_write_bug_log`).
"""

from __future__ import annotations

import sys
import time
from typing import Any


EXIT_INPUT = 2
"""Bad input or an environment error (file system, port, memory): one line on stderr."""
EXIT_PIPE = 141
"""stdout was closed by its reader (128 + SIGPIPE, as a shell reports a command killed by it)."""
EXIT_BUG = 70
"""An internal error of di (sysexits' EX_SOFTWARE): one line on stderr names the log holding the traceback."""


def _fail(err: Any, command: str, text: str) -> int:
    try:
        err.print(f"di {command}: error: {text}", markup=False, soft_wrap=True)
    except BrokenPipeError:
        pass
    return EXIT_INPUT


def _os_text(exc: OSError) -> str:
    """``PATH: reason`` of a file-system error (both paths of a failed rename)."""
    what = exc.strerror or str(exc)
    where = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p)
    return f"{where}: {what}" if where else what


def _bug(err: Any, command: str, argv: list[str], exc: Exception) -> int:
    import traceback

    from di import __version__

    text = f"di {__version__}, command: di {' '.join(argv)}\n" + "".join(traceback.format_exception(exc))
    log = _write_bug_log(text)
    where = f"the traceback is in {log}" if log else "the traceback follows"
    err.print(
        f"di {command}: internal error (a bug in di, please report it): {type(exc).__name__}: {exc}; {where}",
        markup=False,
        soft_wrap=True,
    )
    if log is None:
        print(text, file=sys.stderr)
    return EXIT_BUG


def _write_bug_log(text: str) -> str | None:
    """Write ``text`` to a new file in the per-user state folder (else the temp folder); its path, or None."""
    import os
    import tempfile
    from pathlib import Path

    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "di"
    for folder in (state, Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"di-bug-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log", dir=folder)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            return name
        except OSError:
            continue
    return None
