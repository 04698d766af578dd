"""Which rows of a long per-rank table a viewer shows: those least like the median.

A job of 512 ranks has 1,024 breakdown rows and as many wait-state rows; printed whole they are 3,000 lines of
``di analyze`` that nobody reads (and 3 of its 5 CPU-s), drawn whole they are a chart nobody can read. The viewers
show the rows (or the ranks) that differ most from the typical one, and say that ``--csv``/``--json`` (or the
report's table) has the rest.
"""

from __future__ import annotations

import numpy as np


def unusual_rows(values: np.ndarray, most: int) -> np.ndarray:
    """The positions, in order, of the ``most`` rows of ``values`` (a rows x columns float array) least like the median
    row: the largest sums of absolute differences from each column's median, the earlier row first among equal ones.
    All rows when there are no more than ``most``."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape[0] <= most:
        return np.arange(values.shape[0])
    distance = np.abs(values - np.median(values, axis=0)).sum(axis=1)
    return np.sort(np.argsort(-distance, kind="stable")[:most])


def unusual_ranks(ranks: np.ndarray, values: np.ndarray, most: int, groups: np.ndarray | None = None) -> np.ndarray:
    """The ``most`` ranks, ascending, whose rows of ``values`` (a rows x columns float array, one row per entry of
    ``ranks``; NaN counts as 0) are least like the median row: each rank scored by its row farthest from the
    columns' medians (the sum of absolute differences), the lower rank first among equal scores. With ``groups``
    (a code per row: the kind of scope, host or GPU, and the step) a row is held against the medians of its group's
    rows only. All ranks when there are no more than ``most``."""
    ranks = np.asarray(ranks)
    keys, row_rank = np.unique(ranks, return_inverse=True)
    if keys.size <= most:
        return keys
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))
    if groups is None:
        median = np.median(values, axis=0)
    else:
        codes, row_group = np.unique(np.asarray(groups), return_inverse=True)
        order = np.argsort(row_group, kind="stable")
        bounds = np.searchsorted(row_group[order], np.arange(codes.size + 1))
        by_group = np.stack([np.median(values[order[a:b]], axis=0) for a, b in zip(bounds[:-1], bounds[1:])])
        median = by_group[row_group]  # a loop over the groups: a few kinds of scope times the steps, not the rows
    distance = np.abs(values - median).sum(axis=1)
    score = np.full(keys.size, -np.inf)
    np.maximum.at(score, row_rank, distance)
    return np.sort(keys[np.argsort(-score, kind="stable")[:most]])


def more_note(shown: int, total: int, what: str = "ranks", rule: str = "least like the median rank") -> str:
    """The words a table's title ends with when it shows ``shown`` of ``total`` ``what``: ``; 16 of 512 ranks: those
    least like the median rank (all in --csv/--json)``; empty when it shows all."""
    if shown >= total:
        return ""
    return f"; {shown} of {total} {what}: those {rule} (all in --csv/--json)"
