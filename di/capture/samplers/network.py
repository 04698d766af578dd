"""Network-interface sampler: ``ROOT/IFACE/statistics/{rx,tx}_{bytes,packets,errors,dropped}``.

Series ``IFACE rx_bytes`` ... with units bytes, packets or count; values are the
kernel's cumulative counters, re-read with ``os.pread`` on files kept open.
ROOT defaults to /sys/class/net.
"""

from __future__ import annotations

import os
from pathlib import Path

from di.capture.samplers import MissingSource, Series

COUNTERS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped")


class NetworkSource:
    """One series per counter of every interface under ``root``."""

    kind = "network"

    def __init__(self, root: str = "/sys/class/net") -> None:
        self.series, self.fds = [], []
        for iface in sorted(Path(root).glob("*")):
            for name in COUNTERS:
                path = iface / "statistics" / name
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    continue
                unit = "bytes" if name.endswith("bytes") else "packets" if name.endswith("packets") else "count"
                self.series.append(Series(f"{iface.name} {name}", unit))
                self.fds.append(fd)
        if not self.fds:
            raise MissingSource(f"network sampler skipped: no interface statistics under {root}")

    def read(self) -> list[float]:
        out = []
        for fd in self.fds:
            try:
                out.append(float(int(os.pread(fd, 64, 0))))
            except (OSError, ValueError):
                out.append(float("nan"))
        return out

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
