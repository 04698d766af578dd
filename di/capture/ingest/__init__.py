"""Ingest: a recording's raw shards -> one canonical trace on the job clock.

``ingest(run)`` reads ``run/raw/`` (see :mod:`di.capture.shard`), gives every
process its rank (MPI_Init's, else the launcher's environment rank; processes
with neither, such as the launcher itself, are skipped and counted), maps each
rank's clock onto rank 0's (:mod:`di.capture.clock`), turns MPI and I/O call
records into ``events``, matches messages and collective instances
(:mod:`di.capture.matching`), adds per-file I/O statistics
(:mod:`di.capture.iostats`) and sampler series (:mod:`di.capture.samplers`).
Everything is columnar: the per-record work is numpy/polars, the Python loops
run over processes, threads and communicators.

The package: :mod:`~di.capture.ingest.ranks` (each process's rank),
:mod:`~di.capture.ingest.clocks` (tick and clock maps onto the job clock),
:mod:`~di.capture.ingest.strings` (the job's string table),
:mod:`~di.capture.ingest.records` (the records as columns, the thread locations and the
sources), :mod:`~di.capture.ingest.events` (the events table) and
:mod:`~di.capture.ingest.failures` (abnormally ended ranks, the first to fail).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.capture import clock, shard, user_events
from di.capture.ingest.clocks import MIN_OWN_CALIBRATIONS, job_clocks, tick_maps, with_default_maps
from di.capture.ingest.events import MPI_OTHER, NO_PAYLOAD, build_events
from di.capture.ingest.failures import FIRST_END_GAP_S, LAUNCHER_KILLS, abnormal_ranks, first_failed
from di.capture.ingest.ranks import assign_ranks
from di.capture.ingest.records import empty_columns, gather
from di.capture.ingest.strings import StringTable
from di.errors import FormatError
from di.trace import Trace

__all__ = [
    "FIRST_END_GAP_S",
    "LAUNCHER_KILLS",
    "MIN_OWN_CALIBRATIONS",
    "MPI_OTHER",
    "NO_PAYLOAD",
    "StringTable",
    "first_failed",
    "ingest",
]


def ingest(run: str | Path, *, progress: Callable[[str], None] | None = None) -> tuple[Trace, pl.DataFrame]:
    """Read ``run/raw``; return the canonical trace of the recorded job and its per-file I/O table
    (:func:`di.capture.iostats.file_stats`).

    Raises:
        FormatError: no raw shards, or a shard header that is not di's.
    """
    from di.capture import iostats

    run = Path(run)
    raw = run / "raw"
    if not raw.is_dir():
        raise FormatError(raw, "no raw capture shards here (record with `di record -o RUN.di -- COMMAND`)")
    say = progress or (lambda _msg: None)
    say("reading shards")
    seen = shard.raw_fingerprint(raw)  # before reading: what changes meanwhile shows later
    procs, dropped = shard.read_raw(raw)
    warnings: list[str] = []
    ranks = assign_ranks(procs, warnings)
    epoch, maps = job_clocks(procs, ranks)
    say("building events")
    strings = StringTable()
    cols, locations, sources = gather(procs, ranks, maps, tick_maps(procs, warnings), strings)
    cols = _columns_or_empty(cols, raw)
    tables, row_of, io = _record_tables(cols, strings, locations, warnings, say)
    run_info = _run_info(run)
    bad, first = abnormal_ranks(procs, ranks, run_info, warnings)
    tables.update(_sampler_tables(raw, tables["locations"], maps, ranks, warnings))
    files = iostats.file_stats(io, tables["locations"])
    _closing_warnings(warnings, dropped, run_info)
    meta = {
        "format": "di-trace",
        "clock": _clock_meta(maps, epoch),
        "sources": sources,
        "warnings": warnings,
        "world_size": max((p.header.get("world_size", 0) for p in procs if p.lib == "mpi"), default=0) or None,
        "command": run_info.get("command"),
        "capture": _capture_meta(run_info, bad, first, files, seen),
    }
    trace = Trace.build(meta=meta, **tables, io_files=files)
    from di.capture.gpu_ingest import add_gpu
    from di.capture.nccl_work import add_nccl_work

    trace = add_nccl_work(trace, cols, row_of, procs)

    return add_gpu(trace, raw, ranks, with_default_maps(maps, raw, epoch)), files


def _columns_or_empty(cols: dict[str, np.ndarray], raw: Path) -> dict[str, np.ndarray]:
    """``cols``, or empty columns for a recording of samplers or CUPTI only.

    Raises:
        FormatError: the recording holds nothing at all.
    """
    if not cols and not any(raw.glob("samples-*.json")) and not any(raw.glob("cupti-*.json")):
        raise FormatError(raw, "the recording holds no records (did the command run MPI or file I/O under capture?)")
    return cols or empty_columns()


def _record_tables(
    cols: dict[str, np.ndarray],
    strings: StringTable,
    locations: pl.DataFrame,
    warnings: list[str],
    say: Callable[[str], None],
) -> tuple[dict[str, pl.DataFrame], np.ndarray, pl.DataFrame]:
    """The tables made of the shards' records (locations, events, messages, collectives), each
    record's event row (-1 none) and the I/O events."""
    from di.capture import matching

    comms = matching.Communicators.from_records(cols, strings.text)
    events, row_of, io = build_events(cols, comms, strings, warnings)
    locations = user_events.name_threads(locations, cols, strings)
    say("matching messages and collectives")
    messages = matching.messages(cols, row_of, comms, warnings)
    collectives = matching.collectives(cols, row_of, comms)
    tables = {"locations": locations, "events": events, "messages": messages, "collectives": collectives}
    return tables, row_of, io


