"""Timeline output -> the ``events`` table (names, categories, nesting, args).

* Regions: name and ``cat`` from the region definition (``cat_gpu`` on GPU
  locations), ``src_cat`` = ``"<paradigm>/<role>"``; regions di wrote carry
  their own cat/src_cat/instant flag (:mod:`categories`).
* Instant records: name = OTF2 record name, cat ``other``, src_cat
  ``otf2_record``; their fields go to ``args``.
* RMA copies: name ``RmaPut``/``RmaGet``, cat ``memcpy``, ``bytes`` from the
  record, window and remote in ``args``.
* I/O operations (IoOperationBegin .. Complete): name ``read``/``write``/
  ``flush`` (the operation mode), cat ``io``, src_cat ``otf2/io_operation``,
  ``bytes`` = bytes transferred (null when never completed); ``args``: mode,
  handle, file and paradigm (from the IoHandle, IoFile and IoParadigm
  definitions), bytes requested, operation flags when set, ``cancelled``.
  The other I/O records are instants with cat ``io``.
* ``args``: the record's attributes (by attribute name; STRING/REGION/COMM
  values by name), the fields above, a collective's OTF2 op and bytes received.
  Attributes on a record that is not an event's own (MPI, metrics) go to the
  region that holds it.

Rows are sorted by (loc, start_ns, -end_ns, creation order) and nested with
:func:`di.nesting.nest`; ``order`` maps creation index -> row (None when the
creation order is already the row order, as in time-ordered archives).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.otf2.records import (
    ATTRIBUTE,
    COLL_END,
    INSTANT_NAMES,
    IO_INSTANTS,
    IO_OPERATION_FLUSH,
    IO_OPERATION_READ,
    IO_OPERATION_WRITE,
    LEAVE,
    RMA_GET,
    RMA_PUT,
)
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
from di.convert.otf2.recordrows import RecordRows
from di.convert.stringviews import nullable
from di.convert.otf2.values import as_json, ref_ids
from di.nesting import nest, nesting_order

NS_PER_S = 1_000_000_000

IO_MODES = ("read", "write", "flush")
"""OTF2_IoOperationMode 0, 1, 2: the names of I/O operation events."""
IO_OPERATIONS = (IO_OPERATION_READ, IO_OPERATION_WRITE, IO_OPERATION_FLUSH)
IO_ATTRIBUTE = "di.io"
"""Attribute di's writer puts on the I/O operation records it writes inside the I/O event they describe (no event of their own)."""
OWN_ATTRIBUTES = {"di.bytes": "bytes", "di.corr": "corr", "di.args": "args"}
"""Attributes di's writer puts on Enter records -> the event column they restore."""
FLOWS_ATTRIBUTE = "di.flows_in"
"""Attribute di's writer puts on the Enter of a flow's destination (see :func:`flows_frame`)."""


def _descriptors(regions: dict[int, dict[str, Any]]) -> tuple[np.ndarray, pl.DataFrame]:
    """(ref -> region position lookup, one row per event kind: name, cat, src_cat, instant).

    Rows: each region on a CPU location (0..R-1), each region on a GPU location
    (R..2R-1), then each record kind (2R + kind) for instants and RMA copies,
    then one row for regions the definitions lack (name ``?``).
    """
    from di import schema

    dtypes = schema.polars_schema("events")
    refs = np.array(list(regions), dtype=np.int64)
    lookup = np.full(int(refs.max()) + 1 if refs.size else 1, -1, np.int64)
    lookup[refs] = np.arange(refs.size)
    rs = list(regions.values())
    record_names = {**INSTANT_NAMES, RMA_PUT: "RmaPut", RMA_GET: "RmaGet", **dict(zip(IO_OPERATIONS, IO_MODES))}
    n_kinds = max(record_names) + 1
    kinds = [
        (
            record_names.get(k, "?"),
            "memcpy" if k in (RMA_PUT, RMA_GET) else "io" if k in IO_INSTANTS or k in IO_OPERATIONS else "other",
            "otf2/rma" if k in (RMA_PUT, RMA_GET) else "otf2/io_operation" if k in IO_OPERATIONS else "otf2_record",
            k in INSTANT_NAMES,
        )
        for k in range(n_kinds)
    ]
    kinds.append(("?", "other", "otf2/undefined_region", False))
    table = pl.DataFrame(
        {
            "name": [r["name"] for r in rs] * 2 + [k[0] for k in kinds],
            "cat": [r["cat"] for r in rs] + [r["cat_gpu"] for r in rs] + [k[1] for k in kinds],
            "src_cat": [r["src_cat"] for r in rs] * 2 + [k[2] for k in kinds],
            "instant": [r["instant"] for r in rs] * 2 + [k[3] for k in kinds],
        },
        schema={"name": dtypes["name"], "cat": dtypes["cat"], "src_cat": dtypes["src_cat"], "instant": pl.Boolean},
    )
    return lookup, table


