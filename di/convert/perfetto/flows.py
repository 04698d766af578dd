"""Flow arrows of a Perfetto trace: which event packet carries which flow id.

Edges, numbered ``e`` in this order: every row of ``flows`` (launch,
stream_wait, sync, user), every ``messages`` row (send -> receive), and for
each collective instance with two or more members one edge from the member
that arrived last (latest start; ties: lowest rank) to every other member.

Flow id of edge ``e``: ``((e + 1) << 4) | (reversed << 3) | code`` with
``code`` = the flow kind's index in the schema (0-3), 4 for a message, 5 for a
collective; unique, never 0, so di's reader gets the kind and the row back.

Perfetto's trace processor binds flow ids when it processes an event packet
(slice begin, instant or slice end, in timestamp order) and draws each flow
from the slice that starts earlier to the one that starts later. So the
event that starts first (X) carries the id in ``flow_ids`` on its begin
packet, and the other (Y) in ``terminating_flow_ids`` on its begin packet when
it starts later, else on its end packet when it ends later. ``reversed`` is
set when X is the edge's destination.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from di.convert.perfetto.encode import FLOW_AT_END, FLOW_TERMINATING
from di.errors import SchemaError
from di.trace import FLOW_KINDS

CODE_MESSAGE, CODE_COLLECTIVE = 4, 5
REVERSED = 8


@dataclass(frozen=True)
class FlowMarks:
    """Flow ids per event, as CSR arrays over event rows (canonical order).

    Attributes:
        ptr: int64 (n + 1); the marks of event i are ``ptr[i]:ptr[i+1]``.
        fid: uint64 flow id of each mark.
        bits: uint8 of each mark: :data:`~di.convert.perfetto.encode.FLOW_TERMINATING` (in terminating_flow_ids,
            else flow_ids), :data:`~di.convert.perfetto.encode.FLOW_AT_END` (on the event's end packet, else on its
            begin or instant packet).
        edges: number of edges by table: flows, messages, collective.
    """

    ptr: np.ndarray
    fid: np.ndarray
    bits: np.ndarray
    edges: dict[str, int]


def _rows(values: np.ndarray, n: int, what: str) -> np.ndarray:
    bad = np.flatnonzero((values < 0) | (values >= n))
    if len(bad):
        raise SchemaError(f"{what} row {bad[0]}: event row {values[bad[0]]} does not exist ({n} events)")
    return values.astype(np.int64, copy=False)


def collective_edges(collectives: pl.DataFrame, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) event rows: per instance, last arrival -> every other member."""
    c = collectives.filter(pl.col("instance").is_not_null()).select("instance", "event", "rank")
    if not c.height:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ev = _rows(c.get_column("event").to_numpy(), len(start), "collectives.event")
    c = c.with_columns(_start=pl.Series(start[ev]))
    last = c.sort(["_start", "rank"], descending=[True, False]).group_by("instance", maintain_order=True).first()
    pairs = c.join(last.select("instance", pl.col("event").alias("_src")), on="instance").filter(
        pl.col("event") != pl.col("_src")
    )
    pairs = pairs.sort(["instance", "rank", "event"])
    return pairs.get_column("_src").to_numpy().astype(np.int64), pairs.get_column("event").to_numpy().astype(np.int64)


def flow_marks(
    flows: pl.DataFrame,
    messages: pl.DataFrame,
    collectives: pl.DataFrame,
    start: np.ndarray,
    end: np.ndarray,
    instant: np.ndarray,
    row_of: np.ndarray | None,
) -> FlowMarks:
    """Marks of every edge.

    Args:
        flows, messages, collectives: the trace's tables (rows refer to the events as stored).
        start, end, instant: per event in canonical order; times in ns, ``end == start`` for instants.
        row_of: stored event row -> canonical row (None: the same).
    """
    n = len(start)
    fs = _rows(flows.get_column("src").to_numpy(), n, "flows.src")
    fd = _rows(flows.get_column("dst").to_numpy(), n, "flows.dst")
    kind = flows.get_column("kind").to_physical().to_numpy().astype(np.int64)
    ms = _rows(messages.get_column("send").to_numpy(), n, "messages.send")
    mr = _rows(messages.get_column("recv").to_numpy(), n, "messages.recv")
    if row_of is not None:
        fs, fd, ms, mr = row_of[fs], row_of[fd], row_of[ms], row_of[mr]
    cs, cd = collective_edges(
        collectives
        if row_of is None
        else collectives.with_columns(
            event=pl.Series(row_of[_rows(collectives.get_column("event").to_numpy(), n, "collectives.event")])
        ),
        start,
    )
    src = np.concatenate([fs, ms, cs])
    dst = np.concatenate([fd, mr, cd])
    code = np.concatenate([kind, np.full(len(ms), CODE_MESSAGE), np.full(len(cs), CODE_COLLECTIVE)]).astype(np.int64)
    x, y, rev, y_end = _attach(src, dst, start, end, instant)
    fid = (
        ((np.arange(len(src), dtype=np.uint64) + np.uint64(1)) << np.uint64(4))
        | (rev.astype(np.uint64) << np.uint64(3))
        | code.astype(np.uint64)
    )
    ev = np.concatenate([x, y])
    count = np.bincount(ev, minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(count, out=ptr[1:])
    if len(ev) and count.max() > 1:  # the slot of each mark: X's marks first, then Y's, each in edge order
        at = np.empty(len(ev), dtype=np.int64)
        at[np.argsort(ev, kind="stable")] = np.arange(len(ev))
    else:  # an event has at most one mark: its slot is the event's first (no sort)
        at = ptr[ev]
    at_x, at_y = at[: len(x)], at[len(x) :]
    marks = np.empty(len(ev), dtype=np.uint64)
    marks[at_x] = fid
    marks[at_y] = fid
    bits = np.zeros(len(ev), dtype=np.uint8)
    bits[at_y] = np.where(y_end, np.uint8(FLOW_TERMINATING | FLOW_AT_END), np.uint8(FLOW_TERMINATING))
    return FlowMarks(
        ptr=ptr, fid=marks, bits=bits, edges={"flows": len(fs), "messages": len(ms), "collective": len(cs)}
    )


def _attach(
    src: np.ndarray, dst: np.ndarray, start: np.ndarray, end: np.ndarray, instant: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """X (flow_ids on its begin), Y (terminating), reversed (X is dst), Y's mark on its end packet. Each event column
    is read once per end of the edges (gathers of the edges' rows, not of n)."""
    s_start, d_start = start[src], start[dst]
    s_end, d_end = end[src], end[dst]
    s_slice, d_slice = ~instant[src], ~instant[dst]
    # a's end packet comes after b's begin packet: ~instant[a] & (end[a] > start[b])
    d_after_s = d_slice & (d_end > s_start)
    s_after_d = s_slice & (s_end > d_start)
    swap = (d_start < s_start) | ((d_start == s_start) & ~d_after_s & s_after_d)
    x = np.where(swap, dst, src)
    y = np.where(swap, src, dst)
    # Y's end after X's begin, with Y not starting after X
    y_end = np.where(swap, ~(s_start > d_start) & s_after_d, ~(d_start > s_start) & d_after_s)
    return x, y, swap, y_end


def edge_code_names() -> list[str]:
    """Name of each flow id code (the low 3 bits)."""
    return list(FLOW_KINDS) + ["message", "collective"]
