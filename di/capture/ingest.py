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
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.capture import clock, shard, user_events
from di.errors import FormatError
from di.trace import Trace

MPI_OTHER = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Comm_free"}
NO_PAYLOAD = (
    "MPI_Init",
    "MPI_Finalize",
    "MPI_Wait",
    "MPI_Test",
    "MPI_Request_free",
    "MPI_Comm_",
    "MPI_Barrier",
    "MPI_Ibarrier",
    "MPI_Probe",
    "MPI_Iprobe",
    "MPI_Mprobe",
    "MPI_Improbe",
    "MPI_Start",
    "MPI_Send_init",
    "MPI_Ssend_init",
    "MPI_Bsend_init",
    "MPI_Rsend_init",
    "MPI_Recv_init",
)
"""Calls that move no payload of their own: their events carry no bytes."""


def _op_tables() -> tuple[np.ndarray, np.ndarray]:
    """op id -> event name, op id -> cat."""
    from di.capture.matching import COLLECTIVE_OPS, base_name

    names = shard.op_names()
    cats = []
    for name in names:
        if name.startswith("nccl"):
            cats.append("nccl")
        elif not name.startswith("MPI_"):
            cats.append("io")
        elif name in MPI_OTHER:
            cats.append("other")
        elif (
            name.startswith("MPI_Comm_")
            or name.startswith("MPI_Barrier")
            or name.startswith("MPI_Ibarrier")
            or base_name(name) in COLLECTIVE_OPS
        ):
            cats.append("mpi_coll")
        else:
            cats.append("mpi_p2p")
    return np.array(names, dtype=object), np.array(cats, dtype=object)


def _no_payload() -> np.ndarray:
    return np.array([n.startswith(NO_PAYLOAD) for n in shard.op_names()])


def _assign_ranks(procs: list[shard.ProcessShard], warnings: list[str]) -> dict[tuple[str, int], int]:
    """(host, pid) -> rank; processes without any rank get ranks by pid only when nobody has one."""
    ranks: dict[tuple[str, int], int] = {}
    for p in procs:
        if p.lib == "mpi" and p.header["rank"] >= 0:
            ranks[p.key] = p.header["rank"]
    for p in procs:
        if p.key not in ranks and p.header.get("env_rank", -1) >= 0 and p.lib in ("io", "nccl", "nccl_plugin", "nvtx"):
            ranks[p.key] = p.header["env_rank"]
    if not ranks:
        recorded = sorted({p.key for p in procs if p.threads}, key=lambda k: (k[0], k[1]))
        ranks = {key: i for i, key in enumerate(recorded)}
    skipped = [p for p in procs if p.key not in ranks and p.threads]
    if skipped:
        n = sum(int(r.size) for p in skipped for r in p.threads.values())
        names = sorted({Path(p.header.get("exe", "?")).name for p in skipped})
        warnings.append(
            f"{len(skipped)} processes without an MPI rank (launcher: {', '.join(names)}) skipped with their {n} records"
        )
    return ranks


def _epoch(procs: list[shard.ProcessShard], ranks: dict[tuple[str, int], int]) -> int:
    """CLOCK_REALTIME - CLOCK_MONOTONIC of rank 0's process (0 when unknown)."""
    for p in procs:
        if ranks.get(p.key) == 0:
            c = p.header["clock"]
            return int(c["realtime_ns"]) - int(c["now_ns"])
    return 0


def _clock_maps(
    procs: list[shard.ProcessShard], ranks: dict[tuple[str, int], int], epoch: int
) -> dict[int, clock.ClockMap]:
    maps: dict[int, clock.ClockMap] = {}
    for p in procs:
        if p.lib != "mpi" or p.key not in ranks:
            continue
        recs = np.concatenate(list(p.threads.values())) if p.threads else np.empty(0, shard.RECORD)
        c = recs[recs["kind"] == shard.KIND_CLOCK]
        maps[ranks[p.key]] = clock.fit(c["t0"], c["bytes"], c["aux2"], epoch)
    return maps


MIN_OWN_CALIBRATIONS = 3  # with fewer, a process's tick rate comes from its host's other processes


