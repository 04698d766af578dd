"""Timeline output -> the ``events`` table: its ``args``, the columns di's writer stored as attributes, the flows.

The table itself (names, categories, bytes, nesting, row order) is built by
:mod:`eventtable` (:func:`events_frame`, :func:`rows_of`, re-exported here).

* ``args``: the record's attributes (by attribute name; STRING/REGION/COMM
  values by name), a collective's OTF2 op and bytes received, and the
  fields of the records that make events: an instant record's fields; an RMA
  copy's window and remote; an I/O operation's mode, handle, file and paradigm
  (from the IoHandle, IoFile and IoParadigm definitions), bytes requested,
  operation flags when set, ``cancelled``. Attributes on a record that is not
  an event's own (MPI, metrics) go to the region that holds it.
* ``bytes``, ``corr``, ``args`` and the optional id columns (Kineto's ``ext_id``
  ...) of events di wrote: from the attributes its writer adds
  (:data:`OWN_ATTRIBUTES`), an optional column only where some event has its
  attribute; flows: from ``di.flows_in`` (:func:`flows_frame`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di import schema
from di.convert.otf2.eventtable import IO_MODES, IO_OPERATIONS, NS_PER_S, events_frame, rows_of
from di.convert.otf2.records import ATTRIBUTE, COLL_END, LEAVE
from di.convert.otf2.timeline import (
    Builder,
    EV_INSTANT,
    EV_IO,
    EV_REGION,
    EV_RMA,
    IO_CANCELLED_BIT,
    IO_FLAGS_SHIFT,
)
from di.convert.otf2.flowtext import read_flow_lists
from di.convert.otf2.recordrows import RecordRows, one_of
from di.convert.otf2.values import TYPE_REGION, as_json, ref_ids

__all__ = [
    "FLOWS_ATTRIBUTE",
    "FLOW_TEXTS_COMPILED",
    "IO_ATTRIBUTE",
    "IO_MODES",
    "IO_OPERATIONS",
    "NS_PER_S",
    "OWN_ATTRIBUTES",
    "args_column",
    "events_frame",
    "flows_frame",
    "own_columns",
    "rows_of",
]

IO_ATTRIBUTE = "di.io"
"""Attribute di's writer puts on the I/O operation records it writes inside the I/O event they describe (no event of their own)."""
OWN_ATTRIBUTES = {"di.bytes": "bytes", "di.corr": "corr", "di.args": "args"} | {
    f"di.{c}": c for c, _ in schema.optional_args_keys()
}
"""Attributes di's writer puts on Enter records -> the event column they restore (the optional id columns',
``di.ext_id`` ...: :data:`di.convert.otf2.layout.ID_COLUMNS`)."""
FLOWS_ATTRIBUTE = "di.flows_in"
"""Attribute di's writer puts on the Enter of a flow's destination (see :func:`flows_frame`)."""
ENTER_ATTRIBUTES = frozenset(OWN_ATTRIBUTES) | {FLOWS_ATTRIBUTE}
"""Every attribute di's writer may put on an Enter record."""

_Part = tuple[np.ndarray, np.ndarray, np.ndarray]
"""One source of args members: (event rows, the members' UTF-8 bytes, their offsets)."""


def args_column(n_events: int, rec: RecordRows, tl: Builder, order: np.ndarray | None, defs: Any) -> pl.Series:
    """The ``args`` JSON text of every event row (null where the source had nothing more)."""
    from di.convert.otf2.argtext import join_members

    parts = [
        part
        for part in (
            _attribute_members(rec, defs),
            _instant_members(tl, order),
            _rma_members(tl, order, defs),
            _io_members(tl, order, defs),
            _collective_members(rec),
        )
        if part is not None
    ]
    return join_members(n_events, parts)


def _attribute_members(rec: RecordRows, defs: Any) -> _Part | None:
    """The members of the records' attributes (those di's writer adds for itself aside), by attribute name."""
    from di.convert.columns import utf8_buffers

    own = [
        ref
        for ref, (name, _) in defs.attributes.items()
        if name in OWN_ATTRIBUTES or name in (FLOWS_ATTRIBUTE, IO_ATTRIBUTE)
    ]
    got = rec.of_kind(ATTRIBUTE) & (rec.event >= 0)
    if own:
        got &= ~one_of(rec.attribute, own)
    if not got.any():
        return None
    attrs = rec.take(got)
    referenced = np.unique(ref_ids(attrs.attr_type, attrs.attr_value)[attrs.attr_type == TYPE_REGION])
    regions = defs.regions.filter(pl.col("ref").is_in(referenced))  # of a trace's many regions, the few values name
    value = as_json(
        attrs.attr_type,
        attrs.attr_value,
        defs.strings,
        dict(zip(regions.get_column("ref").to_list(), regions.get_column("name").to_list())),
        {k: c["name"] for k, c in defs.comms.items()},
    )
    keys = _attribute_keys(attrs, defs)
    return (
        attrs.event,
        *utf8_buffers(pl.select(pl.concat_str(pl.lit("{"), keys, value.fill_null("null"), pl.lit("}"))).to_series()),
    )


