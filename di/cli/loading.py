"""Loading a command's inputs (:func:`_load`): one file, several in as many processes as the idle cores
allow (:func:`_cores`), or several with a progress bar; progress and timing go to stderr.
"""

from __future__ import annotations

import argparse
import time
from typing import Any


def _load(args: argparse.Namespace) -> Any:
    """Load the command's inputs; progress and timing go to stderr, so that stdout
    holds only the command's output (``--json -`` stays valid JSON)."""
    from rich.console import Console

    from di.convert.registry import expand, load_paths

    console = Console(stderr=True, highlight=False)
    paths = expand(args.inputs)
    started = time.monotonic()
    if len(paths) == 1:
        with console.status(f"loading {paths[0]}"):
            trace = load_paths(paths, rank=args.rank, ranks=args.ranks, max_input_size=args.max_input_size)
    elif (getattr(args, "jobs", None) or _cores()) > 1 and len(paths) > 1:
        from di.parallel.convert import load_jobs

        jobs = getattr(args, "jobs", None) or _cores()
        with console.status(f"loading {len(paths)} files in up to {jobs} processes"):
            trace = load_jobs(paths, jobs=jobs, rank=args.rank, ranks=args.ranks, max_input_size=args.max_input_size)
    else:
        from rich.progress import Progress  # imported only here: ~0.05 s on every command

        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("loading", total=len(paths))
            trace = load_paths(
                paths,
                rank=args.rank,
                ranks=args.ranks,
                max_input_size=args.max_input_size,
                progress=lambda done, total: bar.update(task, completed=done),
            )
    if time.monotonic() - started > 1:
        console.print(f"[dim]loaded {trace.events.height:,} events in {time.monotonic() - started:.1f} s[/dim]")
    return trace


def _cores() -> int:
    from di.parallel.convert import idle_cores

    return idle_cores()
