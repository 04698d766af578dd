"""``di convert``: traces between formats, merging per-rank files, with or without the analysis tracks."""

from __future__ import annotations

import argparse
from typing import Any

from di.cli.failures import _write_bug_log
from di.cli.loading import _load
from di.cli.messages import _say


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
