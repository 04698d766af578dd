"""An archive's global definitions read through the OTF2 C API: plain tables of refs and values, names resolved.

The official high-level ``otf2`` reader builds an object graph for every
definition (about 10 µs each in Python); here each definition callback is a
ctypes function that appends one tuple, and names are resolved from the
string table once at the end. Strings, which a real-shaped trace defines by
the million (one per distinct args text), and regions, one per distinct event
name, are read by numba ``cfunc`` callbacks into arrays instead
(:mod:`stringdefs`, :mod:`regiondefs`). Only the definitions :mod:`definitions` needs
are read; enum values stay ints (their OTF2 names via :func:`enum_name`).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from di.convert.otf2 import clib

if TYPE_CHECKING:  # the String cfunc compiles on import: only reading needs it, not the writer's enum names
    from di.convert.otf2.stringdefs import StringDefs

_c = ctypes
_u8, _u32, _u64, _i64, _p = _c.c_uint8, _c.c_uint32, _c.c_uint64, _c.c_int64, _c.c_void_p


def _no_strings() -> StringDefs:
    from di.convert.otf2.stringdefs import StringDefs

    return StringDefs.of({})


@dataclass
class GlobalDefs:
    """Global definitions by ref, in file order; every name is a str (None where the ref is undefined)."""

    clock: tuple[int, int, int, int] = (1, 0, 0, clib.UNDEFINED_UINT64)  # resolution, global offset, length, realtime
    strings: StringDefs = field(default_factory=_no_strings)
    nodes: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # name, class name, parent ref
    location_groups: dict[int, tuple[Any, ...]] = field(
        default_factory=dict
    )  # name, system tree parent ref, creating group ref
    locations: list[tuple[Any, ...]] = field(default_factory=list)  # ref, name, type, events, location group ref
    regions: pl.DataFrame = field(default_factory=lambda: _region_table(np.zeros((0, 5), np.int64), _no_strings()))
    """One row per region: ref, name, description (String, null where undefined), role, paradigm (OTF2 enum values)."""
    groups: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # name, type, paradigm, member refs
    comms: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # name, group ref
    attributes: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # name, type
    rma_wins: dict[int, str] = field(default_factory=dict)
    parameters: dict[int, str] = field(default_factory=dict)
    metric_members: dict[int, tuple[Any, ...]] = field(
        default_factory=dict
    )  # name, unit, exponent, base, mode, value type
    metric_classes: dict[int, list[int]] = field(default_factory=dict)  # member refs
    metric_instances: dict[int, int] = field(default_factory=dict)  # metric class ref
    io_paradigms: dict[int, str] = field(default_factory=dict)  # identification
    io_files: dict[int, str] = field(default_factory=dict)
    io_handles: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # name, file ref, paradigm ref
    io_file_properties: list[tuple[int, int, int, int]] = field(
        default_factory=list
    )  # file ref, name ref, OTF2 type code, raw value


def enum_name(enum: str, value: int) -> str:
    """The OTF2 name of an enum value (``enum_name("Paradigm", 4)`` -> ``"MPI"``)."""
    import _otf2

    return getattr(_otf2, enum)._names.get(value, str(value))


_FIELDS = {  # record -> (argument ctypes after userData, what the callback stores)
    "ClockProperties": (_u64, _u64, _u64, _u64),
    "String": None,  # a cfunc: stringdefs
    "SystemTreeNode": (_u32, _u32, _u32, _u32),
    "LocationGroup": (_u32, _u32, _u8, _u32, _u32),
    "Location": (_u64, _u32, _u8, _u64, _u32),
    "Region": None,  # a cfunc: regiondefs
    "Group": (_u32, _u32, _u8, _u8, _u32, _u32, _c.POINTER(_u64)),
    "Comm": (_u32, _u32, _u32, _u32, _u32),
    "Attribute": (_u32, _u32, _u32, _u8),
    "RmaWin": (_u32, _u32, _u32, _u32),
    "Parameter": (_u32, _u32, _u8),
    "MetricMember": (_u32, _u32, _u32, _u8, _u8, _u8, _u8, _i64, _u32),
    "MetricClass": (_u32, _u8, _c.POINTER(_u32), _u8, _u8),
    "MetricInstance": (_u32, _u32, _u64, _u8, _u64),
    "IoParadigm": (_u8, _u32, _u32, _u8, _u32, _u8, _p, _p, _p),
    "IoRegularFile": (_u32, _u32, _u32),
    "IoDirectory": (_u32, _u32, _u32),
    "IoHandle": (_u32, _u32, _u32, _u8, _u32, _u32, _u32),
    "IoFileProperty": (_u32, _u32, _u8, _u64),  # the value union is 8 bytes, passed as an integer (x86-64, AArch64)
}


def _collectors(raw: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    """Python callables per record: each stores its arguments (pointers copied out) and returns OTF2_CALLBACK_SUCCESS."""

    def store(record: str) -> Any:
        rows = raw.setdefault(record, [])
        if record == "Group":

            def fn(_: Any, ref: int, name: int, typ: int, paradigm: int, flags: int, n: int, members: Any) -> int:
                rows.append((ref, name, typ, paradigm, [members[i] for i in range(n)]))
                return 0
        elif record == "MetricClass":

            def fn(_: Any, ref: int, n: int, members: Any, *rest: int) -> int:
                rows.append((ref, [members[i] for i in range(n)]))
                return 0
        else:

            def fn(_: Any, *args: Any) -> int:
                rows.append(args)
                return 0

        return fn

    return {record: store(record) for record, types in _FIELDS.items() if types is not None}


def read_global_definitions(handle: int, text_bytes: int) -> GlobalDefs:
    """The global definitions of the open OTF2_Reader* ``handle``; ``text_bytes``: room to start with for
    the strings' text (the global definitions file's size holds them all unless it is compressed; when it
    does not, the definitions are read once more with room for all).

    Raises:
        RuntimeError: the library reports an error (the caller names the archive).
    """
    from di.convert.otf2.regiondefs import RegionBuffer
    from di.convert.otf2.stringdefs import StringBuffer

    lib = clib.library()
    count = _c.c_uint64(0)
    lib.OTF2_Reader_GetNumberOfGlobalDefinitions.argtypes = [_p, _c.POINTER(_c.c_uint64)]
    _raise(lib.OTF2_Reader_GetNumberOfGlobalDefinitions(handle, _c.byref(count)), "count the global definitions")
    strings, regions = StringBuffer(count.value, text_bytes), RegionBuffer(count.value)
    raw = _read(lib, handle, strings, regions)
    need_strings, need_regions = strings.overflow(), regions.overflow()
    if need_strings is not None or need_regions is not None:  # the archive counts fewer definitions than it has
        strings = StringBuffer(*need_strings) if need_strings else StringBuffer(count.value, text_bytes)
        regions = RegionBuffer(need_regions or count.value)
        raw = _read(lib, handle, strings, regions)
    return _tables(raw, regions.rows(), strings.table())


def _read(lib: Any, handle: int, strings: Any, regions: Any) -> dict[str, list[tuple[Any, ...]]]:
    """One pass over the global definitions: every record but String and Region as tuples, String into ``strings``
    (a :class:`~di.convert.otf2.stringdefs.StringBuffer`), Region into ``regions`` (a
    :class:`~di.convert.otf2.regiondefs.RegionBuffer`)."""
    from di.convert.otf2.regiondefs import region_callback
    from di.convert.otf2.stringdefs import OTHER, string_callback

    raw: dict[str, list[tuple[Any, ...]]] = {}
    strings.array[OTHER] = regions.address
    keep = []  # the ctypes callbacks must outlive the read
    lib.OTF2_GlobalDefReaderCallbacks_New.restype = _p
    callbacks = lib.OTF2_GlobalDefReaderCallbacks_New()
    try:
        for record, fn in _collectors(raw).items():
            proto = _c.CFUNCTYPE(_c.c_int32, _p, *_FIELDS[record])(fn)
            keep.append(proto)
            setter = getattr(lib, f"OTF2_GlobalDefReaderCallbacks_Set{record}Callback")
            setter.argtypes = [_p, _p]
            _raise(setter(callbacks, _c.cast(proto, _p)), f"set the {record} callback")
        lib.OTF2_GlobalDefReaderCallbacks_SetStringCallback.argtypes = [_p, _p]
        _raise(
            lib.OTF2_GlobalDefReaderCallbacks_SetStringCallback(callbacks, string_callback()), "set the String callback"
        )
        lib.OTF2_GlobalDefReaderCallbacks_SetRegionCallback.argtypes = [_p, _p]
        _raise(
            lib.OTF2_GlobalDefReaderCallbacks_SetRegionCallback(callbacks, region_callback()), "set the Region callback"
        )
        lib.OTF2_Reader_GetGlobalDefReader.restype = _p
        lib.OTF2_Reader_GetGlobalDefReader.argtypes = [_p]
        reader = lib.OTF2_Reader_GetGlobalDefReader(handle)
        if not reader:
            raise RuntimeError("no global definition reader (global definitions file missing or unreadable)")
        lib.OTF2_Reader_RegisterGlobalDefCallbacks.argtypes = [_p, _p, _p, _p]
        _raise(
            lib.OTF2_Reader_RegisterGlobalDefCallbacks(handle, reader, callbacks, strings.address), "register callbacks"
        )
        read = _c.c_uint64(0)
        lib.OTF2_Reader_ReadAllGlobalDefinitions.argtypes = [_p, _p, _c.POINTER(_c.c_uint64)]
        _raise(lib.OTF2_Reader_ReadAllGlobalDefinitions(handle, reader, _c.byref(read)), "read the global definitions")
        lib.OTF2_Reader_CloseGlobalDefReader.argtypes = [_p, _p]
        lib.OTF2_Reader_CloseGlobalDefReader(handle, reader)
    finally:
        lib.OTF2_GlobalDefReaderCallbacks_Delete.argtypes = [_p]
        lib.OTF2_GlobalDefReaderCallbacks_Delete(callbacks)
    return raw


def _raise(code: int, what: str) -> None:
    if code:
        raise RuntimeError(f"could not {what}: {clib.error_text(code)}")


_NAMED = {
    "SystemTreeNode": (1, 2),
    "LocationGroup": (1,),
    "Location": (1,),
    "Group": (1,),
    "Comm": (1,),
    "Attribute": (1,),
    "RmaWin": (1,),
    "Parameter": (1,),
    "MetricMember": (1, 8),
    "IoParadigm": (1,),
    "IoRegularFile": (1,),
    "IoDirectory": (1,),
    "IoHandle": (1,),
}
"""The fields of each definition that are string refs (names, descriptions, units), by position."""


def _region_table(rows: np.ndarray, strings: StringDefs) -> pl.DataFrame:
    """The Region rows (:data:`~di.convert.otf2.regiondefs.FIELDS`) with their names and descriptions resolved; a ref
    defined twice keeps its last definition."""
    ref, name, description, role, paradigm = (rows[:, i] for i in range(5))
    return pl.DataFrame(
        {
            "ref": ref,
            "name": strings.gather(name),
            "description": strings.gather(description),
            "role": role,
            "paradigm": paradigm,
        }
    ).unique("ref", keep="last", maintain_order=True)


def _tables(raw: dict[str, list[tuple[Any, ...]]], regions: np.ndarray, strings: StringDefs) -> GlobalDefs:
    out = GlobalDefs(strings=strings, regions=_region_table(regions, strings))
    named = [r[i] for record, fields in _NAMED.items() for r in raw[record] for i in fields]
    refs = np.unique(np.array(named, np.int64))  # resolved in one gather, not one lookup each
    s = dict(zip(refs.tolist(), strings.gather(refs).to_list())).get
    if raw["ClockProperties"]:
        out.clock = tuple(int(x) for x in raw["ClockProperties"][-1])  # type: ignore[assignment]
    out.nodes = {ref: (s(name), s(cls), parent) for ref, name, cls, parent in raw["SystemTreeNode"]}
    out.location_groups = {ref: (s(name), parent, creator) for ref, name, _, parent, creator in raw["LocationGroup"]}
    out.locations = [(ref, s(name), typ, events, group) for ref, name, typ, events, group in raw["Location"]]
    out.groups = {ref: (s(name), typ, paradigm, members) for ref, name, typ, paradigm, members in raw["Group"]}
    out.comms = {ref: (s(name), group) for ref, name, group, _, _ in raw["Comm"]}
    out.attributes = {ref: (s(name), typ) for ref, name, _, typ in raw["Attribute"]}
    out.rma_wins = {ref: s(name) for ref, name, _, _ in raw["RmaWin"]}
    out.parameters = {ref: s(name) for ref, name, _ in raw["Parameter"]}
    out.metric_members = {m[0]: (s(m[1]), s(m[8]), m[7], m[6], m[4], m[5]) for m in raw["MetricMember"]}
    out.metric_classes = dict(raw["MetricClass"])
    out.metric_instances = {ref: cls for ref, cls, _, _, _ in raw["MetricInstance"]}
    out.io_paradigms = {p[0]: s(p[1]) for p in raw["IoParadigm"]}
    out.io_files = {ref: s(name) for ref, name, _ in raw["IoRegularFile"] + raw["IoDirectory"]}
    out.io_handles = {h[0]: (s(h[1]), h[2], h[3]) for h in raw["IoHandle"]}
    out.io_file_properties = raw["IoFileProperty"]
    return out
