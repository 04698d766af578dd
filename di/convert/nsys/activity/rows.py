"""The common columns of nsys event rows, and the builders every table reader uses.

:func:`frame` makes the one polars frame shape every reader returns (``kind``,
``pid``, ``tid``, ``device``, ``stream``, ``start_ns``, ``end_ns``, ``name``,
``src_cat``, ``cat``, ``corr``, ``bytes``, ``instant``, ``args``, ``domain``)
from whole columns (numpy arrays, polars Series, or one text repeated);
:func:`base` fills the columns a reader does not give. ``args`` texts are
built column-wise (:func:`num`, :func:`json_object`), never per row in Python.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.nsys.report import Report, pid_of, tid_of
from di.trace import CATS

__all__ = ["KIND", "base", "frame", "json_object", "num", "thread"]

KIND = pl.Enum(["cpu_thread", "async", "gpu_stream"])
"""Timeline kinds of event rows, in the order their locations are numbered."""


def num(values: np.ndarray, null: np.ndarray | None = None) -> pl.Series:
    """Integers as JSON number texts ("null" where ``null``)."""
    s = pl.Series(values).cast(pl.String)
    return (s.set(pl.Series(null), None) if null is not None and null.any() else s).fill_null("null")


def json_object(fields: dict[str, pl.Series]) -> pl.Series:
    """One JSON object text per row from JSON value texts (:func:`_num`, :func:`json_strings`)."""
    parts: list[pl.Expr] = []
    for i, (key, value) in enumerate(fields.items()):
        parts += [pl.lit(("{" if i == 0 else ",") + '"' + key + '":'), pl.lit(value)]
    return pl.select(pl.concat_str(*parts, pl.lit("}")).alias("args")).to_series()


def _enum_text(values: np.ndarray, null: np.ndarray, names: dict[int, str], default: str = "Unknown") -> pl.Series:
    s = pl.Series(values).replace_strict(names, default=default, return_dtype=pl.String)
    return s.set(pl.Series(null), None) if null.any() else s


def base(n: int, **cols: object) -> dict[str, object]:
    out: dict[str, object] = {
        "pid": None,
        "tid": None,
        "device": None,
        "stream": None,
        "corr": None,
        "bytes": None,
        "instant": np.zeros(n, np.bool_),
        "domain": None,
    }
    out.update(cols)
    return out


def frame(n: int, cols: dict[str, object]) -> pl.DataFrame:
    schema = {
        "kind": KIND,
        "pid": pl.Int64,
        "tid": pl.Int64,
        "device": pl.Int32,
        "stream": pl.Int64,
        "start_ns": pl.Int64,
        "end_ns": pl.Int64,
        "name": pl.Categorical,
        "src_cat": pl.Categorical,
        "cat": pl.Enum(list(CATS)),
        "corr": pl.Int64,
        "bytes": pl.Int64,
        "instant": pl.Boolean,
        "args": pl.String,
        "domain": pl.String,
    }
    series = []
    for k, dtype in schema.items():
        v = cols.get(k)
        if v is None:
            series.append(pl.Series(k, [], dtype=dtype).extend_constant(None, n))
        elif isinstance(v, str):
            series.append(
                pl.select(pl.repeat(v, n, dtype=pl.String).cast(dtype).alias(k)).to_series()
                if n
                else pl.Series(k, [], dtype=dtype)
            )
        else:  # a value beyond the column's type (a damaged device id) becomes null
            series.append(pl.Series(k, v).cast(dtype, strict=False))
    return pl.DataFrame(series)


def _nullable(c: dict[str, np.ndarray], key: str) -> pl.Series:
    return pl.Series(c[key]).set(pl.Series(c[key + "_null"]), None) if c[key + "_null"].any() else pl.Series(c[key])


def thread(c: dict[str, np.ndarray]) -> dict[str, object]:
    return {
        "kind": "cpu_thread",
        "pid": pid_of(c["gtid"]),
        "tid": tid_of(c["gtid"]),
        "start_ns": c["start"],
        "end_ns": c["end"],
    }


def _names(values: pl.Series) -> pl.Series:
    return values.cast(pl.Categorical)


def _flag(report: Report, key: str, pattern: str, pos: pl.Series, yes: str, no: str) -> pl.Series:
    """``yes`` where the string at ``pos`` matches ``pattern`` (tested once per distinct string), else ``no``."""
    matches = report.derived(key, lambda v: v.fill_null("").str.contains(pattern))
    return matches.gather(pos).fill_null(False).replace_strict({True: yes, False: no}, return_dtype=pl.Enum(list(CATS)))
