"""OTF2 global definitions -> plain Python tables the event pass and the model need.

Read through the OTF2 C API (:mod:`globaldefs`; the events are read
elsewhere through the same API). Definitions:

* rank of a location = position of its location group among the members of
  the MPI ``COMM_LOCATIONS`` group (the MPI rank); without MPI, the position
  of its location group among all location groups.
* host = the nearest system-tree ancestor of the location group whose class
  is ``node`` (else the direct parent's name).
* kind: CPU_THREAD -> ``cpu_thread``, GPU / ACCELERATOR_STREAM ->
  ``gpu_stream`` (device and stream parsed from Score-P's ``CUDA[d:s]``
  names where present), METRIC -> ``counter``.
* process: the location group's name; ``di analysis`` for the members of a
  LOCATIONS group of that name (:mod:`di.convert.otf2.analysis_defs`).
* comm name: the communicator's name, suffixed with ``#<ref>`` when several
  communicators share a name, so it is equal on every rank and unique.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from di.convert.otf2.categories import DESCRIPTION_PREFIX, parse_description, region_cats
from di.convert.otf2.globaldefs import GlobalDefs, enum_name

if TYPE_CHECKING:  # the String cfunc compiles on import: the writers that import this module do not need it
    from di.convert.otf2.stringdefs import StringDefs

_DEVICE_STREAM = re.compile(r"\[(\d+):(\d+)\]")
_RANK_NAME = re.compile(r"MPI Rank (\d+)")


@dataclass
class Definitions:
    """What the reader needs from an archive's global definitions."""

    timer_resolution: int
    global_offset: int
    trace_length: int
    realtime_ns: int | None
    locations: list[dict[str, Any]]
    regions: pl.DataFrame
    """One row per region (:func:`_regions`)."""
    comms: dict[int, dict[str, Any]]
    metrics: dict[int, list[dict[str, Any]]]
    attributes: dict[int, tuple[str, str]]
    strings: StringDefs
    windows: dict[int, str]
    parameters: dict[int, str]
    info: dict[str, Any] = field(default_factory=dict)
    io_handles: dict[int, dict[str, Any]] = field(default_factory=dict)
    """I/O handle ref -> name, file (its IoFile's name), paradigm (its IoParadigm's identification: POSIX, ISOC, MPI-IO, ...)."""
    io_files: dict[int, str] = field(default_factory=dict)


def _host(g: GlobalDefs, group_ref: int) -> str | None:
    """The nearest system-tree ancestor of a location group whose class is ``node`` (else the direct parent's name)."""
    node = g.nodes.get(g.location_groups.get(group_ref, (None, None))[1])
    first = node
    seen = 0
    while node is not None and seen <= len(g.nodes):
        if (node[1] or "").lower() == "node":
            return node[0]
        node = g.nodes.get(node[2])
        seen += 1
    return first[0] if first is not None else None


def _ranks(g: GlobalDefs) -> dict[int, int]:
    """location group ref -> rank (see :func:`_own_ranks`); a group created by another (OTF2 3's creating
    location group: Score-P 8+ puts a process's CUDA/HIP streams in an ACCELERATOR group it creates) takes its
    creator's rank, so a rank's device activity stays with the rank that launched it."""
    creator = {
        ref: lg[2]
        for ref, lg in g.location_groups.items()
        if len(lg) > 2 and lg[2] in g.location_groups and lg[2] != ref
    }
    ranks = _own_ranks(g, set(creator))
    for ref in creator:
        root, seen = ref, 0
        while root in creator and seen <= len(creator):
            root, seen = creator[root], seen + 1
        ranks[ref] = ranks.get(root, ranks.get(ref, 0))
    return ranks


