"""The single-process graph's node ids of a process's part of the graph (:class:`NodeIds`).

Owned nodes are not given ids one by one: they come first in the part, each
owned timeline one block of consecutive ids in both numberings, so a block's
first node and id map the rest; only the ghosts' ids are listed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NodeIds:
    """The single-process graph's node ids (timeline by timeline in ``loc`` order) of a part's nodes.

    A part's owned nodes come first, ``[0, n_own)``, in ``loc`` order, so each owned timeline is one block
    of consecutive ids in both numberings; the ghost nodes follow, their ids sent by their owners.

    Attributes:
        n_own: number of owned nodes.
        block_local, block_global: per owned timeline with nodes (ascending), its first node here and its id.
        ghost: id of ghost node ``n_own + i`` (int64).
    """

    n_own: int
    block_local: np.ndarray
    block_global: np.ndarray
    ghost: np.ndarray

    def of(self, nodes: np.ndarray) -> np.ndarray:
        """Ids of local nodes (int64; -1 stays -1)."""
        nodes = np.asarray(nodes, np.int64)
        out = np.full(nodes.size, -1, np.int64)
        own = (nodes >= 0) & (nodes < self.n_own)
        b = np.searchsorted(self.block_local, nodes[own], side="right") - 1
        out[own] = self.block_global[b] + (nodes[own] - self.block_local[b])
        ghost = nodes >= self.n_own
        out[ghost] = self.ghost[nodes[ghost] - self.n_own]
        return out

    def owned(self, gid: int) -> int:
        """The local node of an owned node's id."""
        b = int(np.searchsorted(self.block_global, gid, side="right")) - 1
        return int(self.block_local[b] + (gid - self.block_global[b]))
