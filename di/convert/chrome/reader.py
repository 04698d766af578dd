"""Chrome Trace Event JSON (and Kineto's flavour of it) -> canonical Trace.

Pipeline for one file: :func:`decode` (bytes -> scanner columns) ->
:mod:`phases` (phases -> intervals) -> timelines -> sort and nest ->
flows and counters -> :mod:`kineto` (categories, collectives, launch flows).
Times: Chrome ``ts``/``dur`` are microseconds; they become int64 ns exactly,
plus Kineto's ``baseTimeNanoseconds`` when the file has one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.convert.chrome import ditrace, kineto, phases
from di.convert.chrome import scan as S
from di.convert.chrome.decode import Raw, decode
from di.convert.chrome.flows import Nested, bind_id_flows, flow_events, flow_steps, has_bind_flows
from di.convert.chrome.flows import empty as flows_empty
from di.convert.chrome.metadata import apply_metadata, counters
from di.convert.columns import dense_row_ids
from di.convert.provenance import reader_meta
from di.convert.restore import restore, restore_meta
from di.convert.stringviews import nullable
from di.merge import assign_instances
from di.nesting import nest, nesting_order
from di.trace import Trace

GPU_SRC_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_sync", "mtia_ccp_events")
DEVICE_PROCESS_CATS = ("mtia_ccp_events",)
COUNTER_FIELDS = ["name", "pid_k", "pid", "id_k", "id", "ts", "args"]
"""The fields of C records that :func:`~di.convert.chrome.metadata.counters` reads."""
META_FIELDS = ["name", "pid_k", "pid", "tid_k", "tid", "args"]
"""The fields of M records that :func:`~di.convert.chrome.metadata.apply_metadata` reads."""


def _strings(raw: Raw) -> pl.Series:
    """The symbols, and the empty string after them (the text of id -1 once wrapped)."""
    return pl.concat([raw.symbol_texts, pl.Series("sym", [""])])


def _timelines(iv: phases.Intervals, raw: Raw, own: dict[str, Any] | None) -> tuple[np.ndarray, pl.DataFrame]:
    """Each interval's dense timeline ``loc`` (uint32), and the timeline keys with
    kind: ``lkind``, ``pid_k``, ``pid``, ``tid_k``, ``tid``, ``gpu`` and ``loc``,
    sorted by (lkind, gpu, pid, tid) with loc numbering them in that order."""
    ids, first = dense_row_ids(iv.key())
    gpu_ids = raw.symbol_ids(GPU_SRC_CATS)
    gpu = np.zeros(first.size, dtype=bool)
    if gpu_ids.size:
        is_gpu = np.zeros(raw.symbols.len() + 1, dtype=bool)  # per symbol id; the last for -1 (no cat)
        is_gpu[gpu_ids] = True
        # looked up in record order, then gathered as bytes: no int32 column of the intervals' cats made
        gpu[ids[is_gpu[raw.cols["cat"]][iv.row]]] = True
    key = {name: col[first] for name, col in zip(phases.KEY, (iv.lkind, iv.pid_k, iv.pid, iv.tid_k, iv.tid))}
    if raw.symbol_ids(DEVICE_PROCESS_CATS).size:
        # a timeline is a device queue when it holds device activity, or when its
        # process does (MTIA's per-stream submission queues hold runtime records)
        process, _ = dense_row_ids(np.stack([key["pid_k"], key["pid"]]).astype(np.int64))
        gpu = (np.bincount(process, weights=gpu)[process] > 0) & (key["pid_k"] != 0)
    by = np.lexsort((key["tid"], key["tid_k"], key["pid"], key["pid_k"], gpu, key["lkind"]))
    keys = pl.DataFrame(
        {"loc": np.arange(by.size, dtype=np.uint32), **{k: v[by] for k, v in key.items()}, "gpu": gpu[by], "_id": by}
    )
    keys = ditrace.remap_keys(keys, own)
    loc_of_id = np.empty(first.size, dtype=np.uint32)
    loc_of_id[keys.get_column("_id").to_numpy()] = keys.get_column("loc").to_numpy()
    return loc_of_id[ids], keys.drop("_id")


def _events(
    raw: Raw, iv: phases.Intervals, loc: np.ndarray, keys: pl.DataFrame, binds: bool
) -> tuple[pl.DataFrame, Nested, np.ndarray]:
    """The intervals (counter anchors left out) in nesting order with depth and
    parent, and their scanner fields: the columns of the events table with symbol
    ids, plus ``flags`` (and, with ``binds``, the flow v2 fields); the same
    order's times and nesting as numpy columns; and each one's scanner row."""
    order = nesting_order(loc, iv.start_ns, iv.end_ns, iv.row)
    lkind = keys.get_column("lkind").to_numpy()
    if (lkind == phases.LK_COUNTER).any():
        counter_locs = keys.get_column("loc").to_numpy()[lkind == phases.LK_COUNTER]
        order = order[~np.isin(loc[order], counter_locs)]
    loc, start, end = loc[order], iv.start_ns[order], iv.end_ns[order]
    depth, parent = nest(loc, start, end)
    row = iv.row[order]
    args = raw.args_of(row)
    if iv.merged_at.size:
        at = np.full(iv.size, -1, dtype=np.int64)
        at[order] = np.arange(order.size)
        at = at[iv.merged_at]
        args = args.scatter(at[at >= 0], iv.merged_args.filter(pl.Series(at >= 0)))
    c = raw.cols
    flags = iv.flags[order]
    cols: dict[str, Any] = {
        "loc": loc,
        "start_ns": start,
        "end_ns": end,
        "name": c["name"][row],
        "cat": c["cat"][row],
        **raw.lifted_series(row),
        "instant": iv.instant[order],
        "args": args,
        "depth": depth,
        "parent": nullable(parent, parent >= 0, "parent"),
        "flags": flags,
    }
    if binds:
        cols.update(
            bind_k=c["bind_k"][row],
            bind=c["bind"][row],
            di_flow=raw.di_flow.gather(row)
            if raw.di_flow is not None
            else pl.Series([None] * row.size, dtype=pl.String),
        )
    return pl.DataFrame(cols), Nested(loc, start, end, parent, cols["instant"]), row


def _brief(value: Any) -> str:
    """A JSON value in at most 40 characters, an array or object by its kind: one nested thousands deep has no
    repr (RecursionError)."""
    if isinstance(value, (list, dict)):
        return "(a JSON array)" if isinstance(value, list) else "(a JSON object)"
    return str(value)[:40]


def _rank(top: dict[str, Any], rank: int | None, rank_source: str, warnings: list[str]) -> tuple[int, str, int | None]:
    """(rank, where it came from, world size): an explicit option wins, then
    ``distributedInfo``, then the caller's fallback (file name, position)."""
    info = top.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    ws = info.get("world_size")
    world = ws if isinstance(ws, int) and not isinstance(ws, bool) and 0 < ws < 2**31 else None
    own = info.get("rank")
    if own is not None and not (isinstance(own, int) and not isinstance(own, bool) and 0 <= own < 2**31):
        warnings.append(f"distributedInfo rank {_brief(own)} ignored: not a rank")
        own = None
    if rank_source == "option" and rank is not None:
        if own is not None and own != rank:
            warnings.append(f"rank {rank} from the options overrides rank {own} of distributedInfo")
        return rank, "option", world
    if own is not None:
        return own, "distributedInfo", world
    return (rank if rank is not None else 0), rank_source, world


