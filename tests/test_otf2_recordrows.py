"""The OTF2 reader's record rows (di.convert.otf2.recordrows): columns made on demand for the rows read, takes of
takes, and kinds counted once."""

from __future__ import annotations

import numpy as np

from di.convert.otf2.recordrows import RecordRows
from di.convert.otf2.records import ATTRIBUTE, COLL_END, METRIC, MPI_SEND


def _rows(kind: list[int], made_for: list) -> RecordRows:  # type: ignore[type-arg]
    n = len(kind)
    ts = np.arange(n, dtype=np.int64) * 10

    def ts_ns(rows: np.ndarray | None) -> np.ndarray:
        made_for.append(None if rows is None else rows.tolist())
        return ts if rows is None else ts[rows]

    given = {name: np.arange(n, dtype=np.int64) + k for k, name in enumerate("abcde")}
    return RecordRows.lazy(
        {
            "kind": np.array(kind, np.int64),
            **given,
            "event": np.array([0, -1, 1, 1, 2, -1], np.int64)[:n],
            "row": np.arange(n, dtype=np.int64),
            "after": np.zeros(n, np.int64),
            "head": np.arange(n, dtype=np.int64),
        },
        {
            "ts_ns": ts_ns,
            "loc": lambda rows: np.zeros(n if rows is None else rows.size, np.int64),
            "rank": lambda rows: np.zeros(n if rows is None else rows.size, np.int32),
        },
    )


def test_a_made_column_is_made_for_the_rows_a_take_reads_only() -> None:
    made_for: list = []  # type: ignore[type-arg]
    rec = _rows([ATTRIBUTE, MPI_SEND, ATTRIBUTE, MPI_SEND, METRIC, ATTRIBUTE], made_for)
    sends = rec.take(rec.of_kind(MPI_SEND))
    assert sends.ts_ns.tolist() == [10, 30] and made_for == [[1, 3]]
    assert sends.ts_ns.tolist() == [10, 30] and made_for == [[1, 3]]  # kept once made
    inner = rec.take(np.array([5, 2, 0])).take(np.array([True, False, True]))
    assert inner.ts_ns.tolist() == [50, 0] and inner.a.tolist() == [5, 0] and made_for[-1] == [5, 0]
    assert rec.ts_ns.tolist() == [0, 10, 20, 30, 40, 50] and made_for[-1] is None
    assert rec.take(np.array([4])).ts_ns.tolist() == [40]  # once the whole column is held, a take gathers from it
    assert len(made_for) == 3
    assert rec.frame().get_column("ts_ns").to_list() == [0, 10, 20, 30, 40, 50]


def test_kinds_are_counted_once_and_absent_kinds_select_nothing() -> None:
    rec = _rows([ATTRIBUTE, MPI_SEND, ATTRIBUTE, MPI_SEND, METRIC, ATTRIBUTE], [])
    assert rec.count(ATTRIBUTE) == 3 and rec.count(MPI_SEND, METRIC) == 3 and rec.count(COLL_END) == 0
    assert rec.count(10_000) == 0
    assert not rec.of_kind(COLL_END).any() and rec.of_kind(COLL_END).size == 6
    assert rec.inside(MPI_SEND).row.tolist() == [3]  # row 1 belongs to no event
    assert len(rec.inside(COLL_END)) == 0
