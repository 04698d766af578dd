"""``di info``: a trace's summary (ranks, timelines, categories, sources, drops), as a table or JSON;
:func:`show_info` prints it for :mod:`di.parallel.info` too.
"""

from __future__ import annotations

import argparse
from typing import Any

from di.cli.loading import _load
from di.cli.messages import _say


def _info(args: argparse.Namespace, console: Any) -> None:
    from di.parallel import world

    comm = world()  # under mpiexec -n P (P > 1): each process summarises its ranks (di.parallel.info)
    if comm is not None:
        from di.parallel.command import run_or_abort
        from di.parallel.info import info_command

        run_or_abort(info_command, args, console, comm)
        return
    _info_here(args, console)


def _info_here(args: argparse.Namespace, console: Any) -> None:
    show_info(args, console, _load(args))


def show_info(args: argparse.Namespace, console: Any, trace: Any, categories: Any = None) -> None:
    """Print ``di info``'s summary of ``trace`` (JSON with ``--json``) and its warnings; ``categories``: the
    per-category counts when made elsewhere (:func:`di.viewers.info.summary`)."""
    from di.viewers.info import render, summary

    if args.json:
        import json

        print(json.dumps(summary(trace, categories=categories), indent=1))
        return
    render(trace, console, categories=categories)
    _say(console, trace.meta.get("warnings", []))
