"""Which process owns which ranks, and the part of the job one process holds.

Ranks are owned in whole rank groups of the store (:mod:`di.store_partition`):
the groups, in rank order, are split into P consecutive blocks as evenly as
their number allows (16 ranks on 3 processes: 6, 5, 5), so process order is
rank order. A process holds its ranks' rows of every table (an event on its
ranks' timelines, a message it receives or sends, a collective it takes part
in, a flow into its events) and *ghosts*: copies of the few events of other
ranks that its rows reference (the other end of a message, the member of a
collective that entered last, the root, the first non-root; the source of a
flow). With them, the engine's own functions computed on the part give, for
the owned ranks, exactly what they give on the whole job.

Collective aggregates are reduced per instance on a home process (instance
mod P): each process sends its local candidates (its latest member, its
earliest non-root member, the root), the home keeps the job-wide ones and
sends them back to the members' processes: a process never holds all the
members of a collective of many ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.engine.window import Window
from di.parallel.exchange import Exchange
from di.store_partition import PARTITIONED, ROW
from di.trace import Trace, conform

_INT64_MIN, _INT64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max
UNREAD_EVENT_COLUMNS = ("src_cat", "corr", "bytes")
"""Event columns that no analysis reads: a part holds them as nulls (a constant column, no memory per row).
The same-answer tests compare with one process on traces where they are filled."""


@dataclass(frozen=True)
class Part:
    """One process's part of a job.

    Attributes:
        trace: the owned ranks' rows and the ghosts, as a trace (row references are local positions).
        global_row: per local event row, its position in the whole job's ``events`` (int64, sorted).
        own: per local event row, True when its rank is owned (False: a ghost).
        ranks: the ranks this process owns (sorted).
        owner_of_rank: (sorted ranks of the job, owning process of each).
        requests: per process q, the global event rows q holds as ghosts of this process's events.
        ghost_owner: per local event row, the process owning it (this one for owned rows).
    """

    trace: Trace
    global_row: np.ndarray
    own: np.ndarray
    ranks: list[int]
    owner_of_rank: tuple[np.ndarray, np.ndarray]
    requests: list[np.ndarray]
    ghost_owner: np.ndarray

    def local(self, rows: np.ndarray) -> np.ndarray:
        """Local positions of global event rows held here."""
        return np.searchsorted(self.global_row, rows)


def assign_groups(n_groups: int, processes: int) -> list[list[int]]:
    """The rank groups of each process: consecutive blocks, sizes differing by at most one."""
    return [b.tolist() for b in np.array_split(np.arange(n_groups), processes)]


def load_part(
    path: str | Path, ex: Exchange, window: Window, *, load_whole: Any = None, keep_columns: tuple[str, ...] = ()
) -> Part:
    """Read this process's ranks of the store ``path`` and exchange the ghosts (``keep_columns``: of
    :data:`UNREAD_EVENT_COLUMNS`, those to keep in the owned rows all the same).

    Any other input (a store in the single-file form, trace files: then ``load_whole()`` gives the
    trace) is read whole by every process and cut the same way: only the partitioned form spares
    memory and reading.

    Raises:
        FormatError, SchemaVersionError, OSError: this process could not read its part
            (every process raises: see :meth:`Exchange.check`).
    """
    from di.store import read_meta

    error, tables, meta, groups = None, {}, {}, []
    try:
        if load_whole is None:
            meta = read_meta(path)
            tables, groups = _read_owned(Path(path), meta, ex)
        else:
            whole = load_whole()
            meta = dict(whole.meta)
            tables, groups = _cut(whole.tables(), meta, ex)
    except Exception as exc:  # every process must learn of it, whatever it is
        error = exc
    ex.check(error, f"reading {path}")
    tables["events"] = _unread_as_null(tables["events"], keep_columns)
    group_ranks = meta_groups(meta, tables)
    meta = {k: v for k, v in meta.items() if k != "partitions"}
    locs = tables["locations"]
    rank_of_loc = np.zeros(int(locs.get_column("loc").max() or 0) + 1 if locs.height else 1, np.int64)
    rank_of_loc[locs.get_column("loc").to_numpy().astype(np.int64)] = locs.get_column("rank").to_numpy()
    ranks = sorted(r for g in groups[ex.rank] for r in group_ranks[g])
    all_ranks = np.asarray(sorted(int(r) for r in locs.get_column("rank").unique().to_list()), np.int64)
    owner = np.zeros(all_ranks.size, np.int64)
    for p, gs in enumerate(groups):
        for g in gs:
            owner[np.isin(all_ranks, group_ranks[g])] = p
    row_owner = _row_owner(ex, tables["events"], rank_of_loc, all_ranks, owner)
    tables["messages"] = _share_messages(ex, tables["messages"], row_owner)
    E = _clipped_start(meta, window, tables["events"])
    ghosts_coll = _collective_ghosts(ex, tables["collectives"], tables["events"], E, rank_of_loc)
    tables["collectives"] = pl.concat([tables["collectives"], ghosts_coll], how="vertical_relaxed").sort(ROW)
    need = _referenced_rows(tables)
    mine = tables["events"].get_column(ROW).to_numpy()
    need = need[~np.isin(need, mine)]
    who = row_owner(need)
    asked = ex.alltoall([need[who == q] for q in range(ex.size)], "ghost requests")
    requests = [np.zeros(0, np.int64) if a is None else a for a in asked]
    ev = tables["events"]
    held = ev.get_column(ROW).to_numpy()
    replies = ex.alltoall([ev[np.searchsorted(held, r)] for r in requests], "ghost events")
    ghosts = pl.concat([r for r in replies if r is not None and r.height] or [ev.clear()], how="vertical_relaxed")
    parent_dtype = ev.schema["parent"]
    del ev, held
    ghost_from = np.concatenate(
        [np.full(r.height if r is not None else 0, q, np.int64) for q, r in enumerate(replies)] or [np.zeros(0)]
    )
    # the timelines of this part only: per-rank analyses loop over the ranks of ``locations``
    tables["locations"] = locs.filter(
        pl.col("rank").is_in(pl.Series(ranks, dtype=pl.Int64).implode())
        | pl.col("loc").is_in(ghosts.get_column("loc").unique().implode())
    )
    trace, global_row, own, ghost_owner = _build(
        meta,
        tables,
        _unread_as_null(ghosts.with_columns(pl.lit(None, parent_dtype).alias("parent"))),
        ghost_from,
        ex.rank,
    )
    return Part(trace, global_row, own, ranks, (all_ranks, owner), requests, ghost_owner)


def _unread_as_null(events: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    return events.with_columns(pl.lit(None, events.schema[c]).alias(c) for c in UNREAD_EVENT_COLUMNS if c not in keep)


def meta_groups(meta: dict[str, Any], tables: dict[str, pl.DataFrame]) -> list[list[int]]:
    """The store's rank groups (one rank per group for a store in the single-file form)."""
    part = meta.get("partitions")
    if isinstance(part, dict):
        return [list(g) for g in part["groups"]]
    from di.store_partition import rank_groups

    return rank_groups(tables["locations"].get_column("rank").unique().to_list(), 1)


