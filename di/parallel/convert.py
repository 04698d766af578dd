"""Loading many input files on many cores: ``--jobs N`` (processes on one machine) and
``mpiexec -n P di convert IN... -o OUT.di`` (each MPI process reads a share of the files).

Files are read one per task with the connector and rank hint that one process
would give them (their position among all the inputs), so the merged job is the
one :func:`di.convert.registry.load_paths` builds. Under MPI each process reads a
consecutive share of the files, shifts its rows as :func:`di.merge.merge` would
(offsets from the processes before it), numbers the collective instances job-wide
and writes its ranks' files of the rank-partitioned store (:mod:`di.store_partition`)
itself; process 0 writes ``locations``, ``series`` and ``meta.json`` and swaps the
store in. No process ever holds the whole job.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.parallel.exchange import Exchange
from di.trace import Trace

PARALLEL_LOAD_MIN_BYTES = 64 << 20
"""Inputs smaller than this in all are read in one process: starting a worker (importing di, polars,
numba) costs about a second, more than reading them."""


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def idle_cores() -> int:
    """The cores other processes leave idle: :func:`available_cores` less the 1-minute load average beyond
    this process's own (at least 1). The default of ``--jobs``: a worker costs CPU to start and to send its
    part back (:func:`load_jobs`), which only an idle core hides; on a busy machine it makes loading slower."""
    cores = available_cores()
    try:
        others = os.getloadavg()[0] - 1.0
    except OSError:  # no load average on this system
        return cores
    return max(1, min(cores, cores - int(max(0.0, others))))


def read_files(
    paths: list[Path], positions: list[int], count: int, *, rank: int | None, ranks: list[int] | None, limit: int
) -> list[Trace]:
    """The files at ``positions``; their failures are collected and raised together (as load_paths does)."""
    from di.convert.loading import read_one
    from di.errors import FormatError, UnknownFormatError

    traces, failures = [], []
    for i in positions:
        try:
            traces.append(read_one(paths[i], i, count, rank, ranks, limit)[0])
        except (FormatError, UnknownFormatError, FileNotFoundError) as exc:
            failures.append(exc)
    if len(failures) == 1:
        raise failures[0]
    if failures:
        raise FormatError(f"{len(failures)} of {len(positions)} files", "; ".join(str(f) for f in failures))
    return traces


def load_jobs(
    inputs: Any, *, jobs: int, rank: int | None = None, ranks: list[int] | None = None, max_input_size: Any = None
) -> Trace:
    """:func:`di.convert.registry.load_paths` with the files read by up to ``jobs`` processes: this one reads
    the first share itself while ``jobs - 1`` workers read the others (one process when there is one file, or
    less than :data:`PARALLEL_LOAD_MIN_BYTES` in all). A worker costs its start (a fresh interpreter importing
    di, polars and numba and loading the reader's kernels: about 1.4 CPU-s) and sending its part back (pickled
    and unpickled: about 0.45 CPU-s per million events), so this process reads rather than waits.

    Raises:
        as load_paths.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from di.convert.loading import join_job
    from di.convert.registry import connector_for, expand, load_paths
    from di.inputsize import limit_bytes

    paths = expand(inputs)
    size = sum(_bytes(p) for p in paths)
    if jobs < 2 or len(paths) < 2 or size < PARALLEL_LOAD_MIN_BYTES:
        return load_paths(paths, rank=rank, ranks=ranks, max_input_size=max_input_size)
    if ranks is not None and len(ranks) != len(paths):
        raise ValueError(f"{len(ranks)} ranks given for {len(paths)} files")
    limit = limit_bytes(max_input_size)
    shares = [s.tolist() for s in np.array_split(np.arange(len(paths)), min(jobs, len(paths))) if s.size]
    # spawn, not fork: polars' and numba's threads make a forked child unsafe
    with ProcessPoolExecutor(max_workers=len(shares) - 1, mp_context=get_context("spawn")) as pool:
        futures = [
            pool.submit(read_files, paths, s, len(paths), rank=rank, ranks=ranks, limit=limit) for s in shares[1:]
        ]
        parts = read_files(paths, shares[0], len(paths), rank=rank, ranks=ranks, limit=limit)
        parts += [t for f in futures for t in f.result()]
    # as load_paths joins them: text logs aligned, each connector's link (Nsight's MPI across ranks)
    return join_job(parts, [connector_for(p) for p in paths], paths)


