"""``di info`` under ``mpiexec -n P`` (P > 1): each process summarises the rank groups it owns.

Over a rank-partitioned store (:mod:`di.store_partition`) each process reads only
its groups' rows (:func:`di.store_partition.read_groups`: every file of its groups
is read and its columns checked against the schema) and reduces them to counts:
rows per table, events and instants per category, first start and last end.
Process 0 sums them, reads the small whole tables (timelines, series,
communicators) and prints what one process prints, from the same meta as
:func:`di.trace.refresh_meta` derives. Any other input is summarised by process 0
alone, as in one process. A process that cannot read its part fails every process
(:meth:`di.parallel.exchange.Exchange.check`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import polars as pl

from di.parallel.exchange import Exchange


def info_command(args: argparse.Namespace, console: Any, comm: Any) -> None:
    """``di info`` over the processes of ``comm`` (see the module docstring)."""
    from di.convert.registry import expand
    from di.store import is_store, read_meta
    from di.store_partition import is_partitioned

    ex = Exchange(comm)
    inputs = expand(args.inputs)
    store, error = None, None
    try:
        if len(inputs) == 1 and is_store(inputs[0]) and is_partitioned(read_meta(inputs[0])):
            store = Path(inputs[0])
    except Exception as exc:  # every process must learn of it
        error = exc
    ex.check(error, f"reading {inputs[0] if inputs else 'the inputs'}")
    if store is None:
        if ex.rank == 0:
            from di.cli import _info_here

            _info_here(args, console)
        return
    facts = _part_facts(store, ex)
    every = ex.gather(facts, "info")
    if every is None:
        return
    from di.cli import show_info

    show_info(args, console, *_job(store, every))


def _part_facts(store: Path, ex: Exchange) -> dict[str, Any]:
    """This process's counts: rows per partitioned table, events and instants per category, time range."""
    from di.parallel.ownership import assign_groups
    from di.store import _read_checked, read_meta
    from di.store_partition import read_groups
    from di.viewers.info import category_counts

    error, facts = None, {}
    try:
        meta = read_meta(store)
        groups = assign_groups(len(meta["partitions"]["groups"]), ex.size)
        parts = read_groups(store, meta, groups[ex.rank], _read_checked)
        ev = parts["events"]
        facts = {
            "rows": {name: df.height for name, df in parts.items()},
            "categories": category_counts(ev),
            "start_ns": ev.get_column("start_ns").min() if ev.height else None,
            "end_ns": ev.get_column("end_ns").max() if ev.height else None,
        }
        del parts, ev
    except Exception as exc:  # every process must learn of it, whatever it is
        error = exc
    ex.check(error, f"reading {store}")
    return facts


def _job(store: Path, every: list[dict[str, Any]]) -> tuple[Any, pl.DataFrame]:
    """(the job as :func:`di.store.read_store` gives it, but with empty partitioned tables and the meta their
    rows give; the events and instants per category)."""
    from di import schema
    from di.store import _read_checked, read_meta
    from di.store_partition import PARTITIONED, read_whole, whole_tables
    from di.trace import Trace, conform

    meta = read_meta(store)
    tables: dict[str, Any] = {name: conform(name, None) for name in PARTITIONED}
    for name in whole_tables():
        if (df := read_whole(store, name, _read_checked)) is not None:
            tables[name] = conform(name, df)
    trace = Trace.build(meta=meta, **tables)
    derived = dict(trace.meta)
    derived["tables"] = {
        name: sum(f["rows"][name] for f in every) if name in PARTITIONED else trace.tables()[name].height
        for name in schema.TABLES
    }
    starts = [f["start_ns"] for f in every if f["start_ns"] is not None]
    ends = [f["end_ns"] for f in every if f["end_ns"] is not None]
    derived["time_range"] = {"start_ns": min(starts, default=None), "end_ns": max(ends, default=None)}
    categories = (
        pl.concat([f["categories"] for f in every])
        .group_by("cat")
        .agg(pl.col("n").sum(), pl.col("instants").sum())
        .sort("cat")
    )
    return trace.with_meta(derived), categories