def read_chrome(
    path: str | Path,
    *,
    rank: int | None = None,
    rank_source: str = "single",
    source: int = 0,
    max_input_bytes: int | None = None,
) -> Trace:
    """Read one Chrome/Kineto JSON file (``.json`` or gzip) into a Trace.

    Args:
        path: the file.
        rank: rank to use when the file's ``distributedInfo`` has none.
        rank_source: where ``rank`` came from (recorded in meta sources).
        source: index of this file in the job's sources (locations.source).
        max_input_bytes: the most bytes read (decompressed); None: no limit
            (:mod:`di.inputsize`).

    Raises:
        FormatError: the file is not a readable trace (see :func:`decode`).
        InputTooLargeError: the file is (or decompresses to) more than ``max_input_bytes``.
    """
    path = Path(path)
    raw = decode(path, max_input_bytes)
    dropped: Counter[str] = raw.dropped
    own = ditrace.info(raw.top, raw.warnings)
    base_ns = ditrace.base_ns(own, raw.top, raw.warnings)
    epoch = _on_epoch(raw, base_ns)
    ts = phases.timestamps(raw, base_ns)
    counts = phases.phase_counts(raw)
    ok = phases.usable(raw, dropped, counts)
    syms = _strings(raw)
    found = phases.found(raw, ok, counts)
    counter_rows = phases.records(raw, phases.rows_of(raw, ok, phases.COUNTER, counts=counts), ts, COUNTER_FIELDS)
    meta_rows = phases.records(raw, phases.rows_of(raw, ok, phases.META, counts=counts), ts, META_FIELDS)
    steps = flow_steps(raw, ok)
    iv = _intervals(raw, ts, ok, found, dropped)
    del ok
    loc, keys = _timelines(iv, raw, own)
    binds = has_bind_flows(iv.flags)
    ev, nested, row = _events(raw, iv, loc, keys, binds)
    del iv, loc
    at, n_written = ditrace.written_rows(own, raw.cols["ph"], row)
    flows = pl.concat(
        [
            flow_events(raw, steps, ts, nested, keys, syms, dropped),
            bind_id_flows(ev, dropped) if binds else flows_empty(),
        ],
        how="vertical_relaxed",
    )
    raw.cols = {}  # in ev and flows now
    del steps, ts, nested
    the_rank, rank_from, world = _rank(raw.top, rank, rank_source, raw.warnings)
    locations = ditrace.locations(own, keys, apply_metadata(keys, meta_rows, syms, the_rank, source), raw.warnings)
    series, samples = counters(counter_rows, keys, syms, dropped, ditrace.series_map(own))
    n_events = ev.height
    coll_flags = ev.get_column("flags").to_numpy()
    events = kineto.events_table(ev, syms, locations)
    del ev
    written = ditrace.written(own, n_written, raw.warnings)
    events, flows, restored = restore(events, flows, written, at, dropped)
    flows = kineto.sync_kinds(
        pl.concat([flows, kineto.launch_flows(events, locations, flows)], how="vertical_relaxed"), events, locations
    )
    collectives = _collectives(restored.get("collectives"), events, locations, the_rank, coll_flags)
    return Trace.build(
        meta=restore_meta(_meta(path, raw, base_ns, epoch, the_rank, rank_from, world, n_events, dropped), written),
        locations=locations,
        events=events,
        flows=flows,
        series=series,
        samples=samples,
        collectives=collectives,
        messages=restored.get("messages"),
        **(written.side_tables if written is not None else {}),
    )