def _tick_maps(procs: list[shard.ProcessShard], warnings: list[str]) -> dict[tuple[str, str, int], clock.TickMap]:
    """Each process's ticks -> local ns map (calibration records plus the header's pair).

    A process with fewer than MIN_OWN_CALIBRATIONS pairs (short-lived, or killed
    early) takes the median rate of its host's better-calibrated processes.
    """
    pairs = {}
    for p in procs:
        recs = np.concatenate(list(p.threads.values())) if p.threads else np.empty(0, shard.RECORD)
        cal = recs[recs["kind"] == shard.KIND_TICKS]
        c = p.header["clock"]
        ticks, ns = cal["t0"], cal["t1"]
        if "now_ticks" in c:
            ticks, ns = np.append(ticks, c["now_ticks"]), np.append(ns, c["now_ns"])
        pairs[(p.lib, p.host, p.pid)] = (ticks, ns, c.get("ticks", "ns"))
    maps: dict[tuple[str, str, int], clock.TickMap] = {}
    for key, (ticks, ns, unit) in pairs.items():
        if unit == "ns":
            maps[key] = clock.IDENTITY
        elif ticks.size >= MIN_OWN_CALIBRATIONS:
            m = clock.fit_ticks(ticks, ns, None)
            if m is not None:
                maps[key] = m
    slopes: dict[str, list[float]] = {}
    for key, m in maps.items():
        if m is not clock.IDENTITY:
            slopes.setdefault(key[1], []).append(m.slope)
    for key, (ticks, ns, unit) in pairs.items():
        if key in maps:
            continue
        host = slopes.get(key[1])
        if host and ticks.size:
            m = clock.TickMap(int(ticks.mean()), int(ns.mean()), float(np.median(host)))
        else:
            m = clock.fit_ticks(ticks, ns, None)
        if m is None:
            warnings.append(
                f"{key[0]} shard of pid {key[2]} on {key[1]}: its tick clock could not be calibrated; its records are dropped"
            )
        else:
            maps[key] = m
    return maps


class StringTable:
    """The job's strings (file names, member lists): per-process string ids -> global ids."""

    def __init__(self) -> None:
        self.text: list[str] = [""]
        self._index: dict[str, int] = {"": 0}

    def global_ids(self, p: shard.ProcessShard, ids: np.ndarray) -> np.ndarray:
        """Map one process's string ids (0 = none) to global ids (0 = none), vectorized."""
        top = max(p.strings, default=0)
        lut = np.zeros(top + 2, np.int64)
        for sid, text in p.strings.items():  # one per distinct string, not per record
            lut[sid] = self._index.setdefault(text, len(self.text))
            if lut[sid] == len(self.text):
                self.text.append(text)
        return lut[np.where((ids > 0) & (ids <= top), ids, top + 1)]

    def column(self, ids: np.ndarray, name: str) -> pl.Series:
        """A String column of the texts (null for id 0)."""
        lut = pl.Series(name, [None, *self.text[1:]], dtype=pl.String)
        return lut.gather(ids)