def _read_owned(store: Path, meta: dict[str, Any], ex: Exchange) -> tuple[dict[str, pl.DataFrame], list[list[int]]]:
    from di.store import _read_checked
    from di.store_partition import is_partitioned, read_groups, read_whole, whole_tables

    if is_partitioned(meta):
        groups = assign_groups(len(meta["partitions"]["groups"]), ex.size)
        tables = read_groups(store, meta, groups[ex.rank], _read_checked)
        for name in whole_tables():
            tables[name] = conform(name, read_whole(store, name, _read_checked))
        return tables, groups
    from di.store import read_store

    return _cut(read_store(store).tables(), meta, ex)


def _cut(
    whole: dict[str, pl.DataFrame], meta: dict[str, Any], ex: Exchange
) -> tuple[dict[str, pl.DataFrame], list[list[int]]]:
    """This process's rows of a whole trace's tables (with ``_row``), and the groups of every process."""
    from di.store_partition import home_ranks

    rank_list = meta_groups(meta, whole)
    groups = assign_groups(len(rank_list), ex.size)
    mine = np.asarray([r for g in groups[ex.rank] for r in rank_list[g]], np.int64)
    from di.store_partition import whole_tables

    tables = {n: whole[n] for n in whole_tables()}
    for name, home in home_ranks(whole).items():
        df = whole[name].with_columns(pl.int_range(whole[name].height, dtype=pl.Int64).alias(ROW))
        tables[name] = df.filter(pl.Series(np.isin(home, mine)))
    assert set(tables) >= set(PARTITIONED)
    return tables, groups