def _bytes(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


def convert_command(args: argparse.Namespace, console: Any, comm: Any) -> None:
    """``di convert IN... -o OUT.di`` over the processes of ``comm``: the rank-partitioned store."""
    from di.convert.registry import claim_output, expand
    from di.errors import DIError
    from di.inputsize import limit_bytes

    ex = Exchange(comm)
    inputs = expand(args.inputs)
    error = None
    try:
        if ex.rank == 0:
            writer = claim_output(args.output, to=args.to, force=args.force, inputs=inputs)
            if writer.name != "di":
                raise DIError(
                    f"{args.output}: under mpiexec, di convert writes only a .di store (the partitioned form)"
                )
        if args.ranks is not None and len(args.ranks) != len(inputs):
            raise ValueError(f"{len(args.ranks)} ranks given for {len(inputs)} files")
    except Exception as exc:
        error = exc
    ex.check(error, "checking the output")
    mine = np.array_split(np.arange(len(inputs)), ex.size)[ex.rank].tolist()
    part, error = None, None
    try:
        limit = limit_bytes(args.max_input_size)
        traces = read_files(inputs, mine, len(inputs), rank=args.rank, ranks=args.ranks, limit=limit)
        part = _merge_part(traces)
    except Exception as exc:
        error = exc
    ex.check(error, "reading its inputs")
    assert part is not None
    summary = write_partitioned(ex, part, Path(args.output))
    if ex.rank == 0:
        console.print(
            f"wrote {args.output} (partitioned by rank, {ex.size} processes): {len(summary['ranks'])} ranks, "
            f"{summary['tables']['events']:,} events, {summary['tables']['flows']:,} flows"
        )
        for text in summary.get("warnings", []):
            console.print(f"warning: {text}", markup=False, highlight=False)


def _merge_part(traces: list[Trace]) -> Trace:
    from di.merge import merge

    if not traces:
        return Trace.build(meta={"sources": []}, locations=None, events=None)
    return merge(traces) if len(traces) > 1 else traces[0]


def write_partitioned(ex: Exchange, part: Trace, path: Path) -> dict[str, Any]:
    """Write the job whose parts the processes hold (in process order) as one partitioned store.

    Returns:
        The store's meta.json content (on every process).

    Raises:
        FormatError: two processes hold the same rank.
    """
    from di.store_partition import PARTITIONED, home_ranks, whole_tables

    sizes = ex.allgather(
        {t: part.table(t).height for t in ("events", "locations", "series", *PARTITIONED)}
        | {"sources": len(part.meta.get("sources", [])), "ranks": part.ranks},
        "part sizes",
    )
    seen = _rank_processes(sizes)
    before = {k: sum(s[k] for s in sizes[: ex.rank]) for k in sizes[0] if k != "ranks"}
    homes = home_ranks(part.tables())
    shifted = _numbered(ex, part, before)
    groups = [[r] for r in sorted(seen)]
    others = [n for n in whole_tables() if n not in ("locations", "series")]  # per communicator: no row references
    locations = ex.gather(
        (shifted["locations"], shifted["series"], part.meta, {n: part.table(n) for n in others}), "locations"
    )
    staged, ctx = _open_store(ex, path)
    rows, error = _write_rows(shifted, homes, staged, groups, before)
    counts = ex.gather(rows, "row counts")
    time_range = ex.allgather(_time_range(part), "time range")
    if ex.rank != 0:
        ex.check(error, "writing its files")
        return ex.bcast(None, 0, "meta")
    meta: dict[str, Any] = {}
    try:
        if error is None:
            assert locations is not None and counts is not None
            meta = _job_meta(locations, counts, groups, time_range)
            _write_whole(staged, locations, others, meta)
    except Exception as exc:
        error = exc
    _close_store(ex, ctx, error)
    return ex.bcast(meta, 0, "meta")


def _rank_processes(sizes: list[dict[str, Any]]) -> dict[int, int]:
    """{rank: the process holding it} from every process's part sizes.

    Raises:
        FormatError: two processes hold the same rank.
    """
    from di.errors import FormatError

    seen: dict[int, int] = {}
    for p, s in enumerate(sizes):
        for r in s["ranks"]:
            if r in seen:
                raise FormatError(f"process {p}'s inputs", f"rank {r} is also in process {seen[r]}'s; give --ranks")
            seen[r] = p
    return seen


def _numbered(ex: Exchange, part: Trace, before: dict[str, int]) -> dict[str, pl.DataFrame]:
    """The part's tables shifted past the processes before it (:func:`_shift`), its collectives'
    ``instance`` numbered over the whole job's (comm, seq) keys."""
    from di.merge import assign_instances

    shifted = _shift(part, before)
    shifted["events"] = _same_columns(ex, shifted["events"])
    keys = shifted["collectives"].select(pl.col("comm").fill_null(""), "seq").unique()
    every = pl.concat(ex.allgather(keys, "collective keys")).unique()
    shifted["collectives"] = _instances(shifted["collectives"], every, assign_instances)
    return shifted


def _same_columns(ex: Exchange, events: pl.DataFrame) -> pl.DataFrame:
    """``events`` with every column some process's part has (the schema's optional ones, such as Kineto's ids, are
    present only in parts whose files had them), null where its files had none: every file of the store, and the
    store, then has the columns one process reading all the files gives."""
    from di.trace import conform

    every: dict[str, pl.DataType] = {}
    for names in ex.allgather(dict(events.schema), "events columns"):
        every.update({c: t for c, t in names.items() if c not in every})
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in every.items() if c not in events.columns]
    return conform("events", events.with_columns(missing)) if missing else events


