"""The rank-partitioned form of a ``.di`` store: one process of a parallel run reads only its ranks' bytes.

Layout (``meta.json`` member ``partitions``, documented in ``schemas/trace/v1/meta.schema.json``)::

    NAME.di/
      meta.json                 as a single-file store's, plus "partitions"
      locations.parquet         whole: one row per timeline (every process reads it)
      series.parquet            whole: one row per counter series
      events/g00000.parquet     the rows of rank group 0, each with its position in the table (``_row``)
      events/g00001.parquet     ...
      messages/g00000.parquet   (and collectives/, flows/, samples/ likewise)

A rank group is a set of ranks (``partitions.groups``); each row of a partitioned
table lives in the file of its *home* rank's group: an event on its timeline's rank,
a message on its receiver's, a collective row on its member's, a flow on its
target's, a sample on its series' timeline's rank. ``_row`` (Int64) is the row's
position in the table of the single-file store, so :func:`read_tables` gives tables
equal to those of the single-file store, row for row, and a process that owns some
ranks (:func:`read_groups`) knows the global row of everything it read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.errors import FormatError

PARTITIONED = ("events", "messages", "collectives", "flows", "samples")
"""Tables split by rank group; the others (:func:`whole_tables`: locations, series, comms, comm_links) stay whole."""
ROW = "_row"
"""Column of a partition file: the row's position in the whole table (Int64)."""
MAX_GROUPS = 4096
"""The most rank groups a store is split into (ranks are grouped when a job has more): files per table."""


def whole_tables() -> list[str]:
    """The tables a partitioned store keeps whole, one file each (small: per timeline, series or communicator)."""
    from di import schema

    return [name for name in schema.TABLES if name not in PARTITIONED]


def read_whole(store: Path, name: str, read: Any) -> pl.DataFrame | None:
    """One whole table of a partitioned store; None for an optional table the store does not have."""
    from di.store import OPTIONAL_TABLES

    file = store / f"{name}.parquet"
    if not file.is_file():
        if name in OPTIONAL_TABLES:
            return None
        raise FormatError(store, f"table file {file.name} is missing")
    return read(file)


def group_file(store: Path, table: str, group: int) -> Path:
    """The Parquet file of one table's rows of one rank group."""
    return store / table / f"g{group:05d}.parquet"


