"""Where a Perfetto trace came from decides how its tracks, categories, annotations and flows read.

:class:`DiOrigin`: a trace di wrote, with di's packet (:mod:`.ditrace`). Its
locations and series come back from the packet, the track uuid -> location map
with them; categories are di's own (first category the canonical ``cat``, the
second the producer's); the annotations ``args`` and ``bytes`` are di's columns;
flow ids carry the flow kind and table row (:mod:`.flows`), so flows and
messages come back with their attributes.

:class:`ForeignOrigin`: any other producer. Tracks become locations and series
(:func:`.tracks.foreign_layout`); categories are mapped to di's (:mod:`di.convert.categories`);
annotations become ``args``; flow ids are chained as Perfetto's trace processor chains them.

The reader asks the origin once and then runs one path; no other part of it
checks who wrote the file.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import polars as pl

from di.convert.perfetto import ditrace
from di.convert.perfetto.flows import CODE_MESSAGE
from di.convert.perfetto.pairing import chain_flows
from di.convert.perfetto.tracks import Track, foreign_layout
from di.trace import FLOW_KINDS


class Origin(Protocol):
    """What the reader takes from a trace's origin."""

    locations: pl.DataFrame
    loc_of: dict[int, int]
    """track uuid -> loc"""
    series: pl.DataFrame
    series_of: dict[int, int]
    """track uuid -> series"""
    rules: pl.DataFrame | None
    """per series: incremental, multiplier (other producers' counters); None: values as written"""
    own_annotations: bool
    """the debug annotations ``args`` and ``bytes`` are di's columns"""

    def categories(self, cat0: pl.Series, cat1: pl.Series, names: pl.Series) -> tuple[pl.Series, pl.Series]:
        """(cat, src_cat) per slice from its first two category strings and its name."""
        ...

    def flows(
        self, fid: np.ndarray, row: np.ndarray, term: np.ndarray, order: np.ndarray, start_of_row: np.ndarray
    ) -> tuple[pl.DataFrame, pl.DataFrame | None, int]:
        """(flows, messages or None, flow ids seen without both ends) from the flow marks: id bits,
        event row (-1: none), terminating; ``order``: the marks in (timestamp, packet) order;
        ``start_of_row``: each event row's start, ns."""
        ...


class DiOrigin:
    """A trace di wrote; see the module docstring."""

    own_annotations = True
    rules = None

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        tracks, su = doc["tracks"], doc["series_uuid"]
        self.locations = ditrace.table(doc, "locations")
        self.loc_of = dict(zip(tracks["uuid"], tracks["loc"]))
        self.series = ditrace.table(doc, "series")
        self.series_of = dict(zip(su["uuid"], su["series"]))

    def categories(self, cat0: pl.Series, cat1: pl.Series, names: pl.Series) -> tuple[pl.Series, pl.Series]:
        return cat0, cat1

    def flows(
        self, fid: np.ndarray, row: np.ndarray, term: np.ndarray, order: np.ndarray, start_of_row: np.ndarray
    ) -> tuple[pl.DataFrame, pl.DataFrame | None, int]:
        return _di_flows(self.doc, fid, row, term)


class ForeignOrigin:
    """A trace another producer wrote; see the module docstring."""

    own_annotations = False

    def __init__(
        self, descriptors: list[Track], slice_tracks: list[int], counter_tracks: list[int], rank: int, source: int
    ) -> None:
        self.locations, self.loc_of, self.series, self.series_of, self.rules = foreign_layout(
            descriptors, slice_tracks, counter_tracks, rank, source
        )

    def categories(self, cat0: pl.Series, cat1: pl.Series, names: pl.Series) -> tuple[pl.Series, pl.Series]:
        from di.convert.categories import canonical_cats

        src_cat = pl.select(
            pl.when(cat1.is_not_null()).then(pl.concat_str([cat0, pl.lit(","), cat1])).otherwise(cat0)
        ).to_series()
        return canonical_cats(src_cat, names), src_cat

    def flows(
        self, fid: np.ndarray, row: np.ndarray, term: np.ndarray, order: np.ndarray, start_of_row: np.ndarray
    ) -> tuple[pl.DataFrame, pl.DataFrame | None, int]:
        src, dst, ids = chain_flows(fid, row, term, order, start_of_row)
        return pl.DataFrame({"src": src, "dst": dst, "kind": ["user"] * len(src), "id": ids.view(np.int64)}), None, 0


def map_ids(values: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
    """values -> mapping[value], -1 where absent."""
    if not mapping:
        return np.full(len(values), -1, dtype=np.int64)
    keys = np.array(sorted(mapping), dtype=np.int64)
    vals = np.array([mapping[k] for k in keys.tolist()], dtype=np.int64)
    at = np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)
    return np.where(keys[at] == values, vals[at], -1)


