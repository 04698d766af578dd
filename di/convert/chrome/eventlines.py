"""The X / i lines of the Chrome writer: one per events row, in row order, as one :class:`Block`.

A line is ``{"ph":"X","pid":..,"tid":..,"ts":..,"dur":..,"name":..,"cat":..,"args":{..}}``
(instants: ``{"ph":"i","s":"t",...}`` without ``dur``) plus the flow-v2 suffix of
the events that carry a bind_id (:func:`di.convert.chrome.flowlines.bind_suffix`).
Names and categories are escaped once per distinct value; ``ts`` is relative to ``t0``
(ns, written as exact microsecond text by the kernel). ``args`` gets ``correlation`` and
``bytes`` from the ``corr`` and ``bytes`` columns unless its text has that key already.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.chrome.fragments import Block, Pool, json_column
from di.convert.columns import dense_codes
from di.convert.chrome.lines import ARGS, CONST, FRAG, NO_TIME, TIME
from di.convert.chrome.tracks import TrackLayout

__all__ = ["args_columns", "event_block"]


def args_columns(ev: pl.DataFrame, ints: np.ndarray) -> pl.Series:
    """events.args; fills ``ints`` (2, n) with the corr / bytes values to add to them (NO_TIME: none to add)."""
    args = ev.get_column("args")
    if args.str.contains("[\r\n]").any():  # raw CR/LF can only be whitespace in valid JSON: keep one event per line
        args = args.str.replace_all("[\r\n]", " ")

    for row, (column, key) in enumerate((("corr", "correlation"), ("bytes", "bytes"))):
        values = ev.get_column(column)
        ints[row] = NO_TIME if values.null_count() == len(values) else values.fill_null(NO_TIME).to_numpy()
        if values.null_count() < len(values):
            ints[row, args.str.contains(f'"{key}"\\s*:').fill_null(False).to_numpy()] = NO_TIME
    return args


def event_block(
    ev: pl.DataFrame, layout: TrackLayout, pool: Pool, suffix: tuple[np.ndarray, pl.Series], t0: int
) -> Block:
    """X / i lines of every event, in row order."""
    n = ev.height
    start, end = ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
    inst = ev.get_column("instant").to_numpy()
    dur_id = pool.add([',"dur":'])
    args_id = pool.add([',"args":', '"correlation":', '"bytes":'])
    pid_tid = [
        pl.lit(',"pid":'),
        pl.col("pid").cast(pl.String),
        pl.lit(',"tid":'),
        pl.col("tid").cast(pl.String),
        pl.lit(',"ts":'),
    ]
    x_base = pool.add(layout.tracks.select(pl.concat_str([pl.lit('{"ph":"X"'), *pid_tid])).to_series())
    i_base = pool.add(layout.tracks.select(pl.concat_str([pl.lit('{"ph":"i","s":"t"'), *pid_tid])).to_series())
    names, name_values = dense_codes(ev.get_column("name"))
    name_base = pool.add(_fragments(',"name":', name_values))
    cats, cat_values = dense_codes(ev.get_column("cat"))
    src_cats, src_values = dense_codes(ev.get_column("src_cat"))
    cat_base = pool.add(_fragments(',"cat":', pl.concat([cat_values.cast(pl.String), src_values.cast(pl.String)])))
    ints = np.empty((2, n), dtype=np.int64)
    args = args_columns(ev, ints)
    rows, text = suffix
    frag = np.empty((5, n), dtype=np.int32)
    frag[0] = np.where(inst, i_base, x_base) + layout.track_of_event
    frag[1] = np.where(inst, -1, dur_id)
    frag[2] = name_base + names
    frag[3] = cat_base + np.where(src_cats >= 0, len(cat_values) + src_cats, cats)
    frag[4] = -1
    frag[4, rows] = pool.add(text) + np.arange(len(rows))
    times = np.empty((2, n), dtype=np.int64)
    np.subtract(start, t0, out=times[0])
    np.subtract(end, start, out=times[1])
    times[1, inst] = NO_TIME
    ops = [(FRAG, 0), (TIME, 0), (FRAG, 1), (TIME, 1), (FRAG, 2), (FRAG, 3), (ARGS, args_id), (FRAG, 4)]
    return Block(n, ops + [(CONST, pool.add(["}"]))], frag, times, ints, args)


def _fragments(key: str, values: pl.Series) -> pl.Series:
    """``key`` and the JSON string literal of each distinct text (a trace of autotuned kernels has 100,000 names)."""
    return key + json_column(values)
