"""Checking a result document di writes (``di analyze --json``, ``di diff --json``) against its JSON Schema, in
time that grows with the schema, not with the rows.

A document's long arrays are tables: every row an object of the same keys, each key's schema a plain one (a type,
bounds, allowed values). Such a row is valid when each of its values is, so the array is valid exactly when a few
rows made of each column's *witnesses* are: per Python type of the column's values, the least and the greatest
number (and a number with a fraction where the schema wants integers), every distinct value where the schema lists
the allowed ones, else one value. Nested tables (each rank's breakdown rows) are pooled across the rows and
reduced the same way, as are arrays of arrays (a partitioned store's groups of ranks); arrays of plain values keep
their witnesses; maps of one value schema (wait time per kind) pool their values. What the reduction cannot
prove equivalent (rows with different keys, a schema keyword it does not know) is kept whole.

jsonschema then checks the reduced document: for the analysis of a 512-rank job, about 2,000 values instead of
240,000 (3.3 CPU-s). A reduced document that fails is checked again whole, so the error names the real row.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from di.errors import SchemaError

SMALL = 4
"""Arrays of at most this many rows are checked as they are."""
NOTES = frozenset({"description", "title", "$comment", "default", "examples"})
LEAF = frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum", "const"}) | NOTES
"""The keywords of a value's schema whose verdict on a column follows from its witnesses."""
ARRAY = frozenset({"type", "items"}) | NOTES
OBJECT = frozenset({"type", "properties", "required", "additionalProperties"}) | NOTES
EVERY_VALUE = frozenset({"enum", "const"})


def validate_document(doc: dict[str, Any], family: str, what: str) -> None:
    """Check ``doc`` against the JSON Schema of ``family`` (``analysis``, ``diff``).

    Raises:
        SchemaError: ``what`` (``analysis JSON``) and the path in the document where it fails.
    """
    schema, validator = _validator(family)
    check(doc, schema, validator, what)


def check(doc: Any, schema: dict[str, Any], validator: Any, what: str) -> None:
    """Check ``doc`` against ``schema`` with its jsonschema ``validator``: its witness rows, and the whole of it
    when they fail, for the error's real place.

    Raises:
        SchemaError: ``what`` and the path in the document where it fails.
    """
    import jsonschema

    if validator.is_valid(_reduced(doc, schema, schema)):
        return
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise SchemaError(f"{what} at {where}: {error.message}")


@cache
def _validator(family: str) -> tuple[dict[str, Any], Any]:
    """The schema and its validator, built once (``jsonschema.validate`` checks the schema itself on every call)."""
    import jsonschema

    from di.schema import document_schema

    schema = document_schema(family)
    return schema, jsonschema.validators.validator_for(schema)(schema)


def _resolved(sub: Any, root: dict[str, Any]) -> Any:
    """``sub`` with a local ``$ref`` (``#/$defs/x``) replaced by its target, notes beside it kept, and an ``allOf``
    of schemas with no keyword in common merged into one (unless one part's ``additionalProperties`` would then
    see another part's ``properties``); as it is where neither can be done."""
    while isinstance(sub, dict):
        if isinstance(sub.get("$ref"), str) and sub["$ref"].startswith("#/") and not set(sub) - NOTES - {"$ref"}:
            target: Any = root
            for part in sub["$ref"][2:].split("/"):
                target = target.get(part) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                return sub
            sub = {**target, **{k: v for k, v in sub.items() if k != "$ref"}}
        elif isinstance(sub.get("allOf"), list) and not set(sub) - NOTES - {"allOf"}:
            parts = [_resolved(p, root) for p in sub["allOf"]]
            if not all(isinstance(p, dict) for p in parts):
                return sub
            keys = [set(p) - NOTES for p in parts]
            if sum(len(k) for k in keys) != len(set().union(*keys)):
                return sub
            if any("additionalProperties" in k for k in keys) and any("properties" in k for k in keys):
                return sub
            sub = {k: v for p in parts for k, v in p.items() if k not in NOTES}
        else:
            return sub
    return sub