def _di_flows(
    doc: dict[str, Any], fid: np.ndarray, row: np.ndarray, term: np.ndarray
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """flows and messages of a trace di wrote, from its flow ids and di's packet.

    Collective edges (code 5) are drawn for the UI only: the collectives table comes from di's packet.
    """
    edges = _edges_by_number(fid, row, term)
    if edges is None:
        edges, unpaired = _edges_joined(fid, row, term)
    else:
        edges, unpaired = edges
    return _with_attributes(doc, edges, unpaired)


def _edges_by_number(fid: np.ndarray, row: np.ndarray, term: np.ndarray) -> tuple[pl.DataFrame, int] | None:
    """:func:`_edges_joined` by direct address: di's writer numbers its edges (``e``, the flow id's bits from 4 on,
    less one) densely, so the first start and the first end of each edge are found by its number, with no hashing
    and no join (0.17 CPU-s for 300,000 flows by unique and join). None when two flow ids share a number or the
    numbers are not dense (an archive di did not write as it writes them), for the join to read it."""
    kept = row >= 0
    fid, row, term = fid[kept], row[kept], term[kept].astype(np.bool_)
    if not fid.size:
        return None
    e = (fid >> np.uint64(4)).astype(np.int64) - 1
    size = int(e.max()) + 1 if e.size else 0
    if e.min() < 0 or size > 2 * fid.size + 16:
        return None
    owner = np.zeros(size, np.uint64)
    owner[e] = fid
    if not (owner[e] == fid).all():  # two flow ids of one number
        return None
    first = []
    for side in (~term, term):  # the row of the first start and of the first end mark of each number
        marks = np.flatnonzero(side)
        at = np.full(size, fid.size, np.int64)
        np.minimum.at(at, e[marks], marks)
        first.append(np.where(at < fid.size, row[np.minimum(at, fid.size - 1)], -1))
    x, y = first
    paired = np.flatnonzero((x >= 0) & (y >= 0))
    f = owner[paired]
    rev = (f & np.uint64(8)) > 0
    edges = pl.DataFrame(
        {
            "code": (f & np.uint64(7)).astype(np.int64),
            "e": paired,
            "src": np.where(rev, y[paired], x[paired]),
            "dst": np.where(rev, x[paired], y[paired]),
        }
    )
    return edges, int(np.count_nonzero(owner)) - paired.size  # a flow id is never 0: the numbers used


def _edges_joined(fid: np.ndarray, row: np.ndarray, term: np.ndarray) -> tuple[pl.DataFrame, int]:
    """The edges (code, e, src, dst) of the flow ids that have a start and an end mark (the first of each), in
    order of ``e``, and the number of flow ids without both."""
    marks = pl.DataFrame(
        {
            "fid": fid,
            "row": row,
            "term": term.astype(bool),
            "code": (fid & np.uint64(7)).astype(np.int64),
            "rev": (fid & np.uint64(8)) > 0,
            "e": (fid >> np.uint64(4)).astype(np.int64) - 1,
        }
    ).filter(pl.col("row") >= 0)
    x = (
        marks.filter(~pl.col("term"))
        .unique("fid", keep="first")
        .select("fid", "code", "rev", "e", pl.col("row").alias("x"))
    )
    y = marks.filter(pl.col("term")).unique("fid", keep="first").select("fid", pl.col("row").alias("y"))
    edges = (
        x.join(y, on="fid", how="inner")
        .with_columns(
            src=pl.when("rev").then("y").otherwise("x"),
            dst=pl.when("rev").then("x").otherwise("y"),
        )
        .sort("e")
    )
    unpaired = marks.select(pl.col("fid").n_unique()).item() - edges.height
    return edges.select("code", "e", "src", "dst"), int(unpaired)


def _with_attributes(doc: dict[str, Any], edges: pl.DataFrame, unpaired: int) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """The flows and messages of the ``edges`` (code, e, src, dst), their other columns from di's packet."""
    n_flows = int(doc["counts"]["flows"])
    f_attr = ditrace.table(doc, "flows").with_row_index("e")
    f = edges.filter(pl.col("code") < len(FLOW_KINDS)).join(
        f_attr.with_columns(pl.col("e").cast(pl.Int64)), on="e", how="left"
    )
    flows = f.select(
        "src",
        "dst",
        kind=pl.col("code").replace_strict(dict(enumerate(FLOW_KINDS)), return_dtype=pl.String),
        id=pl.col("id") if "id" in f.columns else None,
        src_cat=pl.col("src_cat") if "src_cat" in f.columns else None,
    )
    m_attr = ditrace.table(doc, "messages").with_row_index("e").with_columns((pl.col("e").cast(pl.Int64) + n_flows))
    m = edges.filter(pl.col("code") == CODE_MESSAGE).join(m_attr, on="e", how="left")
    messages = m.select(
        pl.col("src").alias("send"),
        pl.col("dst").alias("recv"),
        *[c for c in ("bytes", "tag", "comm", "send_done", "recv_post") if c in m.columns],
    )
    return flows, messages, int(unpaired)
