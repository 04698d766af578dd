"""The canonical schema, read from the versioned JSON Schemas in ``schemas/``.

The JSON Schema files are the single source of truth: each table's file
describes one row (column name, JSON type, nullability, allowed values) and
names the column's polars type in ``x-dtype``. This module turns them into
polars schemas and checks traces against them, column by column (vectorized),
so validation costs O(columns), not a Python call per row.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from di.errors import SchemaError

SCHEMA_VERSION = 1
"""Version of the canonical trace schema that this di writes."""

TABLES = (
    "locations",
    "events",
    "messages",
    "collectives",
    "flows",
    "series",
    "samples",
    "comms",
    "comm_links",
    "io_files",
    "jobs",
)


def schema_dir(version: int = SCHEMA_VERSION, family: str = "trace") -> Path:
    """Folder holding one family's JSON Schemas of one version (``trace``, ``analysis``, ``diff``;
    installed with the package as ``di/_schemas``, or the repository's ``schemas/``)."""
    here = Path(__file__).resolve().parent
    for root in (here / "_schemas", here.parent / "schemas"):
        folder = root / family / f"v{version}"
        if folder.is_dir():
            return folder
    raise SchemaError(f"JSON Schemas for {family} schema v{version} are not installed with di")


@cache
def document_schema(family: str, version: int = 1) -> dict[str, Any]:
    """The JSON Schema of a result document di writes (``schemas/FAMILY/vN/FAMILY.schema.json``)."""
    return json.loads((schema_dir(version, family) / f"{family}.schema.json").read_text())


@cache
def json_schema(table: str, version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema of one table (or ``"meta"``) as a dict."""
    return json.loads((schema_dir(version) / f"{table}.schema.json").read_text())


def _dtype(spec: dict[str, Any]) -> pl.DataType:
    name = spec["x-dtype"]
    if name == "Enum":
        return pl.Enum(spec["enum"])
    if name == "Struct":  # an object of the listed fields, in order
        return pl.Struct({k: _dtype(v) for k, v in spec["properties"].items()})
    return getattr(pl, name)()


@cache
def polars_schema(table: str) -> dict[str, pl.DataType]:
    """Column name -> polars dtype of the columns every table of the current schema version has
    (the optional ones, ``x-optional`` in the JSON Schema, are in :func:`optional_schema`)."""
    props = json_schema(table)["properties"]
    return {col: _dtype(spec) for col, spec in props.items() if not spec.get("x-optional")}


@cache
def optional_schema(table: str) -> dict[str, pl.DataType]:
    """Column name -> polars dtype of a table's optional columns: present only where a source has their
    values, so a trace without them holds no all-null column (8 bytes a row each)."""
    props = json_schema(table)["properties"]
    return {col: _dtype(spec) for col, spec in props.items() if spec.get("x-optional")}


@cache
def args_keys(table: str = "events") -> tuple[tuple[str, str], ...]:
    """(column, args key) of each column that holds an ``args`` member of its own (``x-args-key``), in schema
    order: readers lift that member out of the args text into the column, writers put it back first."""
    props = json_schema(table)["properties"]
    return tuple((col, spec["x-args-key"]) for col, spec in props.items() if "x-args-key" in spec)


@cache
def optional_args_keys(table: str = "events") -> tuple[tuple[str, str], ...]:
    """The pairs of :func:`args_keys` whose column is optional (Kineto's ids: ``ext_id`` <-> "External id", ...):
    the integer columns the writers carry as attributes or annotations of their own, where a trace has them."""
    return tuple((col, key) for col, key in args_keys(table) if col in optional_schema(table))


@cache
def nullable_columns(table: str) -> frozenset[str]:
    """Columns of a table whose JSON type admits null."""
    props = json_schema(table)["properties"]
    return frozenset(c for c, s in props.items() if isinstance(s["type"], list) and "null" in s["type"])


@cache
def non_nullable_columns(table: str) -> frozenset[str]:
    """Columns of a table whose JSON type admits no null (every row has a value)."""
    return frozenset(json_schema(table)["properties"]) - nullable_columns(table)


def validate_table(table: str, df: pl.DataFrame) -> None:
    """Check one table against its JSON Schema, vectorized.

    Checks: every required column present with its declared dtype (an optional one, where present, too); no nulls in
    non-nullable columns; values within ``minimum``; enum values allowed (the
    Enum dtype already guarantees it).

    Raises:
        SchemaError: naming the table, column and problem.
    """
    props = json_schema(table)["properties"]
    optional = optional_schema(table)
    expected = polars_schema(table) | {c: t for c, t in optional.items() if c in df.columns}
    nullable = nullable_columns(table)
    for col, dtype in expected.items():
        if col not in df.columns:
            raise SchemaError(f"table {table!r}: column {col!r} is missing")
        got = df.schema[col]
        if got != dtype:
            raise SchemaError(f"table {table!r}: column {col!r} has dtype {got}, schema says {dtype}")
        series = df.get_column(col)
        if col not in nullable and series.null_count():
            raise SchemaError(f"table {table!r}: column {col!r} has {series.null_count()} nulls but is not nullable")
        minimum = props[col].get("minimum")
        lowest = series.min() if minimum is not None and len(series) else None
        if lowest is not None and lowest < minimum:  # type: ignore[operator]
            raise SchemaError(f"table {table!r}: column {col!r} has values below {minimum}")


def validate_meta(meta: dict[str, Any]) -> None:
    """Validate meta.json content against its JSON Schema (jsonschema, on the witnesses of its long arrays:
    :mod:`di.document_check`; a partitioned store's manifest of 512 groups took 0.041 CPU-s checked whole, 0.002 so)."""
    from di.document_check import check

    check(meta, json_schema("meta"), _meta_validator(), "meta.json")


def valid_meta_fields(meta: Any, keys: tuple[str, ...], warnings: list[str], what: str) -> dict[str, Any]:
    """The ``keys`` of ``meta`` (a trace's meta.json content stored in a file di wrote) whose values
    match the meta.json schema; each one that does not is left out and said in ``warnings``
    (``what`` names where it was stored)."""
    import jsonschema

    if not isinstance(meta, dict):
        warnings.append(f"{what} ignored: not an object")
        return {}
    props, out = json_schema("meta")["properties"], {}
    for k in keys:
        if k not in meta:
            continue
        try:
            jsonschema.validate(meta[k], props[k])
            out[k] = meta[k]
        except jsonschema.ValidationError as exc:
            warnings.append(f"{what} {k} ignored: {exc.message[:120]}")
    return out


@cache
def _meta_validator() -> Any:
    """The meta.json validator, built once (``jsonschema.validate`` checks the schema itself on every call)."""
    import jsonschema

    schema = json_schema("meta")
    return jsonschema.validators.validator_for(schema)(schema)
