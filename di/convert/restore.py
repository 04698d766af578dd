"""Restoring what di wrote beside the events of a trace it wrote, once, after any format's reading.

di's writers store what a format's events cannot say in one document of their
own (Chrome: the top-level ``diTrace`` key, :mod:`di.convert.chrome.ditrace`;
Perfetto: di's packet, :mod:`di.convert.perfetto.ditrace`). Each format's module
checks its document and gives a :class:`Written`: the meta fields to restore,
each written event row's canonical category, and the messages and collectives
tables whose event references are *written rows* (the k-th event di wrote is
row k). The reader reads the file as it reads any producer's, knowing for each
loaded event its written row; then :func:`restore` puts the categories and the
tables back on the loaded events, and :func:`restore_meta` the meta.

What cannot wait until after the reading stays in the format's module, as one
named hook each, because the reading itself depends on it:

- the clock origin (Chrome ``base_ns``, Perfetto ``offset_ns``): every timestamp
  is converted with it;
- the location of each written timeline (Chrome ``remap_keys``/``locations``,
  Perfetto ``layout``): events are sorted and nested per location, and di's
  writer spreads one location over several lanes (tids, tracks);
- the series of each counter track (Chrome ``series_map``, Perfetto ``layout``):
  samples are grouped by series as they are read;
- Perfetto's flows and messages, whose ends are the flow ids' marks on events.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from di.convert.provenance import ROW_OF_UNLOADED_EVENT

WRITTEN_ROW_REFS = {"messages": ("send", "recv"), "collectives": ("event",)}
"""The columns of the restored tables that hold event rows (written rows until :func:`restore`)."""

ROWS_UNKNOWN = "rows (the trace is incomplete: their event rows are unknown)"
"""Drop reason of a table whose written rows cannot be matched to loaded events."""


@dataclass
class Written:
    """What di wrote beside the events of one file, checked by the format's module.

    ``meta``: meta.json fields to restore (valid ones only); with ``replaces_meta``, the
    whole meta of the trace written, which replaces the reader's (but for its warnings,
    which follow those di wrote), else fields that override the reader's. ``categories``: the
    canonical category (index in ``di.trace.CATS``) of each written event row, or
    None; ``no_source_category``: whether each written event row had no ``src_cat`` (the
    format wrote its canonical one in its place), or None. ``tables``: messages and
    collectives with event references as written rows.
    """

    meta: dict[str, Any] = field(default_factory=dict)
    categories: np.ndarray | None = None
    no_source_category: np.ndarray | None = None
    args_added: np.ndarray | None = None
    """By written event row: the keys the format's writer put in its args (1: correlation, 2: bytes, + 4: the event
    had no args), or None."""
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    replaces_meta: bool = False
    side_tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    """comms, comm_links, io_files as di wrote them (:mod:`di.convert.side_tables`): no event references."""


RECOMPUTED_META = ("format", "schema_version", "di_version", "tables", "ranks", "time_range", "partitions")
"""meta.json fields that the tables (:meth:`di.trace.Trace.build`) or a store's layout give: never restored."""