@njit(cache=True, pipeline_class=ScalarKernelCompiler)
def _ticks_to_ns(t, offset, res, realtime):
    """One OTF2 tick count -> int64 ns, exactly as :func:`di.convert.otf2.reader.ticks_to_ns`."""
    d = t - offset
    if res == NS_PER_S:
        ns = d
    elif res < 9_223_372_036:  # 2**63 // 1e9: q * 1e9 cannot overflow
        q = d // res
        ns = q * NS_PER_S + ((d - q * res) * NS_PER_S) // res
    else:
        ns = np.int64(np.floor(np.float64(d) * (NS_PER_S / res)))
    return ns + realtime


@njit(cache=True, pipeline_class=ScalarKernelCompiler)
def _finish(ev_loc, ev_start, ev_end, ev_type, ev_ref, lookup, n_regions, gpu_locs, instant_of, offset, res, realtime):
    """In place: ticks -> ns (instants end where they start). Returns (descriptor row of every event,
    whether the events are in (loc, start, -end) order)."""
    n_kinds_base = 2 * n_regions
    unknown = instant_of.size - 1
    ordered = True
    desc = np.empty(ev_loc.size, np.int64)
    for i in range(ev_loc.size):
        ref = ev_ref[i]
        if ev_type[i] == EV_REGION:
            pos = lookup[ref] if ref >= 0 and ref < lookup.size else -1
            d = unknown if pos < 0 else pos + n_regions * gpu_locs[ev_loc[i]]
        else:
            d = n_kinds_base + ref
        desc[i] = d
        s = _ticks_to_ns(ev_start[i], offset, res, realtime)
        ev_start[i] = s
        ev_end[i] = s if instant_of[d] else _ticks_to_ns(ev_end[i], offset, res, realtime)
        if i > 0 and ordered:
            if ev_loc[i] == ev_loc[i - 1] and (
                s < ev_start[i - 1] or (s == ev_start[i - 1] and ev_end[i] > ev_end[i - 1])
            ):
                ordered = False
            elif ev_loc[i] < ev_loc[i - 1]:
                ordered = False
    return desc, ordered


def events_frame(
    tl: tuple, clock: tuple[int, int, int], regions: dict[int, dict[str, Any]], gpu_locs: np.ndarray
) -> tuple[pl.DataFrame, np.ndarray | None]:
    """(events without args sorted and nested, creation index -> row or None when they are the same).

    ``tl``: the :class:`timeline.Builder` arrays (ev_loc .. ev_c); ``clock``: (global offset
    ticks, timer resolution ticks/s, realtime ns added). ev_start and ev_end are converted to ns in place.
    """
    ev_loc, ev_start, ev_end, ev_type, ev_ref, _, _, ev_c, ev_d = tl[:9]
    lookup, table = _descriptors(regions)
    n_regions = len(regions)
    instant_of = table["instant"].to_numpy()
    desc, ordered = _finish(
        ev_loc,
        ev_start,
        ev_end,
        ev_type,
        ev_ref,
        lookup,
        n_regions,
        gpu_locs.astype(np.int64),
        instant_of,
        *(np.int64(c) for c in clock),
    )
    n = ev_loc.size
    order = None
    io = ev_type == EV_IO
    loc, start, end = ev_loc, ev_start, ev_end
    nbytes, known = (
        (np.where(io, ev_d, ev_c), (ev_type == EV_RMA) | (io & (ev_d >= 0))) if io.any() else (ev_c, ev_type == EV_RMA)
    )
    if not ordered:
        perm = nesting_order(ev_loc, ev_start, ev_end, np.arange(n, dtype=np.int64))
        loc, start, end, desc, nbytes, known = (a[perm] for a in (loc, start, end, desc, nbytes, known))
        order = np.empty(n, np.int64)
        order[perm] = np.arange(n, dtype=np.int64)
    depth, parent = nest(loc, start, end)
    codes = pl.Series(desc.astype(np.uint32))  # polars' index type: no conversion per gather
    df = pl.DataFrame(
        {
            "loc": loc.astype(np.uint32),
            "start_ns": start,
            "end_ns": end,
            "name": table["name"].gather(codes),
            "cat": table["cat"].gather(codes),
            "src_cat": table["src_cat"].gather(codes),
            "bytes": nullable(nbytes, known, "bytes")
            if known.any()
            else pl.repeat(None, n, dtype=pl.Int64, eager=True),
            "instant": instant_of[desc],
            "depth": depth,
            "parent": nullable(parent, parent >= 0, "parent"),
        }
    )
    return df, order


def rows_of(order: np.ndarray | None, created: np.ndarray) -> np.ndarray:
    """Rows in ``events`` of events given by creation index (-1 stays -1)."""
    created = np.asarray(created, dtype=np.int64)
    if order is None:
        return created
    return np.where(created >= 0, order[np.maximum(created, 0)] if order.size else created, -1)