def _gather(
    procs: list[shard.ProcessShard],
    ranks: dict[tuple[str, int], int],
    maps: dict[int, clock.ClockMap],
    ticks: dict[tuple[str, str, int], clock.TickMap],
    strings: StringTable,
) -> tuple[dict[str, np.ndarray], pl.DataFrame, list[dict[str, Any]]]:
    """All records of ranked processes (less calibrations) as columns, with loc, rank and job-clock times."""
    loc_of: dict[tuple[int, str, int, int], int] = {}
    parts: list[dict[str, np.ndarray]] = []
    sources: list[dict[str, Any]] = []
    for p in sorted(procs, key=lambda p: (ranks.get(p.key, 1 << 30), p.lib)):
        tmap = ticks.get((p.lib, p.host, p.pid))
        if p.key not in ranks or tmap is None:
            continue
        rank = ranks[p.key]
        cmap = maps.get(rank) or clock.ClockMap(0, 0, 0.0, 0, 0, 0)
        src = len(sources)
        count = 0
        for tid, recs in sorted(p.threads.items()):
            recs = recs[recs["kind"] != shard.KIND_TICKS]
            if not recs.size:
                continue
            loc = loc_of.setdefault((rank, p.host, p.pid, tid), len(loc_of))
            # clock-sync records and Python calls are stamped in ns already
            is_ns = (recs["kind"] == shard.KIND_CLOCK) | user_events.ns_times(recs)
            n = recs.size
            count += n
            kind = recs["kind"]
            user = kind == shard.KIND_USER
            text_ids = np.where(
                (kind == shard.KIND_IO) | user,
                recs["comm"].astype(np.int64),
                np.where(kind == shard.KIND_COMM, recs["aux2"], 0),
            )
            names = strings.global_ids(p, text_ids)
            text2 = strings.global_ids(p, np.where(user, recs["aux2"], 0))  # NVTX domain, Python call's file
            parts.append(
                {
                    "kind": recs["kind"],
                    "op": recs["op"],
                    "peer": recs["peer"],
                    "t0": cmap.apply(np.where(is_ns, recs["t0"], tmap.apply(recs["t0"]))),
                    "t1": cmap.apply(np.where(is_ns, recs["t1"], tmap.apply(recs["t1"]))),
                    "bytes": recs["bytes"],
                    "comm": recs["comm"],
                    "tag": recs["tag"],
                    "aux": recs["aux"],
                    "req": recs["req"],
                    "aux2": recs["aux2"],
                    "text": names,
                    "text2": text2,
                    "loc": np.full(n, loc, np.uint32),
                    "rank": np.full(n, rank, np.int32),
                    "thread": np.full(n, len(parts), np.int64),
                    "source": np.full(n, src, np.int32),
                }
            )
        sources.append(
            {
                "path": f"raw/{p.lib}-{p.host}-{p.pid}.json",
                "format": f"di-capture-{p.lib}",
                "rank": rank,
                "rank_source": "metadata",
                "events": count,
                "dropped": {"incomplete records": p.incomplete} if p.incomplete else {},
                "info": {"pid": p.pid, "host": p.host, "state": p.header["state"], "exe": p.header.get("exe")},
            }
        )
    cols = {k: np.concatenate([q[k] for q in parts]) for k in parts[0]} if parts else {}
    keys = sorted(loc_of.items(), key=lambda kv: kv[1])
    src_of = {(s["info"]["host"], s["info"]["pid"]): i for i, s in enumerate(sources)}
    locations = pl.DataFrame(
        {
            "loc": [v for _, v in keys],
            "rank": [k[0] for k, _ in keys],
            "host": [k[1] for k, _ in keys],
            "pid": [k[2] for k, _ in keys],
            "tid": [k[3] for k, _ in keys],
            "kind": ["cpu_thread"] * len(keys),
            "name": [("main thread" if k[3] == k[2] else f"thread {k[3]}") for k, _ in keys],
            "process": [f"rank {k[0]}" for k, _ in keys],
            "source": [src_of[(k[1], k[2])] for k, _ in keys],
        },
        schema_overrides={"loc": pl.UInt32, "rank": pl.Int32, "source": pl.Int32},
    )
    return cols, locations, sources


