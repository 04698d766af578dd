"""``comms``, ``comm_links`` and ``jobs`` in an OTF2 archive: one archive property holding their documents.

OTF2 has no definition for what NCCL logs say of a communicator's members (host, pid, device, bus id,
version) or its channel, ring and tree edges with their transports; its Comm definitions hold a name and a
group only; nor for a scheduler's jobs. di writes these tables in the anchor file's property :data:`PROPERTY` (``otf2-print -A`` lists
it), one JSON object ``{table: document}`` in :mod:`di.convert.side_tables`' form. ``io_files`` has an
OTF2 home of its own (:mod:`di.convert.otf2.iofiles`).
"""

from __future__ import annotations

from typing import Any

import orjson
import polars as pl

from di.convert.side_tables import decode_all, encode_all

PROPERTY = "DI::SIDE_TABLES"
"""Name of the archive property (OTF2 property names are ``NAMESPACE::NAME``)."""
TABLES = ("comms", "comm_links", "jobs")


def side_document(trace: Any, losses: list[str]) -> str:
    """The property's value for ``trace`` (empty when the tables are all empty); what JSON cannot hold is said in
    ``losses``."""
    docs = encode_all(trace, "OTF2", TABLES, losses)
    return orjson.dumps(docs).decode() if docs else ""


def set_side_property(o: Any, archive: Any, text: str) -> None:
    """Store ``text`` (:func:`side_document`) as the archive's property (nothing when empty)."""
    if text:
        o.Archive_SetProperty(archive, PROPERTY, text, True)


def read_side_property(o: Any, reader: Any, warnings: list[str]) -> dict[str, pl.DataFrame]:
    """The tables of an open reader's property (none without it); a damaged one is said in ``warnings``."""
    if PROPERTY not in o.Reader_GetPropertyNames(reader):
        return {}
    try:
        docs = orjson.loads(o.Reader_GetProperty(reader, PROPERTY))
    except (orjson.JSONDecodeError, UnicodeDecodeError) as exc:  # the otf2 package decodes the text
        warnings.append(f"archive property {PROPERTY} ignored: not UTF-8 JSON ({exc})")
        return {}
    return decode_all(docs, f"archive property {PROPERTY}", warnings)


def read_side_tables(reader: Any, warnings: list[str]) -> dict[str, pl.DataFrame]:
    """comms, comm_links, jobs and io_files of an open :class:`di.convert.otf2.archive.ArchiveReader`, those it has;
    damaged ones are said in ``warnings``."""
    import _otf2

    from di.convert.otf2.iofiles import read_io_files

    g = reader.global_defs
    out = read_side_property(_otf2, reader.handle, warnings)
    files = read_io_files(g.io_file_properties, g.io_files, g.strings, warnings)
    if files is not None:
        out["io_files"] = files
    return out
