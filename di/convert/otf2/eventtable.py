"""Timeline output -> the ``events`` table without its args (names, categories, bytes, nesting).

* Regions: name and ``cat`` from the region definition (``cat_gpu`` on GPU
  locations), ``src_cat`` = ``"<paradigm>/<role>"``; regions di wrote carry
  their own cat/src_cat/instant flag (:mod:`categories`).
* Instant records: name = OTF2 record name, cat ``other``, src_cat
  ``otf2_record``.
* RMA copies: name ``RmaPut``/``RmaGet``, cat ``memcpy``, ``bytes`` from the
  record.
* I/O operations (IoOperationBegin .. Complete): name ``read``/``write``/
  ``flush`` (the operation mode), cat ``io``, src_cat ``otf2/io_operation``,
  ``bytes`` = bytes transferred (null when never completed). The other I/O
  records are instants with cat ``io``.

Rows are sorted by (loc, start_ns, -end_ns, creation order) and nested with
:func:`di.nesting.nest`; ``order`` maps creation index -> row (None when the
creation order is already the row order, as in time-ordered archives).
"""

from __future__ import annotations


import numpy as np
import polars as pl
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.otf2.records import (
    INSTANT_NAMES,
    IO_INSTANTS,
    IO_OPERATION_FLUSH,
    IO_OPERATION_READ,
    IO_OPERATION_WRITE,
    RMA_GET,
    RMA_PUT,
)
from di.convert.otf2.timeline import EV_IO, EV_REGION, EV_RMA
from di.convert.stringviews import nullable
from di.nesting import nest, nesting_order

NS_PER_S = 1_000_000_000

IO_MODES = ("read", "write", "flush")
"""OTF2_IoOperationMode 0, 1, 2: the names of I/O operation events."""
IO_OPERATIONS = (IO_OPERATION_READ, IO_OPERATION_WRITE, IO_OPERATION_FLUSH)


def _descriptors(regions: pl.DataFrame) -> tuple[np.ndarray, pl.DataFrame]:
    """(ref -> region position lookup, one row per event kind: name, cat, src_cat, instant).

    Rows: each region on a CPU location (0..R-1), each region on a GPU location
    (R..2R-1), then each record kind (2R + kind) for instants and RMA copies,
    then one row for regions the definitions lack (name ``?``). ``regions``: one row per region
    (:func:`di.convert.otf2.definitions._regions`).
    """
    from di import schema

    dtypes = schema.polars_schema("events")
    refs = regions.get_column("ref").to_numpy().astype(np.int64)
    lookup = np.full(int(refs.max()) + 1 if refs.size else 1, -1, np.int64)
    lookup[refs] = np.arange(refs.size)
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
    columns = ("name", "cat", "src_cat", "instant")
    table = pl.concat(
        [
            regions.select(columns),
            regions.select("name", pl.col("cat_gpu").alias("cat"), "src_cat", "instant"),
            pl.DataFrame(kinds, schema=list(columns), orient="row"),
        ],
        how="vertical_relaxed",
    )
    return lookup, table.cast({"name": dtypes["name"], "cat": dtypes["cat"], "src_cat": dtypes["src_cat"]})


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
    tl: tuple, clock: tuple[int, int, int], regions: pl.DataFrame, gpu_locs: np.ndarray
) -> tuple[pl.DataFrame, np.ndarray | None]:
    """(events without args sorted and nested, creation index -> row or None when they are the same).

    ``tl``: the :class:`timeline.Builder` arrays (ev_loc .. ev_c); ``clock``: (global offset
    ticks, timer resolution ticks/s, realtime ns added). ev_start and ev_end are converted to ns in place.
    """
    ev_loc, ev_start, ev_end, ev_type, ev_ref, _, _, ev_c, ev_d = tl[:9]
    lookup, table = _descriptors(regions)
    n_regions = regions.height
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
    return np.append(order, np.int64(-1))[created]  # -1 reads the last entry: one gather
