"""``di demo``: record the built-in 4-rank MPI training-like job, or write a Kineto-shaped one (``--kineto``)."""

from __future__ import annotations

import argparse
from typing import Any


def _demo(args: argparse.Namespace, console: Any) -> int | None:
    if args.kineto:
        from di.demo import write_kineto_job
        from di.demo.job import is_job_folder
        from di.output import claim

        claim(args.output, ours=is_job_folder, what="a Kineto demo folder")
        files = write_kineto_job(args.output, ranks=args.ranks, steps=args.steps)
        console.print(f"wrote {len(files)} files to {args.output}")
        return None
    from di.demo.recorded import run_demo

    return run_demo(args.output, ranks=args.ranks, steps=args.steps, console=console, force=args.force)