def _sampler_tables(
    raw: Path,
    locations: pl.DataFrame,
    maps: dict[int, clock.ClockMap],
    ranks: dict[tuple[str, int], int],
    warnings: list[str],
) -> dict[str, pl.DataFrame]:
    """The samplers' series and samples, and ``locations`` with their counter locations."""
    from di.capture import samplers

    series, samples, counter_locs = samplers.ingest_samples(raw, locations, maps, ranks, warnings)
    if counter_locs.height:
        locations = pl.concat([locations, counter_locs], how="diagonal_relaxed")
    return {"locations": locations, "series": series, "samples": samples}


def _closing_warnings(warnings: list[str], dropped: dict[str, int], run_info: dict[str, Any]) -> None:
    """Add what the shard reader dropped, the ranks that never reported an exit and `di record`'s notes."""
    if dropped:
        warnings.append("dropped: " + ", ".join(f"{v} {k}" for k, v in dropped.items()))
    if run_info.get("unreported_ranks"):
        warnings.append(f"ranks {run_info['unreported_ranks']}: their di record never reported an exit status")
    warnings.extend(run_info.get("notes", []))


def _clock_meta(maps: dict[int, clock.ClockMap], epoch: int) -> dict[str, Any]:
    """meta ``clock``: ns, Unix-epoch based where rank 0's epoch is known, each rank's map."""
    return {
        "unit": "ns",
        "domain": "unix_epoch" if epoch else "relative",
        "sync": "mpi_ping_pong_linear" if any(m.points for m in maps.values()) else None,
        "offsets": {str(r): m.as_meta() for r, m in sorted(maps.items())},
    }


def _capture_meta(
    run_info: dict[str, Any], bad: list[int], first: list[int], files: pl.DataFrame, seen: dict[str, int]
) -> dict[str, Any]:
    """meta ``capture``: how the ranks ended, `di record`'s options, I/O totals, the raw files read."""
    return {
        "abnormal_ranks": bad,
        "first_failed_ranks": first,
        "exit_code": run_info.get("exit_code"),
        "options": run_info.get("options"),
        "io_files": files.height,
        "io_bytes_read": int(files.get_column("bytes_read").sum() or 0) if files.height else 0,
        "io_bytes_written": int(files.get_column("bytes_written").sum() or 0) if files.height else 0,
        "raw_files": seen,
    }


def _run_info(run: Path) -> dict[str, Any]:
    """What `di record` wrote about the run (command, exit code, options), if anything."""
    path = run / "raw" / "run.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
