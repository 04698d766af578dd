"""``di demo``: record the built-in demo job with everything available, then summarise it.

Runs :mod:`di.capture.demo_train` on ``ranks`` MPI processes under ``di record``
(MPI, file I/O, host counters; InfiniBand, network and NVML counters where the
machine has them: what it lacks is said once in the trace's warnings), writes the
trace directory and, beside it, the formats whose writers are installed
(Chrome JSON always: ``NAME.json.gz``), and prints the ``di info`` summary and
the ``di analyze`` result (breakdown, imbalance, wait states, critical path).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from di.errors import MissingDependencyError, UnknownFormatError

EXTRA_FORMATS = (".json.gz", ".pftrace", ".otf2")
"""Extensions written beside the trace directory when a connector writes them."""


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.is_file() else shutil.which("mpiexec")
    if not found:
        raise MissingDependencyError("di demo needs an MPI launcher: no mpiexec beside this Python or on PATH "
                                     "(pip install mpich mpi4py)")
    return found


def run_demo(output: str | Path, *, ranks: int = 4, steps: int = 6, console: Any = None) -> int:
    """Record, save and summarise the demo job; returns the job's exit code."""
    import di
    from di.capture.record import RecordOptions, record
    from di.convert.registry import writer_for

    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise MissingDependencyError("di demo needs mpi4py (pip install mpich mpi4py)") from None
    run = Path(output)
    work = Path(tempfile.mkdtemp(prefix="di-demo-"))
    command = [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "di.capture.demo_train", str(work), "--steps", str(steps)]
    opts = RecordOptions(output=run, mpi=True, io=True, host=True, ib=True, net=True, nvml=True)
    try:
        code, trace = record(command, opts, console)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    written = [str(run)]
    stem = run.with_suffix("") if run.suffix == ".di" else run
    for ext in EXTRA_FORMATS:
        target = stem.parent / (stem.name + ext)
        try:
            writer_for(target)
        except UnknownFormatError:
            continue
        di.save(trace, target)
        written.append(str(target))
    if console is not None:
        from di.engine import analyze
        from di.viewers.analysis import render as render_analysis
        from di.viewers.info import render

        render(trace, console)
        render_analysis(analyze(trace), console, title=str(run))
        for w in trace.meta.get("warnings", []):
            console.print(f"[yellow]note:[/yellow] {w}")
        console.print(f"wrote {', '.join(written)}")
    return code
