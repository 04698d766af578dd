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
    keep = np.flatnonzero(include & frame.selected & ((step != NO_STEP) if by_step else True))
    r, sc, st = frame.rank[keep].astype(np.int64), scope[keep].astype(np.int64) + 1, step[keep].astype(np.int64) + 1
    of = np.full(frame.rank.size, -1, np.int64)
    if not keep.size:
        return Groups(of, pl.DataFrame(schema={"rank": pl.Int32, "scope": pl.Int32, "step": pl.Int64}))
    bs, bt = max(int(sc.max()), 1).bit_length(), max(int(st.max()), 1).bit_length()
    if int(r.max()).bit_length() + bs + bt <= 62 and int(st.min()) >= 0:
        uniq, inverse = np.unique((((r << bs) | sc) << bt) | st, return_inverse=True)
        of[keep] = inverse
        keys = pl.DataFrame(
            {
                "rank": uniq >> (bs + bt),
                "scope": ((uniq >> bt) & ((1 << bs) - 1)) - 1,
                "step": (uniq & ((1 << bt) - 1)) - 1,
            }
        )
    else:
        key = pl.DataFrame({"rank": r, "scope": sc - 1, "step": st - 1})
        keys = key.unique().sort("rank", "scope", "step")
        of[keep] = (
            key.join(keys.with_row_index("gid"), on=["rank", "scope", "step"], how="left", maintain_order="left")
            .get_column("gid")
            .to_numpy()
        )
    keys = keys.with_columns(pl.when(pl.col("step") == NO_STEP).then(None).otherwise(pl.col("step")).alias("step"))
    return Groups(of, keys.cast({"rank": pl.Int32, "scope": pl.Int32, "step": pl.Int64}))


def span(frame: EventFrame, groups: Groups, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First start and last end (int64 ns) of the masked events of each group (0, 0 when none)."""
    m = mask & (groups.of_event >= 0)
    return iv.group_extent(groups.of_event[m], frame.start_ns[m], frame.end_ns[m], groups.n)
