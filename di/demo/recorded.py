"""``di demo``: record the built-in demo job with everything available, then summarise it.

Runs :mod:`di.demo.train` on ``ranks`` MPI processes under ``di record``
(MPI, file I/O, host counters; InfiniBand, network and NVML counters where the
machine has them: what it lacks is said once in the trace's warnings), writes the
trace directory and, beside it, the formats whose writers are installed
(Chrome JSON ``NAME.json.gz``, Perfetto ``NAME.pftrace``, OTF2 in the folder
``NAME-otf2/``), and prints the ``di info`` summary and the ``di analyze`` one.
An extra format that cannot be written is reported, not fatal.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from di.errors import DIError, MissingDependencyError, UnknownFormatError

EXTRA_FORMATS = ((".json.gz", None), (".pftrace", None), ("-otf2", "otf2"))
"""(suffix, format) written beside the trace directory when a connector writes
them; OTF2 gets a folder of its own (its archive is a file, a .def and a folder)."""


def _mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.is_file() else shutil.which("mpiexec")
    if not found:
        raise MissingDependencyError(
            "di demo needs an MPI launcher: no mpiexec beside this Python or on PATH (pip install mpich mpi4py)"
        )
    return found


def run_demo(output: str | Path, *, ranks: int = 4, steps: int = 6, console: Any = None, force: bool = False) -> int:
    """Record, save and summarise the demo job; returns the job's exit code.

    Every output is claimed before the job runs (:func:`di.output.claim`), so a
    path that is not di's is refused at once, not after the recording.
    """
    from di.capture.record import RecordOptions, record
    from di.convert.registry import claim_output, save_path
    from di.output import claim
    from di.store import is_own_folder

    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise MissingDependencyError("di demo needs mpi4py (pip install mpich mpi4py)") from None
    run = Path(output)
    claim(run, ours=is_own_folder, what="a trace store")
    extras = []
    stem = run.with_suffix("") if run.suffix == ".di" else run
    for suffix, fmt in EXTRA_FORMATS:
        target = stem.parent / (stem.name + suffix)
        try:
            claim_output(target, to=fmt, force=force)
        except UnknownFormatError:
            continue
        extras.append((target, fmt))
    work = Path(tempfile.mkdtemp(prefix="di-demo-"))
    command = [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "di.demo.train", str(work), "--steps", str(steps)]
    opts = RecordOptions(output=run, mpi=True, io=True, host=True, ib=True, net=True, nvml=True)
    try:
        code, trace, _ = record(command, opts, console)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    written = [str(run)]
    failed = []
    for target, fmt in extras:
        try:
            save_path(trace, target, to=fmt, force=force)
            written.append(str(target))
        except (DIError, OSError) as exc:
            failed.append(f"{target} not written: {exc}")
    if console is not None:
        from di.viewers.info import render

        render(trace, console)
        _analysis(trace, console)
        for w in trace.meta.get("warnings", []) + failed:
            console.print(f"[yellow]note:[/yellow] {w}")
        console.print(f"wrote {', '.join(written)}")
    return code


def _analysis(trace: Any, console: Any) -> None:
    """The ``di analyze`` summary of the recorded job."""
    import di
    from di.viewers.terminal import render

    with console.status("analyzing"):
        result = di.analyze(trace)
    render(result, console, title="the demo job")
