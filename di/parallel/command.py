"""The ``di analyze`` and ``di convert`` commands when run under ``mpiexec -n P`` (P > 1).

Every process runs the command; only process 0 prints and writes (the JSON, the
CSV files, the summary). An error that one process meets while reading its
input is every process's error (:meth:`di.parallel.exchange.Exchange.check`);
an internal error on one process aborts the whole run (``MPI_Abort``), so no
process waits forever for another.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from di.parallel.exchange import Exchange


def analyze_command(args: argparse.Namespace, console: Any, comm: Any) -> None:
    """``di analyze`` over the processes of ``comm`` (see the module docstring)."""
    from di.convert.registry import expand, load_paths
    from di.output import atomic_write, claim, file_starts_with
    from di.parallel.analyze import analyze
    from di.store import is_store
    from di.viewers.analysis import JSON_MARK, is_csv_folder, render, to_json, validate, write_csv

    ex = Exchange(comm)
    inputs = expand(args.inputs)
    error = None
    try:
        if ex.rank == 0 and args.json and args.json != "-":
            claim(
                args.json,
                ours=file_starts_with(JSON_MARK),
                force=args.force,
                inputs=inputs,
                what="an analysis JSON file",
            )
        if ex.rank == 0 and args.csv:
            claim(args.csv, ours=is_csv_folder, inputs=inputs, what="a CSV folder")
    except Exception as exc:  # the others must not wait for process 0
        error = exc
    ex.check(error, "checking the outputs")
    store = inputs[0] if len(inputs) == 1 and is_store(inputs[0]) else None

    def whole() -> Any:
        from di.analysis_parts import without_analysis

        return without_analysis(
            load_paths(inputs, rank=args.rank, ranks=args.ranks, max_input_size=args.max_input_size)
        )

    result = analyze(
        store or inputs[0],
        ex,
        window=args.window,
        per_step=args.steps,
        load_whole=None if store else whole,
        wait_rows=bool(args.csv),
    )
    if result is None:
        return
    if args.json:
        doc = to_json(result, inputs=list(args.inputs))
        doc["seconds"] = {**result.seconds, "processes": ex.size}
        validate(doc)
        text = json.dumps(doc, indent=1)
        if args.json == "-":
            print(text)
            return
        with atomic_write(args.json) as fh:
            fh.write(text.encode())
    if args.csv:
        write_csv(result, args.csv)
    render(result, console, title=f"{', '.join(args.inputs)} ({ex.size} processes)")


def run_or_abort(command: Any, args: argparse.Namespace, console: Any, comm: Any) -> Any:
    """Run ``command``; an error that is not di's (a bug) on one process aborts every process after it is said."""
    from di.errors import DIError

    try:
        return command(args, console, comm)
    except (DIError, FileNotFoundError, ValueError, OSError, KeyboardInterrupt):
        raise
    except Exception as exc:
        import sys
        import traceback

        print(
            f"di {args.command}: internal error on process {comm.Get_rank()} of {comm.Get_size()} "
            f"(a bug in di, please report it): {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(70)
        raise