def _own_ranks(g: GlobalDefs, created: set[int]) -> dict[int, int]:
    """location group ref -> rank: the number in names ``MPI Rank N`` when every group (but those ``created`` by
    another) has a distinct one, else the position in MPI's COMM_LOCATIONS group."""
    named = {ref: _RANK_NAME.fullmatch(lg[0] or "") for ref, lg in g.location_groups.items() if ref not in created}
    numbers = [int(m.group(1)) for m in named.values() if m]
    if named and len(numbers) == len(named) and len(set(numbers)) == len(numbers):
        out = {ref: int(m.group(1)) for ref, m in named.items() if m}
        nxt = max(out.values()) + 1
        return {**out, **{ref: nxt for ref in created}}  # placeholders: the caller gives them their creator's rank
    group_of = {loc[0]: loc[4] for loc in g.locations}
    for _, typ, paradigm, members in g.groups.values():
        if enum_name("GroupType", typ) == "COMM_LOCATIONS" and enum_name("Paradigm", paradigm) == "MPI":
            ranks: dict[int, int] = {}
            for i, loc in enumerate(members):
                if loc in group_of:
                    ranks.setdefault(group_of[loc], i)
            if ranks:
                nxt = max(ranks.values()) + 1
                for ref in g.location_groups:
                    if ref not in ranks and ref not in created:
                        ranks[ref] = nxt
                        nxt += 1
                return {**{ref: nxt for ref in created}, **ranks}
    own = [ref for ref in g.location_groups if ref not in created]
    return {**{ref: len(own) for ref in created}, **{ref: i for i, ref in enumerate(own)}}


def _locations(g: GlobalDefs) -> list[dict[str, Any]]:
    from di.analysis_parts import PROCESS
    from di.convert.otf2.analysis_defs import analysis_location_refs

    ranks = _ranks(g)
    analysis = analysis_location_refs(g)
    out = []
    for order, (ref, name, typ_code, events, group) in enumerate(g.locations):
        typ = enum_name("LocationType", typ_code)
        kind = {
            "CPU_THREAD": "cpu_thread",
            "GPU": "gpu_stream",
            "ACCELERATOR_STREAM": "gpu_stream",
            "METRIC": "counter",
        }.get(typ, "cpu_thread")
        m = _DEVICE_STREAM.search(name or "") if kind == "gpu_stream" else None
        out.append(
            {
                "ref": ref,
                "name": name,
                "kind": kind,
                "rank": ranks.get(group, 0),
                "host": _host(g, group),
                "pid": group,
                "tid": ref if ref < 1 << 63 else None,  # refs are uint64 (a damaged one: 2^64 - 1, OTF2's undefined)
                "process": PROCESS if ref in analysis else g.location_groups.get(group, (None,))[0],
                "sort_index": order,
                "device": int(m.group(1)) if m else None,
                "stream": int(m.group(2)) if m else None,
                "otf2_type": typ,
                "records": int(events or 0),
            }
        )
    return out


def _regions(g: GlobalDefs) -> pl.DataFrame:
    """One row per region: ref, name, cat on a CPU location, cat_gpu on a GPU location, src_cat, instant, paradigm,
    role (OTF2 enum names). A region di wrote takes cat, src_cat and instant from its description (parsed once per
    distinct description: di writes one per kind of region); any other from its paradigm, role and name
    (:func:`region_cats`), with src_cat ``"<paradigm>/<role>"`` in lower case."""
    r = g.regions.with_columns(
        _enum_names("Paradigm", g.regions.get_column("paradigm")),
        _enum_names("RegionRole", g.regions.get_column("role")),
    )
    own = [
        (text, got["cat"], got.get("src_cat"), bool(got.get("instant")))
        for text in r.get_column("description")
        .filter(r.get_column("description").str.starts_with(DESCRIPTION_PREFIX))
        .unique()
        .to_list()
        if (got := parse_description(text)) is not None
    ]
    described = pl.DataFrame(
        own,
        schema={"description": pl.String, "own_cat": pl.String, "own_src_cat": pl.String, "own_instant": pl.Boolean},
        orient="row",
    )
    r = r.join(described, on="description", how="left", maintain_order="left")
    paradigm, role, name = pl.col("paradigm"), pl.col("role"), pl.col("name")
    is_own = pl.col("own_cat").is_not_null()
    return r.select(
        "ref",
        name.fill_null(""),
        pl.when(is_own).then(pl.col("own_cat")).otherwise(region_cats(paradigm, role, name, False)).alias("cat"),
        pl.when(is_own).then(pl.col("own_cat")).otherwise(region_cats(paradigm, role, name, True)).alias("cat_gpu"),
        pl.when(is_own)
        .then(pl.col("own_src_cat"))
        .otherwise(pl.concat_str(paradigm, pl.lit("/"), role).str.to_lowercase())
        .alias("src_cat"),
        pl.col("own_instant").fill_null(False).alias("instant"),
        paradigm,
        role,
    )


