"""The OTF2 writer's output locations: one per (loc, lane), plus a metric location where a series needs one.

A trace location becomes one OTF2 location per lane of its events (lane 0 keeps
its name, lane k is ``NAME lane k``). The samples of a series go to the
location's lane 0 when it holds no events, else to a location of their own
(lane -1, ``NAME metrics``). Each location is in the location group of its
rank (ranks in order, each with its host, ``unknown host`` when none is known);
a rank's location is its first CPU thread, else its first location.
"""

from __future__ import annotations

import polars as pl

from di.convert.otf2.stringtable import Strings
from di.trace import Trace

__all__ = ["plan_locations"]


def plan_locations(
    trace: Trace, pairs: pl.DataFrame, strings: Strings
) -> tuple[pl.DataFrame, list[str], list[tuple[int, int]], list[int]]:
    """Output locations, one per (loc, lane) in that order, with ``metric`` (the lane -1 or the counter
    timeline that holds a series' samples), their group, plus hosts, groups and the rank locations.
    ``pairs``: the distinct (loc, lane) of the events."""
    locs = trace.locations
    keys = _location_keys(locs, pairs, trace.series["loc"].unique())
    ranks, hosts, groups = _rank_groups(locs)
    out = _named_locations(keys, locs, ranks)
    for s in ["di", "machine", "node", *hosts, *(f"MPI Rank {r}" for r in ranks)]:
        strings.ref(s)
    strings.add_many(out["out_name"])
    first = out.sort(pl.col("kind") != "cpu_thread", "ref").group_by("group", maintain_order=True).first().sort("group")
    return out, hosts, groups, first["ref"].to_list()


def _location_keys(locs: pl.DataFrame, with_events: pl.DataFrame, series_locs: pl.Series) -> pl.DataFrame:
    """Every (loc, lane) to write, sorted, with ``metric`` true on those that hold a series' samples (else null)."""
    busy = set(with_events["loc"].to_list())
    metric = pl.DataFrame(
        {"loc": series_locs, "lane": [-1 if int(x) in busy else 0 for x in series_locs.to_list()]},
        schema={"loc": pl.UInt32, "lane": pl.Int64},
    )
    return (
        pl.concat(
            [
                locs.select("loc", pl.lit(0, pl.Int64).alias("lane")),
                with_events.with_columns(pl.col("loc").cast(pl.UInt32)),
                metric,
            ]
        )
        .unique()
        .sort("loc", "lane")
        .join(metric.with_columns(pl.lit(True).alias("metric")), on=["loc", "lane"], how="left")
    )


def _rank_groups(locs: pl.DataFrame) -> tuple[list[int], list[str], list[tuple[int, int]]]:
    """The ranks in order, the hosts in order, and (rank, index of its host) per rank (its first location's host)."""
    ranks = sorted(locs["rank"].unique().to_list())
    host_of = {}
    for r, h in locs.select("rank", "host").iter_rows():
        host_of.setdefault(r, h or "unknown host")
    hosts = sorted(set(host_of.values()))
    groups = [(r, hosts.index(host_of[r])) for r in ranks]
    return ranks, hosts, groups


def _named_locations(keys: pl.DataFrame, locs: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """``keys`` with their ``group`` (position of the rank), ``out_name``, ``out_kind`` and ``ref`` (row index)."""
    base = pl.col("name").fill_null(pl.format("{} {}", pl.col("kind").cast(pl.String), "loc"))
    return (
        keys.join(locs.select("loc", "rank", "kind", "name", "tid"), on="loc", how="left")
        .with_columns(
            pl.col("metric").fill_null(False),
            pl.col("rank").replace_strict({r: i for i, r in enumerate(ranks)}, return_dtype=pl.Int64).alias("group"),
            pl.when(pl.col("lane") > 0)
            .then(pl.format("{} lane {}", base, "lane"))
            .when(pl.col("lane") < 0)
            .then(pl.format("{} metrics", base))
            .otherwise(base)
            .alias("out_name"),
        )
        .with_columns(
            pl.when(pl.col("metric"))
            .then(pl.lit("counter"))
            .otherwise(pl.col("kind").cast(pl.String))
            .replace("counter", "cpu_thread")
            .alias("out_kind")
        )
        .with_columns(pl.when(pl.col("metric")).then(pl.lit("counter")).otherwise(pl.col("out_kind")).alias("out_kind"))
        .with_row_index("ref")
    )
