"""OTF2 3 accelerator location groups (Score-P 8+ puts a process's CUDA/HIP streams in a group the process
creates): their locations keep the creating process's rank, so the engine pairs a rank's launches and syncs
with its own device activity (di.engine.inferred_edges)."""

from __future__ import annotations

import pytest

from di.convert.otf2.clib import UNDEFINED_UINT32
from di.convert.otf2.definitions import _ranks
from di.convert.otf2.globaldefs import GlobalDefs


@pytest.mark.parametrize("names", [("MPI Rank 1", "MPI Rank 0"), ("Process", "Process")])
def test_accelerator_groups_take_their_creators_rank(names):
    g = GlobalDefs(
        location_groups={
            10: (names[0], 1, UNDEFINED_UINT32),
            11: (names[1], 1, UNDEFINED_UINT32),
            12: ("HIP Context 1", 1, 11),
            13: ("HIP Context 1", 1, 10),
            14: ("nested", 1, 13),
        }
    )
    ranks = _ranks(g)
    own = {10: ranks[10], 11: ranks[11]}
    assert sorted(own.values()) == [0, 1]
    assert ranks[12] == ranks[11] and ranks[13] == ranks[10] and ranks[14] == ranks[10]


def test_groups_without_creator_keep_their_ranks():
    g = GlobalDefs(location_groups={5: ("MPI Rank 0", 1, UNDEFINED_UINT32), 6: ("MPI Rank 1", 1, UNDEFINED_UINT32)})
    assert _ranks(g) == {5: 0, 6: 1}
