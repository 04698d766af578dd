"""di's own archive property in an OTF2 archive: the locations and meta that OTF2's definitions cannot say.

An OTF2 location has a name, a type and a location group (here: its rank's
process). A di location also has a host, pid, tid, kind, device, stream, process
name and sort index, and di's writer spreads one location over several OTF2
locations: one per lane of properly nested events (``NAME lane k``,
:mod:`di.convert.otf2.outlocations`) and a metric location for the samples of a
location that has events too. So the writer stores, in the anchor file's
property :data:`PROPERTY` (``otf2-print -A`` lists it), one JSON object:

``format``/``version``
    ``"di-otf2"``, 1.
``meta``
    the trace's meta.json content (restored but for what the tables give, :func:`di.convert.restore.written_meta`).
``locations``, ``series``
    the tables, every column, as :mod:`di.convert.side_tables` writes a table.
``written``
    the trace's ``loc`` of each OTF2 location, by location ref.

The reader puts the records of each OTF2 location back on its ``loc`` (a location's
lanes merge; its events are sorted and nested again) and takes the locations table
and the meta from here, and gives each series read (by loc and name) its id, so an
archive di wrote reads back as the trace it was, series without samples too. A
property that does not check out (another version, columns that do not fit the
schema, a location ref it does not map) is ignored, said in the warnings, and the
archive reads as any producer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import polars as pl

from di.convert.restore import Written, written_meta
from di.convert.side_tables import decode, encode

PROPERTY = "DI::TRACE"
"""Name of the archive property (OTF2 property names are ``NAMESPACE::NAME``)."""
FORMAT, VERSION = "di-otf2", 1


@dataclass(frozen=True)
class Own:
    """What the property says, checked against the archive's location definitions."""

    locations: pl.DataFrame
    """The locations table of the trace written (conformed and validated)."""
    loc_of: np.ndarray
    """The trace's ``loc`` of each of the archive's locations, by its position in the definitions."""
    series: pl.DataFrame
    """The series table of the trace written."""
    written: Written
    """The meta to restore (:func:`di.convert.restore.restore_meta`)."""

    def rank_of(self) -> np.ndarray:
        """The rank of each ``loc`` value (an array indexed by loc)."""
        return self._by_loc(self.locations.get_column("rank").to_numpy().astype(np.int32))

    def is_gpu(self) -> np.ndarray:
        """Whether each ``loc`` value is a GPU stream (an array indexed by loc)."""
        return self._by_loc((self.locations.get_column("kind") == "gpu_stream").to_numpy())

    def _by_loc(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per locations row) as an array indexed by ``loc`` (zero for unused loc values)."""
        loc = self.locations.get_column("loc").to_numpy()
        out = np.zeros(int(loc.max(initial=0)) + 1, values.dtype)
        out[loc] = values
        return out

    def renumber(
        self, series: pl.DataFrame, samples: pl.DataFrame, warnings: list[str]
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """The series read (numbered by the reader) and their samples, with the ids and table di wrote; when some
        series read is not in that table (an archive changed since), the reader's, said in ``warnings``."""
        if not series.height:
            return self.series, samples
        if self.series.select("loc", "name").is_duplicated().any():  # OTF2 held them as one metric member each
            warnings.append(f"archive property {PROPERTY} series ignored: two series of one name on one location")
            return series, samples
        ids = series.join(self.series, on=["loc", "name"], how="left", suffix="_written")
        if ids.get_column("series_written").null_count():
            warnings.append(f"archive property {PROPERTY} series ignored: it lacks some of the archive's metrics")
            return series, samples
        to_id = dict(zip(ids.get_column("series").to_list(), ids.get_column("series_written").to_list()))
        samples = samples.with_columns(pl.col("series").replace_strict(to_id, return_dtype=pl.UInt32)).sort(
            "series", "ts_ns", maintain_order=True
        )
        return self.series, samples


def document(trace: Any, written: pl.Series, losses: list[str]) -> str:
    """The property's value for ``trace``; ``written``: the trace's loc of each output location, by ref. What
    JSON cannot hold of the locations' extra columns is said in ``losses``."""
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "meta": trace.meta,
        "locations": encode(trace.locations, "locations", "OTF2", losses),
        "series": encode(trace.series, "series", "OTF2", losses),
        "written": written.cast(pl.Int64).to_list(),
    }
    return orjson.dumps(doc).decode()


def set_own_property(o: Any, archive: Any, text: str) -> None:
    """Store ``text`` (:func:`document`) as the archive's property (nothing when empty)."""
    if text:
        o.Archive_SetProperty(archive, PROPERTY, text, True)


def read_own(reader: Any, refs: list[int], warnings: list[str]) -> Own | None:
    """The property of an open :class:`di.convert.otf2.archive.ArchiveReader`, checked against the location ``refs``
    of its definitions (in their order); None without it, or when it does not check out (then said in
    ``warnings``)."""
    import _otf2

    if PROPERTY not in _otf2.Reader_GetPropertyNames(reader.handle):
        return None
    where = f"archive property {PROPERTY}"
    try:
        doc = orjson.loads(_otf2.Reader_GetProperty(reader.handle, PROPERTY))
    except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:  # the otf2 package decodes the text
        warnings.append(f"{where} ignored: not UTF-8 JSON ({exc}); locations read as the archive defines them")
        return None
    why, own = _checked(doc, refs, where, warnings)
    if own is None:
        warnings.append(f"{where} ignored: {why}; locations read as the archive defines them")
    return own


def _checked(doc: Any, refs: list[int], where: str, warnings: list[str]) -> tuple[str, Own | None]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        return f"not {FORMAT} version {VERSION}", None
    tables = {}
    for name in ("locations", "series"):
        try:
            tables[name] = decode(doc.get(name), name)
        except ValueError as exc:
            return f"{name}: {exc}", None
    locations = tables["locations"]
    written = doc.get("written")
    if not isinstance(written, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in written):
        return "written is not a list of integers", None
    known = set(locations.get_column("loc").to_list())
    if not set(written) <= known or not set(tables["series"].get_column("loc").to_list()) <= known:
        return "written or series name locations it does not define", None
    if any(r < 0 or r >= len(written) for r in refs):
        return f"the archive has {len(refs)} locations, the property maps {len(written)}", None
    meta = written_meta(doc.get("meta"), warnings, f"{where} meta")
    restored = Written(meta={**meta, "warnings": meta.get("warnings", [])}, replaces_meta=True)
    loc_of = np.asarray(written, np.int64)[np.asarray(refs, np.int64)]
    return "", Own(locations, loc_of, tables["series"], restored)
