"""Plan of an OTF2 archive for a Trace: locations, definitions, and the arrays :mod:`emit` writes.

Everything here is vectorised (numpy / polars) except loops over
definitions (ranks, hosts, regions, communicators, series), which are few.
See :mod:`di.convert.otf2.writer` for the layout's definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import polars as pl

from di.convert.columns import readonly, text_spans, utf8_buffers
from di.convert.jsonstrings import json_strings
from di.convert.lanes import assign_lanes
from di.convert.otf2 import clib, emit
from di.convert.otf2.categories import collective_op_code, describe, region_kind
from di.convert.otf2.iofiles import IoFileProperties, plan_io_files
from di.convert.otf2.iolayout import IoDefs, plan_io
from di.convert.otf2.sideprops import side_document
from di.convert.side_tables import warn_losses
from di.convert.otf2.rowids import combined_ids, key_ids, run_starts, text_ids
from di.convert.otf2.flowtext import flow_lists
from di.convert.stringviews import gather_spans, texts_at_offsets
from di.trace import Trace

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
field for, or whose OTF2 field is coarser)."""
NULL_COMM = "\0null"
"""Stands for a null comm while planning; written as an unnamed communicator whose group name says so."""
DEFAULT_COMM = NULL_COMM
GROUP_NAME_PREFIX = "di:"
"""A communicator group name starting with this holds JSON; ``{"null_comm": true}`` marks the communicator of
messages and collectives whose ``comm`` is null."""


@dataclass
class TextColumn:
    """Strings a column added whole (:meth:`Strings.add_many`): ref ``first_ref + i`` is the text of row ``rows[i]``,
    ``data[starts[r]:ends[r]]`` (UTF-8); ``ids``: the id (ref - first_ref) of every row, -1 for a null."""

    first_ref: int
    values: pl.Series
    data: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    rows: np.ndarray
    ids: np.ndarray


DISTINCT_SAMPLE = 4096
"""Rows of a string column sampled (evenly spread) to tell whether its texts are nearly all distinct."""
MOSTLY_DISTINCT = 0.9
"""Share of distinct texts in the sample above which a column's texts are not searched for repeats."""


def mostly_distinct(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, valid: np.ndarray) -> bool:
    """True when the texts ``data[starts[i]:ends[i]]`` of the ``valid`` rows are nearly all distinct, judged on
    :data:`DISTINCT_SAMPLE` rows spread evenly over the column (False for a column of fewer than four times as many
    rows: those are numbered whole). Numbering a million args texts of a real PyTorch profile by hash costs a fifth of
    the OTF2 write and finds no repeat; writing the rare repeat of such a column twice only costs its bytes."""
    rows = np.flatnonzero(valid)
    if rows.size < 4 * DISTINCT_SAMPLE:
        return False
    take = rows[np.linspace(0, rows.size - 1, DISTINCT_SAMPLE).astype(np.int64)]
    picked = np.ones(take.size, np.bool_)
    sample, sample_offsets = gather_spans(data, starts[take], ends[take], picked)
    _, first = text_ids(*(readonly(a) for a in (sample, sample_offsets, picked)))
    return first.size >= MOSTLY_DISTINCT * take.size


