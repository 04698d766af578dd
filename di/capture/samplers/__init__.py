"""Samplers: counters read beside the job at a set rate, written as series with units.

One sampler thread per node (in the ``di record`` process elected on that node)
reads every source each tick and appends fixed 24-byte records
(:data:`SAMPLE`: series id, CLOCK_MONOTONIC ns, value) to
``raw/samples-HOST-PID.bin``; ``raw/samples-HOST-PID.json`` names the series
(schemas/capture/v1/samples-header.schema.json). A source whose hardware is
missing (no /sys/class/infiniband, no NVML library) is said once in the header's
``notes`` and skipped. Counters that only grow (bytes, packets, energy) are
written as read, cumulative; rates follow from consecutive samples.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

SAMPLE = np.dtype([("series", "<u4"), ("pad", "<u4"), ("ts_ns", "<i8"), ("value", "<f8")])
"""One sample record (24 bytes, little-endian)."""
DEFAULT_RATE_HZ = 10.0


@dataclass(frozen=True)
class Series:
    """One counter series: its name and unit (W, %, bytes, B, MHz, C, J, count...)."""

    name: str
    unit: str


class Source(Protocol):
    """What a sampler source offers: its series (it may append more later) and one read."""

    kind: str
    series: list[Series]

    def read(self) -> list[float]:
        """Current values, one per series, in the series' units (nan when unavailable)."""
        ...


@dataclass
class SamplerOptions:
    """Which sources to run and where their inputs live (roots are for tests and containers)."""

    host: bool = False
    ib: bool = False
    net: bool = False
    nvml: bool = False
    rate_hz: float = DEFAULT_RATE_HZ
    proc_root: str = "/proc"
    ib_root: str = "/sys/class/infiniband"
    net_root: str = "/sys/class/net"
    job_pids: Any = None
    """Callable returning {rank: pid} of this node's ranks (host sampler's per-process series)."""

    def any(self) -> bool:
        return self.host or self.ib or self.net or self.nvml


def build_sources(opts: SamplerOptions) -> tuple[list[Source], list[str]]:
    """The sources asked for that this machine has, and a note for each one skipped."""
    from di.capture.samplers import host, infiniband, network, nvml

    sources: list[Source] = []
    notes: list[str] = []
    wanted = [
        (opts.host, lambda: host.HostSource(opts.proc_root, opts.job_pids)),
        (opts.ib, lambda: infiniband.InfiniBandSource(opts.ib_root)),
        (opts.net, lambda: network.NetworkSource(opts.net_root)),
        (opts.nvml, nvml.NvmlSource),
    ]
    for on, make in wanted:
        if not on:
            continue
        try:
            sources.append(make())
        except MissingSource as exc:
            notes.append(str(exc))
    return sources, notes


class MissingSource(Exception):
    """This machine lacks what a source reads (said once, then skipped)."""