def _row_owner(ex: Exchange, ev: pl.DataFrame, rank_of_loc: np.ndarray, ranks: np.ndarray, owner: np.ndarray) -> Any:
    """A function: global event rows -> owning process, from each loc's first row (gathered: O(timelines))."""
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    row = ev.get_column(ROW).to_numpy()
    first = pl.DataFrame({"loc": loc, "row": row}).group_by("loc").agg(pl.col("row").min())
    every = pl.concat(ex.allgather(first, "timeline rows")).sort("row")
    starts = every.get_column("row").to_numpy()
    locs = every.get_column("loc").to_numpy().astype(np.int64)

    def of(rows: np.ndarray) -> np.ndarray:
        if not rows.size:
            return np.zeros(0, np.int64)
        at = np.maximum(np.searchsorted(starts, rows, side="right") - 1, 0)
        return owner[np.searchsorted(ranks, rank_of_loc[locs[at]])]

    return of


def _share_messages(ex: Exchange, m: pl.DataFrame, row_owner: Any) -> pl.DataFrame:
    """Each message held by its receiver's process is sent to its sender's process too (endpoints only once each)."""
    to = row_owner(m.get_column("send").to_numpy())
    out = [m.filter(pl.Series(to == q)) if q != ex.rank else None for q in range(ex.size)]
    got = ex.alltoall(out, "messages")
    return pl.concat([m, *[g for g in got if g is not None]], how="vertical_relaxed").unique(ROW).sort(ROW)


def _clipped_start(meta: dict[str, Any], window: Window, ev: pl.DataFrame) -> pl.Series:
    """Start of each held event as the analyses see it (clipped to a time window, as di.engine.window does)."""
    start = ev.get_column("start_ns")
    if window.t0_ns is None and window.t1_ns is None:
        return start
    base = int(meta.get("time_range", {}).get("start_ns") or 0)
    lo = _INT64_MIN if window.t0_ns is None else base + window.t0_ns
    hi = _INT64_MAX if window.t1_ns is None else base + window.t1_ns
    return pl.Series("start_ns", np.clip(start.to_numpy(), lo, hi))


def _collective_ghosts(
    ex: Exchange, c: pl.DataFrame, ev: pl.DataFrame, E: pl.Series, rank_of_loc: np.ndarray
) -> pl.DataFrame:
    """The collective rows of other processes that decide this process's members' waits and edges: per instance
    the last member to enter (by enter time, then rank), the root and the first non-root to enter."""
    pos = np.searchsorted(ev.get_column(ROW).to_numpy(), c.get_column("event").to_numpy())
    cand = c.with_columns(
        pl.Series("_E", E.to_numpy()[pos] if pos.size else np.zeros(0, np.int64), pl.Int64),
        pl.Series("_rank", rank_of_loc[ev.get_column("loc").to_numpy()[pos].astype(np.int64)], pl.Int32),
    ).filter(pl.col("instance").is_not_null() & ~pl.col("op").is_in(["send", "recv"]))
    local = _winners(cand)
    home = (local.get_column("instance").to_numpy() % ex.size) if local.height else np.zeros(0, np.int64)
    got = ex.alltoall([local.filter(pl.Series(home == q)) for q in range(ex.size)], "collective candidates")
    senders = [(q, g) for q, g in enumerate(got) if g is not None and g.height]
    if senders:
        won = _winners(pl.concat([g for _, g in senders], how="vertical_relaxed"))
        back = [
            won.join(g.select("instance").unique(), on="instance", how="semi") if g is not None else None for g in got
        ]
    else:
        back = [None] * ex.size
    answers = ex.alltoall(back, "collective aggregates")
    mine = set(c.get_column(ROW).to_list())
    rows = [a for a in answers if a is not None and a.height]
    if not rows:
        return c.clear()
    won = pl.concat(rows, how="vertical_relaxed").unique(ROW)
    return won.filter(~pl.col(ROW).is_in(pl.Series(list(mine), dtype=pl.Int64).implode())).drop("_E", "_rank")