class Strings:
    """The archive's string definitions: ref = insertion order, ``""`` is ref 0.

    A few hundred names (regions, locations, communicators) are looked up one
    by one through a dict; a column of per-event strings (args texts, a
    million distinct ones in a real PyTorch profile) is numbered on its UTF-8
    buffer by a numba hash table (:func:`rowids.text_ids`) and its distinct
    texts take consecutive refs, never through a Python dict or loop; when a
    sample shows them nearly all distinct (:func:`mostly_distinct`), every
    row takes a ref of its own without hashing. Such a column's texts are not
    matched against the dict's: OTF2 allows two refs of one text.
    """

    SMALL = 4096
    """Distinct strings of one :meth:`add_many` up to which the dict takes them."""

    def __init__(self) -> None:
        self.refs: dict[str, int] = {"": 0}
        self.n = 1
        self.pieces: list[str | TextColumn] = [""]
        """The strings in ref order: single strings, and columns of new distinct strings."""
        self.frozen = False

    def ref(self, s: str) -> int:
        """Ref of ``s``, added while planning; after :meth:`chunks` only lookups."""
        got = self.refs.get(s)
        if got is None and self.frozen:
            got = self._in_columns(s)
        if got is None:
            if self.frozen:
                raise KeyError(f"string {s!r} was not planned")
            got = self.refs[s] = self.n
            self.pieces.append(s)
            self.n += 1
        return got

    def _in_columns(self, s: str) -> int | None:
        for col in self.pieces:
            if isinstance(col, TextColumn):
                hit = (col.values.cast(pl.String) == s).arg_true()
                if hit.len():
                    self.refs[s] = col.first_ref + int(col.ids[int(hit[0])])
                    return self.refs[s]
        return None

    def add_many(self, values: pl.Series) -> np.ndarray:
        """Refs (int64, ``emit.NO_VALUE`` for nulls) of a column of strings, adding the new ones. A column whose
        texts are nearly all distinct (:func:`mostly_distinct`) is not searched for repeats: each of its non-null
        rows takes a ref of its own."""
        valid = values.is_not_null().to_numpy()
        data, starts, ends = text_spans(values)
        if mostly_distinct(data, starts, ends, valid):
            rows = np.flatnonzero(valid)
            ids = np.where(valid, np.cumsum(valid) - 1, -1)
        else:
            data, offsets = utf8_buffers(values)
            starts, ends = offsets[:-1], offsets[1:]
            ids, rows = text_ids(*(readonly(a) for a in (data, offsets, valid)))
        if rows.size <= self.SMALL:
            lut = np.full(rows.size + 1, emit.NO_VALUE, np.int64)  # ids of nulls (-1) pick the last entry
            lut[:-1] = [self.ref(v) for v in values.gather(rows).cast(pl.String).to_list()]
            return lut[ids]
        self.pieces.append(TextColumn(self.n, values, data, starts, ends, rows, ids))
        refs = np.where(ids >= 0, ids + self.n, emit.NO_VALUE)
        self.n += rows.size
        return refs

    def chunks(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The strings in ref order as (UTF-8 bytes, int64 starts and ends, rows) for :func:`emit.write_strings`; ref
        lookups only from now on."""
        self.frozen = True
        out, singles = [], []
        for piece in [*self.pieces, None]:
            if isinstance(piece, str):
                singles.append(piece)
                continue
            if singles:
                data, offsets = utf8_buffers(pl.Series(singles, dtype=pl.String))
                out.append((data, offsets[:-1], offsets[1:], np.arange(len(singles), dtype=np.int64)))
                singles = []
            if piece is not None:
                out.append((piece.data, piece.starts, piece.ends, piece.rows))
        return [tuple(readonly(a) for a in chunk) for chunk in out]

    def check_frozen(self) -> None:
        assert self.frozen


@dataclass
class Layout:
    """What the writer writes; see the writer module for the meaning."""

    strings: Strings
    hosts: list[str]
    groups: list[tuple[int, int]]
    out_locations: list[dict[str, Any]]
    rank_locations: list[int]
    regions: list[dict[str, Any]]
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


def _locations(
    trace: Trace, pairs: pl.DataFrame, strings: Strings
) -> tuple[pl.DataFrame, list[str], list[tuple[int, int]], list[int]]:
    """Output locations, one per (loc, lane) in that order, with ``metric`` (the lane -1 or the counter
    timeline that holds a series' samples), their group, plus hosts, groups and the rank locations.
    ``pairs``: the distinct (loc, lane) of the events."""
    locs = trace.locations
    with_events = pairs
    series_locs = trace.series["loc"].unique()
    busy = set(with_events["loc"].to_list())
    metric = pl.DataFrame(
        {"loc": series_locs, "lane": [-1 if int(x) in busy else 0 for x in series_locs.to_list()]},
        schema={"loc": pl.UInt32, "lane": pl.Int64},
    )
    keys = (
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
    ranks = sorted(locs["rank"].unique().to_list())
    host_of = {}
    for r, h in locs.select("rank", "host").iter_rows():
        host_of.setdefault(r, h or "unknown host")
    hosts = sorted(set(host_of.values()))
    groups = [(r, hosts.index(host_of[r])) for r in ranks]
    base = pl.col("name").fill_null(pl.format("{} {}", pl.col("kind").cast(pl.String), "loc"))
    out = (
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
    for s in ["di", "machine", "node", *hosts, *(f"MPI Rank {r}" for r in ranks)]:
        strings.ref(s)
    strings.add_many(out["out_name"])
    first = out.sort(pl.col("kind") != "cpu_thread", "ref").group_by("group", maintain_order=True).first().sort("group")
    return out, hosts, groups, first["ref"].to_list()


def _regions(trace: Trace, strings: Strings) -> tuple[list[dict[str, Any]], np.ndarray]:
    """One region per distinct (name, cat, src_cat, instant), found on the columns' integer codes; region ref per event row."""
    ev = trace.events
    src = ev["src_cat"]
    if src.null_count() == 0:
        src_code = src.to_physical().to_numpy()
    elif src.null_count() == src.len():
        src_code = np.zeros(src.len(), np.uint32)
    else:
        src_code = (src.to_physical().cast(pl.Int64) + 1).fill_null(0).to_numpy()  # null apart from every category
    region, first = combined_ids(
        ev["name"].to_physical().to_numpy(), ev["cat"].to_physical().to_numpy(), src_code, ev["instant"].to_numpy()
    )
    keys = ev[first].select(
        pl.col("name").cast(pl.String), pl.col("cat").cast(pl.String), pl.col("src_cat").cast(pl.String), "instant"
    )
    regions = []
    for name, cat, src_cat, instant in keys.iter_rows():
        paradigm, role = region_kind(cat, src_cat)
        d = describe(cat, src_cat, bool(instant))
        strings.ref(name or "")
        strings.ref(d)
        regions.append({"name": name or "", "description": d, "paradigm": paradigm, "role": role})
    return regions, region


def _comms(
    trace: Trace, loc_rank: np.ndarray, ranks: list[int], strings: Strings
) -> tuple[list[dict[str, Any]], dict[str, dict[int, int]]]:
    """Communicators by name: members (indices into the rank list) and global rank -> rank within it."""
    used: dict[str, set[int]] = {}
    msg = trace.messages
    if msg.height:
        ev_loc = trace.events["loc"].to_numpy()
        comm = msg["comm"].fill_null(DEFAULT_COMM)
        ends = pl.DataFrame(
            {
                "comm": pl.concat([comm, comm]),
                "rank": loc_rank[ev_loc[np.concatenate([msg["send"].to_numpy(), msg["recv"].to_numpy()])]],
            }
        ).unique()
        for c, r in ends.iter_rows():  # one row per communicator and rank
            used.setdefault(c, set()).add(r)
    given: dict[str, list[int]] = {}
    coll = trace.collectives
    for c, r, gr in coll.select(pl.col("comm").fill_null(DEFAULT_COMM), "rank", "group_ranks").unique().iter_rows():
        used.setdefault(c, set()).add(r)
        if gr and c not in given:
            try:
                given[c] = [int(x) for x in orjson.loads(gr)]
            except (orjson.JSONDecodeError, TypeError, ValueError):
                pass
    comms, local = [], {}
    position = {r: i for i, r in enumerate(ranks)}
    for name in sorted(used):
        declared = list(given.get(name, []))
        members = declared + sorted(r for r in used[name] if r not in set(declared))
        members = [r for r in members if r in position]
        local[name] = {r: i for i, r in enumerate(members)}
        group_name = GROUP_NAME_PREFIX + '{"null_comm":true}' if name == NULL_COMM else ""
        comms.append(
            {
                "name": "" if name == NULL_COMM else name,
                "members": [position[r] for r in members],
                "group_name": group_name,
            }
        )
        strings.ref(comms[-1]["name"])
        strings.ref(group_name)
    return comms, local


class _LocalRanks:
    """Per row of a communicator column and a global rank column: the communicator's ref (its position in
    ``local``) and the rank within it (the global rank where the communicator does not list it), looked up by
    array search over the communicators' members, not per row."""

    def __init__(self, local: dict[str, dict[int, int]]) -> None:
        self.names = pl.Series(list(local), dtype=pl.String)
        members = [(c, r, i) for c, m in enumerate(local.values()) for r, i in m.items()]
        comm, rank, index = (np.array(v, np.int64) for v in zip(*members)) if members else (np.zeros(0, np.int64),) * 3
        self.width = int(rank.max(initial=0)) + 1
        key = comm * self.width + rank
        order = np.argsort(key)
        self.keys, self.index = key[order], index[order]

    def comm_refs(self, comm: pl.Series) -> np.ndarray:
        """The ref of each row's communicator (a null is :data:`DEFAULT_COMM`)."""
        codes = pl.Series(np.arange(self.names.len(), dtype=np.int64))
        return comm.fill_null(DEFAULT_COMM).replace_strict(self.names, codes, return_dtype=pl.Int64).to_numpy()

    def ranks(self, refs: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Each row's rank within its communicator ``refs``."""
        rank = rank.astype(np.int64)
        if not self.keys.size:
            return rank
        key = refs * self.width + np.clip(rank, 0, self.width - 1)
        at = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        found = (rank >= 0) & (rank < self.width) & (self.keys[at] == key)
        return np.where(found, self.index[at], rank)


def _attachments(trace: Trace, loc_rank: np.ndarray, comms: _LocalRanks, strings: Strings) -> np.ndarray:
    """Attachment rows (see :mod:`emit`) for messages and collectives, in no particular order (:func:`plan` sorts
    them), filled into one array column by column."""
    ev_loc = trace.events["loc"].to_numpy()
    msg, coll = trace.messages, trace.collectives
    done, post = msg["send_done"].fill_null(-1).to_numpy(), msg["recv_post"].fill_null(-1).to_numpy()
    isend, irecv = done >= 0, post >= 0
    m, c = msg.height, coll.height
    n_isend, n_irecv = int(isend.sum()), int(irecv.sum())
    att = np.zeros((2 * m + n_isend + n_irecv + 2 * c, emit.ATT_WIDTH), np.int64)
    if m:
        send, recv = msg["send"].to_numpy(), msg["recv"].to_numpy()
        cref = comms.comm_refs(msg["comm"])
        request = np.arange(1, m + 1, dtype=np.int64)  # one request id per message, unique on every location
        tag, nb = msg["tag"].fill_null(0).to_numpy(), msg["bytes"].fill_null(0).to_numpy()
        for rows, event, phase, kinds, peer in (
            (att[:m], send, 0, np.where(isend, emit.ATT_ISEND, emit.ATT_SEND), loc_rank[ev_loc[recv]]),
            (att[m : 2 * m], recv, 1, np.where(irecv, emit.ATT_IRECV, emit.ATT_RECV), loc_rank[ev_loc[send]]),
        ):
            rows[:, emit.COL_EVENT], rows[:, emit.COL_PHASE], rows[:, emit.COL_TYPE] = event, phase, kinds
            rows[:, emit.COL_PEER] = comms.ranks(cref, peer)
            rows[:, emit.COL_COMM], rows[:, emit.COL_TAG], rows[:, emit.COL_BYTES] = cref, tag, nb
            rows[:, emit.COL_REQUEST] = request
        at = 2 * m
        for event, phase, kind, which, count in (
            (done, 1, emit.ATT_ISEND_COMPLETE, isend, n_isend),
            (post, 0, emit.ATT_IRECV_REQUEST, irecv, n_irecv),
        ):
            rows = att[at : at + count]
            rows[:, emit.COL_EVENT], rows[:, emit.COL_PHASE], rows[:, emit.COL_TYPE] = event[which], phase, kind
            rows[:, emit.COL_REQUEST] = request[which]
            at += count
    if c:
        extra = pl.DataFrame({"args": trace.events["args"].gather(coll["event"])}).select(
            pl.col("args").str.json_path_match("$.collective_op").alias("otf2_op"),
            pl.col("args").str.json_path_match("$.bytes_received").cast(pl.Int64, strict=False).alias("received"),
        )
        begin, end = att[-2 * c : -c], att[-c:]
        event = coll["event"].to_numpy()
        begin[:, emit.COL_EVENT], begin[:, emit.COL_TYPE] = event, emit.ATT_COLL_BEGIN
        end[:, emit.COL_EVENT], end[:, emit.COL_PHASE], end[:, emit.COL_TYPE] = event, 1, emit.ATT_COLL_END
        cref = comms.comm_refs(coll["comm"])
        end[:, emit.COL_OP] = _op_codes(coll["op"], extra["otf2_op"])
        end[:, emit.COL_COMM] = cref
        root = coll["root"]
        end[:, emit.COL_ROOT] = np.where(
            root.is_null().to_numpy(), clib.UNDEFINED_UINT32, comms.ranks(cref, root.fill_null(0).to_numpy())
        )
        sent = coll["bytes"].fill_null(0).to_numpy()
        end[:, emit.COL_SENT], end[:, emit.COL_RECEIVED] = sent, extra["received"].fill_null(pl.Series(sent)).to_numpy()
        own = end[:, emit.COL_ATTRS :]
        own[:, 0], own[:, 1] = strings.add_many(coll["dtype"]), strings.add_many(coll["op"])
        own[:, 2], own[:, 3] = _optional(coll["group_size"]), strings.add_many(coll["group_ranks"])
    return att


def _op_codes(op: pl.Series, otf2_op: pl.Series) -> np.ndarray:
    """OTF2_CollectiveOp of each collective (:func:`collective_op_code`), found once per distinct pair."""
    pairs = pl.DataFrame({"op": op.cast(pl.String).fill_null(""), "otf2": otf2_op.fill_null("")})
    distinct = pairs.unique(maintain_order=True)
    codes = distinct.with_columns(
        pl.Series("code", [collective_op_code(o, x) for o, x in distinct.iter_rows()], dtype=pl.Int64)
    )
    return pairs.join(codes, on=["op", "otf2"], how="left", maintain_order="left")["code"].to_numpy()


def _metrics(trace: Trace, shift: int, out: pl.DataFrame) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """(metric members = one per series, metric arrays: writer refs, bounds, samples)."""
    series = trace.series.sort("series")
    metric_locs = out.filter(pl.col("metric"))
    empty = np.zeros(0, np.int64)
    if not series.height:
        return [], {
            "metric_writers": empty,
            "metric_bounds": np.zeros(1, np.int64),
            "metric_ts": empty,
            "metric_ref": empty,
            "metric_values": np.zeros(0),
        }
    members = [{"name": n, "unit": u} for n, u in series.select("name", "unit").iter_rows()]
    position = {loc: i for i, loc in enumerate(metric_locs["loc"].to_list())}
    ser_pos = {s: i for i, s in enumerate(series["series"].to_list())}
    ser_out = {s: position[loc] for s, loc in series.select("series", "loc").iter_rows()}
    smp = trace.samples.with_columns(
        pl.col("series").replace_strict(ser_out, return_dtype=pl.Int64).alias("out"),
        pl.col("series").replace_strict(ser_pos, return_dtype=pl.Int64).alias("metric"),
    ).sort("out", "ts_ns", "series")
    counts = np.bincount(smp["out"].to_numpy(), minlength=metric_locs.height)
    bounds = np.zeros(metric_locs.height + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    arrays = {
        "metric_writers": metric_locs["ref"].to_numpy().astype(np.int64),
        "metric_counts": counts,
        "metric_bounds": bounds,
        "metric_ts": smp["ts_ns"].to_numpy() + shift,
        "metric_ref": smp["metric"].to_numpy(),
        "metric_values": smp["value"].to_numpy().astype(np.float64),
    }
    return members, arrays


def _optional(col: pl.Series) -> np.ndarray:
    """int64 values with NO_VALUE for nulls."""
    return col.cast(pl.Int64).fill_null(emit.NO_VALUE).to_numpy()


def _event_attribute(col: pl.Series) -> np.ndarray:
    """:func:`_optional` of an events column, or an empty array when every value is null (see :func:`emit.emit_events`)."""
    return np.zeros(0, np.int64) if col.null_count() == col.len() else _optional(col)


def _flows_in(
    trace: Trace, out_of: Callable[[np.ndarray], np.ndarray], order: np.ndarray, bounds: np.ndarray, strings: Strings
) -> np.ndarray:
    """String ref of the ``di.flows_in`` text of every event row (NO_VALUE where no flow ends), empty without flows.

    A flow's source is named by its output location and Enter ordinal there
    (its position in that location's emission order), which survive lanes.
    """
    fl = trace.flows
    if not fl.height:
        return np.zeros(0, np.int64)
    n = trace.events.height
    src = fl["src"].to_numpy()
    if order.size:
        emitted = np.empty(n, np.int64)  # event row -> position in the emission order
        emitted[order] = np.arange(n, dtype=np.int64)
    else:
        emitted = np.arange(n, dtype=np.int64)
    src_loc = out_of(src)
    dst_id, first = key_ids(np.array(fl["dst"].to_numpy()), n)  # writable, as the other callers' keys: one signature
    by_dst = np.zeros(0, np.int64) if first.size == fl.height else np.argsort(dst_id, kind="stable")
    cat = fl["src_cat"].unique()  # JSON of each distinct src_cat, as polars writes it ("null" for null)
    cat_json = json_strings(cat)
    cat_code = fl["src_cat"].replace_strict(cat, pl.Series(np.arange(cat.len(), dtype=np.int64)), return_dtype=pl.Int64)
    if by_dst.size:  # the flows of one destination back to back, destinations in order of first flow
        run = dst_id[by_dst]
        starts = np.r_[True, run[1:] != run[:-1]]
        ends = np.r_[run[1:] != run[:-1], True]
    else:
        starts = ends = np.ones(fl.height, bool)
    kinds = fl["kind"]
    data, offsets = flow_lists(
        by_dst if by_dst.size else np.arange(fl.height, dtype=np.int64),
        starts,
        ends,
        src_loc,
        emitted[src] - bounds[src_loc],
        kinds.to_physical().to_numpy(),
        list(kinds.dtype.categories),
        fl["id"].fill_null(0).to_numpy(),
        fl["id"].is_not_null().to_numpy(),
        cat_code.to_numpy(),
        cat_json.to_list(),
    )
    lists = texts_at_offsets(data, offsets, np.ones(offsets.size - 1, np.bool_), "flows_in")
    refs = strings.add_many(lists)
    dst = fl["dst"].to_numpy()[first]
    out = np.full(n, emit.NO_VALUE, np.int64)
    out[dst] = refs
    return out


def plan(trace: Trace) -> Layout:
    """Everything the writer needs for ``trace``."""
    strings = Strings()
    for name, _ in ATTRIBUTES:
        strings.ref(name)
    ev = trace.events
    loc, start, end = ev["loc"].to_numpy().astype(np.int64), ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
    lanes = assign_lanes(loc, start, end)
    n_lanes = int(lanes.max(initial=0)) + 1
    if n_lanes > 1:
        pair, first = key_ids(loc * n_lanes + lanes)
    else:  # one output location per timeline, in loc order: no array per event needed (events are sorted by loc)
        first = run_starts(loc)
    pairs = pl.DataFrame({"loc": loc[first].astype(np.int64), "lane": lanes[first].astype(np.int64)})
    out, hosts, groups, rank_locs = _locations(trace, pairs, strings)
    ranks = [r for r, _ in groups]
    loc_rank = np.zeros(max(int(trace.locations["loc"].max() or 0) + 1, 1), np.int64)
    loc_rank[trace.locations["loc"].to_numpy()] = trace.locations["rank"].to_numpy()
    event_out = out.filter(~pl.col("metric")).select(pl.col("loc").cast(pl.Int64), "lane", "ref")
    pair_ref = (
        pairs.join(event_out, on=["loc", "lane"], how="left", maintain_order="left")["ref"].to_numpy().astype(np.int64)
    )
    if n_lanes > 1:
        out_ref = pair_ref[pair]
        grouped = out_ref.size < 2 or bool((out_ref[1:] >= out_ref[:-1]).all())  # no lanes split a timeline
        order = (
            np.zeros(0, np.int64) if grouped else np.argsort(out_ref, kind="stable").astype(np.int64)
        )  # empty: identity

        def out_of(rows: np.ndarray) -> np.ndarray:
            return out_ref[rows]

        counts = np.bincount(out_ref, minlength=out.height)
    else:
        order = np.zeros(0, np.int64)

        def out_of(rows: np.ndarray) -> np.ndarray:
            return pair_ref[np.searchsorted(first, rows, side="right") - 1]

        counts = np.zeros(out.height, np.int64)
        np.add.at(counts, pair_ref, np.diff(np.r_[first, ev.height]))
    bounds = np.zeros(out.height + 1, np.int64)
    np.cumsum(counts, out=bounds[1:])
    regions, region = _regions(trace, strings)
    comms, local = _comms(trace, loc_rank, ranks, strings)
    io_att, io_defs = plan_io(trace, strings)
    att = _attachments(trace, loc_rank, _LocalRanks(local), strings)
    if io_att.size:
        att = np.concatenate([att, io_att])
    att_out = out_of(att[:, 0]) if att.size else np.zeros(0, np.int64)
    by = np.lexsort((att[:, 1], att[:, 0], att_out))  # emission order: output location, event row, phase
    att, att_counts = att[by], np.bincount(att_out, minlength=out.height)
    att_bounds = np.zeros(out.height + 1, np.int64)
    np.cumsum(att_counts, out=att_bounds[1:])
    records = 2 * counts + att_counts
    shift, offset, length, realtime = _clock(trace)
    args_ref = strings.add_many(ev["args"]) if ev["args"].null_count() < ev.height else np.zeros(0, np.int64)
    members, metric_arrays = _metrics(trace, shift, out)
    for m in members:
        strings.ref(m["name"])
        strings.ref(m["unit"] or "")
    if members:
        records[metric_arrays["metric_writers"]] += metric_arrays["metric_counts"]
    out_locations = [
        {"name": n, "kind": k, "group": g, "records": int(r), "loc": int(lc)}
        for n, k, g, r, lc in zip(
            out["out_name"].to_list(),
            out["out_kind"].to_list(),
            out["group"].to_list(),
            records.tolist(),
            out["loc"].to_list(),
        )
    ]
    lay = Layout(
        strings=strings,
        hosts=hosts,
        groups=groups,
        out_locations=out_locations,
        rank_locations=rank_locs,
        regions=regions,
        comms=comms,
        metric_members=members,
        global_offset=offset,
        trace_length=length,
        realtime=realtime,
        io=io_defs,
    )
    losses: list[str] = []
    lay.io_file_props = plan_io_files(trace, io_defs.files, strings, losses)
    lay.side_text = side_document(trace, losses)
    warn_losses(losses)  # one DataLossWarning for the writing
    lay.description = f"written by di from {len(trace.meta.get('sources', []))} source(s)"
    lay.arrays.update(metric_arrays)
    lay.arrays.update(
        {
            "order": order,
            "bounds": bounds,
            "start_t": start + shift if shift else start,
            "end_t": end + shift if shift else end,
            "region": region,
            "nbytes": _event_attribute(ev["bytes"]),
            "corr": _event_attribute(ev["corr"]),
            "args_ref": args_ref,
            "flows_ref": _flows_in(trace, out_of, order, bounds, strings),
            "att": att,
            "att_bounds": att_bounds,
        }
    )
    return lay
