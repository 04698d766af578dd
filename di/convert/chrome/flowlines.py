"""Flows in the Chrome writer: flow-v2 ``bind_id`` on X lines where one can carry a flow, ``s``/``f`` pairs elsewhere.

* The flows drawn are the trace's, then one per message (send -> recv, kind
  ``message``): :func:`drawn_flows`.
* An X event that is the source of exactly one flow and/or the destination of
  exactly one flow carries ``bind_id`` + ``flow_out``/``flow_in`` (a chain
  shares one id; only when binders see the source first): :func:`bind_ids`,
  :func:`bind_suffix`. Ids start at :data:`BIND_ID_BASE`.
* Every other flow becomes an ``s``/``f`` pair (ids 1, 2, ...), each marker at
  the first time (``f`` not before ``s``) its event is the innermost open slice
  of its location: :func:`marker_times`, :func:`pair_block`.
* The event ending a flow carries ``"di_flow": {"kind", "id", "src_cat"}``
  (absent keys = null): :func:`flow_attrs`.

All of it is numpy / polars over whole columns, never a Python loop per flow.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.chrome.fragments import Block, Pool
from di.convert.chrome.lines import CONST, FRAG, TIME
from di.convert.chrome.tracks import TrackLayout
from di.convert.lanes import NO_POINT, innermost_points

__all__ = ["BIND_ID_BASE", "bind_ids", "bind_suffix", "drawn_flows", "flow_attrs", "marker_times", "pair_block"]

BIND_ID_BASE = 1 << 32
"""First flow-v2 bind_id: Perfetto numbers s/f flows 0, 1, ... (uint32) in the same id space."""


def drawn_flows(flows: pl.DataFrame, messages: pl.DataFrame) -> pl.DataFrame:
    """The flows to write: the trace's, then one per message (send -> recv, kind
    ``message``), so that viewers draw MPI messages as arrows. The reader takes
    these back out: messages come from diTrace."""
    if not messages.height:
        return flows
    cols = {"src": pl.Int64, "dst": pl.Int64, "kind": pl.String, "id": pl.Int64, "src_cat": pl.String}
    drawn = messages.select(
        pl.col("send").alias("src"),
        pl.col("recv").alias("dst"),
        pl.lit("message").alias("kind"),
        pl.lit(None).alias("id"),
        pl.lit(None).alias("src_cat"),
    )
    return pl.concat([flows.select(list(cols)).cast(cols), drawn.cast(cols)])


def bind_ids(src: np.ndarray, dst: np.ndarray, start: np.ndarray, end: np.ndarray, instant: np.ndarray) -> np.ndarray:
    """Flow-v2 bind_id per flow (-1: written as an s/f pair); a chain of bound flows shares its first flow's id.

    Binders see events in time order, so the source must come first: an earlier start, or the same start
    with an earlier row and at least the same duration (Perfetto puts longer slices first at equal ts).
    """
    n, m = len(start), len(src)
    out_deg, in_deg = np.bincount(src, minlength=n), np.bincount(dst, minlength=n)
    tie = (start[src] == start[dst]) & (src < dst) & (end[src] - start[src] >= end[dst] - start[dst])
    first = (start[src] < start[dst]) | tie
    ok = (out_deg[src] == 1) & (in_deg[dst] == 1) & ~instant[src] & ~instant[dst] & first
    into = np.full(n, -1, dtype=np.int64)
    into[dst[ok]] = np.flatnonzero(ok)
    root = np.arange(m)
    link = ok & (into[src] >= 0)
    root[link] = into[src][link]
    while len(root) and not np.array_equal(nxt := root[root], root):  # pointer jumping to the chain's first flow
        root = nxt
    return np.where(ok, BIND_ID_BASE + root, -1)


def flow_attrs(flows: pl.DataFrame, src_cat: pl.Series) -> pl.Series:
    """The ``di_flow`` object text of each flow: kind, and id / src_cat (JSON literals) when not null."""
    return (
        flows.with_columns(_sc=src_cat)
        .select(
            pl.concat_str(
                [
                    pl.lit('{"kind":"'),
                    pl.col("kind").cast(pl.String),
                    pl.lit('"'),
                    pl.lit(',"id":') + pl.col("id").cast(pl.String),
                    pl.lit(',"src_cat":') + pl.col("_sc"),
                    pl.lit("}"),
                ],
                ignore_nulls=True,
            )
        )
        .to_series()
    )


def bind_suffix(
    src: np.ndarray, dst: np.ndarray, bind: np.ndarray, attrs: pl.Series, n: int
) -> tuple[np.ndarray, pl.Series]:
    """Event rows carrying a bind_id, and the text appended to their X line."""
    ok = np.flatnonzero(bind >= 0)
    ev_bind = np.full(n, -1, dtype=np.int64)
    ev_bind[src[ok]] = bind[ok]
    ev_bind[dst[ok]] = bind[ok]
    inflow = np.full(n, -1, dtype=np.int64)
    inflow[dst[ok]] = ok
    out = np.zeros(n, dtype=bool)
    out[src[ok]] = True
    rows = np.flatnonzero(ev_bind >= 0)
    df = pl.DataFrame({"b": ev_bind[rows], "i": inflow[rows], "o": out[rows]})
    df = df.with_columns(a=attrs.gather(df.get_column("i").replace(-1, None)) if len(attrs) else None)
    suffix = df.select(
        pl.concat_str(
            [
                pl.lit(',"bind_id":'),
                pl.col("b").cast(pl.String),
                pl.when(pl.col("i") >= 0).then(pl.lit(',"flow_in":true')),
                pl.when("o").then(pl.lit(',"flow_out":true')),
                pl.lit(',"di_flow":') + pl.col("a"),
            ],
            ignore_nulls=True,
        )
    ).to_series()
    return rows, suffix


def marker_times(
    sorted_events: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None], src: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ns of the ``s`` and ``f`` marker of each flow: where its event is the innermost one, ``f`` not before ``s``."""
    loc, start, end, order = sorted_events
    if order is not None:
        where = np.empty_like(order)
        where[order] = np.arange(len(order))
        src, dst = where[src], where[dst]

    def point(rows: np.ndarray, lower: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        t = innermost_points(loc, start, end, rows, lower)
        return np.where(t == NO_POINT, fallback, t)

    s_ts = point(src, start[src], start[src])
    f_ts = point(dst, np.maximum(start[dst], s_ts), point(dst, start[dst], start[dst]))
    return s_ts, f_ts


def _pair_heads(sub: pl.DataFrame, ph: str, p: str, t: str, extra: list[pl.Expr]) -> pl.Series:
    """The text of each ``ph`` (s or f) line of the pairs in ``sub`` up to its ``"ts":``, at pid ``p`` / tid ``t``."""
    return sub.select(
        pl.concat_str(
            [
                pl.lit('{"ph":"' + ph + '","id":'),
                pl.col("_id").cast(pl.String),
                pl.lit(',"pid":'),
                pl.col(p).cast(pl.String),
                pl.lit(',"tid":'),
                pl.col(t).cast(pl.String),
                pl.lit(',"name":"'),
                pl.col("kind").cast(pl.String),
                pl.lit('","cat":'),
                pl.col("_cat"),
                *extra,
                pl.lit(',"ts":'),
            ]
        )
    ).to_series()


def pair_block(
    flows: pl.DataFrame,
    sf: np.ndarray,
    layout: TrackLayout,
    pool: Pool,
    attrs: pl.Series,
    src_cat: pl.Series,
    markers: tuple[np.ndarray, np.ndarray],
    t0: int,
) -> Block:
    """``s`` and ``f`` lines of the flows in ``sf`` (ids 1, 2, ...) at the marker times (ns) given for them."""
    src = flows.get_column("src").to_numpy()[sf]
    dst = flows.get_column("dst").to_numpy()[sf]
    pid, tid = layout.tracks.get_column("pid").to_numpy(), layout.tracks.get_column("tid").to_numpy()
    ts, td = layout.track_of_event[src], layout.track_of_event[dst]
    sub = (
        flows[sf]
        .with_columns(
            _id=pl.Series(np.arange(1, len(sf) + 1)),
            _ps=pid[ts],
            _ts=tid[ts],
            _pd=pid[td],
            _td=tid[td],
            _a=attrs.gather(sf),
            _cat=src_cat.gather(sf),
        )
        .with_columns(_cat=pl.coalesce("_cat", pl.format('"{}"', "kind")))
    )
    s_base = pool.add(_pair_heads(sub, "s", "_ps", "_ts", []))
    f_base = pool.add(_pair_heads(sub, "f", "_pd", "_td", [pl.lit(',"bp":"e","di_flow":'), pl.col("_a")]))
    k = np.arange(len(sf))
    frag = np.concatenate([s_base + k, f_base + k]).astype(np.int32)[None, :]
    times = (np.concatenate(markers) - t0)[None, :]
    return Block(
        2 * len(sf), [(FRAG, 0), (TIME, 0), (CONST, pool.add(["}"]))], frag, times, np.zeros((0, 2 * len(sf)), np.int64)
    )
