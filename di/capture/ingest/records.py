"""Every ranked process's shard records as one set of columns on the job clock.

:func:`gather` takes the records of each process that has a rank and a tick map (less
the tick calibrations), thread by thread, and gives each record:

* ``t0``/``t1``: job-clock ns (ticks through the process's tick map, then the rank's
  clock map; clock-sync records and Python calls are stamped in ns already);
* ``text``: the global string id of its file name (I/O), name (user) or member list
  (COMM), ``text2``: that of its NVTX domain or Python call's file (:class:`StringTable`);
* ``loc`` (one per (rank, host, pid, tid)), ``rank``, ``thread`` (one per thread part)
  and ``source`` (the process's row in meta ``sources``).

It also returns the ``locations`` rows of those threads and the ``sources`` entries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.capture import clock, shard, user_events
from di.capture.ingest.strings import StringTable

LocKey = tuple[int, str, int, int]
"""(rank, host, pid, tid) of a thread's timeline."""


def _thread_columns(
    p: shard.ProcessShard,
    recs: np.ndarray,
    strings: StringTable,
    tmap: clock.TickMap,
    cmap: clock.ClockMap,
    ids: tuple[int, int, int, int],
) -> dict[str, np.ndarray]:
    """One thread's records as columns; ``ids``: its loc, rank, thread part and source."""
    loc, rank, thread, src = ids
    # clock-sync records and Python calls are stamped in ns already
    is_ns = (recs["kind"] == shard.KIND_CLOCK) | user_events.ns_times(recs)
    n = recs.size
    kind = recs["kind"]
    user = kind == shard.KIND_USER
    text_ids = np.where(
        (kind == shard.KIND_IO) | user,
        recs["comm"].astype(np.int64),
        np.where(kind == shard.KIND_COMM, recs["aux2"], 0),
    )
    names = strings.global_ids(p, text_ids)
    text2 = strings.global_ids(p, np.where(user, recs["aux2"], 0))  # NVTX domain, Python call's file
    return {
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
        "thread": np.full(n, thread, np.int64),
        "source": np.full(n, src, np.int32),
    }


def _source(p: shard.ProcessShard, rank: int, count: int) -> dict[str, Any]:
    """The meta ``sources`` entry of one process's shard."""
    return {
        "path": f"raw/{p.lib}-{p.host}-{p.pid}.json",
        "format": f"di-capture-{p.lib}",
        "rank": rank,
        "rank_source": "metadata",
        "events": count,
        "dropped": {"incomplete records": p.incomplete} if p.incomplete else {},
        "info": {"pid": p.pid, "host": p.host, "state": p.header["state"], "exe": p.header.get("exe")},
    }


def _locations(loc_of: dict[LocKey, int], sources: list[dict[str, Any]]) -> pl.DataFrame:
    """The ``locations`` rows of the threads' timelines, in loc order."""
    keys = sorted(loc_of.items(), key=lambda kv: kv[1])
    src_of = {(s["info"]["host"], s["info"]["pid"]): i for i, s in enumerate(sources)}
    return pl.DataFrame(
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


def gather(
    procs: list[shard.ProcessShard],
    ranks: dict[tuple[str, int], int],
    maps: dict[int, clock.ClockMap],
    ticks: dict[tuple[str, str, int], clock.TickMap],
    strings: StringTable,
) -> tuple[dict[str, np.ndarray], pl.DataFrame, list[dict[str, Any]]]:
    """All records of ranked processes (less calibrations) as columns, with loc, rank and job-clock times."""
    loc_of: dict[LocKey, int] = {}
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
            count += recs.size
            parts.append(_thread_columns(p, recs, strings, tmap, cmap, (loc, rank, len(parts), src)))
        sources.append(_source(p, rank, count))
    cols = {k: np.concatenate([q[k] for q in parts]) for k in parts[0]} if parts else {}
    return cols, _locations(loc_of, sources), sources


def empty_columns() -> dict[str, np.ndarray]:
    """The columns of a job without records (a samplers- or CUPTI-only recording)."""
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
    return cols
