"""The ``di analyze`` and ``di convert`` commands when run under ``mpiexec -n P`` (P > 1).

Every process runs the command; only process 0 prints and writes (the JSON, the
CSV files, the summary). Installed ``di.analyses`` plugins (``--csv``) run on
process 0 over the whole trace, as in one process: process 0 then reads the
whole job after the parallel analysis, so its memory is one process's. An error that one process meets while reading its
input is every process's error (:meth:`di.parallel.exchange.Exchange.check`);
an internal error on one process aborts the whole run (``MPI_Abort``), so no
process waits forever for another.
"""

from __future__ import annotations

import argparse
from typing import Any

from di.parallel.exchange import Exchange


def analyze_command(args: argparse.Namespace, console: Any, comm: Any) -> None:
    """``di analyze`` over the processes of ``comm`` (see the module docstring)."""
    from di.convert.registry import expand, load_paths
    from di.output import claim, file_starts_with
    from di.parallel.analyze import analyze
    from di.store import is_store
    from di.viewers.analysis import JSON_MARK, is_csv_folder, write_csv, write_json
    from di.viewers.terminal import render

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
        write_json(result, args.json, inputs=list(args.inputs), seconds={"processes": ex.size})
        if args.json == "-":
            return
    if args.csv:
        write_csv(result, args.csv, extra=_plugin_tables(result, whole, console))
    render(result, console, title=f"{', '.join(args.inputs)} ({ex.size} processes)")


def _plugin_tables(result: Any, whole: Any, console: Any) -> dict[str, Any]:
    """The tables of installed ``di.analyses`` plugins (process 0, over ``whole()``: the whole job, read only
    when a plugin is installed); their failures are said, as one process says them."""
    from di.cli import _say
    from di.plugins import load_group, run_analyses

    loaded = load_group("di.analyses")
    if not loaded.ok and not loaded.failed:
        return {}
    frames, problems = run_analyses(whole() if loaded.ok else None, result)
    _say(console, problems)
    return frames


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
