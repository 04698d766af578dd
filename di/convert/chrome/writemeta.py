"""What the Chrome writer writes besides trace events: the M lines and the ``diTrace`` object.

* M lines: ``process_name`` / ``process_sort_index`` of every process that holds
  data, ``thread_name`` / ``thread_sort_index`` of every track that holds events.
* ``diTrace``: what Chrome events cannot carry, read back by
  :mod:`di.convert.chrome.ditrace`: every emitted (pid, tid) with its location and
  lane, the series table, meta, counts, the ``messages`` and ``collectives`` tables
  (columns of values; event references are events rows), ``categories`` (each
  event's canonical category as one letter, only when reading the written ``cat``
  back would not give it) and ``side_tables`` (:mod:`di.convert.side_tables`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert import side_tables
from di.convert.chrome.fragments import json_text
from di.convert.chrome.tracks import TrackLayout
from di.convert.chrome.ditrace import ARGS_ADDED, LOCATION_COLUMNS
from di.convert.chrome.lines import NO_TIME
from di.convert.restore import RECOMPUTED_META
from di.schema import polars_schema
from di.trace import Trace

__all__ = ["di_trace", "metadata_lines"]


def metadata_lines(layout: TrackLayout, counter_pids: set[int]) -> bytes:
    """M lines: names and sort indices of the processes and tracks that hold data."""
    tracks = layout.tracks.filter("used")
    used = set(tracks.get_column("pid").to_list()) | counter_pids
    lines = []
    for p in layout.procs.filter(pl.col("pid").is_in(sorted(used))).iter_rows(named=True):
        lines.append({"ph": "M", "pid": p["pid"], "name": "process_name", "args": {"name": p["process_name"]}})
        lines.append({"ph": "M", "pid": p["pid"], "name": "process_sort_index", "args": {"sort_index": p["pid"]}})
    for t in tracks.select("pid", "tid", "thread_name").iter_rows(named=True):
        lines.append(
            {"ph": "M", "pid": t["pid"], "tid": t["tid"], "name": "thread_name", "args": {"name": t["thread_name"]}}
        )
        lines.append(
            {"ph": "M", "pid": t["pid"], "tid": t["tid"], "name": "thread_sort_index", "args": {"sort_index": t["tid"]}}
        )
    return "".join(",\n" + json_text(line) for line in lines).encode()


def added_keys(ints: np.ndarray, keys: list[str], args_null: np.ndarray) -> str | None:
    """diTrace's ``args_added``: one digit per events row, the keys the writer put in its args (1: correlation,
    2: bytes, plus 4 when the event had no args, whichever keys it got); None when no row got any. ``ints``: the
    values of ``keys`` added (:func:`di.convert.chrome.eventlines.args_columns`)."""
    got = ints != NO_TIME
    flags = np.zeros(ints.shape[1], dtype=np.uint8)
    for row, key in enumerate(keys):
        if key in ("correlation", "bytes"):
            flags |= got[row].astype(np.uint8) << (0 if key == "correlation" else 1)
    any_added = got.any(axis=0)
    if not any_added.any():
        return None
    flags[any_added & args_null] |= 4
    return (flags + np.uint8(ord("0"))).tobytes().decode("ascii")


def di_trace(
    trace: Trace,
    layout: TrackLayout,
    series: list[dict[str, Any]],
    t0: int,
    counts: dict[str, int],
    added: str | None = None,
) -> bytes:
    """The diTrace object: every emitted (pid, tid) with its location and lane, series, meta; ``added``: the
    keys put in each event's args (:func:`added_keys`)."""
    locations = layout.tracks.select(
        "pid",
        "tid",
        "loc",
        "lane",
        "rank",
        pl.col("kind").cast(pl.String),
        "device",
        "stream",
        "name",
        "process",
        "host",
        "src_pid",
        "src_tid",
        "sort_index",
        "source",
    ).to_dicts()
    meta = trace.meta
    di_meta = {**{k: v for k, v in meta.items() if k not in RECOMPUTED_META}, "start_ns": t0}
    tables = {
        name: _columns(getattr(trace, name)) for name in ("messages", "collectives") if getattr(trace, name).height
    }
    cats = _categories(trace.events)
    losses: list[str] = []
    side = side_tables.encode_all(trace, "Chrome JSON", losses=losses)
    if side:
        tables[side_tables.KEY] = side
    extra = [c for c in trace.locations.columns if c not in polars_schema("locations")]
    if extra:  # a connector's own location columns (Nsight's gpu_model): beside the timelines' rows
        tables[LOCATION_COLUMNS] = side_tables.encode(
            trace.locations.select("loc", *extra), "locations", "Chrome JSON", losses
        )
    side_tables.warn_losses(losses)
    return json_text(
        {
            "schema_version": 1,
            "locations": locations,
            "series": series,
            "meta": di_meta,
            **counts,
            **tables,
            **({"categories": cats} if cats else {}),
            **({ARGS_ADDED: added} if added else {}),
        }
    ).encode()


def _columns(table: pl.DataFrame) -> dict[str, list[Any]]:
    """A table as {column: values}, for diTrace (Chrome JSON has no place for messages and collectives)."""
    return {c: table.get_column(c).to_list() for c in table.columns}


def _categories(ev: pl.DataFrame) -> str | None:
    """Each event's canonical ``cat``, one letter per events row ('a' + its index in
    the vocabulary; upper case where the event has no ``src_cat``, as the written
    ``cat`` is then the canonical one), when reading the written ``cat`` (``src_cat``,
    else ``cat``) and name back would give another category or a source category for
    some event; else None."""
    from di.convert.categories import canonical_cats

    if not ev.height:
        return None
    none = ev.get_column("src_cat").is_null().to_numpy()
    written = ev.select(pl.coalesce(pl.col("src_cat").cast(pl.String), pl.col("cat").cast(pl.String))).to_series()
    codes = ev.get_column("cat").to_physical().to_numpy()
    if not none.any() and (canonical_cats(written, ev.get_column("name")).to_physical().to_numpy() == codes).all():
        return None
    return (codes.astype(np.uint8) + np.where(none, ord("A"), ord("a")).astype(np.uint8)).tobytes().decode("ascii")
