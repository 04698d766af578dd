"""The engine's result tables from the steps of the path, on process 0 (:func:`assemble`).

The steps the processes walked (:mod:`~di.parallel.critical_path.backtrack`)
are turned into the tables of :func:`di.engine.critical_path.critical_path`
with the engine's own ``_result``, run on a graph of the path's nodes only
(three per step: the node before it on its timeline, the step's node, its
predecessor) and a frame of the path's events only; the event ids of the
tables are then mapped back to rows of the whole job's ``events``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import polars as pl

from di.engine.critical_path import _MIN, _result
from di.engine.critical_path_graph import Graph
from di.engine.window import EventFrame
from di.parallel.ownership import Part

EVENT_COLUMNS = ("ev_v", "ev_o", "ev_u")
"""Columns of a step's events (global rows, -1: none): its node's event, the event open before it, its predecessor's."""


def selected_range(part: Part, frame: EventFrame) -> tuple[int, int] | None:
    """(first start, last end) in ns of the part's owned selected events; None without any."""
    sel = frame.selected & part.own
    if not sel.any():
        return None
    return int(frame.start_ns[sel].min()), int(frame.end_ns[sel].max())


def assemble(table: pl.DataFrame | None, dropped: int, length: int, ranges: list) -> dict[str, Any]:
    """The engine's result tables from the path's steps (the engine's own :func:`_result` on a graph of
    the path's nodes only), event ids mapped back to rows of the whole job's ``events``."""
    n = table.height if table is not None else 0
    known = [r for r in ranges if r is not None]
    if table is None or not n:
        table = pl.DataFrame({c: [] for c in EVENT_COLUMNS}, schema={c: pl.Int64 for c in EVENT_COLUMNS})
    rows = pl.concat([table.get_column(c) for c in EVENT_COLUMNS]).to_numpy()
    ids = np.unique(rows[rows >= 0])
    mini = _mini_frame(_path_events(table, n), known)
    g, v, arrival = _mini_graph(table, n, ids)
    kind = table.get_column("kind").to_numpy() if n else np.zeros(0, np.int64)
    w = table.get_column("w").to_numpy() if n else np.zeros(0, np.int64)
    out = _result(mini, g, (v + 1, v, kind, w), dropped, length, arrival=arrival if known or n else None)
    back = pl.Series(ids, dtype=pl.Int64)
    out["segments"] = _to_rows(out["segments"], ("event",), back)
    out["events"] = _to_rows(out["events"], ("event",), back)
    out["waits"] = _to_rows(out["waits"], ("event", "cause_event"), back)
    return out


def _path_events(table: pl.DataFrame, n: int) -> pl.DataFrame:
    """The path's events, one row each by global row: row, rank, gpu, name, cat."""
    if not n:
        return pl.DataFrame(
            schema={"row": pl.Int64, "rank": pl.Int32, "gpu": pl.Boolean, "name": pl.String, "cat": pl.String}
        )
    attrs = [
        table.select(
            pl.col(f"ev_{key}").alias("row"),
            pl.col(f"rank_{key}").alias("rank"),
            pl.col(f"gpu_{key}").alias("gpu"),
            pl.col(f"name_{key}").alias("name"),
            pl.col(f"cat_{key}").alias("cat"),
        )
        for key in ("v", "o", "u")
    ]
    return pl.concat(attrs).filter(pl.col("row") >= 0).unique("row").sort("row")


def _mini_frame(ev: pl.DataFrame, known: list[tuple[int, int]]) -> SimpleNamespace:
    """What ``_result`` reads of an :class:`EventFrame`, for the path's events ``ev`` and one more event that
    spans the window (``known``: each process's selected range), selected when any process had one."""
    lo = min((r[0] for r in known), default=0)
    hi = max((r[1] for r in known), default=0)
    return SimpleNamespace(
        trace=SimpleNamespace(events=ev.select("name", "cat")),
        rank=np.append(ev.get_column("rank").to_numpy().astype(np.int32), 0),
        on_gpu=np.append(ev.get_column("gpu").to_numpy().astype(bool), False),
        start_ns=np.append(np.zeros(ev.height, np.int64), lo),
        end_ns=np.append(np.zeros(ev.height, np.int64), hi),
        selected=np.append(np.zeros(ev.height, bool), bool(known)),
    )


def _mini_ids(table: pl.DataFrame, n: int, ids: np.ndarray, col: str) -> np.ndarray:
    """The events of column ``col`` as positions in ``ids`` (the path's events; -1 stays -1)."""
    r = table.get_column(col).to_numpy() if n else np.zeros(0, np.int64)
    return np.where(r >= 0, np.searchsorted(ids, r), -1)


def _mini_graph(table: pl.DataFrame, n: int, ids: np.ndarray) -> tuple[Graph, np.ndarray, np.ndarray]:
    """The graph of the path's nodes, three per step (the node before the step's on its timeline, the step's
    node v, its predecessor), with the cross edge deciding each v's arrival; returns (graph, the nodes v,
    arrival per node)."""
    node_event = np.zeros(3 * n, np.int64)
    node_event[0::3] = _mini_ids(table, n, ids, "ev_v")
    node_event[1::3] = _mini_ids(table, n, ids, "ev_v")
    node_event[2::3] = _mini_ids(table, n, ids, "ev_u")
    time_ns = np.zeros(3 * n, np.int64)
    time_ns[0::3] = table.get_column("t_prev").to_numpy() if n else 0
    time_ns[1::3] = table.get_column("t_v").to_numpy() if n else 0
    first = np.zeros(3 * n, bool)
    first[1::3] = table.get_column("first_v").to_numpy() if n else False
    owner = np.full(3 * n, -1, np.int64)
    owner[1::3] = _mini_ids(table, n, ids, "ev_o")
    arrival = np.full(3 * n, _MIN, np.int64)
    arrival[1::3] = table.get_column("arrival_v").to_numpy() if n else _MIN
    akind = table.get_column("akind_v").to_numpy() if n else np.zeros(0, np.int64)
    with_edge = np.flatnonzero(akind >= 0)
    v = 3 * np.arange(n, dtype=np.int64) + 1
    g = Graph(
        node_event,
        time_ns,
        np.zeros(3 * n, bool),
        first,
        owner,
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        v[with_edge],
        v[with_edge],
        akind[with_edge],
    )
    return g, v, arrival


def _to_rows(df: pl.DataFrame, cols: tuple[str, ...], back: pl.Series) -> pl.DataFrame:
    """``df`` with the events of columns ``cols`` (positions in ``back``) as their rows in the whole job."""
    return (
        df.with_columns(
            [
                back.gather(pl.Series(df.get_column(c)).fill_null(0))
                .zip_with(df.get_column(c).is_not_null(), pl.Series([None] * df.height, dtype=pl.Int64))
                .alias(c)
                for c in cols
            ]
        )
        if df.height
        else df
    )
