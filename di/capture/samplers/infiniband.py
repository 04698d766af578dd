"""InfiniBand sampler: ``ROOT/DEVICE/ports/PORT/counters/*`` and ``hw_counters/*``.

Every counter file is opened once and re-read with ``os.pread`` each tick.
``port_xmit_data`` and ``port_rcv_data`` count 4-byte words (IBTA PortCounters):
they are written in bytes (x 4); ``*_packets`` in packets; the rest as counts.
Series are named ``DEVICE/PORT COUNTER``; values are cumulative, as the device
counts them. ROOT defaults to /sys/class/infiniband.
"""

from __future__ import annotations

import os
from pathlib import Path

from di.capture.samplers import MissingSource, Series

WORD_BYTES = 4  # port_xmit_data / port_rcv_data unit (IBTA: octets divided by 4)
DATA_COUNTERS = {"port_xmit_data", "port_rcv_data"}


def _unit(name: str) -> tuple[str, float]:
    if name in DATA_COUNTERS:
        return "bytes", float(WORD_BYTES)
    if name.endswith("_packets") or name.endswith("_pkts"):
        return "packets", 1.0
    return "count", 1.0


class InfiniBandSource:
    """One series per counter file of every port of every device under ``root``."""

    kind = "infiniband"

    def __init__(self, root: str = "/sys/class/infiniband") -> None:
        base = Path(root)
        files = sorted(base.glob("*/ports/*/counters/*")) + sorted(base.glob("*/ports/*/hw_counters/*"))
        files = [f for f in files if f.is_file()]
        if not files:
            raise MissingSource(f"InfiniBand sampler skipped: no counters under {root}")
        self.series, self.fds, self.scale = [], [], []
        for f in files:
            dev, port, name = f.parts[-5], f.parts[-3], f.name
            try:
                fd = os.open(f, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # some hw_counters are root-only
            unit, scale = _unit(name)
            self.series.append(Series(f"{dev}/{port} {name}", unit))
            self.fds.append(fd)
            self.scale.append(scale)

    def read(self) -> list[float]:
        out = []
        for fd, scale in zip(self.fds, self.scale):
            try:
                out.append(float(int(os.pread(fd, 64, 0).split()[0])) * scale)
            except (OSError, ValueError, IndexError):
                out.append(float("nan"))
        return out

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
