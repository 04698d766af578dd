"""``di analyze``: one trace's analysis (terminal summary, ``--json``, ``--csv``, plugin analyses), or a batch of
traces analysed one by one into one row per trace and rank (``--batch``).
"""

from __future__ import annotations

import argparse
from typing import Any

from di.cli.loading import _load
from di.cli.messages import _say


def _analyze(args: argparse.Namespace, console: Any) -> None:

    from di.convert.registry import expand
    from di.engine import analyze
    from di.engine.window import parse_window
    from di.output import claim, file_starts_with
    from di.viewers.analysis import JSON_MARK, is_csv_folder, write_csv, write_json
    from di.viewers.terminal import render

    window = parse_window(args.window)
    from di.parallel import world

    comm = world()  # under mpiexec -n P (P > 1): each process owns some ranks (di.parallel)
    batch = args.batch or _all_stores(args.inputs)
    if comm is not None and not batch:
        from di.parallel.command import analyze_command, run_or_abort

        run_or_abort(analyze_command, args, console, comm)
        return
    if batch:
        if comm is None or comm.Get_rank() == 0:  # a batch of traces runs in process 0 only
            _analyze_batch(args, window, console)
        return
    from di.analysis_parts import without_analysis

    inputs = expand(args.inputs)
    if args.json and args.json != "-":
        claim(
            args.json, ours=file_starts_with(JSON_MARK), force=args.force, inputs=inputs, what="an analysis JSON file"
        )
    if args.csv:
        claim(args.csv, ours=is_csv_folder, inputs=inputs, what="a CSV folder")
    trace = without_analysis(_load(args))  # plugin analyses, too, see the program's events only
    with console.status("analyzing"):
        result = analyze(trace, window=window, per_step=args.steps)
    if args.json:
        write_json(result, args.json, inputs=list(args.inputs))
        if args.json == "-":
            return
    if args.csv:
        write_csv(result, args.csv, extra=_plugin_analyses(trace, result, console))
    render(result, console, title=", ".join(args.inputs))
    _say(console, trace.meta.get("warnings", []))


def _plugin_analyses(trace: Any, result: Any, console: Any) -> dict[str, Any]:
    """The tables of installed ``di.analyses`` plugins, by CSV name; their failures are said."""
    from di.plugins import run_analyses

    frames, problems = run_analyses(trace, result)
    _say(console, problems)
    return frames


def _all_stores(inputs: list[str]) -> bool:

    from di.convert.registry import expand

    paths = expand(inputs) if len(inputs) > 1 or any(ch in inputs[0] for ch in "*?[") else []
    return len(paths) > 1 and all((p / "meta.json").is_file() for p in paths)


def _analyze_batch(args: argparse.Namespace, window: Any, console: Any) -> None:
    from rich.table import Table

    from di.convert.registry import expand, load_paths
    from di.engine import analyze
    from di.viewers.batch import rank_rows, write_table
    from di.viewers.terminal import print_table

    if args.json or args.steps:
        raise ValueError("--json and --steps take one trace; with many traces (--batch) use --csv DIR")
    paths = [p for item in args.inputs for p in (map(str, expand(item)) if any(ch in item for ch in "*?[") else [item])]
    if args.csv:
        from di.output import claim
        from di.viewers.analysis import is_csv_folder

        claim(args.csv, ours=is_csv_folder, inputs=paths, what="a CSV folder")
    frames = []
    for path in paths:
        with console.status(f"analyzing {path}"):
            frames.append(
                rank_rows(
                    path, analyze(load_paths([path], rank=args.rank, max_input_size=args.max_input_size), window=window)
                )
            )
    t = Table(title=f"di analyze: {len(paths)} traces, one row per trace and rank")
    for c in ("trace", "rank", "span ms", "compute %", "comm %", "idle %", "waited ms", "crit. path ms"):
        t.add_column(c, justify="right")
    for f in frames:
        for r in f.iter_rows(named=True):
            span = r["span_ns"] or r["host_span_ns"] or 0
            share = lambda k: "—" if not span else f"{100 * (r[k] if r['span_ns'] else r['host_' + k]) / span:.1f}"
            t.add_row(
                r["trace"],
                str(r["rank"]),
                f"{span / 1e6:,.2f}",
                share("compute_ns"),
                share("comm_ns"),
                share("idle_ns"),
                f"{r['waited_ns'] / 1e6:,.2f}",
                f"{(r['cp_contrib_ns'] or 0) / 1e6:,.2f}",
            )
    print_table(console, t)
    if args.csv:
        console.print(f"wrote {write_table(frames, args.csv)}")
