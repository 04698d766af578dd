"""The X / i lines of the Chrome writer: one per events row, in row order, as one :class:`Block`.

A line is ``{"ph":"X","pid":..,"tid":..,"ts":..,"dur":..,"name":..,"cat":..,"args":{..}}``
(instants: ``{"ph":"i","s":"t",...}`` without ``dur``) plus the flow-v2 suffix of
the events that carry a bind_id (:func:`di.convert.chrome.flowlines.bind_suffix`).
Names and categories are escaped once per distinct value; ``ts`` is relative to ``t0``
(ns, written as exact microsecond text by the kernel). ``args`` gets, first, the members
that integer columns hold (:func:`di.schema.args_keys`: ``correlation`` from ``corr``,
``bytes``, Kineto's ``External id`` and other ids) unless its text has that key already
(a store written before those members were lifted out of the text).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.chrome.fragments import Block, Pool, json_column
from di.convert.columns import dense_codes, filled_rows
from di.convert.chrome.lines import ARGS, CONST, FRAG, NO_TIME, TIME
from di.convert.chrome.tracks import TrackLayout
from di.schema import args_keys

__all__ = ["args_columns", "event_block"]


def args_columns(ev: pl.DataFrame) -> tuple[pl.Series, np.ndarray, list[str]]:
    """events.args; the values (k, n) of the k integer columns of :func:`di.schema.args_keys` that have some, to
    put in the args (NO_TIME: none to put), and the k keys.

    Whether a text has a key already is asked of each distinct text (the ids lifted out, a trace's texts repeat)."""
    args = ev.get_column("args")
    if args.str.contains("[\r\n]").any():  # raw CR/LF can only be whitespace in valid JSON: keep one event per line
        args = args.str.replace_all("[\r\n]", " ")
    key_of = dict(args_keys())
    ints, present = filled_rows(ev, list(key_of), NO_TIME)
    if not present:
        return args, ints, []
    texts = args.unique().drop_nulls()
    for row, column in enumerate(present):
        written = texts.filter(texts.str.contains(f'"{key_of[column]}"\\s*:'))
        if written.len():
            ints[row, args.is_in(written.implode()).fill_null(False).to_numpy()] = NO_TIME
    return args, ints, [key_of[column] for column in present]


def event_block(
    ev: pl.DataFrame, layout: TrackLayout, pool: Pool, suffix: tuple[np.ndarray, pl.Series], t0: int
) -> Block:
    """X / i lines of every event, in row order."""
    n = ev.height
    start, end = ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()
    inst = ev.get_column("instant").to_numpy()
    dur_id = pool.add([',"dur":'])
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
    args, ints, keys = args_columns(ev)
    args_id = pool.add([',"args":', *(f'"{key}":' for key in keys)])
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
    return Block(n, ops + [(CONST, pool.add(["}"]))], frag, times, ints, args, keys)


def _fragments(key: str, values: pl.Series) -> pl.Series:
    """``key`` and the JSON string literal of each distinct text (a trace of autotuned kernels has 100,000 names)."""
    return key + json_column(values)
