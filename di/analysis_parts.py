"""The parts of a trace that di adds from the engine's results, how they are marked, and how to take them out.

``di convert`` and ``di view`` write the analysis into the trace for the
viewers (:mod:`di.viewers.analysis_tracks`). So that such a trace can be read
back, converted again or analyzed without the analysis counting as the
program's activity, every added part carries a mark that survives each format
di writes:

- **timelines**: ``locations.process == "di analysis"`` (:data:`PROCESS`): the
  critical-path track, the worst-wait-states track and the counter timelines of
  the per-rank wait and imbalance series. The ``.di`` store, di's Perfetto packet
  and Chrome ``diTrace`` keep the column; OTF2 archives carry these locations
  in a LOCATIONS group of that name, which the OTF2 reader maps back.
- **their events, series and samples**: everything on those timelines.
- **flows**: kind ``user`` with ``src_cat == "critical_path"`` (:data:`SRC_CAT`),
  between two program events on different ranks.
- **args**: the member ``"critical_path_ns": N`` (:data:`PATH_ARG`) of a
  program event's args object. di appends it before the closing brace, or
  writes it as the only member where the args were null
  (``{"critical_path_ns":N}``) or ``{}`` (``{ "critical_path_ns":N}``, so that
  each comes back as it was). It is found by its key, wherever it stands and
  however the JSON is spaced, so a file that another tool reformatted (keys
  sorted, indented) still gives the program's args back. Where the spacing is
  lost (di's Chrome reader keeps no whitespace), the member alone comes back as
  ``{}`` on an event that has a member lifted into a column (``corr``,
  ``ext_id``, ...: :func:`di.schema.args_keys`; its reader left ``{}`` where
  every member of the object was lifted), else as null.
- **meta** (a note only: readers of other formats rebuild meta):
  ``meta["analysis"]`` (window, path length, timelines added) and a
  ``sources`` entry of format ``di-analysis``.

The added timelines always come after the program's (their ``loc`` ids are the
highest), so the program's events keep their row positions: row references in
a result computed on :func:`without_analysis` of a trace are valid in the trace
itself too.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.schema import args_keys
from di.trace import EVENT_REFS, Trace

PROCESS = "di analysis"
"""``locations.process`` of every timeline di adds from the analysis."""
SRC_CAT = "critical_path"
"""``src_cat`` of the critical-path slices and of the flows between ranks along the path."""
WAIT_SRC_CAT = "wait_state"
"""``src_cat`` of the slices of the worst wait states (on their own analysis timeline)."""
PATH_ARG = "critical_path_ns"
"""Args key on a program event: ns of its exclusive time on the critical path."""
SOURCE_FORMAT = "di-analysis"
"""``format`` of the ``meta["sources"]`` entry the analysis adds."""
META_KEY = "analysis"

_MEMBER = rf'\s*"{PATH_ARG}"\s*:\s*-?\d+\s*'
_ARG_ONLY_OF_EMPTY = rf'^\{{ "{PATH_ARG}":-?\d+\}}$'
"""What di writes for args that were ``{}``: they come back as ``{}``."""
_ARG_ONLY = rf"^\s*\{{{_MEMBER}\}}\s*$"
"""The member alone (args that were null, or ``{}`` reformatted): null, or ``{}`` on an event with lifted members."""
_ARG_FIRST = rf"\{{{_MEMBER},\s*"
_ARG_OTHER = rf",{_MEMBER}([,}}])"


def analysis_locs(trace: Trace) -> pl.Series:
    """``loc`` ids of the timelines di added from the analysis (empty when none)."""
    return trace.locations.filter(pl.col("process") == PROCESS).get_column("loc")


def has_analysis(trace: Trace) -> bool:
    """Whether ``trace`` carries analysis parts di added."""
    return analysis_locs(trace).len() > 0 or META_KEY in trace.meta or trace.flows.filter(_is_path_flow()).height > 0


def path_args(args: pl.Expr, contrib_ns: pl.Expr) -> pl.Expr:
    """``args`` (JSON text) with ``"critical_path_ns":contrib_ns`` added as the last member where ``contrib_ns`` is not null.

    Args that are not a JSON object text ending in ``}`` are left as they are.
    """
    member = pl.concat_str(pl.lit(f'"{PATH_ARG}":'), contrib_ns.cast(pl.String), pl.lit("}"))
    return (
        pl.when(contrib_ns.is_null())
        .then(args)
        .when(args.is_null())
        .then(pl.concat_str(pl.lit("{"), member))
        .when(args == "{}")
        .then(pl.concat_str(pl.lit("{ "), member))
        .when(args.str.ends_with("}"))
        .then(pl.concat_str(args.str.strip_suffix("}"), pl.lit(","), member))
        .otherwise(args)
    )


def without_analysis(trace: Trace) -> Trace:
    """The program's own trace: ``trace`` less every part this module describes.

    Returns ``trace`` itself when it carries none. Args get back the text they
    had before the analysis was added. Timelines, events and series that remain
    keep their order and are numbered densely; row references follow them.
    """
    if not has_analysis(trace):
        return trace
    drop = analysis_locs(trace).implode()
    locs = trace.locations.sort("loc")
    loc_map = _dense(locs.filter(~pl.col("loc").is_in(drop)).get_column("loc"))
    keep = (~trace.events.get_column("loc").is_in(drop)).to_numpy()
    new_row = np.cumsum(keep) - 1
    tables = dict(trace.tables())
    tables["locations"] = locs.filter(~pl.col("loc").is_in(drop)).with_columns(_mapped("loc", loc_map))
    args = pl.col("args")
    lifted = [pl.col(c).is_not_null() for c, _ in args_keys() if c in trace.events.columns]
    tables["events"] = trace.events.filter(pl.Series(keep)).with_columns(
        _mapped("loc", loc_map),
        pl.when(args.str.contains(_ARG_ONLY_OF_EMPTY) | (args.str.contains(_ARG_ONLY) & pl.any_horizontal(lifted)))
        .then(pl.lit("{}"))
        .when(args.str.contains(_ARG_ONLY))
        .then(None)
        .otherwise(args.str.replace(_ARG_FIRST, "{").str.replace(_ARG_OTHER, "$1"))
        .alias("args"),
    )
    tables["flows"] = trace.flows.filter(~_is_path_flow())
    for table, col in EVENT_REFS:
        tables[table] = _moved_rows(tables[table], col, keep, new_row, drop_rows=table != "events")
    series = trace.series.filter(~pl.col("loc").is_in(drop)).sort("series")
    ser_map = _dense(series.get_column("series"))
    tables["series"] = series.with_columns(_mapped("series", ser_map), _mapped("loc", loc_map))
    tables["samples"] = trace.samples.filter(
        pl.col("series").is_in(series.get_column("series").implode())
    ).with_columns(_mapped("series", ser_map))
    meta = {k: v for k, v in trace.meta.items() if k != META_KEY}
    meta["sources"] = [s for s in meta.get("sources", []) if s.get("format") != SOURCE_FORMAT]
    return Trace.build(meta=meta, **tables)


def _is_path_flow() -> pl.Expr:
    return ((pl.col("kind") == "user") & (pl.col("src_cat") == SRC_CAT)).fill_null(False)


def _dense(ids: pl.Series) -> dict[int, int]:
    """old id -> position, for ids in their order."""
    return {int(v): i for i, v in enumerate(ids.to_list())}


def _mapped(col: str, mapping: dict[int, int]) -> pl.Expr:
    if all(k == v for k, v in mapping.items()):
        return pl.col(col)
    return pl.col(col).replace_strict(mapping, default=None)


def _moved_rows(df: pl.DataFrame, col: str, keep: np.ndarray, new_row: np.ndarray, *, drop_rows: bool) -> pl.DataFrame:
    """``df`` with the event rows in ``col`` renumbered; references to dropped rows become null
    (``events.parent``) or drop their row (``drop_rows``)."""
    if not df.height or keep.all():
        return df
    refs = df.get_column(col)
    valid = refs.is_not_null().to_numpy()
    idx = refs.fill_null(0).cast(pl.Int64).to_numpy()
    alive = valid & keep[idx]
    moved = pl.Series(col, np.where(alive, new_row[idx], 0), dtype=df.schema[col]).set(pl.Series(~alive), None)
    out = df.with_columns(moved)
    return out.filter(pl.Series(alive | ~valid)) if drop_rows else out