def written_meta(meta: Any, warnings: list[str], what: str, *, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of a trace's meta stored in a file di wrote that reading restores: all but
    :data:`RECOMPUTED_META` and ``drop`` (a format's own keys). Those meta.json's schema defines only when they
    match it, each that does not said in ``warnings`` (``what`` names where the meta was stored); the others
    (a recording's ``capture``, a combined job's ``combine``) as they are."""
    from di.schema import json_schema, valid_meta_fields

    if not isinstance(meta, dict):
        warnings.append(f"{what} ignored: not an object")
        return {}
    known = json_schema("meta")["properties"]
    keys = [k for k in meta if k not in RECOMPUTED_META and k not in drop]
    out = valid_meta_fields(meta, tuple(k for k in keys if k in known), warnings, what)
    return {**out, **{k: meta[k] for k in keys if k not in known}}


def loaded_rows(written: np.ndarray, n_written: int) -> np.ndarray:
    """By written row (``n_written`` of them): the loaded event row that holds it, -1 for none.

    ``written``: the written row of each loaded event, -1 for an event di did not write."""
    at = np.full(n_written, -1, dtype=np.int64)
    ok = written >= 0
    at[written[ok]] = np.flatnonzero(ok)
    return at


def restore(
    events: pl.DataFrame, flows: pl.DataFrame, written: Written | None, at: np.ndarray | None, dropped: Counter[str]
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, pl.DataFrame]]:
    """``events`` with the categories di wrote; ``flows`` without the arrows di draws for messages
    (kind ``message``: the messages table is what di wrote); the tables di wrote with event
    references turned into rows of ``events``. No ``written``: events and flows as they are.

    ``at``: the loaded row of each written row (:func:`loaded_rows`); None when the
    written rows cannot be matched (every table is then dropped and counted). A table
    row whose event was not loaded is dropped and counted in ``dropped``."""
    if written is None:
        return events, flows, {}
    flows = flows.filter(pl.col("kind") != "message")
    if at is None:
        for name, table in written.tables.items():
            if table.height:
                dropped[f"{name} {ROWS_UNKNOWN}"] += table.height
        return events, flows, {}
    if written.categories is not None:
        events = _categories(events, written.categories, at)
    if written.no_source_category is not None:
        events = _no_source_category(events, written.no_source_category, at)
    if written.args_added is not None:
        events = _without_added_keys(events, written.args_added, at)
    out = {}
    for name, table in written.tables.items():
        rows = {
            c: _rows_of(table.get_column(c).cast(pl.Int64, strict=False).fill_null(-1).to_numpy(), at)
            for c in WRITTEN_ROW_REFS[name]
        }
        keep = np.logical_and.reduce([r >= 0 for r in rows.values()])
        if not keep.all():
            dropped[f"{name} {ROW_OF_UNLOADED_EVENT}"] += int((~keep).sum())
        out[name] = table.with_columns(pl.Series(c, r) for c, r in rows.items()).filter(pl.Series(keep))
    return events, flows, out


def restore_meta(meta: dict[str, Any], written: Written | None) -> dict[str, Any]:
    """The reader's ``meta`` with the fields di wrote in their place (see :class:`Written`); warnings di
    wrote come first. The sources di wrote (the files the trace came from) replace the reader's, but the
    file just read stays last among them when reading it dropped something, with what it dropped."""
    if written is None:
        return meta
    read = [s for s in meta.get("sources", []) if isinstance(s, dict) and s.get("dropped")]
    if written.replaces_meta:
        meta = {"warnings": meta.get("warnings", [])}
    out = {**meta, **written.meta}
    if "warnings" in written.meta:
        del out["warnings"]
        out["warnings"] = [*written.meta["warnings"], *meta.get("warnings", [])]
    if read and "sources" in written.meta:
        out["sources"] = [*written.meta["sources"], *read]
    return out


def _categories(events: pl.DataFrame, codes: np.ndarray, at: np.ndarray) -> pl.DataFrame:
    """``events`` whose rows di wrote take the category di wrote for them."""
    from di.trace import CATS

    loaded = at >= 0
    cat = events.get_column("cat").to_physical().to_numpy().astype(np.int64)
    cat[at[loaded]] = codes[loaded]
    return events.with_columns(pl.Series("cat", list(CATS), dtype=pl.Enum(list(CATS))).gather(cat))


def _no_source_category(events: pl.DataFrame, flags: np.ndarray, at: np.ndarray) -> pl.DataFrame:
    """``events`` whose rows di wrote without a source category have none again."""
    rows = at[flags & (at >= 0)]
    if not rows.size:
        return events
    none = np.zeros(events.height, dtype=bool)
    none[rows] = True
    return events.with_columns(pl.when(pl.Series(none)).then(None).otherwise(pl.col("src_cat")).alias("src_cat"))


_ADDED_PREFIX = {1: r'^\{"correlation":-?\d+,?', 2: r'^\{"bytes":-?\d+,?', 3: r'^\{"correlation":-?\d+,"bytes":-?\d+,?'}
"""The start of an args text whose writer put these keys first (:data:`Written.args_added` & 3)."""


def _without_added_keys(events: pl.DataFrame, flags: np.ndarray, at: np.ndarray) -> pl.DataFrame:
    """``events`` whose args di's writer gave keys of their own have their args as before: the keys taken out,
    null again where there were none."""
    per_row = np.zeros(events.height, dtype=np.uint8)
    ok = at >= 0
    per_row[at[ok]] = flags[ok]
    rows = np.flatnonzero(per_row)
    if not rows.size:
        return events
    got = events.get_column("args").gather(rows)
    kind = pl.Series(per_row[rows])
    fixed = pl.select(
        pl.when(kind >= 4)
        .then(None)
        .when(kind == 1)
        .then(got.str.replace(_ADDED_PREFIX[1], "{"))
        .when(kind == 2)
        .then(got.str.replace(_ADDED_PREFIX[2], "{"))
        .otherwise(got.str.replace(_ADDED_PREFIX[3], "{"))
    ).to_series()
    return events.with_columns(events.get_column("args").scatter(rows, fixed))


def _rows_of(written: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The loaded row of each written row (``at``: by written row), -1 for none."""
    out = np.full(written.size, -1, dtype=np.int64)
    valid = (written >= 0) & (written < at.size)
    out[valid] = at[written[valid]]
    return out
