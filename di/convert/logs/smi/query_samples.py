"""The samples of ``--query-gpu`` rows: which cells are samples (:func:`_csv_samples`: those of a series field that
hold a number, worked out once per distinct rest of a row and table), and the samples' frame (:func:`_samples_frame`:
each cell's row, field, value and unit).

A cell is given as (row, field, text): the row's place among the rows, the field's among the tables' fields
(:func:`~di.convert.logs.smi.query_heads._csv_tables`), the text's among the texts of cells (a row's first cell,
then the cells of each distinct rest).
"""

from __future__ import annotations

import numpy as np
import polars as pl


def _csv_samples(
    key: np.ndarray, rest_at: np.ndarray, nrest: np.ndarray, f0: np.ndarray, series: np.ndarray, number: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The samples of ``--query-gpu`` rows: (row, field, text) of each cell of a series field that holds a number,
    in row and cell order. ``key``: each row's distinct rest (``key // tables``) and table (``key % tables``, whose
    fields start at ``f0``); the cells of rest ``j`` are texts ``rest_at[j]`` on (``nrest[j]`` of them), ``number``:
    whether a text holds a number, ``series``: whether a field is a series. A row's first cell is given as text -1
    (the caller reads it: first cells are not shared by rows).

    The cells to take are worked out once per distinct (rest, table): a row takes those of its pair."""
    tables = f0.size
    if key.size and int(key.max()) < 4 * key.size + 4096:  # pairs numbered through a table of all keys
        seen = np.zeros(int(key.max()) + 1, np.bool_)
        seen[key] = True
        keys = np.flatnonzero(seen)
        pair = (np.cumsum(seen) - 1)[key]
    else:
        keys, pair = np.unique(key, return_inverse=True)
    rest, table = keys // tables, keys % tables
    first = series[np.minimum(f0, series.size - 1)][table] & (f0[table] < series.size)  # is its first field a series
    count = nrest[rest] + first
    of = np.repeat(np.arange(keys.size), count)
    i = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count) + ~first[of]  # cell place in the row
    f = f0[table[of]] + i
    src = np.where(i == 0, -1, rest_at[rest[of]] + i - 1)
    take = np.flatnonzero(series[f] & ((i == 0) | number[src]))
    f, src, of = f[take], src[take], of[take]
    count = np.bincount(of, minlength=keys.size)
    per_row = count[pair]
    r = np.repeat(np.arange(key.size), per_row)
    cell = np.repeat(np.cumsum(count)[pair] - count[pair] - (np.cumsum(per_row) - per_row), per_row) + np.arange(r.size)
    return r, f[cell], src[cell]


def _samples_frame(
    per_row: pl.DataFrame, fields: pl.DataFrame, read: pl.DataFrame, r: np.ndarray, f: np.ndarray, src: np.ndarray
) -> pl.DataFrame:
    """The samples of cells (``r``, ``f``, ``src``: row, field, text): the row's ``gpu``, ``host``, ``ts`` and
    ``line`` (of ``per_row``), the field's ``series`` (of ``fields``), the text's ``value`` (of ``read``) and the
    ``unit``."""
    # the unit: the header's, else the value's, else the field's (UNITS): one gather from all three, then a null
    units = pl.concat(
        [
            fields.get_column("hunit"),
            read.get_column("vunit"),
            fields.get_column("tunit"),
            pl.Series([None], dtype=pl.String),
        ]
    )
    nf, nt = fields.height, read.height
    has = lambda col: col.is_not_null().to_numpy()  # noqa: E731
    unit = np.where(
        has(fields.get_column("hunit"))[f],
        f,
        np.where(
            has(read.get_column("vunit"))[src],
            nf + src,
            np.where(has(fields.get_column("tunit"))[f], nf + nt + f, 2 * nf + nt),
        ),
    )
    return pl.DataFrame(
        {
            "gpu": per_row.get_column("gpu").gather(r),
            "host": per_row.get_column("host").gather(r),
            "ts": per_row.get_column("ts").gather(r),
            "series": fields.get_column("series").gather(f),
            "unit": units.gather(unit),
            "value": read.get_column("value").gather(src),
            "line": per_row.get_column("line").gather(r),
        }
    )
