"""Which rows of a long per-rank table a viewer shows: those least like the median.

A job of 512 ranks has 1,024 breakdown rows and as many wait-state rows; printed whole they are 3,000 lines of
``di analyze`` that nobody reads (and 3 of its 5 CPU-s), drawn whole they are a chart nobody can read. The viewers
show the rows (or the ranks) that differ most from the typical one, and say that ``--csv``/``--json`` (or the
report's table) has the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def unusual_rows(values: np.ndarray, most: int) -> np.ndarray:
    """The positions, in order, of the ``most`` rows of ``values`` (a rows x columns float array) least like the median
    row (:func:`unusual_ranks` with each row its own rank): the earlier row first among equal ones. All rows when
    there are no more than ``most``."""
    return unusual_ranks(np.arange(np.shape(values)[0]), values, most)


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


def unusual_rank_rows(
    frame: Any, values: list[Any], most: int, rule: str = "least like the median rank", groups: Any = None
) -> tuple[Any, str]:
    """The rows of ``frame`` (a polars DataFrame with a ``rank`` column) of its :func:`unusual_ranks` by the
    polars expressions ``values`` (cast to Float64; null counts as 0), rows held against their ``groups`` (an
    expression) when given; and the :func:`more_note` saying so (``rule``). All of ``frame`` and no note when it
    has no more than ``most`` ranks."""
    import polars as pl

    total = frame.get_column("rank").n_unique()
    if total <= most:
        return frame, ""
    numbers = frame.select(v.cast(pl.Float64) for v in values).to_numpy()
    codes = frame.select(groups).to_series().to_numpy() if groups is not None else None
    picked = unusual_ranks(frame.get_column("rank").to_numpy(), numbers, most, codes)
    return frame.filter(pl.col("rank").is_in(picked.tolist())), more_note(picked.size, total, rule=rule)