def _open_store(ex: Exchange, path: Path) -> tuple[Path, Any]:
    """Process 0 claims ``path`` and stages the store's folder (with one folder per partitioned table):
    (the staged folder, on every process; process 0's :func:`di.output.atomic_dir`, None elsewhere)."""
    from di.store_partition import PARTITIONED

    staged = None
    error: BaseException | None = None
    ctx = None
    if ex.rank == 0:
        from di.output import atomic_dir, claim
        from di.store import is_own_folder

        try:
            target = claim(path, ours=is_own_folder, what="a trace store")
            ctx = atomic_dir(target)
            staged = ctx.__enter__()
            for name in PARTITIONED:
                (staged / name).mkdir()
        except Exception as exc:
            error = exc
    ex.check(error, "creating the store")
    return ex.bcast(staged, 0, "store folder"), ctx


def _write_rows(
    shifted: dict[str, pl.DataFrame], homes: Any, staged: Path, groups: list[list[int]], before: dict[str, int]
) -> tuple[dict[str, list[int]], BaseException | None]:
    """This process's rows of the partitioned tables written into ``staged``: (rows per table and
    group, {} on failure; the failure, reported by every process together)."""
    from di.store import _write_parquet, required_columns
    from di.store_partition import PARTITIONED, write_rows

    try:
        level = 3

        def write(name: str, df: pl.DataFrame, file: Path) -> None:
            _write_parquet(df, file, level, required_columns(name, df, whole=False))

        return write_rows(shifted, homes, staged, write, groups, {t: before[t] for t in PARTITIONED}), None
    except Exception as exc:
        return {}, exc


def _write_whole(staged: Path, locations: list[Any], others: list[str], meta: dict[str, Any]) -> None:
    """Process 0: the tables kept whole (locations, series, the per-communicator ones) and meta.json."""
    from di.merge import stack
    from di.store import META, _write_parquet, required_columns

    whole = {"locations": stack([x[0] for x in locations]), "series": stack([x[1] for x in locations])}
    whole |= {name: stack([x[3][name] for x in locations]) for name in others}
    for name, df in whole.items():
        _write_parquet(df, staged / f"{name}.parquet", 3, required_columns(name, df, whole=True))
    import json

    (staged / META).write_text(json.dumps(meta, indent=1) + "\n")


