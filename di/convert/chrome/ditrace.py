"""Reading back what di's own Chrome writer stores under the top-level ``diTrace`` key.

The writer moves overlapping events to extra lanes (extra tids) and renumbers
pids per rank; ``diTrace.locations`` maps every emitted (pid, tid) back to
its location, ``diTrace.series`` every counter back to its series, and
``diTrace.meta.start_ns`` is the absolute ns of ``ts`` 0; ``messages`` and
``collectives`` hold those tables (event references as written rows: the
k-th X/i line is row k) and ``categories`` each written row's canonical
category where the written ``cat`` would not give it back. With it, a trace
written by di reads back with the same locations, series, clock, categories,
messages and collectives.

The hooks the reading itself needs (clock origin, timeline -> location, counter
-> series, written row of each event) are here and take None for a file without
diTrace (they then change nothing); categories, messages, collectives and meta
are put back after the reading by :mod:`di.convert.restore` from :func:`written`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert.chrome import scan as S
from di.convert.chrome.phases import LK_COUNTER, LK_THREAD, SLICE
from di.convert.restore import WRITTEN_ROW_REFS, Written, loaded_rows, written_meta

LOCATION_COLUMNS = "location_columns"
"""diTrace key of the locations' columns beyond the schema's (:func:`di.convert.side_tables.encode` form, with ``loc``)."""
ARGS_ADDED = "args_added"
"""diTrace key of the keys di's writer put in each event's args: one digit per written row (1: correlation,
2: bytes, + 4: the event had no args), as Chrome events carry ``corr`` and ``bytes`` only there."""
_LOC_COLS = ("loc", "rank", "host", "kind", "device", "stream", "name", "process", "sort_index", "source")


def info(top: dict[str, Any], warnings: list[str]) -> dict[str, Any] | None:
    """The diTrace object when the file has a well-formed one (see :func:`problem`); a damaged
    one is said in ``warnings`` and the file reads as any Chrome trace."""
    d = top.get("diTrace")
    why = problem(d)
    if why is None:
        return d
    if "diTrace" in top:
        warnings.append(f"diTrace ignored ({why}): read as any Chrome trace")
    return None


def _is_int(v: Any, lo: int = -(2**63), hi: int = 2**63 - 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


# what each field of a diTrace location and series must be: int (int64), u32, nonneg, str, or None where allowed
_LOC_FIELDS = {
    "pid": "int",
    "tid": "int",
    "loc": "u32",
    "lane": "int",
    "rank": "nonneg",
    "kind": "kind",
    "device": "int?",
    "stream": "int?",
    "name": "str?",
    "process": "str?",
    "host": "str?",
    "src_pid": "int?",
    "src_tid": "int?",
    "sort_index": "int?",
    "source": "nonneg",
}
_SERIES_FIELDS = {"pid": "int", "counter": "str", "loc": "u32", "name": "str", "unit": "str?"}


def _fits(v: Any, kind: str) -> bool:
    from di.trace import LOCATION_KINDS

    if kind.endswith("?"):
        return v is None or _fits(v, kind[:-1])
    return {
        "int": _is_int(v),
        "u32": _is_int(v, 0, 2**32 - 1),
        "nonneg": _is_int(v, 0),
        "str": isinstance(v, str),
        "kind": v in LOCATION_KINDS,
    }[kind]


def problem(d: Any) -> str | None:
    """What makes ``d`` not a diTrace di's writer wrote (None: it is one). A damaged one is ignored
    whole: the file then reads as any Chrome trace."""
    if d is None:
        return "none"
    if not isinstance(d, dict) or d.get("schema_version") != 1:
        return "not an object with schema_version 1"
    for name, fields in (("locations", _LOC_FIELDS), ("series", _SERIES_FIELDS)):
        rows = d.get(name, [])
        if not isinstance(rows, list):  # no locations: a trace of no timelines (a Darshan log's io_files alone)
            return f"{name} is not a list"
        for i, row in enumerate(rows):
            bad = [
                k
                for k, kind in fields.items()
                if not isinstance(row, dict)
                or (k in row or not kind.endswith("?"))
                and not _fits(row.get(k) if isinstance(row, dict) else None, kind)
            ]
            if bad:
                return f"{name}[{i}] has no valid {', '.join(bad)}"
    m = d.get("meta", {})
    if not isinstance(m, dict) or not _is_int(m.get("start_ns", 0)):
        return "meta is not an object with an integer start_ns"
    return None


def base_ns(d: dict[str, Any] | None, top: dict[str, Any], warnings: list[str]) -> int:
    """Absolute ns of ts 0: diTrace's ``start_ns``, else Kineto's ``baseTimeNanoseconds``, else 0;
    a ``baseTimeNanoseconds`` beyond int64 is said in ``warnings`` and read as 0."""
    start = d.get("meta", {}).get("start_ns") if d is not None else top.get("baseTimeNanoseconds")
    if not isinstance(start, int) or isinstance(start, bool):
        return 0
    if not _is_int(start):
        warnings.append(f"baseTimeNanoseconds {start} is beyond int64 ns: ignored (timestamps kept relative)")
        return 0
    return int(start)


def remap_keys(keys: pl.DataFrame, d: dict[str, Any] | None) -> pl.DataFrame:
    """Timeline keys with ``loc`` replaced by the original location of their (pid, tid) (no diTrace: as they are)."""
    if d is None or not d["locations"]:
        return keys
    tracks = pl.DataFrame(d["locations"]).select(
        pl.col("pid").cast(pl.Int64), pl.col("tid").cast(pl.Int64), pl.col("loc").cast(pl.UInt32).alias("_orig")
    )
    threads = keys.filter((pl.col("lkind") == LK_THREAD) & (pl.col("pid_k") == S.K_INT) & (pl.col("tid_k") == S.K_INT))
    mapped = keys.join(
        threads.join(tracks, on=["pid", "tid"]).select(phases_key() + ["_orig"]),
        on=phases_key(),
        how="left",
        nulls_equal=True,
    )
    top = int(tracks.get_column("_orig").max() or 0) + 1
    fresh = pl.int_range(pl.len(), dtype=pl.UInt32) + top
    return mapped.with_columns(pl.coalesce("_orig", fresh).alias("loc")).drop("_orig")


def written_rows(d: dict[str, Any] | None, ph: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, int]:
    """By written row, the loaded event row that holds it (:func:`di.convert.restore.loaded_rows`), and
    the number of written rows. di writes one X or i line per events row: an event's written row is its
    scanner ``row``'s position among the file's X and i lines (``ph``: each scanner row's phase code).
    No diTrace: none."""
    if d is None:
        return np.zeros(0, dtype=np.int64), 0
    lines = np.flatnonzero((ph == ord(SLICE)) | (ph == ord("i")) | (ph == ord("I")))
    at = np.minimum(np.searchsorted(lines, row), max(lines.size - 1, 0))
    found = lines[at] == row if lines.size else np.zeros(row.size, dtype=bool)
    return loaded_rows(np.where(found, at, -1), int(lines.size)), int(lines.size)


def phases_key() -> list[str]:
    from di.convert.chrome.phases import KEY

    return list(KEY)


def locations(
    d: dict[str, Any] | None, keys: pl.DataFrame, fallback: pl.DataFrame, warnings: list[str] | None = None
) -> pl.DataFrame:
    """The original locations (with the columns beyond the schema's that diTrace holds; a damaged set of them
    is said in ``warnings``), plus the fallback rows of timelines diTrace does not name (but not the
    per-process counter timelines of the series diTrace maps); no diTrace: the fallback."""
    if d is None or not d["locations"]:
        return fallback
    rows = pl.DataFrame(d["locations"]).filter(pl.col("lane") == 0)
    known = rows.select(
        *[c for c in _LOC_COLS if c in rows.columns],
        pl.col("src_pid").alias("pid"),
        pl.col("src_tid").alias("tid"),
    ).unique("loc", keep="first")
    known = _with_own_columns(known, d.get(LOCATION_COLUMNS), warnings if warnings is not None else [])
    extra = fallback.join(known.select(pl.col("loc").cast(fallback.schema["loc"])), on="loc", how="anti")
    series_pids = [s["pid"] for s in d.get("series", [])]
    if series_pids:  # the counter processes of di's series: their samples go to the series' own locations
        anchors = keys.filter((pl.col("lkind") == LK_COUNTER) & pl.col("pid").is_in(series_pids))
        extra = extra.join(anchors.select(pl.col("loc").cast(fallback.schema["loc"])), on="loc", how="anti")
    out = pl.concat(
        [known.cast({c: fallback.schema[c] for c in known.columns if c in fallback.schema}), extra],
        how="diagonal_relaxed",
    )
    return out.sort("loc")


def _with_own_columns(known: pl.DataFrame, doc: Any, warnings: list[str]) -> pl.DataFrame:
    """``known`` with the locations' extra columns of diTrace's ``location_columns`` (none: as it is)."""
    if doc is None:
        return known
    from di.convert.side_tables import decode_columns
    from di.schema import polars_schema

    try:
        extra = decode_columns(doc, {"loc": polars_schema("locations")["loc"]})
        if "loc" not in extra.columns or extra.get_column("loc").is_duplicated().any():
            raise ValueError("no loc column, or one loc twice")
    except ValueError as exc:
        warnings.append(f"diTrace {LOCATION_COLUMNS} ignored ({exc})")
        return known
    own = [c for c in extra.columns if c != "loc" and c not in known.columns]
    return known.with_columns(pl.col("loc").cast(pl.UInt32)).join(
        extra.select("loc", *own), on="loc", how="left", maintain_order="left"
    )


def series_map(d: dict[str, Any] | None) -> dict[tuple[int, str], tuple[int, str, str | None]] | None:
    """(pid, counter name as written) -> (loc, series name, unit); None without diTrace."""
    if d is None:
        return None
    out = {}
    for s in d.get("series", []):
        out[(s["pid"], s["counter"])] = (s["loc"], s["name"], s.get("unit"))
    return out


def written(d: dict[str, Any] | None, n_written: int, warnings: list[str]) -> Written | None:
    """What :func:`di.convert.restore.restore` puts back (None: the file has no diTrace): the
    meta fields that are set, the categories and the messages and collectives tables."""
    if d is None:
        return None
    from di.convert.side_tables import KEY, decode_all

    (categories, no_source), tables = _categories(d, n_written, warnings), _tables(d, warnings)
    added = _args_added(d, n_written, warnings)
    return Written(
        meta={k: v for k, v in _meta(d, warnings).items() if v},
        categories=categories,
        no_source_category=no_source,
        args_added=added,
        tables=tables,
        side_tables=decode_all(d.get(KEY), "diTrace", warnings),
    )


def _meta(d: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The meta of the trace that was written (:func:`di.convert.restore.written_meta`; ``start_ns`` is the clock
    origin, not meta)."""
    return written_meta(d.get("meta", {}), warnings, "diTrace meta", drop=("start_ns",))


def _categories(d: dict[str, Any], n_written: int, warnings: list[str]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The canonical category (index in the vocabulary) of each written event row and whether it had no source
    category (its letter upper case), when diTrace has them for exactly ``n_written`` rows; else None, None (a
    mismatch is warned)."""
    from di.trace import CATS

    text = d.get("categories")
    if not isinstance(text, str):
        return None, None
    letters = np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64)
    upper = letters < ord("a")
    codes = letters - np.where(upper, ord("A"), ord("a"))
    if codes.size != n_written or codes.min(initial=0) < 0 or codes.max(initial=0) >= len(CATS):
        warnings.append(
            f"diTrace categories ignored: {codes.size} letters for {n_written} events, or letters out of range"
        )
        return None, None
    return codes, upper


def _args_added(d: dict[str, Any], n_written: int, warnings: list[str]) -> np.ndarray | None:
    """The digits of ``args_added`` (see :data:`ARGS_ADDED`) when there is one for exactly ``n_written`` rows; else
    None (a mismatch is warned)."""
    text = d.get(ARGS_ADDED)
    if not isinstance(text, str):
        return None
    flags = np.frombuffer(text.encode("ascii", "replace"), dtype=np.uint8).astype(np.int64) - ord("0")
    if flags.size != n_written or flags.min(initial=0) < 0 or flags.max(initial=0) > 7:
        warnings.append(f"diTrace {ARGS_ADDED} ignored: {flags.size} digits for {n_written} events, or not 0-7")
        return None
    return flags.astype(np.uint8)


def _tables(d: dict[str, Any], warnings: list[str]) -> dict[str, pl.DataFrame]:
    """The messages and collectives tables diTrace holds, event references still written rows."""
    from di.schema import polars_schema

    out = {}
    for name, refs in WRITTEN_ROW_REFS.items():
        cols = d.get(name)
        if cols is None:
            continue
        try:
            out[name] = pl.DataFrame(cols)
        except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
            warnings.append(f"diTrace {name} ignored: {exc}")
            continue
        if not set(refs) <= set(out[name].columns):
            warnings.append(f"diTrace {name} ignored: no {', '.join(refs)} columns")
            del out[name]
            continue
        try:  # the types the table's schema gives them
            out[name] = out[name].cast(
                {c: t for c, t in polars_schema(name).items() if c in out[name].columns and c not in refs}
            )
        except pl.exceptions.PolarsError as exc:
            warnings.append(f"diTrace {name} ignored: {str(exc).splitlines()[0][:120]}")
            del out[name]
    return out
