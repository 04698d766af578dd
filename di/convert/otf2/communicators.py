"""The OTF2 writer's MPI communicators: members and each global rank's rank within them.

A communicator is named by the ``comm`` of messages and collectives (a null
comm is :data:`NULL_COMM`, written unnamed with a group name that says so).
Its members: the ranks a collective lists in ``group_ranks`` (first such list),
then every other rank seen on it, in order; only ranks of the trace count.
:class:`LocalRanks` maps (communicator, global rank) columns to refs and local
ranks by array search, not per row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import polars as pl

from di.convert.otf2.stringtable import Strings
from di.trace import Trace

__all__ = ["DEFAULT_COMM", "GROUP_NAME_PREFIX", "NULL_COMM", "LocalRanks", "plan_comms"]

NULL_COMM = "\0null"
"""Stands for a null comm while planning; written as an unnamed communicator whose group name says so."""
DEFAULT_COMM = NULL_COMM
GROUP_NAME_PREFIX = "di:"
"""A communicator group name starting with this holds JSON; ``{"null_comm": true}`` marks the communicator of
messages and collectives whose ``comm`` is null."""


def plan_comms(
    trace: Trace, loc_rank: np.ndarray, ranks: list[int], strings: Strings
) -> tuple[list[dict[str, Any]], dict[str, dict[int, int]]]:
    """Communicators by name: members (indices into the rank list) and global rank -> rank within it."""
    used = _message_ranks(trace, loc_rank)
    given = _add_collective_ranks(trace.collectives, used)
    return _comm_definitions(used, given, ranks, strings)


def _message_ranks(trace: Trace, loc_rank: np.ndarray) -> dict[str, set[int]]:
    """The ranks that send or receive a message on each communicator."""
    used: dict[str, set[int]] = {}
    msg = trace.messages
    if msg.height:
        ev_loc = trace.events["loc"].to_numpy()
        comm = msg["comm"].fill_null(DEFAULT_COMM)
        ends = pl.DataFrame(
            {
                "comm": pl.concat([comm, comm]),
                "rank": loc_rank[ev_loc[np.concatenate([msg["send"].to_numpy(), msg["recv"].to_numpy()])]],
            }
        ).unique()
        for c, r in ends.iter_rows():  # one row per communicator and rank
            used.setdefault(c, set()).add(r)
    return used


def _add_collective_ranks(coll: pl.DataFrame, used: dict[str, set[int]]) -> dict[str, list[int]]:
    """Adds the rank of each collective to ``used``; returns the first readable ``group_ranks`` per communicator."""
    given: dict[str, list[int]] = {}
    for c, r, gr in coll.select(pl.col("comm").fill_null(DEFAULT_COMM), "rank", "group_ranks").unique().iter_rows():
        used.setdefault(c, set()).add(r)
        if gr and c not in given:
            try:
                given[c] = [int(x) for x in orjson.loads(gr)]
            except (orjson.JSONDecodeError, TypeError, ValueError):
                pass
    return given


def _comm_definitions(
    used: dict[str, set[int]], given: dict[str, list[int]], ranks: list[int], strings: Strings
) -> tuple[list[dict[str, Any]], dict[str, dict[int, int]]]:
    """The communicators in name order (name, members as positions in ``ranks``, group name), and each one's
    global rank -> local rank; their names are added to ``strings``."""
    comms, local = [], {}
    position = {r: i for i, r in enumerate(ranks)}
    for name in sorted(used):
        declared = list(given.get(name, []))
        members = declared + sorted(r for r in used[name] if r not in set(declared))
        members = [r for r in members if r in position]
        local[name] = {r: i for i, r in enumerate(members)}
        group_name = GROUP_NAME_PREFIX + '{"null_comm":true}' if name == NULL_COMM else ""
        comms.append(
            {
                "name": "" if name == NULL_COMM else name,
                "members": [position[r] for r in members],
                "group_name": group_name,
            }
        )
        strings.ref(comms[-1]["name"])
        strings.ref(group_name)
    return comms, local


class LocalRanks:
    """Per row of a communicator column and a global rank column: the communicator's ref (its position in
    ``local``) and the rank within it (the global rank where the communicator does not list it), looked up by
    array search over the communicators' members, not per row."""

    def __init__(self, local: dict[str, dict[int, int]]) -> None:
        self.names = pl.Series(list(local), dtype=pl.String)
        members = [(c, r, i) for c, m in enumerate(local.values()) for r, i in m.items()]
        comm, rank, index = (np.array(v, np.int64) for v in zip(*members)) if members else (np.zeros(0, np.int64),) * 3
        self.width = int(rank.max(initial=0)) + 1
        key = comm * self.width + rank
        order = np.argsort(key)
        self.keys, self.index = key[order], index[order]

    def comm_refs(self, comm: pl.Series) -> np.ndarray:
        """The ref of each row's communicator (a null is :data:`DEFAULT_COMM`)."""
        codes = pl.Series(np.arange(self.names.len(), dtype=np.int64))
        return comm.fill_null(DEFAULT_COMM).replace_strict(self.names, codes, return_dtype=pl.Int64).to_numpy()

    def ranks(self, refs: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Each row's rank within its communicator ``refs``."""
        rank = rank.astype(np.int64)
        if not self.keys.size:
            return rank
        key = refs * self.width + np.clip(rank, 0, self.width - 1)
        at = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        found = (rank >= 0) & (rank < self.width) & (self.keys[at] == key)
        return np.where(found, self.index[at], rank)
