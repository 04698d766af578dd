"""The canonical trace: one job's activity as polars tables on one clock.

Every time is int64 nanoseconds on the trace's clock (``meta["clock"]``);
row references (``parent``, ``send``, ``recv``, ``event``, ``src``, ``dst``)
are positions in ``events`` as stored. Column definitions, units and allowed
values live in the JSON Schemas under ``schemas/trace/v1``; see
:mod:`di.schema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from di import schema

CATS: tuple[str, ...] = tuple(schema.json_schema("events")["properties"]["cat"]["enum"])
"""The closed vocabulary of event categories."""

FLOW_KINDS: tuple[str, ...] = tuple(schema.json_schema("flows")["properties"]["kind"]["enum"])
LOCATION_KINDS: tuple[str, ...] = tuple(schema.json_schema("locations")["properties"]["kind"]["enum"])


def conform(table: str, df: pl.DataFrame | dict[str, Any] | None) -> pl.DataFrame:
    """Return ``df`` with exactly the schema's columns, in order, cast to their dtypes.

    Missing nullable columns are added as nulls; the schema's optional columns
    (:func:`di.schema.optional_schema`) follow, in schema order and cast, where
    ``df`` has them; other columns are kept after those (the schema is a floor,
    not a ceiling).
    """
    target = schema.polars_schema(table)
    if df is None:
        return pl.DataFrame(schema=target)
    if isinstance(df, dict):
        df = pl.DataFrame(df)
    have = df.schema  # built on every access: once here
    optional = {c: t for c, t in schema.optional_schema(table).items() if c in have}
    if optional:
        target = target | optional
    if list(have.items())[: len(target)] == list(target.items()):  # already conforming, in order: no new frame
        return df
    n = df.height
    cols = []
    for col, dtype in target.items():
        if col in have:
            cols.append(df.get_column(col).cast(dtype) if have[col] != dtype else df.get_column(col))
        else:
            cols.append(pl.Series(col, [None] * n if n else [], dtype=dtype))
    extra = [df.get_column(c) for c in have if c not in target]
    return pl.DataFrame(cols + extra)


@dataclass(frozen=True)
class Trace:
    """A job trace in the canonical model.

    Attributes:
        locations: one row per timeline (CPU thread, GPU stream, async track, counter source).
        events: slices and instants, sorted by (loc, start_ns, -end_ns); times in int64 ns.
        messages: matched point-to-point messages (rows of events).
        collectives: one row per rank's part in a collective instance.
        flows: dependency edges other than program order and messages.
        series: counter series with units.
        samples: counter samples (series, ts_ns, value).
        comms: one row per rank and communicator it joined (NCCL logs).
        comm_links: channel connections, ring and tree edges of communicators, with transports.
        io_files: per-file I/O statistics (di record's I/O shim, Darshan counters), whole-run totals.
        jobs: jobs and job steps a batch scheduler reported (Slurm sacct, squeue, scontrol), their fields as printed.
        meta: the content of meta.json (schema version, clock, sources, drops, warnings).
    """

    locations: pl.DataFrame
    events: pl.DataFrame
    messages: pl.DataFrame = field(default_factory=lambda: conform("messages", None))
    collectives: pl.DataFrame = field(default_factory=lambda: conform("collectives", None))
    flows: pl.DataFrame = field(default_factory=lambda: conform("flows", None))
    series: pl.DataFrame = field(default_factory=lambda: conform("series", None))
    samples: pl.DataFrame = field(default_factory=lambda: conform("samples", None))
    comms: pl.DataFrame = field(default_factory=lambda: conform("comms", None))
    comm_links: pl.DataFrame = field(default_factory=lambda: conform("comm_links", None))
    io_files: pl.DataFrame = field(default_factory=lambda: conform("io_files", None))
    jobs: pl.DataFrame = field(default_factory=lambda: conform("jobs", None))
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(cls, *, meta: dict[str, Any], **tables: pl.DataFrame | dict[str, Any] | None) -> Trace:
        """Make a Trace from tables that may lack nullable columns or exact dtypes."""
        unknown = set(tables) - set(schema.TABLES)
        if unknown:
            raise TypeError(f"unknown tables: {sorted(unknown)}")
        conformed = {t: conform(t, tables.get(t)) for t in schema.TABLES}
        trace = cls(**conformed, meta=dict(meta))
        return trace.with_meta(refresh_meta(trace))

    def table(self, name: str) -> pl.DataFrame:
        """One table by name."""
        if name not in schema.TABLES:
            raise KeyError(f"no table {name!r}; tables are {', '.join(schema.TABLES)}")
        return getattr(self, name)

    def tables(self) -> dict[str, pl.DataFrame]:
        """All tables by name, in schema order."""
        return {t: getattr(self, t) for t in schema.TABLES}

    def with_meta(self, meta: dict[str, Any]) -> Trace:
        """A copy with another meta dict."""
        return replace(self, meta=meta)

    def validate(self, *, tables: bool = True) -> None:
        """Check every table and meta.json against the JSON Schemas, and the
        model's invariants (ordered intervals, sorted events, valid row references).

        Args:
            tables: False skips the tables' schema check, for a reader that checked them before building the trace.

        Raises:
            SchemaError: on the first mismatch.
        """
        for name, df in self.tables().items() if tables else ():
            schema.validate_table(name, df)
        schema.validate_meta(self.meta)
        _check_invariants(self)

    @property
    def ranks(self) -> list[int]:
        """Sorted ranks present in the trace."""
        return sorted(self.locations.get_column("rank").unique().to_list())

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}={getattr(self, t).height}" for t in schema.TABLES)
        return f"Trace(ranks={len(self.ranks)}, {counts})"


# (table, column) pairs that hold row positions in ``events``
EVENT_REFS = (
    ("events", "parent"),
    ("flows", "src"),
    ("flows", "dst"),
    ("messages", "send"),
    ("messages", "recv"),
    ("messages", "send_done"),
    ("messages", "recv_post"),
    ("collectives", "event"),
)


def _check_invariants(trace: Trace) -> None:
    """What the schemas cannot say: intervals are ordered, instants are points,
    events are sorted by (loc, start_ns), and every reference points at a row."""
    from di.errors import SchemaError

    ev = trace.events
    problems = []
    if ev.height:
        checks = ev.select(
            (pl.col("end_ns") < pl.col("start_ns")).sum().alias("events end before they start"),
            (pl.col("instant") & (pl.col("end_ns") != pl.col("start_ns")))
            .sum()
            .alias("instants with end_ns != start_ns"),
            (
                (pl.col("loc") < pl.col("loc").shift(1))
                | ((pl.col("loc") == pl.col("loc").shift(1)) & (pl.col("start_ns") < pl.col("start_ns").shift(1)))
            )
            .sum()
            .alias("events out of (loc, start_ns) order"),
            (~pl.col("loc").is_in(trace.locations.get_column("loc").implode()))
            .sum()
            .alias("events on unknown locations"),
        ).row(0, named=True)
        problems += [f"{n} {what}" for what, n in checks.items() if n]
    for table, col in EVENT_REFS:
        refs = getattr(trace, table).get_column(col)
        if refs.null_count() == refs.len():
            continue
        lowest, highest = refs.min(), refs.max()  # nulls skipped, nothing copied: the count only when one is out
        if lowest < 0 or highest >= ev.height:  # type: ignore[operator]
            bad = int(((refs < 0) | (refs >= ev.height)).sum())
            problems.append(f"{bad} {table}.{col} values that are not rows of events")
    if problems:
        raise SchemaError("trace invariants violated: " + "; ".join(problems))


def refresh_meta(trace: Trace) -> dict[str, Any]:
    """meta with the derived fields (tables, ranks, time range) recomputed."""
    from di import __version__

    # identity first, so that a reader of the first bytes knows what this is
    meta = {"format": "di-trace", "schema_version": schema.SCHEMA_VERSION, "di_version": __version__}
    meta.update((k, v) for k, v in trace.meta.items() if k not in meta)
    meta.setdefault("clock", {"unit": "ns", "domain": "relative", "sync": None})
    meta.setdefault("sources", [])
    meta.setdefault("warnings", [])
    meta.setdefault("hosts", sorted(h for h in trace.locations.get_column("host").unique().to_list() if h))
    meta["tables"] = {t: getattr(trace, t).height for t in schema.TABLES}
    meta["ranks"] = trace.ranks
    ev = trace.events
    if ev.height:
        meta["time_range"] = {
            "start_ns": int(ev.get_column("start_ns").min()),
            "end_ns": int(ev.get_column("end_ns").max()),
        }
    else:
        meta["time_range"] = {"start_ns": None, "end_ns": None}
    return meta