def rank_groups(ranks: list[int], ranks_per_group: int | None = None) -> list[list[int]]:
    """Consecutive groups of the sorted ``ranks``: ``ranks_per_group`` each (default: one rank per
    group, or as many as keep the groups at most :data:`MAX_GROUPS`)."""
    ranks = sorted(ranks)
    size = ranks_per_group or max(1, -(-len(ranks) // MAX_GROUPS))
    return [ranks[i : i + size] for i in range(0, len(ranks), size)]


def home_ranks(tables: dict[str, pl.DataFrame]) -> dict[str, np.ndarray]:
    """Per partitioned table, the home rank of each row (int64; see the module docstring)."""
    loc = tables["locations"]
    n_loc = int(loc.get_column("loc").max() or 0) + 1 if loc.height else 1
    rank_of_loc = np.zeros(n_loc, np.int64)
    rank_of_loc[loc.get_column("loc").to_numpy().astype(np.int64)] = loc.get_column("rank").to_numpy()
    ev_rank = rank_of_loc[tables["events"].get_column("loc").to_numpy().astype(np.int64)]
    series = tables["series"]
    rank_of_series = np.zeros(int(series.get_column("series").max() or 0) + 1 if series.height else 1, np.int64)
    if series.height:
        rank_of_series[series.get_column("series").to_numpy().astype(np.int64)] = rank_of_loc[
            series.get_column("loc").fill_null(0).to_numpy().astype(np.int64)
        ]
    return {
        "events": ev_rank,
        "messages": ev_rank[tables["messages"].get_column("recv").to_numpy()],
        "collectives": ev_rank[tables["collectives"].get_column("event").to_numpy()],
        "flows": ev_rank[tables["flows"].get_column("dst").to_numpy()],
        "samples": rank_of_series[tables["samples"].get_column("series").to_numpy().astype(np.int64)],
    }


def write_tables(
    tables: dict[str, pl.DataFrame], folder: Path, write: Any, *, ranks_per_group: int | None = None
) -> dict[str, Any]:
    """Write ``tables`` (a trace's, by name) into ``folder`` in the partitioned form.

    Args:
        write: ``write(name, df, file)`` writes the rows ``df`` of the table ``name`` as one Parquet file (the store's
            writer, with its compression).
        ranks_per_group: see :func:`rank_groups`.

    Returns:
        The ``partitions`` member of meta.json.
    """
    groups = rank_groups(tables["locations"].get_column("rank").unique().to_list(), ranks_per_group)
    for name in PARTITIONED:
        (folder / name).mkdir()
    rows = write_rows(tables, home_ranks(tables), folder, write, groups, dict.fromkeys(PARTITIONED, 0))
    for name in whole_tables():
        if name in tables:
            write(name, tables[name], folder / f"{name}.parquet")
    return {"layout": "rank_groups", "groups": groups, "rows": rows}


def write_rows(
    tables: dict[str, pl.DataFrame],
    homes: dict[str, np.ndarray],
    folder: Path,
    write: Any,
    groups: list[list[int]],
    first_row: dict[str, int],
) -> dict[str, list[int]]:
    """Write the partitioned tables' rows into their groups' files (the table folders exist).

    Args:
        homes: per table, the home rank of each row (:func:`home_ranks`).
        first_row: per table, the ``_row`` of the first row given (a part of a job written by several processes).

    Returns:
        Per table, the rows written per group.
    """
    group_of = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    sorted_ranks = np.asarray([r for g in groups for r in g], np.int64)
    rows: dict[str, list[int]] = {}
    for name in PARTITIONED:
        df, home = tables[name], homes[name]
        at = np.clip(np.searchsorted(sorted_ranks, home), 0, max(sorted_ranks.size - 1, 0))
        group = group_of[at] if home.size else np.zeros(0, np.int64)
        counts = np.bincount(group, minlength=len(groups)) if group.size else np.zeros(len(groups), np.int64)
        rows[name] = counts.tolist()
        index = pl.int_range(first_row[name], first_row[name] + df.height, dtype=pl.Int64).alias(ROW)
        framed = df.with_columns(index, pl.Series("_group", group))
        for (g,), part in framed.partition_by("_group", as_dict=True, maintain_order=True).items():
            write(name, part.drop("_group"), group_file(folder, name, int(g)))
    return rows


def is_partitioned(meta: dict[str, Any]) -> bool:
    """True for the meta.json of a store in the partitioned form."""
    return isinstance(meta.get("partitions"), dict)


def _manifest(store: Path, meta: dict[str, Any]) -> tuple[list[list[int]], dict[str, list[int]]]:
    part = meta["partitions"]
    groups, rows = part.get("groups"), part.get("rows")
    if (
        not isinstance(groups, list)
        or not isinstance(rows, dict)
        or any(not isinstance(rows.get(t), list) or len(rows[t]) != len(groups) for t in PARTITIONED)
    ):
        raise FormatError(
            store / "meta.json", "'partitions' needs 'groups' and, per partitioned table, 'rows' per group"
        )
    return groups, rows


def table_files(store: Path, meta: dict[str, Any], table: str, groups: list[int] | None = None) -> list[Path]:
    """The files of ``table`` holding rows (of ``groups`` only, when given), in group order."""
    all_groups, rows = _manifest(store, meta)
    wanted = range(len(all_groups)) if groups is None else sorted(groups)
    files = [group_file(store, table, g) for g in wanted if rows[table][g]]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise FormatError(store, f"table file {missing[0].relative_to(store)} is missing")
    return files


def read_groups(store: Path, meta: dict[str, Any], groups: list[int], read: Any) -> dict[str, pl.DataFrame]:
    """The partitioned tables' rows of some rank groups (each with ``_row``, in ``_row`` order), read with
    ``read(files)`` (a table's files, in group order, into one frame); nothing of the other groups is read. Empty
    tables have the schema's columns and ``_row``."""
    from di.trace import conform

    out = {}
    for name in PARTITIONED:
        files = table_files(store, meta, name, groups)
        if files:
            # one read of all a table's files (polars reads them side by side: a 512-rank store's 2,054 files read
            # one by one took 1.7 CPU-s); one copy when the rows of several groups interleave
            df = read(files)
            df = conform(name, df.drop(ROW)).with_columns(df.get_column(ROW).cast(pl.Int64))
            row = df.get_column(ROW).to_numpy()
            out[name] = df.rechunk() if bool((row[1:] >= row[:-1]).all()) else df.sort(ROW)
            del df, row
        else:
            out[name] = conform(name, None).with_columns(pl.Series(ROW, [], pl.Int64))
    return out


def read_tables(store: Path, meta: dict[str, Any], read: Any) -> dict[str, pl.DataFrame]:
    """Every table of a partitioned store, equal to the single-file store's (``_row`` order, ``_row`` dropped)."""
    groups, _ = _manifest(store, meta)
    tables = {name: df.drop(ROW) for name, df in read_groups(store, meta, list(range(len(groups))), read).items()}
    for name in whole_tables():
        if (df := read_whole(store, name, read)) is not None:
            tables[name] = df
    return tables


def scan_tables(store: Path, meta: dict[str, Any]) -> dict[str, pl.LazyFrame]:
    """Lazy frames over a partitioned store's tables, in the single-file store's row order."""
    from di import schema
    from di.store import OPTIONAL_TABLES

    out = {}
    for name in schema.TABLES:
        if name in PARTITIONED:
            files = table_files(store, meta, name)
            out[name] = (
                pl.scan_parquet(files).sort(ROW).drop(ROW) if files else pl.LazyFrame(schema=schema.polars_schema(name))
            )
        elif (store / f"{name}.parquet").is_file() or name not in OPTIONAL_TABLES:
            out[name] = pl.scan_parquet(store / f"{name}.parquet")
        else:
            out[name] = pl.LazyFrame(schema=schema.polars_schema(name))
    return out


def uncompressed_files(store: Path, meta: dict[str, Any]) -> list[Path]:
    """Every table file of a partitioned store (for the input size check)."""
    files = [f for name in PARTITIONED for f in table_files(store, meta, name)]
    return files + [store / "locations.parquet", store / "series.parquet"]
