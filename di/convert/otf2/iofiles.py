"""The ``io_files`` table (per-file I/O statistics) as OTF2 IoFileProperty definitions, both ways.

OTF2's home for what is known of a file as a whole is the IoFileProperty definition: (IoFile, name, type,
value), which ``otf2-print -G`` and Vampir show with the file. Each row of ``io_files`` (one per module, rank
and file) becomes properties of its file's IoRegularFile (the one the file's I/O operations use, else a new
one), named ``io_files:<module>:<rank>:<column>`` (module empty for null; rank -1 for Darshan's shared record):

- ``row``: the row's position in the table, and ``opens``: always, so that every row has properties;
- every other counter of the schema that is not 0: INT64; the size histograms one property per bin,
  ``read_sizes.1K-10K`` (bytes, Darshan's bins, :mod:`di.convert.logs.darshan_counters`);
- columns beyond the schema: integers (and booleans) INT64, floats DOUBLE, text STRING, zeros included
  (null: no property; they read back as Int64, Float64, String); a column of another type is left out and
  counted in a :class:`di.errors.DataLossWarning`.

Reading takes the properties of this form from any archive (other names are not di's and are left alone),
missing counters are 0, and rows come back in ``row`` order (without it: sorted by module, rank, file). A
set of properties that does not make a valid table is dropped whole and said, with its row count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from numba import njit

from di.convert.otf2.clib import ccall as clib_call

if TYPE_CHECKING:  # the String cfunc compiles on import: the writers that import this module do not need it
    from di.convert.otf2.stringdefs import StringDefs

PREFIX = "io_files:"
"""Start of the name of every property di writes for io_files."""
_KEY = ("module", "rank", "file")
_ALWAYS = ("row", "opens")


_NONE = np.zeros(0, np.int64)


@dataclass
class IoFileProperties:
    """Properties to write, one entry per property (int64 arrays): IoFile ref (position in
    :class:`~di.convert.otf2.iolayout.IoDefs` ``files``), name string ref, OTF2 type code, and the value's 64
    bits (INT64 as is, DOUBLE its IEEE bits, STRING its string ref)."""

    file: np.ndarray = field(default_factory=lambda: _NONE)
    name: np.ndarray = field(default_factory=lambda: _NONE)
    type: np.ndarray = field(default_factory=lambda: _NONE)
    value: np.ndarray = field(default_factory=lambda: _NONE)


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
    from di.schema import polars_schema

    # only the schema's counters read back 0 when absent: a column beyond it keeps its zeros
    sparse = set(_flat(pl.DataFrame(schema=polars_schema("io_files"))).columns) - {*_ALWAYS, *_KEY}
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
        keep = value.is_not_null() & (value != 0) if c in sparse and kind == "INT64" else value.is_not_null()
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
    kind = long.get_column("_type").to_numpy()
    value = long.get_column("_INT64").fill_null(0).to_numpy().astype(np.int64)
    doubles = kind == "DOUBLE"
    value[doubles] = long.get_column("_DOUBLE").to_numpy()[doubles].astype(np.float64).view(np.int64)
    texts = kind == "STRING"
    if texts.any():
        value[texts] = strings.add_many(long.get_column("_STRING").filter(pl.Series(texts)))
    codes = {k: type_code(k) for k in cast}
    return IoFileProperties(
        file=long.get_column("_file").to_numpy().astype(np.int64),
        name=strings.add_many(long.get_column("_name")).astype(np.int64),
        type=long.get_column("_type").replace_strict(codes, return_dtype=pl.Int64).to_numpy(),
        value=value,
    )


def type_code(name: str) -> int:
    """The OTF2_Type code of a type name (``INT64`` -> 8)."""
    import _otf2

    return int(getattr(_otf2, f"TYPE_{name}").value)


def write_io_file_properties(g: Any, props: IoFileProperties, anchor: Any) -> None:
    """The IoFileProperty definitions through the global definition writer ``g`` (an ``_otf2`` handle), after
    the IoRegularFiles, from one numba loop.

    Raises:
        FormatError: the OTF2 library refused one.
    """
    from di.convert.columns import readonly
    from di.convert.otf2 import clib
    from di.errors import FormatError

    if not props.file.size:
        return
    cols = (readonly(a) for a in (props.file, props.name, props.type, props.value))
    code = _write_properties(
        np.int64(clib.address("OTF2_GlobalDefWriter_WriteIoFileProperty")), np.int64(clib.handle(g)), *cols
    )
    if code:
        raise FormatError(
            anchor, f"OTF2 library failed writing IoFileProperty definitions: {clib.error_text(int(code))}"
        )


@njit(cache=True, _nrt=False)
def _write_properties(fn, writer, file, name, kind, value):  # noqa: ANN001, ANN202
    """WriteIoFileProperty(writer, file[i], name[i], kind[i], value[i]) for every i (the 8-byte value union
    passed as an integer, :mod:`di.convert.otf2.clib`); the first error code, else 0."""
    for i in range(file.size):
        code = clib_call(fn, (writer, file[i], name[i], kind[i], value[i]))
        if code != 0:
            return np.int64(code)
    return np.int64(0)


def read_io_files(
    properties: list[tuple[int, int, int, int]], files: dict[int, str], strings: StringDefs, warnings: list[str]
) -> pl.DataFrame | None:
    """The io_files table of an archive's IoFileProperty definitions ((file ref, name ref, OTF2 type code, raw
    64-bit value) each), None when none is di's; a set that makes no valid table is said in ``warnings``."""
    if not properties:
        return None
    raw = np.array(properties, dtype=np.uint64).reshape(-1, 4)
    name_refs = np.unique(raw[:, 1])
    names = pl.DataFrame(
        {"name_ref": name_refs.astype(np.int64), "name": strings.gather(name_refs.astype(np.int64))},
        schema={"name_ref": pl.Int64, "name": pl.String},
    ).filter(pl.col("name").str.starts_with(PREFIX))
    if not names.height:
        return None
    parts = pl.col("name").str.slice(len(PREFIX)).str.splitn(":", 3)  # module may be empty; column is the rest
    names = names.select(
        "name_ref",
        parts.struct.field("field_0").alias("module"),
        parts.struct.field("field_1").alias("rank"),
        parts.struct.field("field_2").alias("column"),
    )
    kind = raw[:, 2].astype(np.int64)
    bits = raw[:, 3].copy()
    text = kind == type_code("STRING")
    s_ref = (bits & np.uint64(0xFFFFFFFF)).astype(np.int64)
    long = pl.DataFrame(
        {
            "file_ref": raw[:, 0].astype(np.int64),
            "name_ref": raw[:, 1].astype(np.int64),
            "i": np.where(kind == type_code("DOUBLE"), 0, bits.view(np.int64)),
            "is_int": ~text & (kind != type_code("DOUBLE")),
            "f": bits.view(np.float64),
            "is_float": kind == type_code("DOUBLE"),
            "s": strings.gather(np.where(text, s_ref, -1)),
        }
    ).join(names, on="name_ref", how="inner")
    long = long.select(
        pl.col("file_ref").replace_strict(files, default=None, return_dtype=pl.String).alias("file"),
        pl.when(pl.col("module") != "").then("module").alias("module"),
        "rank",
        "column",
        pl.when("is_int").then("i").alias("i"),
        pl.when("is_float").then("f").alias("f"),
        "s",  # null but for STRING values (their ref's text)
    )
    try:
        return _table(long)
    except (ValueError, TypeError, pl.exceptions.PolarsError) as exc:
        rows = long.select("file", "module", "rank").unique().height
        warnings.append(
            f"io_files IoFileProperty definitions ignored ({str(exc).splitlines()[0][:160]}): {rows} rows dropped"
        )
        return None


def _table(long: pl.DataFrame) -> pl.DataFrame:
    """The checked io_files table of property rows (file, module, rank text, column, int, float, text)."""
    from di.errors import SchemaError
    from di.schema import polars_schema, validate_table
    from di.trace import conform

    long = long.with_columns(pl.col("rank").cast(pl.Int32, strict=True))
    if long.get_column("file").null_count() or long.get_column("column").null_count():
        raise ValueError("properties of an undefined IoFile, or names without a column")
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