@dataclass
class SamplerThread:
    """Runs the sources at ``rate_hz`` in a daemon thread until :meth:`stop`."""

    raw: Path
    opts: SamplerOptions
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    notes: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.sources, self.notes = build_sources(self.opts)
        host = socket.gethostname().replace("-", "_")
        stem = self.raw / f"samples-{host}-{os.getpid()}"
        self._bin = open(f"{stem}.bin", "ab")
        self._header_path = Path(f"{stem}.json")
        self._host = host
        self._ids: list[list[int]] = [[] for _ in self.sources]
        self._names: list[dict[str, Any]] = []
        self._write_header()
        self._thread = threading.Thread(target=self._run, name="di-sampler", daemon=True)
        self._thread.start()

    def _write_header(self) -> None:
        """(Re)write the header after giving ids to series the sources added."""
        for k, src in enumerate(self.sources):
            for s in src.series[len(self._ids[k]) :]:
                self._ids[k].append(len(self._names))
                self._names.append({"id": len(self._names), "name": s.name, "unit": s.unit, "source": src.kind})
        series = self._names
        doc = {
            "format": "di-samples",
            "version": 1,
            "host": self._host,
            "pid": os.getpid(),
            "rate_hz": self.opts.rate_hz,
            "clock": "CLOCK_MONOTONIC",
            "series": series,
            "notes": self.notes,
        }
        tmp = self._header_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(self._header_path)

    def tick(self) -> None:
        """Read every source once and append the samples."""
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        values: list[float] = []
        ids: list[int] = []
        for k, src in enumerate(self.sources):
            got = src.read()
            if len(src.series) > len(self._ids[k]):
                self._write_header()
            values += got
            ids += self._ids[k][: len(got)]
        if not values:
            return
        recs = np.zeros(len(values), SAMPLE)
        recs["series"] = ids
        recs["ts_ns"] = now
        recs["value"] = values
        self._bin.write(recs.tobytes())
        self._bin.flush()

    def _run(self) -> None:
        period = 1.0 / self.opts.rate_hz
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.tick()
            next_t += period
            now = time.monotonic()
            if next_t <= now:  # behind (the thread did not run for a while): skip the missed ticks, no burst
                next_t += period * (int((now - next_t) / period) + 1)
            self._stop.wait(next_t - now)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
            self.tick()  # a last sample at the end of the job
            self._bin.close()
            for src in self.sources:
                close = getattr(src, "close", None)
                if close:
                    close()


def ingest_samples(
    raw: Path, locations: Any, maps: dict[int, Any], ranks: dict[tuple[str, int], int], warnings: list[str]
) -> tuple[Any, Any, Any]:
    """series, samples and counter locations from every sampler file under ``raw``."""
    import polars as pl

    from di.capture.shard import read_header
    from di.trace import conform

    series_rows: list[dict[str, Any]] = []
    parts: list[Any] = []
    locs: list[dict[str, Any]] = []
    next_loc = locations.height
    host_rank = {h: r for h, r in locations.group_by("host").agg(pl.col("rank").min()).iter_rows()}
    for header_path in sorted(raw.glob("samples-*.json")):
        doc = read_header(header_path, "samples-header")
        for note in doc.get("notes", []):
            warnings.append(f"sampler on {doc['host']}: {note}")
        rank = host_rank.get(doc["host"], 0)
        cmap = maps.get(rank)
        binary = header_path.with_suffix(".bin")
        recs = (
            np.fromfile(binary, SAMPLE, count=binary.stat().st_size // SAMPLE.itemsize)
            if binary.exists()
            else np.empty(0, SAMPLE)
        )
        loc_of: dict[str, int] = {}
        first = len(series_rows)
        for s in doc["series"]:
            if s["source"] not in loc_of:
                loc_of[s["source"]] = next_loc
                locs.append(
                    {
                        "loc": next_loc,
                        "rank": rank,
                        "host": doc["host"],
                        "pid": doc["pid"],
                        "kind": "counter",
                        "name": f"{s['source']} counters",
                        "process": f"node {doc['host']}",
                        "source": 0,
                    }
                )
                next_loc += 1
            series_rows.append(
                {"series": first + s["id"], "loc": loc_of[s["source"]], "name": s["name"], "unit": s["unit"]}
            )
        ok = (recs["series"] < len(doc["series"])) & np.isfinite(recs["value"])
        recs = recs[ok]
        ts = cmap.apply(recs["ts_ns"]) if cmap else recs["ts_ns"]
        parts.append(
            pl.DataFrame({"series": recs["series"].astype(np.uint32) + first, "ts_ns": ts, "value": recs["value"]})
        )
    series = conform("series", pl.DataFrame(series_rows) if series_rows else None)
    samples = conform("samples", pl.concat(parts).sort("series", "ts_ns") if parts else None)
    counter_locs = conform("locations", pl.DataFrame(locs) if locs else None)
    return series, samples, counter_locs
