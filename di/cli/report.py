"""``di report``: the self-contained HTML report; :func:`_report_here` writes it in this process
(and for :mod:`di.parallel.report` where the store is not partitioned).
"""

from __future__ import annotations

import argparse
from typing import Any

from di.cli.loading import _load
from di.cli.messages import _say


def _report(args: argparse.Namespace, console: Any) -> None:
    from di.parallel import world

    comm = world()  # under mpiexec -n P (P > 1): each process reduces its ranks' part (di.parallel.report)
    if comm is not None:
        from di.parallel.command import run_or_abort
        from di.parallel.report import report_command

        run_or_abort(report_command, args, console, comm)
        return
    _report_here(args, console)


def _report_here(args: argparse.Namespace, console: Any) -> None:
    from di.convert.registry import expand
    from di.engine import analyze
    from di.engine.window import parse_window
    from di.output import claim
    from di.viewers.report import is_own_report, write_report

    window = parse_window(args.window)
    claim(args.output, ours=is_own_report, force=args.force, inputs=expand(args.inputs), what="an HTML report")
    trace = _load(args)
    with console.status("analyzing"):
        result = analyze(trace, window=window, per_step=True)
    with console.status(f"writing {args.output}"):
        problems = write_report(trace, result, args.output, inputs=list(args.inputs), plugins=not args.no_plugins)
    console.print(f"wrote {args.output}")
    _say(console, problems)
    _say(console, trace.meta.get("warnings", []))
