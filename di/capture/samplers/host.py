"""Host sampler: CPU busy per core (/proc/stat), memory (/proc/meminfo), and each
rank's resident memory and storage I/O (/proc/PID/status, /proc/PID/io).

Series and units: ``cpuN busy`` and ``cpu busy`` (%, of the time since the
previous sample, nan on the first), ``mem used`` and ``mem available``
(bytes; used = MemTotal - MemAvailable), ``rank R rss`` (bytes, VmRSS),
``rank R read_bytes`` / ``rank R write_bytes`` (bytes, cumulative, as the
kernel counts storage I/O). The root is configurable so tests can read a tree
they wrote themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from di.capture.samplers import MissingSource, Series

MAX_RANK_SERIES = 64  # per-process series for at most this many ranks per node
KIB = 1024  # /proc/meminfo and VmRSS count kB = KiB


class HostSource:
    """Reads /proc (or ``proc_root``) each tick."""

    kind = "host"

    def __init__(self, proc_root: str = "/proc", job_pids: Callable[[], dict[int, int]] | None = None) -> None:
        self.root = proc_root
        self.job_pids = job_pids or (lambda: {})
        try:
            cores = self._stat()
        except OSError as exc:
            raise MissingSource(f"host sampler skipped: cannot read {proc_root}/stat ({exc})") from None
        self.cores = len(cores) - 1
        self.prev = cores
        self.series = [Series(f"cpu{i} busy", "%") for i in range(self.cores)] + [Series("cpu busy", "%")]
        self.series += [Series("mem used", "bytes"), Series("mem available", "bytes")]
        self.ranks: list[int] = []  # ranks seen so far; their series are appended as they appear

    def _stat(self) -> np.ndarray:
        """Rows: total then each core; columns: busy jiffies, total jiffies."""
        rows = []
        with open(f"{self.root}/stat") as f:
            for line in f:
                if not line.startswith("cpu"):
                    break
                v = np.array(line.split()[1:], dtype=np.int64)
                idle = v[3] + (v[4] if v.size > 4 else 0)  # idle + iowait
                rows.append((v.sum() - idle, v.sum()))
        return np.array(rows, dtype=np.int64)

    def _meminfo(self) -> tuple[float, float]:
        fields = {}
        with open(f"{self.root}/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                fields[key] = int(rest.split()[0]) * KIB
        return float(fields["MemTotal"] - fields["MemAvailable"]), float(fields["MemAvailable"])

    def _process(self, pid: int) -> list[float]:
        rss = rd = wr = float("nan")
        try:
            with open(f"{self.root}/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = float(int(line.split()[1]) * KIB)
            with open(f"{self.root}/{pid}/io") as f:
                for line in f:
                    if line.startswith("read_bytes:"):
                        rd = float(line.split()[1])
                    elif line.startswith("write_bytes:"):
                        wr = float(line.split()[1])
        except OSError:
            pass  # the process has exited or /proc/PID/io is not readable: nan
        return [rss, rd, wr]

    def read(self) -> list[float]:
        cur = self._stat()
        d = cur - self.prev
        self.prev = cur
        with np.errstate(invalid="ignore", divide="ignore"):
            busy = np.where(d[:, 1] > 0, 100.0 * d[:, 0] / np.maximum(d[:, 1], 1), np.nan)
        values = list(busy[1:]) + [busy[0]]
        values += list(self._meminfo())
        pids = self.job_pids()
        for r in sorted(pids):
            if r not in self.ranks and len(self.ranks) < MAX_RANK_SERIES:
                self.ranks.append(r)
                self.series += [
                    Series(f"rank {r} rss", "bytes"),
                    Series(f"rank {r} read_bytes", "bytes"),
                    Series(f"rank {r} write_bytes", "bytes"),
                ]
        for r in self.ranks:
            values += self._process(pids[r]) if r in pids else [float("nan")] * 3
        return [float(v) for v in values]