def _winners(c: pl.DataFrame) -> pl.DataFrame:
    """Per instance: the member entering last (ties: higher rank), the root members, the non-root entering first."""
    if not c.height:
        return c
    by = c.sort("_E", "_rank")
    last = by.group_by("instance").agg(pl.col(ROW).last())
    first = by.filter(pl.col("_rank") != pl.col("root")).group_by("instance").agg(pl.col(ROW).first())
    root = c.filter(pl.col("_rank") == pl.col("root")).select("instance", ROW)
    keep = pl.concat([last, first, root]).get_column(ROW).unique()
    return c.filter(pl.col(ROW).is_in(keep.implode()))


def _referenced_rows(tables: dict[str, pl.DataFrame]) -> np.ndarray:
    """Every event row the held messages, collectives and flows reference."""
    cols = [
        tables["messages"].select(pl.concat_list("send", "recv", "send_done", "recv_post").explode()).to_series(),
        tables["collectives"].get_column("event"),
        tables["flows"].get_column("src"),
        tables["flows"].get_column("dst"),
    ]
    return np.unique(pl.concat([s.cast(pl.Int64).drop_nulls() for s in cols]).to_numpy())


def _build(
    meta: dict[str, Any], tables: dict[str, pl.DataFrame], ghosts: pl.DataFrame, ghost_from: np.ndarray, me: int
) -> tuple[Trace, np.ndarray, np.ndarray, np.ndarray]:
    # the caller's events are handed over (popped), so the one copy below, merging the ghosts in, is the only one
    own_ev = tables.pop("events")
    src = np.concatenate([np.full(own_ev.height, me, np.int64), ghost_from.astype(np.int64)])
    rows = np.concatenate([own_ev.get_column(ROW).to_numpy(), ghosts.get_column(ROW).to_numpy()])
    order = np.argsort(rows, kind="stable")
    del rows
    events = pl.concat([own_ev, ghosts], how="vertical_relaxed", rechunk=False)
    del own_ev, ghosts
    events = events[order]
    src = src[order]
    global_row = events.get_column(ROW).to_numpy().astype(np.int64)
    own = src == me

    def local(col: pl.Series) -> pl.Series:
        idx = np.searchsorted(global_row, col.fill_null(0).to_numpy().astype(np.int64))
        return pl.Series(col.name, idx, pl.Int64).zip_with(
            col.is_not_null(), pl.Series([None] * col.len(), dtype=pl.Int64)
        )

    def remap(df: pl.DataFrame, cols: tuple[str, ...]) -> pl.DataFrame:
        return df.with_columns([local(df.get_column(c)).cast(df.schema[c]) for c in cols]).drop(ROW)

    parent = events.get_column("parent")
    events = events.with_columns(local(parent).cast(parent.dtype)).drop(ROW)
    built = {
        "locations": tables["locations"],
        "events": events,
        "messages": remap(tables["messages"], ("send", "recv", "send_done", "recv_post")),
        "collectives": remap(tables["collectives"], ("event",)),
        "flows": remap(tables["flows"], ("src", "dst")),
        "series": tables["series"],
        "samples": tables["samples"].drop(ROW),
        # whole in every part (small: per communicator and channel)
        **{name: tables[name] for name in ("comms", "comm_links") if name in tables},
    }
    trace = Trace(**{n: conform(n, df) for n, df in built.items()}, meta=meta)
    return trace, global_row, own, src
