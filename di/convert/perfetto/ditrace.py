"""di's own packet in a Perfetto trace: what TrackEvents cannot say.

A TracePacket with field :data:`~di.convert.perfetto.fields.PACKET_DI_TRACE`
(an extension number the trace processor skips) holding one JSON object:

``format``/``version``
    ``"di-perfetto"``, 1.
``offset_ns``
    added to every packet timestamp to get the model's ns (0 unless some time was negative).
``meta``
    the trace's meta.json content.
``locations``, ``series``
    the tables, column-wise, with every column (extra ones too).
``tracks``
    uuid, loc and lane of each event track; ``series_uuid`` of each series.
``flows``, ``messages``
    the columns flow ids cannot carry (flows: id, src_cat; messages: bytes,
    tag, comm, and the rows send_done/recv_post of non-blocking ends in the
    events order the reader rebuilds), row k = the k-th edge of that table
    (:mod:`di.convert.perfetto.flows`).
``collectives``
    the whole table, ``event`` = rows in the events order the reader rebuilds.
``counts``
    events, flows, messages, samples written, for the reader's checks.
``side_tables``
    comms, comm_links and io_files, where the trace has rows of them (:mod:`di.convert.side_tables`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import polars as pl

from di.convert import side_tables
from di.convert.perfetto import fields as F
from di.convert.perfetto.protobuf import field_len, field_varint

from di.convert.restore import Written, written_meta

if TYPE_CHECKING:
    from di.convert.perfetto.flows import FlowMarks
    from di.convert.perfetto.layout import Layout
    from di.trace import Trace

FORMAT, VERSION = "di-perfetto", 1


def _columns(df: pl.DataFrame) -> dict[str, Any]:
    """The columns of ``df`` as JSON arrays, without a Python object per value: integer columns without
    nulls as numpy arrays, text columns as JSON that polars writes (the bytes orjson would write)."""
    out: dict[str, Any] = {}
    for c in df.columns:
        s = df.get_column(c)
        if s.dtype.is_integer() and not s.null_count():
            out[c] = s.to_numpy()
        elif s.dtype in (pl.String, pl.Categorical) or isinstance(s.dtype, pl.Enum):
            out[c] = orjson.Fragment(_json_array(s.cast(pl.String)))
        else:
            out[c] = s.to_list()
    return out


def _json_array(s: pl.Series) -> str:
    """A String Series as one JSON array text (null as null)."""
    text = pl.DataFrame({"v": s}).select(pl.col("v").implode()).write_json()
    return text[len('[{"v":') : -len("}]")]


def _rows(row_of: np.ndarray, refs: pl.Series) -> pl.Series:
    """Event rows ``refs`` (nulls kept) in the events order the reader rebuilds."""
    got = refs.fill_null(0).to_numpy()
    return pl.Series(row_of[got]).set(refs.is_null(), None) if refs.len() else refs


def packet(
    trace: Trace, layout: Layout, marks: FlowMarks, offset_ns: int, row_of: np.ndarray | None, sequence_id: int
) -> bytes:
    """The di packet (a whole TracePacket field of the Trace message)."""
    collectives = trace.collectives
    if row_of is not None and collectives.height:
        collectives = collectives.with_columns(event=pl.Series(row_of[collectives.get_column("event").to_numpy()]))
    messages = trace.messages.select("bytes", "tag", "comm", "send_done", "recv_post")
    if row_of is not None and messages.height:
        messages = messages.with_columns(
            *(pl.Series(c, _rows(row_of, messages.get_column(c))) for c in ("send_done", "recv_post"))
        )
    tracks = layout.tracks.filter("used")
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "offset_ns": offset_ns,
        "meta": trace.meta,
        "locations": _columns(trace.locations),
        "tracks": {
            "uuid": tracks.get_column("uuid").to_list(),
            "loc": tracks.get_column("loc").to_list(),
            "lane": tracks.get_column("lane").to_list(),
        },
        "series": _columns(trace.series),
        "series_uuid": layout.series.select("series", "uuid").to_dict(as_series=False),
        "flows": _columns(trace.flows.select("id", "src_cat")),
        "messages": _columns(messages),
        "collectives": _columns(collectives),
        "counts": {"events": trace.events.height, "samples": trace.samples.height, **marks.edges},
    }
    side = side_tables.encode_all(trace, "Perfetto")
    if side:
        doc[side_tables.KEY] = side
    body = field_varint(F.PACKET_SEQUENCE_ID, sequence_id) + field_len(
        F.PACKET_DI_TRACE, orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    )
    return field_len(F.TRACE_PACKET, body)


def parse(data: bytes) -> dict[str, Any] | None:
    """The di packet's object, or None when it is not one this reader knows."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("version") == VERSION:
        return doc
    return None


