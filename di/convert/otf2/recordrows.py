"""The records kept beside the events (everything but Enter/Leave), as numpy columns.

One row per kept record row of :mod:`di.convert.otf2.timeline` (MPI,
collectives, RMA, instants, metrics, their ATTRIBUTE and METRIC_VALUE rows):

* ``kind``, ``ts_ns`` (int64 ns on the trace clock), ``a`` .. ``e``: the
  record row's fields, whose meaning is the kind's (see :mod:`di.convert.otf2.records`):
  read them through the accessors named by meaning (``peer``, ``comm``, ``tag``,
  ``request``, ``coll_op``, ``attribute``, ...);
* ``loc``: dense location index; ``rank``: that location's rank;
* ``event``: the row in ``events`` the record belongs to (-1: none);
* ``row``: the record's row among all records of the archive; ``head``: the
  row of the record an ATTRIBUTE row belongs to (its own row for others);
  ``after``: that record's kind.

Consumers select rows with numpy masks (cheap on any size) and turn only the
few rows they need into polars frames (:meth:`RecordRows.frame`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np
import polars as pl


Made = Callable[[np.ndarray | None], np.ndarray]
"""A column made on demand for the rows of an index array (None: every row)."""


@dataclass
class RecordRows:
    """Kept record rows, one numpy array per column (see the module docstring)."""

    kind: np.ndarray
    ts_ns: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    e: np.ndarray
    loc: np.ndarray
    rank: np.ndarray
    event: np.ndarray
    row: np.ndarray
    after: np.ndarray
    head: np.ndarray

    # The fields by meaning, for the record kinds that fill them (records.PEER, ...):

    @property
    def peer(self) -> np.ndarray:
        """MPI point-to-point rows: the receiver of a send, the sender of a receive (a rank within ``comm``)."""
        return self.a

    @property
    def comm(self) -> np.ndarray:
        """MPI point-to-point and MpiCollectiveEnd rows: the communicator ref."""
        return self.b

    @property
    def tag(self) -> np.ndarray:
        """MPI point-to-point rows: the message tag."""
        return self.c

    @property
    def msg_bytes(self) -> np.ndarray:
        """MPI point-to-point rows: the message length in bytes."""
        return self.d

    @property
    def request(self) -> np.ndarray:
        """Non-blocking MPI rows (MpiIsend, MpiIrecv, MpiIsendComplete, MpiIrecvRequest, ...): the request id."""
        return self.e

    @property
    def coll_op(self) -> np.ndarray:
        """MpiCollectiveEnd rows: the OTF2_CollectiveOp."""
        return self.a

    @property
    def root(self) -> np.ndarray:
        """MpiCollectiveEnd rows: the root's rank within ``comm`` (OTF2_UNDEFINED_UINT32: none)."""
        return self.c

    @property
    def sent(self) -> np.ndarray:
        """MpiCollectiveEnd rows: bytes sent."""
        return self.d

    @property
    def received(self) -> np.ndarray:
        """MpiCollectiveEnd rows: bytes received."""
        return self.e

    @property
    def metric(self) -> np.ndarray:
        """Metric rows: the metric ref."""
        return self.a

    @property
    def value_type(self) -> np.ndarray:
        """METRIC_VALUE rows: the value's OTF2_Type."""
        return self.a

    @property
    def value_bits(self) -> np.ndarray:
        """METRIC_VALUE rows: the value's raw 8 bytes."""
        return self.b

    @property
    def attribute(self) -> np.ndarray:
        """ATTRIBUTE rows: the attribute ref."""
        return self.a

    @property
    def attr_type(self) -> np.ndarray:
        """ATTRIBUTE rows: the value's OTF2_Type."""
        return self.b

    @property
    def attr_value(self) -> np.ndarray:
        """ATTRIBUTE rows: the value's raw 8 bytes."""
        return self.c

    def __len__(self) -> int:
        return int(self.kind.size)

    def inside(self, *kinds: int) -> RecordRows:
        """The rows of one of ``kinds`` that belong to an event (``event`` >= 0); no pass when there are none."""
        if not self.count(*kinds):
            return self.take(np.zeros(0, np.int64))
        return self.take(self.of_kind(*kinds) & (self.event >= 0))

    def count(self, *kinds: int) -> int:
        """How many rows are of one of ``kinds``: from the rows' kinds counted once (a real-shaped archive's 4.5 M
        rows are nearly all ATTRIBUTE rows, and most kinds a consumer asks for are absent)."""
        counts = self.__dict__.get("_counts")
        if counts is None:
            counts = np.bincount(self.kind) if self.kind.size else np.zeros(0, np.int64)  # kinds are >= 0
            self.__dict__["_counts"] = counts
        return sum(int(counts[k]) for k in kinds if 0 <= k < counts.size)

    def of_kind(self, *kinds: int) -> np.ndarray:
        """Boolean mask of the rows whose kind is one of ``kinds`` (all False, with no pass over the rows, when no
        row is)."""
        if not self.count(*kinds):
            return np.zeros(len(self), np.bool_)
        if len(kinds) == 1:
            return self.kind == kinds[0]
        return one_of(self.kind, list(kinds))

    @classmethod
    def lazy(cls, columns: dict[str, np.ndarray], made: dict[str, Made]) -> RecordRows:
        """Rows whose ``columns`` are given and the others ``made`` when first read: each a function of the rows
        wanted (an index array, None for all), so that a :meth:`take` of a few rows makes the column of those only
        (the times, locations and ranks of an archive's millions of attribute rows are read by no consumer)."""
        rows = object.__new__(cls)
        rows.__dict__.update(columns, _made=made)
        return rows

    def take(self, mask: np.ndarray) -> RecordRows:
        """The rows selected by a boolean mask or an index array. Each column is gathered when first read:
        consumers read three or four of the thirteen, and a real-shaped trace has millions of rows."""
        selected = object.__new__(RecordRows)
        selected.__dict__["_source"] = (self, np.flatnonzero(mask) if mask.dtype == np.bool_ else mask)
        return selected

    def _column_at(self, name: str, index: np.ndarray) -> np.ndarray:
        """Column ``name`` at rows ``index``, made for those rows alone where it is not held yet."""
        held = self.__dict__.get(name)
        if held is not None:
            return held[index]
        made = self.__dict__.get("_made", {})
        if name in made:
            return made[name](index)
        source = self.__dict__.get("_source")
        if source is None:
            return getattr(self, name)[index]
        parent, own = source
        return parent._column_at(name, own[index])

    def __getattr__(self, name: str) -> np.ndarray:
        """A column of a :meth:`take` or a :meth:`lazy` one not read yet (called only for attributes not set)."""
        if name not in _COLUMNS:
            raise AttributeError(name)
        made = self.__dict__.get("_made", {})
        source = self.__dict__.get("_source")
        if name in made:
            column = made[name](None)
        elif source is not None:
            parent, index = source
            column = parent._column_at(name, index)
        else:
            raise AttributeError(name)
        self.__dict__[name] = column
        return column

    def frame(self, mask: np.ndarray | None = None) -> pl.DataFrame:
        """The selected rows (all when None) as a polars DataFrame, one column per field."""
        cols = self if mask is None else self.take(mask)
        return pl.DataFrame({f.name: getattr(cols, f.name) for f in fields(cols)})


_COLUMNS = frozenset(f.name for f in fields(RecordRows))


def one_of(values: np.ndarray, refs: list[int]) -> np.ndarray:
    """Whether each value is one of the few small non-negative ``refs`` (record kinds, attribute refs): compares, or a
    lookup table, where ``np.isin`` sorted the millions of rows of a real-shaped archive (0.02-0.1 CPU-s a call)."""
    if len(refs) <= 4:  # a compare per ref: 1 ms each on 5 M rows
        out = values == refs[0]
        for ref in refs[1:]:
            out |= values == ref
        return out
    lut = np.zeros(max(refs) + 2, np.bool_)  # the last entry, False, takes every value beyond (negatives too)
    lut[refs] = True
    return np.take(lut, np.asarray(values, np.int64).view(np.uint64), mode="clip")
