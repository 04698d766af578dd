"""The ``io_files`` table (per-file I/O statistics) as OTF2 IoFileProperty definitions, both ways.

OTF2's home for what is known of a file as a whole is the IoFileProperty definition: (IoFile, name, type,
value), which ``otf2-print -G`` and Vampir show with the file. Each row of ``io_files`` (one per module, rank
and file) becomes properties of its file's IoRegularFile (the one the file's I/O operations use, else a new
one), named ``io_files:<module>:<rank>:<column>`` (module empty for null; rank -1 for Darshan's shared record):

- ``row``: the row's position in the table, and ``opens``: always, so that every row has properties;
- every other counter that is not 0: INT64; the size histograms one property per bin,
  ``read_sizes.1K-10K`` (bytes, Darshan's bins, :mod:`di.convert.logs.darshan_counters`);
- columns beyond the schema: integers INT64, floats DOUBLE, text STRING (null: no property); a column of
  another type is left out and counted in a :class:`di.errors.DataLossWarning`.

Reading takes the properties of this form from any archive (other names are not di's and are left alone),
missing counters are 0, and rows come back in ``row`` order (without it: sorted by module, rank, file). A
set of properties that does not make a valid table is dropped whole and said, with its row count.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import polars as pl

PREFIX = "io_files:"
"""Start of the name of every property di writes for io_files."""
_KEY = ("module", "rank", "file")
_ALWAYS = ("row", "opens")


@dataclass
class IoFileProperties:
    """Properties to write: IoFile ref (position in :class:`~di.convert.otf2.iolayout.IoDefs` ``files``),
    name, OTF2 type name (INT64, DOUBLE, STRING) and value, one entry per property."""

    file: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    type: list[str] = field(default_factory=list)
    value: list[Any] = field(default_factory=list)


def _flat(table: pl.DataFrame) -> pl.DataFrame:
    """``table`` with a ``row`` column and each struct column's fields as columns ``<column>.<field>``."""
    flat = table.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    for c, dtype in table.schema.items():
        if isinstance(dtype, pl.Struct):
            fields = [f.name for f in dtype.fields]
            flat = flat.with_columns(pl.col(c).struct.rename_fields([f"{c}.{f}" for f in fields])).unnest(c)
    return flat


def _kind(dtype: pl.DataType) -> str | None:
    if dtype.is_integer() or dtype == pl.Boolean:
        return "INT64"
    if dtype.is_float():
        return "DOUBLE"
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum):
        return "STRING"
    return None


def plan_io_files(trace: Any, files: list[str], strings: Any, losses: list[str]) -> IoFileProperties:
    """The properties of ``trace.io_files``; its file names are added to ``files`` (the IoRegularFile names,
    extended in place) and every name to ``strings``; columns of no OTF2 type are said in ``losses``."""
    table = trace.io_files
    out = IoFileProperties()
    if not table.height:
        return out
    flat = _flat(table)
    name = pl.concat_str(
        pl.lit(PREFIX), pl.col("module").fill_null(""), pl.lit(":"), pl.col("rank").cast(pl.String), pl.lit(":")
    )
    index = {f: i for i, f in enumerate(files)}
    for f in flat.get_column("file").unique(maintain_order=True).to_list():
        if f not in index:
            index[f] = len(files)
            files.append(f)
            strings.ref(f)
    flat = flat.with_columns(flat.get_column("file").replace_strict(index, return_dtype=pl.Int64).alias("_file"))
    cast = {"INT64": pl.Int64, "DOUBLE": pl.Float64, "STRING": pl.String}
    parts = []
    for k, (c, dtype) in enumerate(flat.schema.items()):
        kind = _kind(dtype)
        if c in (*_KEY, "_file"):
            continue
        if kind is None:
            losses.append(f"io_files column {c!r} ({dtype}) not written to OTF2: {flat.height} values")
            continue
        value = pl.col(c).cast(cast[kind])
        keep = value.is_not_null() if c in _ALWAYS or kind != "INT64" else value.is_not_null() & (value != 0)
        parts.append(
            flat.filter(keep).select(
                "row",
                pl.lit(k).alias("_col"),
                "_file",
                (name + pl.lit(c)).alias("_name"),
                pl.lit(kind).alias("_type"),
                *((value if kind == t else pl.lit(None, d)).alias(f"_{t}") for t, d in cast.items()),
            )
        )
    long = pl.concat(parts).sort("row", "_col")  # a file's properties together, in the table's column order
    out.file = long.get_column("_file").to_list()
    out.name = long.get_column("_name").to_list()
    out.type = long.get_column("_type").to_list()
    out.value = [
        i if t == "INT64" else f if t == "DOUBLE" else x
        for t, i, f, x in zip(out.type, *(long.get_column(f"_{t}").to_list() for t in cast))
    ]
    for s in {*out.name, *(v for v, k in zip(out.value, out.type) if k == "STRING")}:
        strings.ref(s)
    return out