def table(doc: dict[str, Any], name: str) -> pl.DataFrame:
    """One column-wise table of the packet as a DataFrame (columns as stored; Trace.build casts them)."""
    cols = doc.get(name) or {}
    return pl.DataFrame({c: pl.Series(c, v, strict=False) for c, v in cols.items()})


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63


def _int_lists(d: Any, cols: tuple[str, ...]) -> bool:
    return (
        isinstance(d, dict)
        and all(isinstance(d.get(c), list) and all(_is_int(v) for v in d[c]) for c in cols)
        and len({len(d[c]) for c in cols}) == 1
    )


def problem(doc: dict[str, Any]) -> str | None:
    """What makes a parsed di packet unusable (None: it reads back): fields of the wrong type, columns
    of unequal length or of values their table's schema refuses, tracks or series on no location."""
    from di.schema import validate_table
    from di.trace import conform

    counts = doc.get("counts")
    if (
        not _is_int(doc.get("offset_ns", 0))
        or not isinstance(counts, dict)
        or not all(_is_int(counts.get(k)) for k in ("events", "flows"))
    ):
        return "offset_ns or counts are not integers"
    if not _int_lists(doc.get("tracks"), ("uuid", "loc", "lane")) or not _int_lists(
        doc.get("series_uuid"), ("uuid", "series")
    ):
        return "tracks or series_uuid are not lists of integers of one length"
    tables = {}
    for name in ("locations", "series", "flows", "messages", "collectives"):
        cols = doc.get(name) or {}
        if (
            not isinstance(cols, dict)
            or not all(isinstance(v, list) for v in cols.values())
            or len({len(v) for v in cols.values()}) > 1
        ):
            return f"{name} is not columns of one length"
        try:
            tables[name] = conform(name, table(doc, name))
            if name in ("locations", "series", "collectives"):
                validate_table(name, tables[name])
        except Exception as exc:  # noqa: BLE001  polars and the schema check raise several types
            return f"{name}: {str(exc).splitlines()[0][:120]}"
    locs = set(tables["locations"].get_column("loc").to_list())
    if not set(doc["tracks"]["loc"]) <= locs or not set(tables["series"].get_column("loc").to_list()) <= locs:
        return "tracks or series on locations it does not define"
    if not set(doc["series_uuid"]["series"]) <= set(tables["series"].get_column("series").to_list()):
        return "series tracks of series it does not define"
    return None


def offset_ns(doc: dict[str, Any] | None) -> int:
    """What to add to every packet timestamp to get the model's ns (0 without di's packet)."""
    return int(doc.get("offset_ns", 0)) if doc is not None else 0  # optional in di's packet (see problem)


def written(doc: dict[str, Any] | None, path: Any, warnings: list[str]) -> Written | None:
    """What :func:`di.convert.restore.restore` puts back (None without di's packet): the trace's meta
    (the fields that match the schema; the others said in ``warnings``) and the collectives table
    (``event``: rows in the events order the reader rebuilds, which are the written rows)."""
    if doc is None:
        return None
    meta = written_meta(doc.get("meta"), warnings, f"{path}: di packet meta")
    return Written(
        meta={**meta, "warnings": meta.get("warnings", [])},
        tables={"collectives": table(doc, "collectives")},
        replaces_meta=True,
        side_tables=side_tables.decode_all(doc.get(side_tables.KEY), f"{path}: di packet", warnings),
    )


def loaded_rows(doc: dict[str, Any] | None, n_events: int) -> np.ndarray | None:
    """By written row, the loaded event row: the same row when every event written was read
    back, else None (the rows are unknown)."""
    if doc is None or n_events != int(doc["counts"]["events"]):
        return None
    return np.arange(n_events, dtype=np.int64)
