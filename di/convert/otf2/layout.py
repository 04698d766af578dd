"""Plan of an OTF2 archive for a Trace: locations, definitions, and the arrays :mod:`emit` writes.

Everything here is vectorised (numpy / polars) except loops over
definitions (ranks, hosts, communicators, series), which are few; regions,
which may be as many as the distinct event names, are a table
(:mod:`~di.convert.otf2.regions`).
See :mod:`di.convert.otf2.writer` for the layout's definitions.

:func:`plan` takes its steps in the order that numbers the strings (a string's
ref is its place in the table): attributes, locations
(:mod:`~di.convert.otf2.outlocations`), regions (:mod:`~di.convert.otf2.regions`),
communicators (:mod:`~di.convert.otf2.communicators`), I/O
(:mod:`~di.convert.otf2.iolayout`), MPI records (:mod:`~di.convert.otf2.attachments`),
args texts, metrics (:mod:`~di.convert.otf2.metricplan`), I/O file properties, and
last the flow lists (:mod:`~di.convert.otf2.flowrefs`); the table itself is
:mod:`~di.convert.otf2.stringtable`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from di import schema
from di.convert.columns import filled_or_empty, run_starts, with_values
from di.convert.intcolumns import int_columns
from di.convert.lanes import assign_lanes
from di.convert.otf2 import clib, emit
from di.convert.otf2.attachments import plan_attachments
from di.convert.otf2.ditrace import document as own_document
from di.convert.otf2.communicators import DEFAULT_COMM, GROUP_NAME_PREFIX, NULL_COMM, LocalRanks, plan_comms
from di.convert.otf2.flowrefs import plan_flows_in
from di.convert.otf2.iofiles import IoFileProperties, plan_io_files
from di.convert.otf2.iolayout import IoDefs, plan_io
from di.convert.otf2.metricplan import plan_metrics
from di.convert.otf2.outlocations import plan_locations
from di.convert.otf2.regions import plan_regions
from di.convert.otf2.rowids import key_ids
from di.convert.otf2.sideprops import side_document
from di.convert.otf2.stringtable import DISTINCT_SAMPLE, MOSTLY_DISTINCT, Strings, TextColumn, mostly_distinct
from di.convert.side_tables import warn_losses
from di.trace import Trace

__all__ = [
    "ATTRIBUTES",
    "DEFAULT_COMM",
    "DISTINCT_SAMPLE",
    "GROUP_NAME_PREFIX",
    "ID_COLUMNS",
    "MOSTLY_DISTINCT",
    "NULL_COMM",
    "Layout",
    "Strings",
    "TextColumn",
    "mostly_distinct",
    "plan",
]

ATTRIBUTES = (
    ("di.bytes", "UINT64"),
    ("di.corr", "INT64"),
    ("di.args", "STRING"),
    ("di.dtype", "STRING"),
    ("di.op", "STRING"),
    ("di.group_size", "INT64"),
    ("di.group_ranks", "STRING"),
    ("di.flows_in", "STRING"),
    ("di.io", "UINT64"),
)
"""Attributes di writes (refs in this order): the first three and ``di.flows_in`` on Enter records, ``di.io`` on
I/O operation records (:mod:`iolayout`), the others on MpiCollectiveEnd (the ``collectives`` columns OTF2 has no
field for, or whose OTF2 field is coarser). The INT64 attributes of :data:`ID_COLUMNS` other than ``corr`` follow,
those of the columns a trace has values in only (:func:`id_attributes`)."""

ID_COLUMNS = ("corr",) + tuple(c for c, _ in schema.optional_args_keys())
"""The integer event columns written as INT64 attributes ``di.<column>`` on Enter, where not null: ``corr``, then
the optional columns holding args members (Kineto's ids, ``ext_id`` ...; :func:`di.schema.args_keys`)."""


@dataclass
class Layout:
    """What the writer writes; see the writer module for the meaning."""

    strings: Strings
    hosts: list[str]
    groups: list[tuple[int, int]]
    out_locations: list[dict[str, Any]]
    rank_locations: list[int]
    regions: np.ndarray
    """int64, one column per region, rows :data:`~di.convert.otf2.regions.REGION_FIELDS`."""
    comms: list[dict[str, Any]]
    metric_members: list[dict[str, Any]]
    global_offset: int
    trace_length: int
    realtime: int
    description: str = ""
    attributes: tuple[tuple[str, str], ...] = ATTRIBUTES
    attr_refs: np.ndarray = field(default_factory=lambda: np.arange(len(ATTRIBUTES), dtype=np.int64))
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    io: IoDefs = field(default_factory=IoDefs)
    io_file_props: IoFileProperties = field(default_factory=IoFileProperties)
    side_text: str = ""
    """comms and comm_links for the archive property (:mod:`di.convert.otf2.sideprops`)."""
    own_text: str = ""
    """meta, locations and the loc of each output location for di's own property (:mod:`di.convert.otf2.ditrace`)."""

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None


def _clock(trace: Trace) -> tuple[int, int, int, int]:
    """(shift added to every ns, global offset, trace length, realtime timestamp) in ns ticks."""
    times = [
        trace.events["start_ns"].min(),
        trace.events["end_ns"].max(),
        trace.samples["ts_ns"].min(),
        trace.samples["ts_ns"].max(),
    ]
    known = [int(t) for t in times if t is not None]
    lo, hi = (min(known), max(known)) if known else (0, 0)
    if trace.meta.get("clock", {}).get("domain") == "unix_epoch" and lo >= 0:
        return 0, lo, hi - lo, lo
    shift = max(0, -lo)
    return shift, shift, hi - lo, clib.UNDEFINED_UINT64


@dataclass(frozen=True)
class _Placement:
    """Where the event rows go: their output locations and the order :func:`emit.emit_events` walks them in."""

    order: np.ndarray
    """Event rows in emission order (grouped by output location); empty: the rows' own order."""
    counts: np.ndarray
    """Events per output location."""
    bounds: np.ndarray
    """Each output location's first position in the emission order (len + 1)."""
    out_of: Callable[[np.ndarray], np.ndarray]
    """Event rows -> their output location refs."""


def _attribute_strings(attributes: tuple[tuple[str, str], ...]) -> Strings:
    """A string table holding the names of ``attributes`` first."""
    strings = Strings()
    for name, _ in attributes:
        strings.ref(name)
    return strings


def id_attributes(
    ev: pl.DataFrame,
) -> tuple[tuple[tuple[str, str], ...], tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The attributes di writes for ``ev`` (:data:`ATTRIBUTES`, then one per optional id column with values), the
    :data:`ID_COLUMNS` with values read in place (``ints``, ``valid``, ``cols`` of
    :func:`di.convert.intcolumns.int_columns`; K = 0 columns when none) and the ref of each one's attribute (K,)."""
    names = with_values(ev, ID_COLUMNS)
    attributes = ATTRIBUTES + tuple((f"di.{c}", "INT64") for c in names if c != "corr")
    refs = [name for name, _ in attributes]
    ints = int_columns([ev.get_column(c) for c in names])
    return attributes, ints, np.array([refs.index(f"di.{c}") for c in names], np.int64)


def _lane_pairs(
    loc: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[pl.DataFrame, np.ndarray | None, np.ndarray]:
    """The distinct (loc, lane) of the events in order of first row, each row's index into them (None: with one lane
    per location, the runs of equal ``loc`` are the pairs) and the first row of each."""
    lanes = assign_lanes(loc, start, end)
    n_lanes = int(lanes.max(initial=0)) + 1
    pair = None
    if n_lanes > 1:
        key = loc * n_lanes
        key += lanes
        pair, first = key_ids(key)
    else:  # one output location per timeline, in loc order: no array per event needed (events are sorted by loc)
        first = run_starts(loc)
    pairs = pl.DataFrame({"loc": loc[first].astype(np.int64), "lane": lanes[first].astype(np.int64)})
    return pairs, pair, first


def _loc_ranks(locations: pl.DataFrame) -> np.ndarray:
    """Rank of each ``loc`` value (an array indexed by loc)."""
    loc_rank = np.zeros(max(int(locations["loc"].max() or 0) + 1, 1), np.int64)
    loc_rank[locations["loc"].to_numpy()] = locations["rank"].to_numpy()
    return loc_rank


def _place_events(
    out: pl.DataFrame, pairs: pl.DataFrame, pair: np.ndarray | None, first: np.ndarray, n_events: int
) -> _Placement:
    """The output location of every event row (through its (loc, lane) pair) and the emission order."""
    event_out = out.filter(~pl.col("metric")).select(pl.col("loc").cast(pl.Int64), "lane", "ref")
    pair_ref = (
        pairs.join(event_out, on=["loc", "lane"], how="left", maintain_order="left")["ref"].to_numpy().astype(np.int64)
    )
    if pair is not None:
        out_ref = pair_ref[pair]
        grouped = out_ref.size < 2 or bool((out_ref[1:] >= out_ref[:-1]).all())  # no lanes split a timeline
        order = np.zeros(0, np.int64) if grouped else np.argsort(out_ref, kind="stable")  # empty: identity

        def out_of(rows: np.ndarray) -> np.ndarray:
            return out_ref[rows]

        counts = np.bincount(out_ref, minlength=out.height)
    else:
        order = np.zeros(0, np.int64)

        def out_of(rows: np.ndarray) -> np.ndarray:
            return pair_ref[np.searchsorted(first, rows, side="right") - 1]

        counts = np.zeros(out.height, np.int64)
        np.add.at(counts, pair_ref, np.diff(np.r_[first, n_events]))
    bounds = np.zeros(out.height + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    return _Placement(order, counts, bounds, out_of)


def _sorted_attachments(
    att: np.ndarray, io_att: np.ndarray, out_of: Callable[[np.ndarray], np.ndarray], n_out: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The MPI and I/O attachment rows in emission order (output location, event row, phase), rows per output
    location and each location's first row (len + 1)."""
    if io_att.size:
        att = np.concatenate([att, io_att])
    att_out = out_of(att[:, 0]) if att.size else np.zeros(0, np.int64)
    by = np.lexsort((att[:, 1], att[:, 0], att_out))  # emission order: output location, event row, phase
    att, att_counts = att[by], np.bincount(att_out, minlength=n_out)
    att_bounds = np.zeros(n_out + 1, np.int64)
    np.cumsum(att_counts, out=att_bounds[1:])
    return att, att_counts, att_bounds


def _out_locations(out: pl.DataFrame, records: np.ndarray) -> list[dict[str, Any]]:
    """One dict per output location: name, kind, group, record count and the trace's loc."""
    return [
        {"name": n, "kind": k, "group": g, "records": int(r), "loc": int(lc)}
        for n, k, g, r, lc in zip(
            out["out_name"].to_list(),
            out["out_kind"].to_list(),
            out["group"].to_list(),
            records.tolist(),
            out["loc"].to_list(),
        )
    ]


def _metric_records(
    trace: Trace, shift: int, out: pl.DataFrame, records: np.ndarray, strings: Strings
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """:func:`plan_metrics`, with each member's name and unit added to ``strings`` and its samples to the record
    counts of their locations (``records``, in place)."""
    members, metric_arrays = plan_metrics(trace, shift, out)
    for m in members:
        strings.ref(m["name"])
        strings.ref(m["unit"] or "")
    if members:
        records[metric_arrays["metric_writers"]] += metric_arrays["metric_counts"]
    return members, metric_arrays


def _add_side_definitions(lay: Layout, trace: Trace, out_loc: pl.Series) -> None:
    """The I/O file properties, the side tables' document, di's own document (``out_loc``: the trace's loc of each
    output location) and the description, with one DataLossWarning for what OTF2 cannot hold."""
    losses: list[str] = []
    lay.io_file_props = plan_io_files(trace, lay.io.files, lay.strings, losses)
    lay.side_text = side_document(trace, losses)
    lay.own_text = own_document(trace, out_loc, losses)
    warn_losses(losses)  # one DataLossWarning for the writing
    lay.description = f"written by di from {len(trace.meta.get('sources', []))} source(s)"


def plan(trace: Trace) -> Layout:
    """Everything the writer needs for ``trace``."""
    ev = trace.events
    attributes, ids, id_refs = id_attributes(ev)
    strings = _attribute_strings(attributes)
    loc, start, end = ev["loc"].to_numpy().astype(np.int64), ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
    pairs, pair, first = _lane_pairs(loc, start, end)
    out, hosts, groups, rank_locs = plan_locations(trace, pairs, strings)
    loc_rank = _loc_ranks(trace.locations)
    placed = _place_events(out, pairs, pair, first, ev.height)
    regions, region = plan_regions(trace, strings)
    comms, local = plan_comms(trace, loc_rank, [r for r, _ in groups], strings)
    io_att, io_defs = plan_io(trace, strings)
    att = plan_attachments(trace, loc_rank, LocalRanks(local), strings)
    att, att_counts, att_bounds = _sorted_attachments(att, io_att, placed.out_of, out.height)
    records = 2 * placed.counts + att_counts
    shift, offset, length, realtime = _clock(trace)
    args_ref = strings.add_many(ev["args"]) if ev["args"].null_count() < ev.height else np.zeros(0, np.int64)
    members, metric_arrays = _metric_records(trace, shift, out, records, strings)
    lay = Layout(
        strings=strings,
        hosts=hosts,
        groups=groups,
        out_locations=_out_locations(out, records),
        rank_locations=rank_locs,
        regions=regions,
        comms=comms,
        metric_members=members,
        global_offset=offset,
        trace_length=length,
        realtime=realtime,
        io=io_defs,
        attributes=attributes,
        attr_refs=np.arange(len(attributes), dtype=np.int64),
    )
    _add_side_definitions(lay, trace, out.get_column("loc"))
    lay.arrays.update(metric_arrays)
    lay.arrays.update(
        {
            "order": placed.order,
            "bounds": placed.bounds,
            "start_t": start + shift if shift else start,
            "end_t": end + shift if shift else end,
            "region": region,
            "nbytes": filled_or_empty(ev["bytes"], emit.NO_VALUE),  # empty: absent (see emit.emit_events)
            "ids": ids[0],
            "id_valid": ids[1],
            "id_cols": ids[2],
            "id_refs": id_refs,
            "args_ref": args_ref,
            "flows_ref": plan_flows_in(trace, placed.out_of, placed.order, placed.bounds, strings),
            "att": att,
            "att_bounds": att_bounds,
        }
    )
    return lay