def _events(
    cols: dict[str, np.ndarray], comms: Any, strings: StringTable, warnings: list[str]
) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame]:
    """Events of CALL, IO and USER records, sorted; record index -> event row (-1 none); the I/O events."""
    names, cats = _op_tables()
    ev = np.flatnonzero((cols["kind"] == shard.KIND_CALL) | (cols["kind"] == shard.KIND_IO))
    op = cols["op"][ev]
    is_io = cols["kind"][ev] == shard.KIND_IO
    world_peer = comms.world_peer(cols["comm"][ev], cols["peer"][ev])
    comm_name = comms.names(cols["comm"][ev], "comm")
    from di.trace import CATS

    name_lut = pl.Series("name", list(names), dtype=pl.Enum(list(dict.fromkeys(names))))
    cat_lut = pl.Series("cat", list(cats), dtype=pl.Enum(list(CATS)))
    nbytes = np.where(_no_payload()[op] & ~is_io, -1, cols["bytes"][ev])
    df = pl.DataFrame(
        {
            "record": ev,
            "loc": cols["loc"][ev],
            "start_ns": cols["t0"][ev],
            "end_ns": cols["t1"][ev],
            "name": name_lut.gather(op).cast(pl.Categorical),
            "cat": cat_lut.gather(op),
            "src_cat": pl.Series("src_cat", ["mpi", "posix_io", "nccl"], dtype=pl.Categorical).gather(
                np.where(cats[op] == "nccl", 2, is_io.astype(np.int64))
            ),
            "bytes": np.where(nbytes >= 0, nbytes, -1),
            "io": is_io,
            "peer": world_peer,
            "tag": cols["tag"][ev],
            "comm": comm_name,
            "file": strings.column(cols["text"][ev], "file"),
            "fd": cols["aux"][ev],
            "offset": cols["aux2"][ev],
        },
        strict=False,
    )
    # args: MPI ones by concatenation (communicator names need no escaping), I/O ones
    # through json_encode (file names may); each on its own rows
    peer, comm = pl.col("peer"), pl.col("comm")
    mpi_args = (
        pl.when(peer >= 0)
        .then(
            pl.concat_str(
                pl.lit('{"peer":'),
                peer.cast(pl.String),
                pl.lit(',"tag":'),
                pl.col("tag").cast(pl.String),
                pl.lit(',"comm":"'),
                comm,
                pl.lit('"}'),
            )
        )
        .when(comm.is_not_null())
        .then(pl.concat_str(pl.lit('{"comm":"'), comm, pl.lit('"}')))
    )
    io_args = pl.struct(
        pl.col("file"), pl.col("fd"), pl.when(pl.col("offset") >= 0).then(pl.col("offset")).alias("offset")
    ).struct.json_encode()
    df = pl.concat(
        [df.filter(~pl.col("io")).with_columns(args=mpi_args), df.filter(pl.col("io")).with_columns(args=io_args)]
    )
    df = df.with_columns(instant=pl.lit(False))
    user = user_events.user_events(cols, strings, warnings)
    if user is not None:
        df = pl.concat([df, user.with_columns(io=pl.lit(False))], how="diagonal_relaxed")
    df = df.with_columns(
        bytes=pl.when(pl.col("bytes") >= 0).then(pl.col("bytes")),
    ).sort(["loc", "start_ns", pl.col("end_ns")], descending=[False, False, True], maintain_order=True)
    row_of = np.full(cols["kind"].size, -1, np.int64)
    row_of[df.get_column("record").to_numpy()] = np.arange(df.height)
    from di.nesting import nest

    depth, parent = nest(
        df.get_column("loc").to_numpy(), df.get_column("start_ns").to_numpy(), df.get_column("end_ns").to_numpy()
    )
    df = df.with_columns(depth=pl.Series(depth), parent=pl.Series(parent)).with_columns(
        parent=pl.when(pl.col("parent") >= 0).then(pl.col("parent"))
    )
    io = df.filter(pl.col("io")).select("loc", "name", "start_ns", "end_ns", "bytes", "file")
    return df.drop("record", "io", "peer", "tag", "comm", "file", "fd", "offset"), row_of, io


LAUNCHER_KILLS = (signal.SIGKILL, signal.SIGTERM)  # how launchers end the ranks that are left
FIRST_END_GAP_S = 0.02  # a rank named first by time alone ended this long before every other