def _reduced(value: Any, sub: Any, root: dict[str, Any]) -> Any:
    """``value`` with its long arrays replaced by their witnesses."""
    sub = _resolved(sub, root)
    if not isinstance(sub, dict):
        return value
    if isinstance(value, list):
        items = _resolved(sub.get("items"), root)
        if len(value) > SMALL and set(sub) <= ARRAY:
            witnesses = _column_witnesses(value, items, root)
            if witnesses is not None:
                return witnesses
        return [_reduced(v, items, root) for v in value] if isinstance(items, dict) else value
    if isinstance(value, dict):
        props = sub.get("properties") if isinstance(sub.get("properties"), dict) else {}
        extra = sub.get("additionalProperties")
        return {k: _reduced(v, props[k] if k in props else extra, root) for k, v in value.items()}
    return value


def _witness_rows(rows: list[Any], items: Any, root: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Rows as valid as ``rows`` (objects of one schema ``items``): each column's witnesses, the i-th row holding
    each column's i-th (or last) one; None when the reduction is not sure to agree with the rows."""
    if not isinstance(items, dict) or not set(items) <= OBJECT or not all(isinstance(r, dict) for r in rows):
        return None
    keys = rows[0].keys()
    if any(r.keys() != keys for r in rows):
        return None
    props = items.get("properties") if isinstance(items.get("properties"), dict) else {}
    extra = items.get("additionalProperties")
    columns: dict[str, list[Any]] = {}
    for k in keys:
        schema = _resolved(props[k] if k in props else extra, root)
        witnesses = _column_witnesses([r[k] for r in rows], schema, root)
        if witnesses is None:
            return None
        columns[k] = witnesses
    if not columns:
        return rows[:1]
    n = max(len(w) for w in columns.values())
    return [{k: w[min(i, len(w) - 1)] for k, w in columns.items()} for i in range(n)]


def _column_witnesses(column: list[Any], schema: Any, root: dict[str, Any]) -> list[Any] | None:
    """Values as valid as ``column`` under ``schema``; None when that cannot be shown."""
    if not isinstance(schema, dict):  # no schema (additionalProperties true) or false: any one value decides
        return column[:1]
    keys = set(schema)
    if keys <= LEAF:
        return _leaf_witnesses(column, schema)
    if keys <= ARRAY and all(isinstance(v, list) for v in column):  # a nested table: all its rows pooled
        pooled = [x for v in column for x in v]
        return [_reduced(pooled, schema, root)]
    if keys <= OBJECT and all(isinstance(v, dict) for v in column):
        if "properties" in schema or "required" in schema:
            return _witness_rows(column, schema, root)
        extra = _resolved(schema.get("additionalProperties"), root)  # a map of one value schema: values pooled
        values = _column_witnesses([x for v in column for x in v.values()], extra, root)
        if values is None:
            return None
        return [{f"w{i}": x for i, x in enumerate(values)}] if values else [{}]
    return None


def _leaf_witnesses(column: list[Any], schema: dict[str, Any]) -> list[Any]:
    """Per Python type of the values: every distinct value where the schema lists the allowed ones; else of numbers
    the least and the greatest (NaN aside), a NaN, and a float with a fraction (where integers are asked for); of
    other values the first."""
    out: list[Any] = []
    for kind in {type(v) for v in column}:
        values = [v for v in column if type(v) is kind]
        if EVERY_VALUE & schema.keys():
            out.extend(dict.fromkeys(values) if kind not in (list, dict) else values)
        elif kind is int:
            out.extend((min(values), max(values)))
        elif kind is float:
            numbers = [v for v in values if v == v]
            out.extend((min(numbers), max(numbers)) if numbers else ())
            out.extend([v for v in values if v != v][:1])
            out.extend([v for v in numbers if not v.is_integer()][:1])
        else:
            out.append(values[0])
    return out