def _intervals(raw: Raw, ts: np.ndarray, ok: np.ndarray, found: set[str], dropped: Counter[str]) -> Any:
    """The intervals of every phase the file holds (X slices, B/E pairs, instants, async, counter anchors), as
    one table of :mod:`phases`."""
    parts = [phases.slices(raw, ts, ok, dropped)]
    if found & set(phases.BEGIN_END):
        parts.append(phases.begin_end(raw, ts, ok, dropped))
    if found & set(phases.INSTANT):
        parts.append(phases.instants(raw, ts, ok))
    if found & set(phases.ASYNC):
        parts.append(phases.async_events(raw, ts, ok, dropped))
    if phases.COUNTER in found:
        parts.append(phases.counter_anchors(raw, ts, ok))
    return phases.concat(parts) if len(parts) > 1 else parts[0]


def _collectives(
    written: pl.DataFrame | None, events: pl.DataFrame, locations: pl.DataFrame, rank: int, flags: np.ndarray
) -> pl.DataFrame:
    """The collectives di wrote (``written``), else those of the file's NCCL events (``flags``: each event row's
    scan flags); matched across ranks when a merged job file (di's own writer) holds several."""
    collectives = written
    if collectives is None:
        collectives = kineto.collectives(events, locations, rank, np.flatnonzero(flags & S.F_COLL))
    if collectives.get_column("rank").n_unique() > 1:
        collectives = assign_instances(collectives)
    return collectives


def _on_epoch(raw: Raw, base_ns: int) -> bool:
    """True when the timestamps are Unix-epoch based (a base, or values beyond 10**18 ns)."""
    if base_ns > 0:
        return True
    ts = raw.cols["ts"]
    return bool(ts.size and int(ts.max(where=(raw.cols["flags"] & S.F_TS) != 0, initial=0)) > 10**18)


def _meta(
    path: Path,
    raw: Raw,
    base_ns: int,
    epoch: bool,
    rank: int,
    rank_from: str,
    world: int | None,
    n: int,
    dropped: Counter[str],
) -> dict[str, Any]:
    info = {
        k: v
        for k, v in raw.top.items()
        if k in ("traceName", "schemaVersion", "displayTimeUnit", "distributedInfo", "baseTimeNanoseconds")
    }
    info["top_level_keys"] = sorted(raw.top)
    devices = _devices(raw.top.get("deviceProperties"))
    if devices:
        info["devices"] = devices
    fmt = "kineto" if ("distributedInfo" in raw.top or "deviceProperties" in raw.top or base_ns) else "chrome"
    return reader_meta(
        path,
        fmt,
        epoch=epoch,
        rank=rank,
        rank_source=rank_from,
        events=n,
        dropped=dropped,
        info=info,
        warnings=[f"{path}: {w}" for w in raw.warnings],
        world_size=world,
    )


DEVICE_FIELDS = {"id": int, "name": str, "computeMajor": int, "computeMinor": int, "numSms": int, "totalGlobalMem": int}
"""The fields of Kineto's ``deviceProperties`` entries kept in the source's ``info.devices`` (the rest are limits of
a block or an SM, which no analysis reads)."""


def _devices(props: Any) -> list[dict[str, Any]]:
    """Kineto's ``deviceProperties`` (one object per GPU: id, name, compute capability, SMs, memory), the fields of
    :data:`DEVICE_FIELDS` that have their type; entries without an integer id or a name are left out."""
    if not isinstance(props, list):
        return []
    out = []
    for entry in props:
        if not isinstance(entry, dict):
            continue
        kept = {
            k: v
            for k, kind in DEVICE_FIELDS.items()
            if isinstance(v := entry.get(k), kind) and not (kind is int and isinstance(v, bool))
        }
        if "id" in kept and "name" in kept:
            out.append(kept)
    return out
