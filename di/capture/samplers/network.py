"""Network-interface sampler: ``ROOT/IFACE/statistics/{rx,tx}_{bytes,packets,errors,dropped}``.

Series ``IFACE rx_bytes`` ... with units bytes, packets or count; values are the
kernel's cumulative counters, re-read with ``os.pread`` on files kept open.
ROOT defaults to /sys/class/net.
"""

from __future__ import annotations

from pathlib import Path

from di.capture.samplers import MissingSource, Series
from di.capture.samplers.counter_files import CounterFiles

COUNTERS = ("rx_bytes", "tx_bytes", "rx_packets", "tx_packets", "rx_errors", "tx_errors", "rx_dropped", "tx_dropped")


class NetworkSource(CounterFiles):
    """One series per counter of every interface under ``root``."""

    kind = "network"

    def __init__(self, root: str = "/sys/class/net") -> None:
        super().__init__()
        for iface in sorted(Path(root).glob("*")):
            for name in COUNTERS:
                path = iface / "statistics" / name
                if path.is_file():
                    unit = "bytes" if name.endswith("bytes") else "packets" if name.endswith("packets") else "count"
                    self.add(path, Series(f"{iface.name} {name}", unit))
        if not self.fds:
            raise MissingSource(f"network sampler skipped: no interface statistics under {root}")