def first_failed(ends: dict[int, dict[str, Any]], bad: list[int]) -> list[int]:
    """The ranks that failed first, of the abnormally ended ``bad``, from the watcher's ``ends``
    ({rank: {"after_s", and "signal" or "exit_code" where it was read}}); [] when it is not known.

    By cause first: a rank that ended with an exit code or a signal other than a launcher's kill
    (SIGKILL, SIGTERM) failed on its own, while the launcher killed the rest. By time only when one
    rank ended more than ``FIRST_END_GAP_S`` before every other: the kernel reports a killed
    process's end after it has closed its files, and the launcher, woken by those, may kill and see
    end another rank within the same few milliseconds, so a closer order says nothing.
    """
    if len(ends) < 2 or len(ends) != len(bad):  # a rank not seen ending (gone before it was watched) may be first
        return []
    own = sorted(
        r for r, e in ends.items() if e.get("exit_code") or ("signal" in e and e["signal"] not in LAUNCHER_KILLS)
    )
    if own:
        return own if len(own) < len(bad) else []
    order = sorted(ends, key=lambda r: ends[r]["after_s"])
    return [order[0]] if ends[order[1]]["after_s"] - ends[order[0]]["after_s"] > FIRST_END_GAP_S else []


def _abnormal(
    procs: list[shard.ProcessShard], ranks: dict[tuple[str, int], int], run_info: dict[str, Any], warnings: list[str]
) -> tuple[list[int], list[int]]:
    """Ranks whose processes did not exit normally (header state), each said in a warning, and
    those of them that failed first, when that is known (:func:`first_failed`).

    ``run_info["unreported_ranks"]``: ranks whose per-rank ``di record`` had not reported an exit
    when the recording was ingested (by a failed rank's ``di record``; the launcher then ends them).
    ``run_info["rank_ends"]``: when and how the launcher form's ``di record`` saw each rank's process
    end (:mod:`di.capture.child`).
    """
    unreported = run_info.get("unreported_ranks") or []
    bad = sorted({ranks[p.key] for p in procs if p.key in ranks and p.header["state"] != "exited"})
    ends = {int(r): e for r, e in (run_info.get("rank_ends") or {}).items() if int(r) in bad}
    first = first_failed(ends, bad)
    for rank in bad:
        states = {p.lib: p.header["state"] for p in procs if ranks.get(p.key) == rank}
        n = sum(int(r.size) for p in procs if ranks.get(p.key) == rank for r in p.threads.values())
        end = ends.get(rank, {})
        if rank in unreported:
            how = "was still running when a failed rank's di record ingested the recording (the launcher then ends it"
        elif first and rank not in first:
            how = (
                f"was ended by the launcher after rank {', '.join(map(str, first))} failed (seen ending "
                f"{end['after_s'] - ends[first[0]]['after_s']:+.3f} s from it; no fault of its own"
            )
        else:
            cause = (
                f"signal {end['signal']}"
                if "signal" in end
                else f"exit code {end['exit_code']}"
                if "exit_code" in end
                else "killed or crashed"
            )
            how = f"ended abnormally{' first' if first else ''} ({cause}"
        warnings.append(f"rank {rank} {how}; last state {states}): its {n} records up to that point are loaded")
    return bad, first


