"""Counter files read with ``os.pread`` on descriptors kept open (sysfs counters)."""

from __future__ import annotations

import os
from pathlib import Path

from di.capture.samplers import Series


class CounterFiles:
    """Integer counter files, one series each, scaled into the series' unit."""

    def __init__(self) -> None:
        self.series: list[Series] = []
        self.fds: list[int] = []
        self.scale: list[float] = []

    def add(self, path: Path, series: Series, scale: float = 1.0) -> None:
        """Open ``path`` for the life of the sampler; unreadable files (root-only) are skipped."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        self.series.append(series)
        self.fds.append(fd)
        self.scale.append(scale)

    def read(self) -> list[float]:
        """Every counter's current value x its scale (nan when a read fails)."""
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
