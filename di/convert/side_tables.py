"""The trace's side tables (``comms``, ``comm_links``, ``io_files``, ``jobs``) in formats that have no table for them.

These tables hold no event references and no times: one row per communicator member, topology edge,
(module, rank, file) or scheduler job step. Chrome JSON and Perfetto have no place for them, so di's writers store them in their own
document (Chrome: ``diTrace.side_tables``; Perfetto: di's packet ``side_tables``); OTF2 keeps ``io_files`` in
its own IoFile property definitions (:mod:`di.convert.otf2.iofiles`) and the others in an archive property
(:mod:`di.convert.otf2.sideprops`). One document per table::

    {"columns": {column: [value per row]}, "dtypes": {column: polars dtype name}}

``dtypes`` names the columns beyond the table's schema (the schema is a floor, a table may carry more) whose
type is not nested; the schema's columns take the schema's type. A column JSON cannot hold (binary, dates,
Python objects) is left out, and a float column's NaN and infinities (JSON has none) become null; both are
counted in the writer's :class:`di.errors.DataLossWarning`. Reading checks each table against its schema: a
damaged one is left out whole and said, with its row count, in the warnings.
"""

from __future__ import annotations

import warnings as pywarnings
from typing import Any

import polars as pl

from di.errors import DataLossWarning

SIDE_TABLES = ("comms", "comm_links", "io_files", "jobs")
"""The canonical tables without event references that formats carry only in di's own document."""
KEY = "side_tables"
"""Key of the tables' document in di's Chrome ``diTrace`` and Perfetto packet."""


def _json_type(dtype: pl.DataType) -> bool:
    """True when every value of ``dtype`` is a JSON value and reads back as one (nested: every field)."""
    if isinstance(dtype, pl.Struct):
        return all(_json_type(f.dtype) for f in dtype.fields)
    if isinstance(dtype, pl.List):
        return _json_type(dtype.inner)
    return dtype.is_numeric() and not dtype.is_decimal() or dtype in (pl.String, pl.Boolean, pl.Null)


def encode(table: pl.DataFrame, name: str, fmt: str, losses: list[str]) -> dict[str, Any]:
    """One table's document (see the module docstring); columns JSON cannot hold are said in ``losses``."""
    from di.schema import polars_schema

    known = polars_schema(name)
    cols: dict[str, list[Any]] = {}
    dtypes: dict[str, str] = {}
    for c, dtype in table.schema.items():
        s = table.get_column(c)
        if isinstance(dtype, (pl.Categorical, pl.Enum)):
            s, dtype = s.cast(pl.String), pl.String
        if not _json_type(dtype):
            losses.append(f"{name} column {c!r} ({dtype}) not written to {fmt}: {s.len() - s.null_count()} values")
            continue
        if dtype.is_float() and (bad := s.len() - s.null_count() - int(s.is_finite().sum())):
            losses.append(f"{name} column {c!r} written to {fmt} with {bad} NaN or infinite values as null")
        cols[c] = s.to_list()
        if c not in known and not dtype.is_nested():
            dtypes[c] = str(dtype)
    return {"columns": cols, "dtypes": dtypes}


def encode_all(
    trace: Any, fmt: str, tables: tuple[str, ...] = SIDE_TABLES, losses: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """The documents of the trace's non-empty ``tables``; what is lost is warned (:class:`di.errors.DataLossWarning`,
    one warning per writing), or added to ``losses`` when given (a writer that warns them with its own)."""
    said: list[str] = [] if losses is None else losses
    out = {n: encode(getattr(trace, n), n, fmt, said) for n in tables if getattr(trace, n).height}
    if losses is None:
        warn_losses(said)
    return out


def warn_losses(losses: list[str]) -> None:
    """One :class:`di.errors.DataLossWarning` naming every loss of a writing (none: nothing)."""
    if losses:
        pywarnings.warn("; ".join(losses), DataLossWarning, stacklevel=3)


def _dtype(name: Any) -> pl.DataType | None:
    """The polars dtype a document's ``dtypes`` names (None: not given, the values' own type).

    Raises:
        ValueError: a name that is not a type :func:`encode` writes (a plain JSON type: Object, Decimal,
            Datetime and the like would pass JSON values into a column they do not fit).
    """
    if name is None:
        return None
    got = getattr(pl, name, None) if isinstance(name, str) and name.isidentifier() else None
    dtype = got() if isinstance(got, type) and issubclass(got, pl.DataType) and not got.is_nested() else None
    if dtype is None or not _json_type(dtype):
        shown = str(name)[:40] if isinstance(name, (str, int, float)) else f"(a JSON {type(name).__name__})"
        raise ValueError(f"dtype {shown!r} is not one di writes")
    return dtype


def decode_columns(doc: Any, known: dict[str, pl.DataType]) -> pl.DataFrame:
    """The columns of a document as they are, ``known`` ones of the type given, the others of their ``dtypes``.

    Raises:
        ValueError: the document is not columns of one length, or a value does not fit its column's type.
    """
    cols = doc.get("columns") if isinstance(doc, dict) else None
    dtypes = (doc.get("dtypes") or {}) if isinstance(doc, dict) else {}
    if (
        not isinstance(cols, dict)
        or not all(isinstance(v, list) for v in cols.values())
        or not isinstance(dtypes, dict)
    ):
        raise ValueError("not an object of column lists")
    if len({len(v) for v in cols.values()}) > 1:
        raise ValueError("columns of unequal length")
    try:
        return pl.DataFrame(
            [pl.Series(c, v, dtype=known.get(c) or _dtype(dtypes.get(c)), strict=True) for c, v in cols.items()]
        )
    except (TypeError, OverflowError, pl.exceptions.PolarsError) as exc:
        raise ValueError(str(exc).splitlines()[0][:160]) from None


def decode(doc: Any, name: str) -> pl.DataFrame:
    """One table from its document, conformed to and checked against its schema.

    Raises:
        ValueError: the document is not columns of one length, or its values do not fit the schema.
    """
    from di.errors import SchemaError
    from di.schema import polars_schema, validate_table
    from di.trace import conform

    known = polars_schema(name)
    try:
        df = conform(name, decode_columns(doc, known))
        validate_table(name, df)
        for c, dtype in known.items():  # the schema's checks stop at a struct column, not its fields
            if isinstance(dtype, pl.Struct) and df.get_column(c).struct.unnest().null_count().sum_horizontal().item():
                raise ValueError(f"column {c!r} has null fields")
    except (TypeError, ValueError, OverflowError, SchemaError, pl.exceptions.PolarsError) as exc:
        raise ValueError(str(exc).splitlines()[0][:160]) from None
    return df


def decode_all(docs: Any, where: str, warnings: list[str]) -> dict[str, pl.DataFrame]:
    """The side tables of ``docs`` ({table: document}, as :func:`encode_all` made it; None: none); each damaged
    one is left out and said in ``warnings`` with its row count (``where`` names the document)."""
    if docs is None:
        return {}
    if not isinstance(docs, dict):
        warnings.append(f"{where} {KEY} ignored: not an object")
        return {}
    out = {}
    for name in SIDE_TABLES:
        if name not in docs:
            continue
        try:
            out[name] = decode(docs[name], name)
        except ValueError as exc:
            warnings.append(f"{where} {name} ignored ({exc}): {_rows(docs[name])} rows dropped")
    return out


def _rows(doc: Any) -> int | str:
    cols = doc.get("columns") if isinstance(doc, dict) else None
    lengths = {len(v) for v in cols.values() if isinstance(v, list)} if isinstance(cols, dict) else set()
    return max(lengths) if lengths else "its"