def write_io_file_properties(o: Any, g: Any, props: IoFileProperties, s: Any) -> None:
    """The IoFileProperty definitions through the global definition writer ``g`` (after the IoRegularFiles)."""
    for file, name, kind, value in zip(props.file, props.name, props.type, props.value):
        if kind == "INT64":
            v = o.AttributeValue(int64=value)
        elif kind == "DOUBLE":
            v = o.AttributeValue(float64=value)
        else:
            v = o.AttributeValue(stringRef=s(value))
        o.GlobalDefWriter_WriteIoFileProperty(g, file, s(name), getattr(o, f"TYPE_{kind}"), v)


def _value(kind: str, raw: int, strings: dict[int, str]) -> tuple[int | None, float | None, str | None]:
    """(int, float, text) of a property's raw 64-bit union value: the one its OTF2 type names, others None."""
    if kind == "INT64":
        return (raw - 2**64 if raw >= 2**63 else raw), None, None
    if kind == "DOUBLE":
        return None, struct.unpack("<d", struct.pack("<Q", raw))[0], None
    if kind == "STRING":
        return None, None, strings.get(raw & 0xFFFFFFFF)
    if kind.startswith(("UINT", "INT")):
        return raw, None, None
    return None, None, None


def read_io_files(
    properties: list[tuple[int, int, str, int]], files: dict[int, str], strings: dict[int, str], warnings: list[str]
) -> pl.DataFrame | None:
    """The io_files table of an archive's IoFileProperty definitions ((file ref, name ref, OTF2 type name, raw
    value) each), None when none is di's; a set that makes no valid table is said in ``warnings``."""
    rows = []
    for file, name_ref, kind, raw in properties:
        name = strings.get(name_ref) or ""
        if not name.startswith(PREFIX):
            continue
        module, rank, column = name[len(PREFIX) :].rsplit(":", 2) if name.count(":") >= 3 else ("", "x", name)
        rows.append((files.get(file), module or None, rank, column, *_value(kind, raw, strings)))
    if not rows:
        return None
    try:
        return _table(rows)
    except (ValueError, TypeError, pl.exceptions.PolarsError) as exc:
        from_rows = len({r[:3] for r in rows})
        warnings.append(
            f"io_files IoFileProperty definitions ignored ({str(exc).splitlines()[0][:160]}): {from_rows} rows dropped"
        )
        return None


def _table(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    """The checked io_files table of property rows (file, module, rank text, column, int, float, text)."""
    from di.errors import SchemaError
    from di.schema import polars_schema, validate_table
    from di.trace import conform

    schema = dict(
        zip(("file", "module", "rank", "column", "i", "f", "s"), (pl.String,) * 4 + (pl.Int64, pl.Float64, pl.String))
    )
    long = pl.DataFrame(rows, schema=schema, orient="row").with_columns(pl.col("rank").cast(pl.Int32, strict=True))
    if long.get_column("file").null_count():
        raise ValueError("properties of an undefined IoFile")
    wide = None
    for value in ("i", "f", "s"):
        part = long.drop_nulls(value)
        if not part.height:
            continue
        got = part.pivot("column", index=list(_KEY), values=value, aggregate_function="first")
        wide = got if wide is None else wide.join(got, on=list(_KEY), how="full", coalesce=True, nulls_equal=True)
    assert wide is not None
    known = polars_schema("io_files")
    fill = []
    for c, dtype in known.items():
        if isinstance(dtype, pl.Struct):
            parts = [f"{c}.{f.name}" for f in dtype.fields]
            wide = wide.with_columns(*(pl.lit(0, pl.Int64).alias(p) for p in parts if p not in wide.columns))
            wide = wide.with_columns(
                pl.struct([pl.col(p).fill_null(0).alias(p.split(".", 1)[1]) for p in parts]).alias(c)
            )
            wide = wide.drop(parts)
        elif c not in _KEY:
            fill.append(pl.col(c).fill_null(0) if c in wide.columns else pl.lit(0, pl.Int64).alias(c))
    wide = wide.with_columns(fill)
    order = ["row", *_KEY] if "row" in wide.columns else list(_KEY)
    wide = wide.sort(order, nulls_last=False).drop("row", strict=False)
    try:
        table = conform("io_files", wide)
        validate_table("io_files", table)
    except SchemaError as exc:
        raise ValueError(str(exc)) from None
    return table
