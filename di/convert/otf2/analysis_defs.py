"""The analysis di adds to a trace (:mod:`di.analysis_parts`), as OTF2 definitions Vampir shows.

Written only when the trace carries an analysis (``di convert`` to OTF2 adds
one by default):

* a LOCATIONS group ``di analysis`` (:data:`di.analysis_parts.PROCESS`): the
  critical-path and counter locations; the reader maps its members back to
  ``process == "di analysis"``, which is how a read-back trace knows them;
* a REGIONS group ``Critical path``: the program's regions with at least one
  event on the critical path (events whose args carry ``critical_path_ns``),
  so that Vampir can filter or colour them as a function group;
* a REGIONS group ``di analysis``: the regions of the analysis locations'
  own events (the critical-path track's slices);
* markers (the archive's marker file, ``otf2-marker``/Vampir), group
  ``di analysis``: category ``critical path`` for the :data:`MARKERS` longest
  critical-path segments, category ``wait state`` (severity high) for each
  slice of the worst-wait-states track; each on the location its slice lies
  on, with the slice's name, rank and ms in its text.

The per-rank wait and imbalance series are Metric records like any series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import polars as pl

from di.analysis_parts import PATH_ARG, PROCESS, SRC_CAT, WAIT_SRC_CAT, analysis_locs

CRITICAL_PATH_GROUP = "Critical path"
MARKERS = 50
"""At most this many markers per category, the longest slices first (markers are for finding, not for every segment)."""
MARKER_GROUP = "di analysis"
MARKER_CATEGORIES = {SRC_CAT: (0, "critical path"), WAIT_SRC_CAT: (1, "wait state")}
"""src_cat of an analysis slice -> (marker definition ref, category)."""


@dataclass
class AnalysisDefs:
    """Group members (output location and region refs) and markers for :func:`write_groups` / :func:`write_markers`."""

    locations: list[int] = field(default_factory=list)
    path_regions: list[int] = field(default_factory=list)
    analysis_regions: list[int] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.locations or self.path_regions)


def plan_analysis(trace: Any, lay: Any) -> AnalysisDefs:
    """The definitions for ``trace``'s analysis parts, given the archive's :class:`~di.convert.otf2.layout.Layout`
    (output locations, region ref of each event row, string table, ticks of each event)."""
    locs = set(analysis_locs(trace).to_list())
    ev = trace.events
    if not locs or not ev.height:
        return AnalysisDefs()
    out_locs, region = [loc["loc"] for loc in lay.out_locations], lay.region
    shift = int(lay.start_t[0] - ev.get_column("start_ns")[0])  # ns -> ticks, as the events are written
    own = ev.get_column("loc").is_in(list(locs)).to_numpy()
    on_path = ev.get_column("args").str.contains(f'"{PATH_ARG}":', literal=True).fill_null(False).to_numpy() & ~own
    defs = AnalysisDefs(
        locations=sorted({ref for ref, loc in enumerate(out_locs) if loc in locs}),
        path_regions=np.unique(region[on_path]).tolist(),
        analysis_regions=np.unique(region[own]).tolist(),
    )
    if not defs:
        return defs
    first_out = {}
    for ref, loc in enumerate(out_locs):
        first_out.setdefault(loc, ref)
    slices = ev.filter(pl.Series(own) & (pl.col("end_ns") > pl.col("start_ns"))).with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur"), pl.col("src_cat").cast(pl.String)
    )
    for src_cat, (ref, _) in MARKER_CATEGORIES.items():
        mine = (
            slices.filter(pl.col("src_cat") == src_cat).sort("dur", "start_ns", descending=[True, False]).head(MARKERS)
        )
        for loc, start, dur, name, args in mine.select(
            "loc", "start_ns", "dur", pl.col("name").cast(pl.String), "args"
        ).iter_rows():
            info = orjson.loads(args) if args else {}
            text = f"{name} (rank {info.get('rank')}, {dur / 1e6:.3f} ms)"
            defs.markers.append(
                {
                    "def": ref,
                    "start": int(start) + shift,
                    "dur": int(dur),
                    "location": first_out[int(loc)],
                    "text": text,
                }
            )
    for s in (PROCESS, CRITICAL_PATH_GROUP):
        lay.strings.ref(s)
    return defs


def write_groups(o: Any, g: Any, defs: AnalysisDefs, first_ref: int, s: Any) -> None:
    """The LOCATIONS and REGIONS groups, refs from ``first_ref`` (after the communicator groups)."""
    ref = first_ref
    for name, typ, members in (
        (PROCESS, o.GROUP_TYPE_LOCATIONS, defs.locations),
        (CRITICAL_PATH_GROUP, o.GROUP_TYPE_REGIONS, defs.path_regions),
        (PROCESS, o.GROUP_TYPE_REGIONS, defs.analysis_regions),
    ):
        if members:
            o.GlobalDefWriter_WriteGroup(g, ref, s(name), typ, o.PARADIGM_UNKNOWN, o.GROUP_FLAG_NONE, members)
            ref += 1


def write_markers(o: Any, archive: Any, defs: AnalysisDefs) -> None:
    """The markers (a marker file beside the definitions)."""
    if not defs.markers:
        return
    w = o.Archive_GetMarkerWriter(archive)
    for ref, category in MARKER_CATEGORIES.values():
        o.MarkerWriter_WriteDefMarker(w, ref, MARKER_GROUP, category, o.SEVERITY_HIGH if ref else o.SEVERITY_MEDIUM)
    for m in defs.markers:
        o.MarkerWriter_WriteMarker(w, m["start"], m["dur"], m["def"], o.MARKER_SCOPE_LOCATION, m["location"], m["text"])
    o.Archive_CloseMarkerWriter(archive, w)


def analysis_location_refs(defs: Any) -> set[int]:
    """Refs of the locations in a LOCATIONS group named ``di analysis`` of an archive being read (``defs``: its
    :class:`~di.convert.otf2.globaldefs.GlobalDefs`)."""
    from di.convert.otf2.globaldefs import enum_name

    out: set[int] = set()
    for name, typ, _, members in defs.groups.values():
        if name == PROCESS and enum_name("GroupType", typ) == "LOCATIONS":
            out.update(members)
    return out
