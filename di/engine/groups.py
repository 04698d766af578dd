"""Grouping events for the interval algebra: dense group ids from (rank, scope, step).

A *scope* is a GPU device (its index) or the rank's host (``HOST`` = -1).
Group ids are dense int64 in 0..n-1 so interval sets can be measured with one
array per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.engine import intervals as iv
from di.engine.steps import NO_STEP
from di.engine.window import EventFrame

HOST = -1


@dataclass(frozen=True)
class Groups:
    """Dense ids for events and the key of each id.

    Attributes:
        of_event: group id per event row (int64; -1 = not grouped).
        keys: one row per id: rank, scope (device or HOST), step (or null), in id order.
    """

    of_event: np.ndarray
    keys: pl.DataFrame

    @property
    def n(self) -> int:
        """Number of groups."""
        return self.keys.height

    def sets(self, frame: EventFrame, mask: np.ndarray) -> iv.IntervalSet:
        """Union per group of the masked events' intervals."""
        m = mask & (self.of_event >= 0)
        return iv.union(self.of_event[m], frame.start_ns[m], frame.end_ns[m])


def make_groups(frame: EventFrame, *, by_scope: bool, by_step: bool, include: np.ndarray) -> Groups:
    """Groups over the selected events in ``include``: per rank, per scope, per step as asked.

    With ``by_step`` events outside every step are left out.
    """
    scope = np.where(frame.on_gpu, np.maximum(frame.device, 0), HOST) if by_scope else np.full(frame.rank.size, HOST)
    step = frame.step if by_step else np.full(frame.rank.size, NO_STEP)
    keep = include & frame.selected & ((step != NO_STEP) if by_step else True)
    key = pl.DataFrame({"rank": frame.rank[keep], "scope": scope[keep], "step": step[keep]})
    uniq = key.unique().sort("rank", "scope", "step")
    of = np.full(frame.rank.size, -1, np.int64)
    if uniq.height:
        ids = key.join(uniq.with_row_index("gid"), on=["rank", "scope", "step"], how="left", maintain_order="left")
        of[np.flatnonzero(keep)] = ids.get_column("gid").to_numpy()
    keys = uniq.with_columns(pl.when(pl.col("step") == NO_STEP).then(None).otherwise(pl.col("step")).alias("step"))
    return Groups(of, keys.cast({"rank": pl.Int32, "scope": pl.Int32, "step": pl.Int64}))


def span(frame: EventFrame, groups: Groups, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First start and last end (int64 ns) of the masked events of each group (0, 0 when none)."""
    m = mask & (groups.of_event >= 0)
    g = groups.of_event[m]
    lo = np.full(groups.n, np.iinfo(np.int64).max, np.int64)
    hi = np.full(groups.n, np.iinfo(np.int64).min, np.int64)
    np.minimum.at(lo, g, frame.start_ns[m])
    np.maximum.at(hi, g, frame.end_ns[m])
    none = hi < lo
    lo[none] = 0
    hi[none] = 0
    return lo, hi