def _enum_names(enum: str, codes: pl.Series) -> pl.Series:
    """The OTF2 names of a column of enum values (:func:`enum_name` once per distinct value)."""
    distinct = codes.unique().to_list()
    if not distinct:  # replace_strict keeps the dtype (Int64) of an empty column
        return codes.cast(pl.String)
    return codes.replace_strict(distinct, [enum_name(enum, v) for v in distinct], return_dtype=pl.String)


def _comm_group_locations(g: GlobalDefs) -> dict[int, list[int]]:
    """COMM_GROUP group ref -> its members as location refs: ranks are positions in the last COMM_LOCATIONS group
    of the same paradigm defined before it (as the official reader resolves them)."""
    out: dict[int, list[int]] = {}
    comm_locations: dict[int, list[int]] = {}
    for ref, (_, typ, paradigm, members) in g.groups.items():
        kind = enum_name("GroupType", typ)
        if kind == "COMM_LOCATIONS":
            comm_locations[paradigm] = members
        elif kind == "COMM_GROUP":
            parent = comm_locations.get(paradigm)
            out[ref] = [parent[r] if parent is not None and r < len(parent) else -1 for r in members]
    return out


def _comms(g: GlobalDefs, ranks_of_group: dict[int, int]) -> dict[int, dict[str, Any]]:
    names = Counter(name for name, _ in g.comms.values())
    group_of = {loc[0]: loc[4] for loc in g.locations}
    comm_group_locs = _comm_group_locations(g)
    out = {}
    for ref, (cname, group_ref) in g.comms.items():
        group = g.groups.get(group_ref)
        members = [ranks_of_group.get(group_of.get(loc, -1), -1) for loc in comm_group_locs.get(group_ref, [])]
        own = _own_group(group[0] if group is not None else None)
        name = cname or "comm"
        out[ref] = {
            "name": None if own.get("null_comm") else name if names[cname] == 1 and cname else f"{name}#{ref}",
            "ranks": members,
            "group_ranks": own.get("group_ranks") or members,
            "paradigm": enum_name("Paradigm", group[2]) if group is not None else "UNKNOWN",
        }
    return out


def _own_group(name: str | None) -> dict[str, Any]:
    """What di's writer put in a communicator group's name (``di:{JSON}``), else {}."""
    if not name or not name.startswith("di:"):
        return {}
    import orjson

    try:
        got = orjson.loads(name[3:])
    except orjson.JSONDecodeError:
        return {}
    return got if isinstance(got, dict) else {}


def _unit(unit: str | None, exponent: int, base: int) -> str | None:
    unit = unit or None
    if exponent:
        return f"{2 if enum_name('Base', base) == 'BINARY' else 10}^{exponent} {unit or ''}".strip()
    return unit


def _metrics(g: GlobalDefs) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for ref, members in g.metric_classes.items():
        rows = []
        for m in members:
            name, unit, exponent, base, mode, value_type = g.metric_members.get(m, (None, None, 0, 1, 0, 0))
            rows.append(
                {
                    "name": name,
                    "unit": _unit(unit, int(exponent or 0), base),
                    "mode": enum_name("MetricMode", mode),
                    "type": enum_name("Type", value_type),
                }
            )
        out[ref] = rows
    for ref, cls in g.metric_instances.items():
        out[ref] = out.get(cls, [])
    return out


def read_definitions(reader: Any) -> Definitions:
    """:class:`Definitions` from an open :class:`archive.ArchiveReader`."""
    g = reader.global_defs
    resolution, offset, length, realtime = g.clock
    return Definitions(
        timer_resolution=int(resolution),
        global_offset=int(offset),
        trace_length=int(length),
        realtime_ns=int(realtime) if realtime < 2**63 else None,
        locations=_locations(g),
        regions=_regions(g),
        comms=_comms(g, _ranks(g)),
        metrics=_metrics(g),
        attributes={ref: (name, enum_name("Type", typ)) for ref, (name, typ) in g.attributes.items()},
        strings=g.strings,
        windows=dict(g.rma_wins),
        parameters=dict(g.parameters),
        info={"creator": None},
        io_handles={
            ref: {"name": name or "", "file": g.io_files.get(file), "paradigm": g.io_paradigms.get(paradigm)}
            for ref, (name, file, paradigm) in g.io_handles.items()
        },
        io_files=dict(g.io_files),
    )
