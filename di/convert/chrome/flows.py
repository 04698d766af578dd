"""Chrome flows -> ``flows`` rows: s/t/f steps bound to slices, and bind_id (flow v2).

Binding (Trace Event Format): 's' and 't' bind to the innermost slice that
encloses their ts on their thread; 'f' with ``"bp": "e"`` too; 'f' without it
binds to the next slice that starts at or after its ts. Steps chain by
(cat, id) in time order. Flow v2: an X event with ``bind_id`` and
``flow_out`` starts a flow that the next event (in time) with the same
``bind_id`` and ``flow_in`` ends.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
import polars as pl

from di.convert.chrome import scan as S
from di.convert.chrome.pairing import bind_points, chain_flows
from di.convert.chrome.decode import Raw
from di.convert.chrome.phases import FLOW, LK_THREAD, rows_of
from di.convert.columns import dense_row_ids, match_rows, packed_key
from di.convert.provenance import FLOW_END_WITHOUT_START, FLOW_START_WITHOUT_END
from di.nesting import nesting_order

LAUNCH_FLOW_CATS = ("ac2g",)
_EMPTY = {"src": pl.Int64, "dst": pl.Int64, "kind": pl.String, "id": pl.Int64, "src_cat": pl.String}


def empty() -> pl.DataFrame:
    """A flows frame with no rows."""
    return pl.DataFrame(schema=_EMPTY)


_THREAD = ["pid_k", "pid", "tid_k", "tid"]


class Nested(NamedTuple):
    """Events in nesting order (sorted by loc, start_ns, -end_ns) as numpy columns:
    what flow end points bind to. ``parent`` is -1 for none."""

    loc: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    parent: np.ndarray
    instant: np.ndarray

    def loc_first(self, n_locs: int) -> np.ndarray:
        """The row of the first event of each loc (size ``n_locs`` + 1)."""
        return np.searchsorted(self.loc, np.arange(n_locs + 1), side="left").astype(np.int64)


def _thread_locs(raw: Raw, rows: np.ndarray, keys: pl.DataFrame) -> np.ndarray:
    """The thread timeline (``loc``) of each record of ``rows``, -1 where its thread has no events."""
    threads = keys.filter(pl.col("lkind") == LK_THREAD)
    if not threads.height:
        return np.full(rows.size, -1, dtype=np.int64)
    c = raw.cols
    # the keys, then the queries, field by field, packed into one word each where their ranges fit (pids and tids of
    # a real trace do): dense_row_ids then numbers them through a slot per word, no hashing
    fields = [np.concatenate([threads.get_column(f).to_numpy(), c[f][rows]]) for f in _THREAD]
    table = packed_key(fields)
    if table is None:
        table = np.stack([f.astype(np.int64, copy=False) for f in fields])
    at = match_rows(table[:, : threads.height], table[:, threads.height :], joined=table)
    return np.where(at >= 0, threads.get_column("loc").to_numpy().astype(np.int64)[at], -1)


def flow_steps(raw: Raw, ok: np.ndarray) -> np.ndarray:
    """The usable s/t/f records (scanner rows)."""
    return rows_of(raw, ok, *FLOW)


def flow_events(
    raw: Raw, rows: np.ndarray, ts: np.ndarray, ev: Nested, keys: pl.DataFrame, syms: pl.Series, dropped: Counter[str]
) -> pl.DataFrame:
    """Edges from the s/t/f records ``rows`` (:func:`flow_steps`; ``ts``: every record's
    ts in ns) between the events ``ev`` (row = position)."""
    if not rows.size:
        return empty()
    c = raw.cols
    # one flow per (cat, id), its steps in (ts, file) order; the key one word when it fits, else
    # (cat, id kind) packed in one row (the kind is one byte): two rows to hash, not three
    cat, id_k, fid = c["cat"][rows], c["id_k"][rows], c["id"][rows]
    key = packed_key([cat, id_k, fid])
    if key is None:
        key = np.stack([(cat.astype(np.int64) << np.int64(8)) | id_k, fid])
    flow, _ = dense_row_ids(key)
    t = ts[rows]
    order = nesting_order(flow, t, np.zeros_like(t), rows)
    rows, flow, t = rows[order], flow[order], t[order]
    ph = c["ph"][rows]
    bound = bind_points(
        ev.loc_first(int(keys.get_column("loc").max() or 0) + 1),
        ev.start_ns,
        ev.end_ns,
        ev.parent,
        ev.instant,
        _thread_locs(raw, rows, keys),
        t,
        (ph == ord("f")) & (c["bp"][rows] != ord("e")),
    )
    step = np.where(ph == ord("s"), 0, np.where(ph == ord("t"), 1, 2)).astype(np.int8)
    src, dst, via, orphan, unbound = chain_flows(flow, step, bound)
    if unbound.size:
        dropped["flow step on no slice"] += int(unbound.size)
    lone_starts = int(np.count_nonzero(ph[orphan] == ord("s")))
    if lone_starts:
        dropped[FLOW_START_WITHOUT_END] += lone_starts
    if orphan.size - lone_starts:
        dropped[FLOW_END_WITHOUT_START] += int(orphan.size - lone_starts)
    last = syms.len() - 1
    first = rows[via]
    cat = c["cat"][first].astype(np.int64)
    cat[cat < 0] = last
    launch = np.isin(cat, raw.symbol_ids(LAUNCH_FLOW_CATS))
    edges = (
        pl.DataFrame(
            {
                "src": src,
                "dst": dst,
                "launch": launch,
                "id": c["id"][first],
                "int_id": c["id_k"][first] == S.K_INT,
            }
        )
        .select(
            "src",
            "dst",
            pl.when(pl.col("launch")).then(pl.lit("launch")).otherwise(pl.lit("user")).alias("kind"),
            pl.when(pl.col("int_id")).then(pl.col("id")).alias("id"),
            syms.gather(cat).alias("src_cat"),
        )
        .cast(_EMPTY)
    )
    return with_di_flow(edges, raw.di_flow.gather(first)) if raw.di_flow is not None else edges


def with_di_flow(edges: pl.DataFrame, di_flow: pl.Series) -> pl.DataFrame:
    """Restore kind, id and src_cat that di's own writer stored in ``di_flow``."""
    if di_flow.null_count() == di_flow.len():
        return edges
    shape = pl.Struct({"kind": pl.String, "id": pl.Int64, "src_cat": pl.String})
    try:
        d = di_flow.str.json_decode(shape)
    except pl.exceptions.PolarsError:  # a damaged file: keep the objects that read, the others restore nothing
        d = pl.Series([_di_flow_or_none(text) for text in di_flow.to_list()], dtype=shape)
    from di.trace import FLOW_KINDS

    # a flows kind, or "message": the arrows di draws for messages, which the reader drops (messages come from diTrace)
    has = d.is_not_null() & d.struct.field("kind").is_in([*FLOW_KINDS, "message"]).fill_null(False)
    return edges.with_columns(
        pl.when(has).then(d.struct.field("kind")).otherwise(pl.col("kind")).alias("kind"),
        pl.when(has).then(d.struct.field("id")).otherwise(pl.col("id")).alias("id"),
        pl.when(has).then(d.struct.field("src_cat")).otherwise(pl.col("src_cat")).alias("src_cat"),
    )


