"""``di record``: run a command under capture and ingest what it recorded (or ingest a recording again with
``--ingest``); a recorded rank killed by a signal ends this process by the same signal.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from di.cli.messages import _say


def _record(args: argparse.Namespace, console: Any) -> int:
    from pathlib import Path

    from di.capture.record import RecordOptions, record

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if args.ingest:
        from di.capture.recover import ingest_recording

        if command:
            raise ValueError("--ingest runs no command; drop what follows --")
        _report_recording(args.output, ingest_recording(Path(args.output), console), console)
        return 0
    if not args.rate > 0:
        raise ValueError(f"--rate must be a positive number of samples per second, not {args.rate}")
    chosen = {k: getattr(args, k) for k in ("mpi", "io", "host", "ib", "net", "nvml")}
    if not any(chosen.values()):
        chosen.update(mpi=_mpi_available(console), io=True, host=True)
    roots = {f"{k}_root": getattr(args, f"{k}_root") for k in ("proc", "ib", "net") if getattr(args, f"{k}_root")}
    python = {} if args.python is None else {"python": True, "python_min_ns": int(args.python * 1000)}
    opts = RecordOptions(output=Path(args.output), rate_hz=args.rate, gpu=args.gpu, **python, **chosen, **roots)
    code, trace, died_by = record(command, opts, console)
    if trace is not None:
        _report_recording(args.output, trace, console)
    if died_by is not None:
        _end_by_signal(died_by)
    return code


def _end_by_signal(num: int) -> None:
    """End this process by signal ``num``, as the recorded rank ended (no core file): its
    launcher then ends the job, as it would have without di record."""
    import os
    import resource
    import signal

    sys.stdout.flush()
    sys.stderr.flush()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if num != signal.SIGKILL:
        signal.signal(num, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [num])
    os.kill(os.getpid(), num)


def _report_recording(output: str, trace: Any, console: Any) -> None:
    console.print(
        f"wrote {output}: {len(trace.ranks)} ranks, {trace.events.height:,} events, "
        f"{trace.messages.height:,} messages, {trace.collectives.height:,} collective parts, {trace.samples.height:,} samples"
    )
    _say(console, trace.meta.get("warnings", []))


def _mpi_available(console: Any) -> bool:
    from di.capture.build import find_mpicc
    from di.errors import MissingDependencyError

    try:
        find_mpicc()
        return True
    except MissingDependencyError as exc:
        _say(console, [f"MPI not recorded: {exc}"], kind="note")
        return False