def _close_store(ex: Exchange, ctx: Any, error: BaseException | None) -> None:
    """Process 0: swap the staged store in once every process wrote its files, else drop it and raise."""
    try:
        ex.check(error, "writing its files")
    except BaseException as exc:
        assert ctx is not None
        ctx.__exit__(type(exc), exc, exc.__traceback__)
        raise
    assert ctx is not None
    ctx.__exit__(None, None, None)


def _shift(part: Trace, before: dict[str, int]) -> dict[str, pl.DataFrame]:
    """The part's tables with row, timeline, series and source ids shifted past the processes before it
    (what :func:`di.merge.merge` does to each part)."""
    from di.merge import _shift as shift

    ev, loc, ser, src = before["events"], before["locations"], before["series"], before["sources"]
    return {
        "locations": shift(part.locations, ["loc"], loc).with_columns((pl.col("source") + src).cast(pl.Int32)),
        "events": shift(shift(part.events, ["loc"], loc), ["parent"], ev),
        "messages": shift(part.messages, ["send", "recv", "send_done", "recv_post"], ev),
        "collectives": shift(part.collectives, ["event"], ev),
        "flows": shift(part.flows, ["src", "dst"], ev),
        "series": shift(shift(part.series, ["series"], ser), ["loc"], loc),
        "samples": shift(part.samples, ["series"], ser),
    }


def _instances(c: pl.DataFrame, keys: pl.DataFrame, assign: Any) -> pl.DataFrame:
    """``instance`` numbered over the whole job's (comm, seq) keys, as :func:`di.merge.assign_instances` does."""
    if not c.height:
        return c
    numbered = assign(keys.with_columns(pl.col("comm").replace("", None)))
    numbered = numbered.select(pl.col("comm").fill_null(""), "seq", "instance")
    return (
        c.drop("instance")
        .with_columns(pl.col("comm").fill_null("").alias("_key"))
        .join(numbered.rename({"comm": "_key"}), on=["_key", "seq"], how="left", maintain_order="left")
        .drop("_key")
        .select(c.columns)
    )


def _time_range(part: Trace) -> tuple[int, int] | None:
    ev = part.events
    if not ev.height:
        return None
    return int(ev.get_column("start_ns").min()), int(ev.get_column("end_ns").max())


def _job_meta(locations: list[Any], counts: list[dict[str, list[int]]], groups: list[list[int]], spans: list) -> dict:
    """meta.json of the whole job: what :func:`di.merge.merge` and :func:`di.trace.refresh_meta` give it."""
    from di import __version__, schema
    from di.merge import merged_meta, stack

    locs = stack([x[0] for x in locations])
    rows = {t: [sum(c[t][g] for c in counts if c) for g in range(len(groups))] for t in counts[0]}
    known = [s for s in spans if s is not None]
    tables = {t: sum(rows[t]) if t in rows else 0 for t in schema.TABLES}
    tables["locations"] = locs.height
    tables["series"] = sum(x[1].height for x in locations)
    for name in locations[0][3]:
        tables[name] = sum(x[3][name].height for x in locations)
    meta = {
        **merged_meta([x[2] for x in locations]),
        "format": "di-trace",
        "schema_version": schema.SCHEMA_VERSION,
        "di_version": __version__,
        "hosts": sorted(h for h in locs.get_column("host").unique().to_list() if h),
        "tables": tables,
        "ranks": sorted(locs.get_column("rank").unique().to_list()),
        "time_range": {
            "start_ns": min(s[0] for s in known) if known else None,
            "end_ns": max(s[1] for s in known) if known else None,
        },
        "partitions": {"layout": "rank_groups", "groups": groups, "rows": rows},
    }
    return meta