def args_column(n_events: int, rec: RecordRows, tl: Builder, order: np.ndarray | None, defs: Any) -> pl.Series:
    """The ``args`` JSON text of every event row (null where the source had nothing more)."""
    import orjson

    from di.convert.columns import utf8_buffers
    from di.convert.otf2.argtext import instant_members, join_members, text_int_members
    from di.convert.otf2.matching import collective_ops

    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (event rows, members UTF-8, offsets) per source
    own = [
        ref
        for ref, (name, _) in defs.attributes.items()
        if name in OWN_ATTRIBUTES or name in (FLOWS_ATTRIBUTE, IO_ATTRIBUTE)
    ]
    got = rec.of_kind(ATTRIBUTE) & (rec.event >= 0)
    if own:
        got &= ~np.isin(rec.attribute, np.array(own, np.int64))
    if got.any():
        attrs = rec.take(got)
        value = as_json(
            attrs.attr_type,
            attrs.attr_value,
            defs.strings,
            {k: r["name"] for k, r in defs.regions.items()},
            {k: c["name"] for k, c in defs.comms.items()},
        )
        key = attrs.attribute * 2 + (attrs.after == LEAVE)
        uniq, inv = np.unique(key, return_inverse=True)
        names = {
            ref: name for ref, (name, _) in defs.attributes.items() if isinstance(name, str)
        }  # a damaged definition may have none
        keys = pl.Series(
            [
                orjson.dumps(("leave." if k & 1 else "") + names.get(int(k) >> 1, str(int(k) >> 1))).decode() + ":"
                for k in uniq.tolist()
            ],
            dtype=pl.String,
        ).gather(inv.ravel())
        parts.append(
            (
                attrs.event,
                *utf8_buffers(
                    pl.select(pl.concat_str(pl.lit("{"), keys, value.fill_null("null"), pl.lit("}"))).to_series()
                ),
            )
        )
    ev_type, ev_ref, ev_a, ev_b, ev_c = tl.ev_type, tl.ev_ref, tl.ev_a, tl.ev_b, tl.ev_c
    instants = np.flatnonzero(ev_type == EV_INSTANT)
    if instants.size:
        parts.append(
            (
                rows_of(order, instants),
                *instant_members(ev_ref[instants], ev_a[instants], ev_b[instants], ev_c[instants]),
            )
        )
    rma = np.flatnonzero(ev_type == EV_RMA)
    if rma.size:
        wins, win_idx = np.unique(ev_a[rma], return_inverse=True)
        texts = [orjson.dumps(defs.windows.get(int(w), str(w))).decode() for w in wins.tolist()]
        parts.append(
            (rows_of(order, rma), *text_int_members('"window":', texts, win_idx.ravel(), ',"remote":', ev_b[rma]))
        )
    io = np.flatnonzero(ev_type == EV_IO)
    if io.size:
        combos, idx = np.unique(np.column_stack([ev_a[io], ev_b[io]]), axis=0, return_inverse=True)
        texts = [_io_text(int(h), int(b), defs.io_handles) for h, b in combos.tolist()]
        parts.append((rows_of(order, io), *text_int_members("", texts, idx.ravel(), ',"bytes_requested":', ev_c[io])))
    coll = rec.of_kind(COLL_END) & (rec.event >= 0)
    if coll.any():
        idx, names_ = collective_ops(rec.coll_op[coll])
        parts.append(
            (
                rec.event[coll],
                *text_int_members(
                    '"collective_op":', [f'"{n}"' for n in names_], idx, ',"bytes_received":', rec.received[coll]
                ),
            )
        )
    return join_members(n_events, parts)


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
    """``ev`` with bytes, corr and args taken from the attributes di's writer adds (:data:`OWN_ATTRIBUTES`)."""
    refs = {name: ref for ref, (name, _) in defs.attributes.items() if name in OWN_ATTRIBUTES}
    if not refs:
        return ev
    attrs = rec.take(
        rec.of_kind(ATTRIBUTE) & (rec.event >= 0) & np.isin(rec.attribute, np.array(list(refs.values()), np.int64))
    )
    for name, column in OWN_ATTRIBUTES.items():
        got = attrs.take(attrs.attribute == refs.get(name, -1))
        if not len(got):
            continue
        values = pl.Series(ref_ids(got.attr_type, got.attr_value))
        if name == "di.args":
            values = defs.strings.gather(values.to_numpy())
        at = np.full(ev.height, -1, np.int64)
        at[got.event] = np.arange(got.event.size)  # one gather: a String column's texts are viewed, not copied
        full = values.cast(ev.schema[column]).gather(pl.Series(at).replace(-1, None))
        own = ev.get_column(column)
        ev = ev.with_columns(
            full.alias(column) if own.null_count() == own.len() else pl.coalesce(full, own).alias(column)
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
