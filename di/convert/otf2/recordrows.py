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

from dataclasses import dataclass, fields

import numpy as np
import polars as pl


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

    def of_kind(self, *kinds: int) -> np.ndarray:
        """Boolean mask of the rows whose kind is one of ``kinds``."""
        if len(kinds) == 1:
            return self.kind == kinds[0]
        return one_of(self.kind, list(kinds))

    def take(self, mask: np.ndarray) -> RecordRows:
        """The rows selected by a boolean mask or an index array. Each column is gathered when first read:
        consumers read three or four of the thirteen, and a real-shaped trace has millions of rows."""
        selected = object.__new__(RecordRows)
        selected.__dict__["_source"] = (self, np.flatnonzero(mask) if mask.dtype == np.bool_ else mask)
        return selected

    def __getattr__(self, name: str) -> np.ndarray:
        """A column of a :meth:`take` not read yet (called only for attributes not set)."""
        source = self.__dict__.get("_source")
        if source is None or name not in _COLUMNS:
            raise AttributeError(name)
        parent, index = source
        column = getattr(parent, name)[index]
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
