"""OTF2 global definitions -> plain Python tables the event pass and the model need.

Read with the official high-level ``otf2`` reader (definitions are few; the
events are read elsewhere through the C API). Definitions:

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
from typing import Any

from di.convert.otf2.categories import parse_description, region_cat

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
    regions: dict[int, dict[str, Any]]
    comms: dict[int, dict[str, Any]]
    metrics: dict[int, list[dict[str, Any]]]
    attributes: dict[int, tuple[str, str]]
    strings: dict[int, str]
    windows: dict[int, str]
    parameters: dict[int, str]
    info: dict[str, Any] = field(default_factory=dict)
    io_handles: dict[int, dict[str, Any]] = field(default_factory=dict)
    """I/O handle ref -> name, file (its IoFile's name), paradigm (its IoParadigm's identification: POSIX, ISOC, MPI-IO, ...)."""
    io_files: dict[int, str] = field(default_factory=dict)


def _name(enum: Any) -> str:
    """The OTF2 enum name of a value of the ``_otf2`` enum types (``PARADIGM_MPI`` -> ``"MPI"``)."""
    return type(enum)._names.get(enum.value, str(enum.value))


def _host(group: Any) -> str | None:
    node = getattr(group, "system_tree_parent", None)
    first = node
    while node is not None:
        if (node.class_name or "").lower() == "node":
            return node.name
        node = node.parent
    return first.name if first is not None else None


def _ranks(defs: Any) -> dict[int, int]:
    """location group ref -> rank: the number in names ``MPI Rank N`` when every group has a distinct one, else the position in MPI's COMM_LOCATIONS group."""
    named = {lg._ref: _RANK_NAME.fullmatch(lg.name or "") for lg in defs.location_groups}
    numbers = [int(m.group(1)) for m in named.values() if m]
    if named and len(numbers) == len(named) and len(set(numbers)) == len(numbers):
        return {ref: int(m.group(1)) for ref, m in named.items() if m}
    for g in defs.groups:
        if _name(g.group_type) == "COMM_LOCATIONS" and _name(g.paradigm) == "MPI":
            ranks: dict[int, int] = {}
            for i, loc in enumerate(g.members):
                ranks.setdefault(loc.group._ref, i)
            if ranks:
                nxt = max(ranks.values()) + 1
                for lg in defs.location_groups:
                    if lg._ref not in ranks:
                        ranks[lg._ref] = nxt
                        nxt += 1
                return ranks
    return {lg._ref: i for i, lg in enumerate(defs.location_groups)}


def _locations(defs: Any) -> list[dict[str, Any]]:
    from di.analysis_parts import PROCESS
    from di.convert.otf2.analysis_defs import analysis_location_refs

    ranks = _ranks(defs)
    analysis = analysis_location_refs(defs)
    out = []
    for order, loc in enumerate(defs.locations):
        typ = _name(loc.type)
        kind = {"CPU_THREAD": "cpu_thread", "GPU": "gpu_stream", "ACCELERATOR_STREAM": "gpu_stream", "METRIC": "counter"}.get(typ, "cpu_thread")
        m = _DEVICE_STREAM.search(loc.name or "") if kind == "gpu_stream" else None
        group = loc.group
        out.append({
            "ref": loc._ref, "name": loc.name, "kind": kind, "rank": ranks.get(group._ref, 0), "host": _host(group),
            "pid": group._ref, "tid": loc._ref, "process": PROCESS if loc._ref in analysis else group.name, "sort_index": order,
            "device": int(m.group(1)) if m else None, "stream": int(m.group(2)) if m else None, "otf2_type": typ,
            "records": int(loc.number_of_events or 0),
        })
    return out


def _regions(defs: Any) -> dict[int, dict[str, Any]]:
    """ref -> name, cat on a CPU location, cat_gpu on a GPU location, src_cat, instant, paradigm, role."""
    out = {}
    for r in defs.regions:
        paradigm, role = _name(r.paradigm), _name(r.region_role)
        own = parse_description(r.description)
        if own is not None:
            cat = cat_gpu = own["cat"]
            src_cat, instant = own.get("src_cat"), bool(own.get("instant"))
        else:
            cat, cat_gpu = (region_cat(paradigm, role, r.name or "", gpu) for gpu in (False, True))
            src_cat, instant = f"{paradigm}/{role}".lower(), False
        out[r._ref] = {"name": r.name or "", "cat": cat, "cat_gpu": cat_gpu, "src_cat": src_cat, "instant": instant,
                       "paradigm": paradigm, "role": role}
    return out


def _comms(defs: Any, ranks_of_group: dict[int, int]) -> dict[int, dict[str, Any]]:
    comms = list(defs.comms)
    names = Counter(c.name for c in comms)
    out = {}
    for c in comms:
        members = []
        group = c.group
        if group is not None and _name(group.group_type) == "COMM_GROUP":
            for m in group.members:
                members.append(ranks_of_group.get(m.group._ref, -1) if hasattr(m, "group") else int(m))
        own = _own_group(group.name if group is not None else None)
        name = c.name or "comm"
        out[c._ref] = {"name": None if own.get("null_comm") else name if names[c.name] == 1 and c.name else f"{name}#{c._ref}",
                       "ranks": members, "group_ranks": own.get("group_ranks") or members,
                       "paradigm": _name(group.paradigm) if group is not None else "UNKNOWN"}
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


def _unit(member: Any) -> str | None:
    unit = member.unit or None
    exp = int(member.exponent or 0)
    if exp:
        base = 2 if _name(member.base) == "BINARY" else 10
        return f"{base}^{exp} {unit or ''}".strip()
    return unit


def _metrics(defs: Any) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for mc in defs.metric_classes:
        out[mc._ref] = [{"name": m.name, "unit": _unit(m), "mode": _name(m.metric_mode), "type": _name(m.value_type)} for m in mc.members]
    for mi in defs.metric_instances:
        out[mi._ref] = out.get(mi.metric_class._ref, [])
    return out


def _io_handles(defs: Any) -> dict[int, dict[str, Any]]:
    out = {}
    for h in defs.io_handles:
        file, paradigm = h.file, h.io_paradigm
        out[h._ref] = {"name": h.name or "", "file": file.name if file is not None else None,
                       "paradigm": paradigm.identification if paradigm is not None else None}
    return out


def read_definitions(reader: Any) -> Definitions:
    """:class:`Definitions` from an open ``otf2.reader.Reader``."""
    defs = reader.definitions
    clock = defs.clock_properties
    locations = _locations(defs)
    ranks_of_group = _ranks(defs)
    realtime = getattr(clock, "realtime_timestamp", None)
    return Definitions(
        timer_resolution=int(clock.timer_resolution),
        global_offset=int(clock.global_offset),
        trace_length=int(clock.trace_length),
        realtime_ns=int(realtime) if realtime is not None and int(realtime) < 2**63 else None,
        locations=locations,
        regions=_regions(defs),
        comms=_comms(defs, ranks_of_group),
        metrics=_metrics(defs),
        attributes={a._ref: (a.name, _name(a.type)) for a in defs.attributes},
        strings={s._ref: s.name for s in defs.strings},
        windows={w._ref: w.name for w in defs.rma_wins},
        parameters={p._ref: p.name for p in defs.parameters},
        info={"creator": None},
        io_handles=_io_handles(defs),
        io_files={f._ref: f.name for f in defs.io_files},
    )