def _attribute_keys(attrs: RecordRows, defs: Any) -> pl.Series:
    """The JSON key (with its colon) of each attribute row: its name, ``leave.`` before it on a Leave record."""
    import orjson

    key = attrs.attribute * 2 + (attrs.after == LEAVE)
    uniq, inv = np.unique(key, return_inverse=True)
    names = {
        ref: name for ref, (name, _) in defs.attributes.items() if isinstance(name, str)
    }  # a damaged definition may have none
    return pl.Series(
        [
            orjson.dumps(("leave." if k & 1 else "") + names.get(int(k) >> 1, str(int(k) >> 1))).decode() + ":"
            for k in uniq.tolist()
        ],
        dtype=pl.String,
    ).gather(inv.ravel())


def _instant_members(tl: Builder, order: np.ndarray | None) -> _Part | None:
    """The members of the instant events: their records' fields."""
    from di.convert.otf2.argtext import instant_members

    instants = np.flatnonzero(tl.ev_type == EV_INSTANT)
    if not instants.size:
        return None
    ev_ref, ev_a, ev_b, ev_c = tl.ev_ref, tl.ev_a, tl.ev_b, tl.ev_c
    return (
        rows_of(order, instants),
        *instant_members(ev_ref[instants], ev_a[instants], ev_b[instants], ev_c[instants]),
    )


def _rma_members(tl: Builder, order: np.ndarray | None, defs: Any) -> _Part | None:
    """The members of the RMA copies: window (by name) and remote rank."""
    import orjson

    from di.convert.otf2.argtext import text_int_members

    rma = np.flatnonzero(tl.ev_type == EV_RMA)
    if not rma.size:
        return None
    ev_a, ev_b = tl.ev_a, tl.ev_b
    wins, win_idx = np.unique(ev_a[rma], return_inverse=True)
    texts = [orjson.dumps(defs.windows.get(int(w), str(w))).decode() for w in wins.tolist()]
    return (rows_of(order, rma), *text_int_members('"window":', texts, win_idx.ravel(), ',"remote":', ev_b[rma]))


def _io_members(tl: Builder, order: np.ndarray | None, defs: Any) -> _Part | None:
    """The members of the I/O operations (:func:`_io_text`) and their bytes requested."""
    from di.convert.otf2.argtext import text_int_members

    io = np.flatnonzero(tl.ev_type == EV_IO)
    if not io.size:
        return None
    ev_a, ev_b, ev_c = tl.ev_a, tl.ev_b, tl.ev_c
    combos, idx = np.unique(np.column_stack([ev_a[io], ev_b[io]]), axis=0, return_inverse=True)
    texts = [_io_text(int(h), int(b), defs.io_handles) for h, b in combos.tolist()]
    return (rows_of(order, io), *text_int_members("", texts, idx.ravel(), ',"bytes_requested":', ev_c[io]))


def _collective_members(rec: RecordRows) -> _Part | None:
    """The members of the regions holding an MpiCollectiveEnd: its OTF2 op and bytes received."""
    from di.convert.otf2.argtext import text_int_members
    from di.convert.otf2.matching import collective_ops

    coll = rec.inside(COLL_END)
    if not len(coll):
        return None
    idx, names_ = collective_ops(coll.coll_op)
    return (
        coll.event,
        *text_int_members('"collective_op":', [f'"{n}"' for n in names_], idx, ',"bytes_received":', coll.received),
    )


def _io_text(handle: int, b: int, handles: dict[int, dict[str, Any]]) -> str:
    """The args members of an I/O operation on ``handle`` whose field b is ``b`` (see :mod:`timeline`), bytes requested aside."""
    import orjson

    mode = b & 0xFF
    members: dict[str, Any] = {"mode": IO_MODES[mode] if mode < len(IO_MODES) else mode}
    h = handles.get(handle)
    members.update({"handle": h["name"], "file": h["file"], "paradigm": h["paradigm"]} if h else {"handle": handle})
    flags = (b >> IO_FLAGS_SHIFT) & 0xFFFFFFFF
    if flags:
        members["operation_flags"] = flags
    if b & IO_CANCELLED_BIT:
        members["cancelled"] = True
    return orjson.dumps(members).decode()[1:-1]


