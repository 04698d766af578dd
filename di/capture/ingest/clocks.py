"""The clocks at ingest: each process's ticks -> local ns, each rank's local ns -> the job clock.

* The job clock is rank 0's CLOCK_MONOTONIC shifted to Unix-epoch ns by rank 0's
  ``realtime - monotonic`` pair (its epoch; 0, a relative clock, when rank 0 is unknown).
* Each rank's map (:class:`di.capture.clock.ClockMap`) comes from the MPI shim's clock-sync
  records (:func:`di.capture.clock.fit`); a rank without any (an I/O-only run) gets rank 0's
  epoch and no drift.
* Each process's tick map (:class:`di.capture.clock.TickMap`) comes from its tick
  calibration records plus its header's pair; a process with fewer than
  :data:`MIN_OWN_CALIBRATIONS` takes the median rate of its host's better-calibrated ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from di.capture import clock, shard

MIN_OWN_CALIBRATIONS = 3  # with fewer, a process's tick rate comes from its host's other processes

TickPairs = dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray, str]]
"""(lib, host, pid) -> calibration ticks, their local ns, the header's tick unit."""


def _records(p: shard.ProcessShard) -> np.ndarray:
    return np.concatenate(list(p.threads.values())) if p.threads else np.empty(0, shard.RECORD)


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
        recs = _records(p)
        c = recs[recs["kind"] == shard.KIND_CLOCK]
        maps[ranks[p.key]] = clock.fit(c["t0"], c["bytes"], c["aux2"], epoch)
    return maps


def job_clocks(
    procs: list[shard.ProcessShard], ranks: dict[tuple[str, int], int]
) -> tuple[int, dict[int, clock.ClockMap]]:
    """The job clock's epoch and every rank's map onto the job clock."""
    epoch = _epoch(procs, ranks)
    maps = _clock_maps(procs, ranks, epoch)
    for rank in set(ranks.values()):  # no MPI clock sync (an I/O-only run): rank 0's realtime offset, no drift
        maps.setdefault(rank, clock.ClockMap(0, 0, 0.0, epoch, 0, 0))
    return epoch, maps


def _calibration_pairs(procs: list[shard.ProcessShard]) -> TickPairs:
    pairs = {}
    for p in procs:
        recs = _records(p)
        cal = recs[recs["kind"] == shard.KIND_TICKS]
        c = p.header["clock"]
        ticks, ns = cal["t0"], cal["t1"]
        if "now_ticks" in c:
            ticks, ns = np.append(ticks, c["now_ticks"]), np.append(ns, c["now_ns"])
        pairs[(p.lib, p.host, p.pid)] = (ticks, ns, c.get("ticks", "ns"))
    return pairs


def _own_tick_maps(pairs: TickPairs) -> dict[tuple[str, str, int], clock.TickMap]:
    """The maps of the processes stamped in ns or calibrated well enough on their own."""
    maps: dict[tuple[str, str, int], clock.TickMap] = {}
    for key, (ticks, ns, unit) in pairs.items():
        if unit == "ns":
            maps[key] = clock.IDENTITY
        elif ticks.size >= MIN_OWN_CALIBRATIONS:
            m = clock.fit_ticks(ticks, ns, None)
            if m is not None:
                maps[key] = m
    return maps


def _add_host_rate_maps(pairs: TickPairs, maps: dict[tuple[str, str, int], clock.TickMap], warnings: list[str]) -> None:
    """Add the other processes' maps: their host's median rate through their mean pair, else their own fit."""
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


def tick_maps(procs: list[shard.ProcessShard], warnings: list[str]) -> dict[tuple[str, str, int], clock.TickMap]:
    """Each process's ticks -> local ns map (calibration records plus the header's pair).

    A process with fewer than MIN_OWN_CALIBRATIONS pairs (short-lived, or killed
    early) takes the median rate of its host's better-calibrated processes.
    """
    pairs = _calibration_pairs(procs)
    maps = _own_tick_maps(pairs)
    _add_host_rate_maps(pairs, maps, warnings)
    return maps


def with_default_maps(maps: dict[int, clock.ClockMap], raw: Path, epoch: int) -> dict[int, clock.ClockMap]:
    """``maps`` plus rank 0's realtime offset for every rank a CUPTI process may get (its launcher
    rank, or a new one after the shims' ranks), so that its times land on the clock meta.json names."""
    top = max([*maps, -1]) + 1 + len(list(raw.glob("cupti-*.json")))
    for header in raw.glob("cupti-*.json"):
        try:
            top = max(top, int(json.loads(header.read_text()).get("env_rank", -1)) + 1)
        except (OSError, ValueError, TypeError):
            continue
    return {**{r: clock.ClockMap(0, 0, 0.0, epoch, 0, 0) for r in range(top)}, **maps}