def ingest(run: str | Path, *, progress: Callable[[str], None] | None = None) -> tuple[Trace, pl.DataFrame]:
    """Read ``run/raw``; return the canonical trace of the recorded job and its per-file I/O table
    (:func:`di.capture.iostats.file_stats`).

    Raises:
        FormatError: no raw shards, or a shard header that is not di's.
    """
    from di.capture import iostats, matching, samplers

    run = Path(run)
    raw = run / "raw"
    if not raw.is_dir():
        raise FormatError(raw, "no raw capture shards here (record with `di record -o RUN.di -- COMMAND`)")
    say = progress or (lambda _msg: None)
    say("reading shards")
    seen = shard.raw_fingerprint(raw)  # before reading: what changes meanwhile shows later
    procs, dropped = shard.read_raw(raw)
    warnings: list[str] = []
    ranks = _assign_ranks(procs, warnings)
    epoch = _epoch(procs, ranks)
    maps = _clock_maps(procs, ranks, epoch)
    for rank in set(ranks.values()):  # no MPI clock sync (an I/O-only run): rank 0's realtime offset, no drift
        maps.setdefault(rank, clock.ClockMap(0, 0, 0.0, epoch, 0, 0))
    say("building events")
    strings = StringTable()
    cols, locations, sources = _gather(procs, ranks, maps, _tick_maps(procs, warnings), strings)
    if not cols and not any(raw.glob("samples-*.json")) and not any(raw.glob("cupti-*.json")):
        raise FormatError(raw, "the recording holds no records (did the command run MPI or file I/O under capture?)")
    if not cols:
        cols = {name: np.empty(0, shard.RECORD[name]) for name in shard.RECORD.names}
        cols.update(
            text=np.empty(0, np.int64),
            text2=np.empty(0, np.int64),
            loc=np.empty(0, np.uint32),
            rank=np.empty(0, np.int32),
            thread=np.empty(0, np.int64),
            source=np.empty(0, np.int32),
        )
        cols["t0"], cols["t1"] = cols["t0"].copy(), cols["t1"].copy()
    comms = matching.Communicators.from_records(cols, strings.text)
    events, row_of, io = _events(cols, comms, strings, warnings)
    locations = user_events.name_threads(locations, cols, strings)
    say("matching messages and collectives")
    messages = matching.messages(cols, row_of, comms, warnings)
    collectives = matching.collectives(cols, row_of, comms)
    run_info = _run_info(run)
    bad, first = _abnormal(procs, ranks, run_info, warnings)
    series, samples, counter_locs = samplers.ingest_samples(raw, locations, maps, ranks, warnings)
    if counter_locs.height:
        locations = pl.concat([locations, counter_locs], how="diagonal_relaxed")
    if dropped:
        warnings.append("dropped: " + ", ".join(f"{v} {k}" for k, v in dropped.items()))
    world = max((p.header.get("world_size", 0) for p in procs if p.lib == "mpi"), default=0)
    files = iostats.file_stats(io, locations)
    if run_info.get("unreported_ranks"):
        warnings.append(f"ranks {run_info['unreported_ranks']}: their di record never reported an exit status")
    meta = {
        "format": "di-trace",
        "clock": {
            "unit": "ns",
            "domain": "unix_epoch" if epoch else "relative",
            "sync": "mpi_ping_pong_linear" if any(m.points for m in maps.values()) else None,
            "offsets": {str(r): m.as_meta() for r, m in sorted(maps.items())},
        },
        "sources": sources,
        "warnings": warnings,
        "world_size": world or None,
        "command": run_info.get("command"),
        "capture": {
            "abnormal_ranks": bad,
            "first_failed_ranks": first,
            "exit_code": run_info.get("exit_code"),
            "options": run_info.get("options"),
            "io_files": files.height,
            "io_bytes_read": int(files.get_column("bytes_read").sum() or 0) if files.height else 0,
            "io_bytes_written": int(files.get_column("bytes_written").sum() or 0) if files.height else 0,
            "raw_files": seen,
        },
    }
    warnings.extend(run_info.get("notes", []))
    trace = Trace.build(
        meta=meta,
        locations=locations,
        events=events,
        messages=messages,
        collectives=collectives,
        series=series,
        samples=samples,
        io_files=files,
    )
    from di.capture.gpu_ingest import add_gpu
    from di.capture.nccl_work import add_nccl_work

    trace = add_nccl_work(trace, cols, row_of, procs)

    return add_gpu(trace, raw, ranks, _with_default_maps(maps, raw, epoch)), files


def _with_default_maps(maps: dict[int, clock.ClockMap], raw: Path, epoch: int) -> dict[int, clock.ClockMap]:
    """``maps`` plus rank 0's realtime offset for every rank a CUPTI process may get (its launcher
    rank, or a new one after the shims' ranks), so that its times land on the clock meta.json names."""
    top = max([*maps, -1]) + 1 + len(list(raw.glob("cupti-*.json")))
    for header in raw.glob("cupti-*.json"):
        try:
            top = max(top, int(json.loads(header.read_text()).get("env_rank", -1)) + 1)
        except (OSError, ValueError, TypeError):
            continue
    return {**{r: clock.ClockMap(0, 0, 0.0, epoch, 0, 0) for r in range(top)}, **maps}


def _run_info(run: Path) -> dict[str, Any]:
    """What `di record` wrote about the run (command, exit code, options), if anything."""
    path = run / "raw" / "run.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