def own_columns(ev: pl.DataFrame, rec: RecordRows, defs: Any) -> pl.DataFrame:
    """``ev`` with bytes, corr, args and the optional id columns taken from the attributes di's writer adds
    (:data:`OWN_ATTRIBUTES`, read in one pass: :mod:`di.convert.otf2.ownvalues`); an optional column is added where
    at least one event has its attribute. An event with two of one attribute takes the later one's value."""
    from di.convert.otf2.ownvalues import own_values
    from di.convert.stringviews import nullable

    refs = {name: ref for ref, (name, _) in defs.attributes.items() if name in OWN_ATTRIBUTES}
    if not refs:
        return ev
    present = [name for name in OWN_ATTRIBUTES if name in refs]
    code = np.full(max(refs.values()) + 1, -1, np.int64)  # attribute ref -> row of own_values
    code[[refs[name] for name in present]] = np.arange(len(present))
    values, valid = own_values(rec, code, len(present), ev.height)
    for j, name in enumerate(present):
        column, got = OWN_ATTRIBUTES[name], valid[j]
        if not got.any():
            continue
        if name == "di.args":  # each event's row in the string table: one gather of the texts (viewed, not copied)
            at = np.zeros(ev.height, np.int64)
            at[got] = defs.strings.positions(values[j][got])
            full = defs.strings.texts.gather(at if got.all() else nullable(at, got, "at"))
        else:
            dtype = ev.schema[column] if column in ev.columns else schema.optional_schema("events")[column]
            full = nullable(values[j], got, column).cast(dtype)
        own = ev.get_column(column) if column in ev.columns else None
        ev = ev.with_columns(
            full.alias(column) if own is None or own.null_count() == own.len() else pl.coalesce(full, own).alias(column)
        )
    return ev


FLOW_TEXTS_COMPILED = 200_000
"""From this many ``di.flows_in`` texts on, the texts of the writer's form are parsed by
:func:`di.convert.otf2.flowtext.read_flow_lists` (about 0.15 us a text here) and only the others as JSON; fewer are
all read as JSON by polars (about 1 us a text: 0.2 s at this count), and the kernel is not compiled (0.6 CPU-s on a
first run, with the symbol table's ``intern``)."""


def flows_frame(rec: RecordRows, tl: Builder, order: np.ndarray | None, defs: Any) -> tuple[pl.DataFrame | None, int]:
    """(flows restored from the ``di.flows_in`` attributes di's writer wrote, or None; flows whose source is missing).

    Each attribute holds the JSON list of the flows ending at its event, each
    with its source as (location ref, Enter ordinal on that location); the
    source's row is the region event created by that Enter.
    """
    ref = next((r for r, (name, _) in defs.attributes.items() if name == FLOWS_ATTRIBUTE), None)
    if ref is None:
        return None, 0
    got = rec.take(rec.of_kind(ATTRIBUTE) & (rec.attribute == ref) & (rec.event >= 0))
    if not len(got):
        return None, 0
    text = defs.strings.gather(ref_ids(got.attr_type, got.attr_value))
    dst = np.asarray(got.event, np.int64)
    parsed = read_flow_lists(text) if text.len() >= FLOW_TEXTS_COMPILED else None
    parts, rest = [], np.arange(text.len())
    if parsed is not None:
        frame, rest = parsed
        parts.append(frame.select(pl.Series("dst", dst[frame["text"].to_numpy()]), pl.exclude("text")))
    if rest.size:
        item = pl.Struct({"l": pl.Int64, "k": pl.Int64, "t": pl.String, "i": pl.Int64, "c": pl.String})
        other = text.gather(rest)
        try:
            lists = other.str.json_decode(pl.List(item))
        except (
            pl.exceptions.PolarsError
        ):  # a damaged archive: keep the items that read (the others count as missing sources)
            lists = pl.Series([_flow_items(t) for t in other.to_list()], dtype=pl.List(item))
        parts.append(pl.DataFrame({"dst": dst[rest], "j": lists}).explode("j").unnest("j"))
    items = pl.concat(parts)  # within one destination (one text) the items keep their order
    ev_loc, ev_type = tl.ev_loc, tl.ev_type
    regions = np.flatnonzero(ev_type == EV_REGION)
    dense = {loc["ref"]: i for i, loc in enumerate(defs.locations)}
    loc = items["l"].replace_strict(dense, default=-1, return_dtype=pl.Int64).to_numpy()
    first = np.searchsorted(ev_loc[regions], loc)
    count = np.searchsorted(ev_loc[regions], loc, side="right") - first
    k = items["k"].fill_null(-1).to_numpy()
    from di.trace import FLOW_KINDS

    ok = (loc >= 0) & (k >= 0) & (k < count) & items["t"].is_in(FLOW_KINDS).fill_null(False).to_numpy()
    src = rows_of(
        order,
        np.where(
            ok, regions[np.minimum(first + np.maximum(k, 0), max(regions.size - 1, 0))] if regions.size else -1, -1
        ),
    )
    flows = (
        items.with_columns(pl.Series("src", src))
        .filter(pl.Series(ok))
        .select("src", "dst", pl.col("t").alias("kind"), pl.col("i").alias("id"), pl.col("c").alias("src_cat"))
    )
    return flows.sort("src", "dst", maintain_order=True), int((~ok).sum())


def _flow_items(text: str | None) -> list[dict[str, Any]] | None:
    """One ``di.flows_in`` value's items with their fields' types checked (a bad field reads as null)."""
    import orjson

    try:
        got = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(got, list):
        return None

    def ok(v: Any, kind: type) -> Any:
        if kind is int:
            return v if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 else None
        return v if isinstance(v, kind) else None

    types = {"l": int, "k": int, "t": str, "i": int, "c": str}
    return [{f: ok(x.get(f), kind) for f, kind in types.items()} for x in got if isinstance(x, dict)]