def _di_flow_or_none(text: str | None) -> dict[str, object] | None:
    """One ``di_flow`` object with its fields' types checked; None when it is not one."""
    import orjson

    try:
        got = orjson.loads(text) if text is not None else None
    except orjson.JSONDecodeError:
        return None
    if not isinstance(got, dict):
        return None
    fid = got.get("id")
    ok_id = isinstance(fid, int) and not isinstance(fid, bool) and -(2**63) <= fid < 2**63
    return {
        "kind": got["kind"] if isinstance(got.get("kind"), str) else None,
        "id": fid if ok_id else None,
        "src_cat": got["src_cat"] if isinstance(got.get("src_cat"), str) else None,
    }


def has_bind_flows(flags: np.ndarray) -> bool:
    """True when some event's ``flags`` have flow_in or flow_out (else :func:`bind_id_flows` finds nothing)."""
    return bool(np.any(flags & (S.F_FLOW_IN | S.F_FLOW_OUT)))


def bind_id_flows(ev: pl.DataFrame, dropped: Counter[str]) -> pl.DataFrame:
    """Edges from flow v2 ``bind_id`` + ``flow_out``/``flow_in`` on slices."""
    io = S.F_FLOW_IN | S.F_FLOW_OUT
    b = ev.with_row_index("row").filter((pl.col("bind_k") != S.K_NONE) & ((pl.col("flags") & io) != 0))
    if not b.height:
        return empty()
    b = b.sort(["bind_k", "bind", "start_ns", "row"]).with_columns(
        pl.col("row").shift(1).over(["bind_k", "bind"]).alias("prev"),
        ((pl.col("flags") & S.F_FLOW_OUT) != 0).shift(1).over(["bind_k", "bind"]).alias("prev_out"),
        ((pl.col("flags") & S.F_FLOW_IN) != 0).alias("is_in"),
        ((pl.col("flags") & S.F_FLOW_OUT) != 0).shift(-1).over(["bind_k", "bind"]).is_null().alias("last"),
    )
    edges = b.filter(pl.col("is_in") & pl.col("prev_out").fill_null(False))
    flow_text = edges.get_column("di_flow")
    lone_in = b.filter(pl.col("is_in") & ~pl.col("prev_out").fill_null(False)).height
    lone_out = b.filter(((pl.col("flags") & S.F_FLOW_OUT) != 0) & pl.col("last")).height
    if lone_in:
        dropped[f"flow_in {FLOW_END_WITHOUT_START}"] += lone_in
    if lone_out:
        dropped[f"flow_out {FLOW_START_WITHOUT_END}"] += lone_out
    return with_di_flow(
        edges.select(
            pl.col("prev").cast(pl.Int64).alias("src"),
            pl.col("row").cast(pl.Int64).alias("dst"),
            pl.lit("user").alias("kind"),
            pl.when(pl.col("bind_k") == S.K_INT).then(pl.col("bind")).otherwise(None).alias("id"),
            pl.lit(None, dtype=pl.String).alias("src_cat"),
        ).cast(_EMPTY),
        flow_text,
    )
