"""The edges of a Perfetto trace di wrote, from its flow ids (di.convert.perfetto.origin): found by the edge number
the writer puts in each flow id, they are the edges the general join finds, in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from di.convert.perfetto.origin import _edges_by_number, _edges_joined


def _marks(rng: np.random.Generator, n_edges: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flow marks as the decoder gives them: flow id ((e + 1) << 4 | rev << 3 | code), the event row (-1: a
    dropped event), whether it ends the flow; some edges lack a start or an end, some repeat a mark."""
    e = np.arange(n_edges, dtype=np.uint64)
    fid = ((e + np.uint64(1)) << np.uint64(4)) | (rng.integers(0, 2, n_edges).astype(np.uint64) << np.uint64(3))
    fid |= rng.integers(0, 6, n_edges).astype(np.uint64)
    starts = fid[rng.random(n_edges) < 0.9]
    ends = fid[rng.random(n_edges) < 0.9]
    again = fid[rng.integers(0, n_edges, n_edges // 5)]  # a second start mark of some edges
    ids = np.concatenate([starts, ends, again])
    term = np.concatenate([np.zeros(starts.size), np.ones(ends.size), np.zeros(again.size)]).astype(np.uint8)
    order = rng.permutation(ids.size)
    row = rng.integers(-1, 10 * n_edges, ids.size)
    return ids[order], row, term[order]


@pytest.mark.parametrize("seed", range(5))
def test_edges_found_by_number_are_the_joined_edges(seed: int) -> None:
    rng = np.random.default_rng(seed)
    fid, row, term = _marks(rng, 500)
    found = _edges_by_number(fid, row, term)
    assert found is not None
    edges, unpaired = found
    want, want_unpaired = _edges_joined(fid, row, term)
    assert edges.height > 0 and unpaired > 0
    assert edges.equals(want) and unpaired == want_unpaired


def test_flow_ids_that_share_a_number_or_are_sparse_go_to_the_join() -> None:
    fid = np.array([(1 << 4) | 1, (1 << 4) | 2, (1 << 4) | 1], np.uint64)  # two ids of edge 0
    row, term = np.array([3, 4, 5]), np.array([0, 1, 1], np.uint8)
    assert _edges_by_number(fid, row, term) is None
    sparse = np.array([(10_000 << 4) | 1, (10_000 << 4) | 1], np.uint64)
    assert _edges_by_number(sparse, np.array([1, 2]), np.array([0, 1], np.uint8)) is None
    edges, unpaired = _edges_joined(sparse, np.array([1, 2]), np.array([0, 1], np.uint8))
    assert edges.select("src", "dst").rows() == [(1, 2)] and unpaired == 0
    assert _edges_by_number(fid, np.array([-1, -1, -1]), term) is None  # no mark on a kept event
