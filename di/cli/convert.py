"""``di convert``: traces between formats, merging per-rank files, with or without the analysis tracks."""

from __future__ import annotations

import argparse
from typing import Any

from di.cli.failures import _write_bug_log
from di.cli.loading import _load
from di.cli.messages import _say


def _convert(args: argparse.Namespace, console: Any) -> None:
    from di.parallel import world

    comm = world()  # under mpiexec -n P (P > 1): each process reads a share, the store is written partitioned
    if comm is not None:
        from di.parallel.command import run_or_abort
        from di.parallel.convert import convert_command

        run_or_abort(convert_command, args, console, comm)
        return
    from di.analysis_parts import without_analysis
    from di.convert.registry import claim_output, expand
    from di.viewers.analysis_tracks import VIEWER_FORMATS

    inputs = expand(args.inputs)
    writer = claim_output(args.output, to=args.to, force=args.force, inputs=inputs)  # before minutes of loading
    add = args.analysis if args.analysis is not None else writer.name in VIEWER_FORMATS
    trace = _load(args)
    program = without_analysis(trace)
    if program is not trace:
        console.print(f"[dim]the input carries di's analysis tracks: {'replaced' if add else 'left out'}[/dim]")
    trace = _with_analysis(program, console) if add else program
    lost = _write(args, writer.name, inputs, program, trace, console)
    _say_written(args, program, trace, console)
    _say(console, [*trace.meta.get("warnings", []), *lost])


def _with_analysis(program: Any, console: Any) -> Any:
    """The program with the analysis tracks; the program alone, said, when the analysis fails."""
    import di
    from di.viewers.analysis_tracks import NEEDS, with_analysis

    trace = program
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
    return trace


def _write(
    args: argparse.Namespace, writer: str, inputs: list[Any], program: Any, trace: Any, console: Any
) -> list[str]:
    """Write ``trace`` to ``args.output``; the data-loss warnings its writer gave, one line each."""
    import warnings

    from di.convert.registry import claim_output, save_path
    from di.errors import DataLossWarning

    with console.status(f"writing {args.output}"), warnings.catch_warnings(record=True) as lost:
        warnings.simplefilter("always", DataLossWarning)  # said below as warnings, one line each
        # the rank-partitioned store (di.store_partition) for many per-rank inputs, or when asked
        if writer == "di" and (args.partition or (len(inputs) > 1 and len(program.ranks) > 1)):
            from di.store import write_store

            sources = [s.get("path") for s in trace.meta.get("sources", []) if isinstance(s, dict)]
            claim_output(
                args.output, to=args.to, force=args.force, inputs=[*inputs, *(s for s in sources if isinstance(s, str))]
            )
            write_store(trace, args.output, partitioned=True)
        else:
            save_path(trace, args.output, to=args.to, force=args.force, inputs=inputs)
    return [str(w.message) for w in lost if w.category is DataLossWarning]


def _say_written(args: argparse.Namespace, program: Any, trace: Any, console: Any) -> None:
    """One line: what was written, with the analysis tracks' slices and counters when added."""
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
