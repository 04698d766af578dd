"""InfiniBand sampler: ``ROOT/DEVICE/ports/PORT/counters/*`` and ``hw_counters/*``.

Every counter file is opened once and re-read with ``os.pread`` each tick.
``port_xmit_data`` and ``port_rcv_data`` count 4-byte words (IBTA PortCounters):
they are written in bytes (x 4); ``*_packets`` in packets; the rest as counts.
Series are named ``DEVICE/PORT COUNTER``; values are cumulative, as the device
counts them. ROOT defaults to /sys/class/infiniband.
"""

from __future__ import annotations

from pathlib import Path

from di.capture.samplers import MissingSource, Series
from di.capture.samplers.counter_files import CounterFiles

WORD_BYTES = 4  # port_xmit_data / port_rcv_data unit (IBTA: octets divided by 4)
DATA_COUNTERS = {"port_xmit_data", "port_rcv_data"}


def _unit(name: str) -> tuple[str, float]:
    if name in DATA_COUNTERS:
        return "bytes", float(WORD_BYTES)
    if name.endswith("_packets") or name.endswith("_pkts"):
        return "packets", 1.0
    return "count", 1.0


class InfiniBandSource(CounterFiles):
    """One series per counter file of every port of every device under ``root``."""

    kind = "infiniband"

    def __init__(self, root: str = "/sys/class/infiniband") -> None:
        super().__init__()
        base = Path(root)
        files = sorted(base.glob("*/ports/*/counters/*")) + sorted(base.glob("*/ports/*/hw_counters/*"))
        for f in files:
            if f.is_file():
                unit, scale = _unit(f.name)
                self.add(f, Series(f"{f.parts[-5]}/{f.parts[-3]} {f.name}", unit), scale)
        if not self.fds:
            raise MissingSource(f"InfiniBand sampler skipped: no counters under {root}")
