"""``.nsys-rep`` reports: exported to SQLite with the ``nsys`` binary, then read.

The export goes to a temporary folder that is removed afterwards, so nothing
is written beside the report. Without ``nsys`` on PATH the error says how to
export elsewhere.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from di.convert.nsys.reader import read_nsys
from di.errors import FormatError
from di.trace import Trace

__all__ = ["REP_EXTENSIONS", "read_report"]

REP_EXTENSIONS = (".nsys-rep", ".qdrep")
"""Nsight Systems' report files (``.qdrep`` before 2021.4)."""
EXPORT_TIMEOUT_S = 3600


def read_report(path: Path, **kw: Any) -> Trace:
    """Read an SQLite export, or a ``.nsys-rep`` after exporting it with ``nsys``.

    Raises:
        FormatError: no ``nsys`` for a ``.nsys-rep``, the export failed, or the export is unreadable.
    """
    path = Path(path)
    if not path.name.endswith(REP_EXTENSIONS):
        return read_nsys(path, **kw)
    nsys = shutil.which("nsys")
    if nsys is None:
        raise FormatError(
            path,
            "an Nsight Systems report needs the nsys binary, which is not on PATH; export it where nsys is "
            f"installed (nsys export --type sqlite --output {path.stem}.sqlite {path.name}) and read the .sqlite",
        )
    with tempfile.TemporaryDirectory(prefix="di-nsys-") as tmp:
        out = Path(tmp) / (path.stem + ".sqlite")
        try:
            done = subprocess.run(
                [nsys, "export", "--type", "sqlite", "--output", str(out), str(path)],
                capture_output=True,
                text=True,
                timeout=EXPORT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FormatError(path, f"nsys export failed: {exc}") from None
        if done.returncode != 0 or not out.is_file():
            last = (done.stderr or done.stdout).strip().splitlines()
            raise FormatError(path, f"nsys export failed (exit {done.returncode}): {last[-1] if last else 'no output'}")
        trace = read_nsys(out, **kw)
    src = trace.meta["sources"][0]
    src["info"]["exported_from"] = str(path)
    src["path"] = str(path)
    meta = dict(trace.meta)
    meta["warnings"] = [w.replace(str(out), str(path)) for w in meta.get("warnings", [])]
    return trace.with_meta(meta)
