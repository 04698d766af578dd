"""Clocks at ingest: record ticks to local ns, then every rank's clock onto rank 0's.

Records are stamped in ticks (the invariant TSC, or CLOCK_MONOTONIC ns where
there is none); each process's KIND_TICKS records pair ticks with
CLOCK_MONOTONIC ns, and :func:`fit_ticks` fits ``ns = ns0 + slope * (ticks -
ticks0)`` by least squares (:class:`TickMap`).

The PMPI shim measures, at MPI_Init and at MPI_Finalize, each rank's offset to
rank 0 (its clock minus rank 0's, from the fastest of several ping-pongs,
error <= half that round trip). A rank's local time ``t`` maps to the job clock
as ``t - offset(t)``, with ``offset`` linear between the two measurements
(constant when only one exists, e.g. a rank killed before MPI_Finalize; zero
for a process with none). The job clock is rank 0's CLOCK_MONOTONIC shifted to
ns since the Unix epoch with the (monotonic, realtime) pair in rank 0's header.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TickMap:
    """Ticks -> local CLOCK_MONOTONIC ns for one process."""

    ticks0: int
    ns0: int
    slope: float
    """ns per tick."""

    def apply(self, ticks: np.ndarray) -> np.ndarray:
        ticks = np.asarray(ticks, dtype=np.int64)
        return self.ns0 + np.rint((ticks - self.ticks0).astype(np.float64) * self.slope).astype(np.int64)


IDENTITY = TickMap(0, 0, 1.0)


def fit_ticks(ticks: np.ndarray, ns: np.ndarray, fallback_slope: float | None) -> TickMap | None:
    """Least-squares ns = ns0 + slope * (ticks - ticks0) over calibration pairs.

    With a single pair the slope is ``fallback_slope`` (another process's on the
    same host); None when there is no pair, or one pair and no fallback.
    """
    if not ticks.size:
        return None
    t0, n0 = int(ticks.mean()), int(ns.mean())
    dt = (ticks - t0).astype(np.float64)
    dn = (ns - n0).astype(np.float64)
    var = float((dt * dt).sum())
    if var > 0:
        return TickMap(t0, n0, float((dt * dn).sum()) / var)
    return TickMap(t0, n0, fallback_slope) if fallback_slope else None


@dataclass(frozen=True)
class ClockMap:
    """Local ns -> job ns for one rank: ``t - (offset0 + slope * (t - at0)) + epoch_ns``."""

    offset0_ns: int
    at0_ns: int
    slope: float
    epoch_ns: int
    rtt_ns: int
    points: int

    def apply(self, t: np.ndarray) -> np.ndarray:
        """Map an int64 array of local ns to job ns (int64)."""
        t = np.asarray(t, dtype=np.int64)
        drift = np.rint(self.slope * (t - self.at0_ns).astype(np.float64)).astype(np.int64)
        return t - self.offset0_ns - drift + self.epoch_ns

    def as_meta(self) -> dict[str, float | int]:
        return {
            "offset_ns": self.offset0_ns,
            "at_ns": self.at0_ns,
            "drift_ppm": self.slope * 1e6,
            "rtt_ns": self.rtt_ns,
            "measurements": self.points,
        }


def fit(at_ns: np.ndarray, offset_ns: np.ndarray, rtt_ns: np.ndarray, epoch_ns: int) -> ClockMap:
    """The map through the first and last measurement of one rank (sorted by time)."""
    if not at_ns.size:
        return ClockMap(0, 0, 0.0, epoch_ns, 0, 0)
    order = np.argsort(at_ns, kind="stable")
    at, off, rtt = at_ns[order], offset_ns[order], rtt_ns[order]
    span = int(at[-1] - at[0])
    slope = float(off[-1] - off[0]) / span if at.size > 1 and span > 0 else 0.0
    return ClockMap(int(off[0]), int(at[0]), slope, epoch_ns, int(rtt.max()), int(at.size))
