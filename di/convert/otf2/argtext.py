"""The ``args`` JSON text of events, assembled in numba from per-source members.

A *member* is one ``"key":value`` (or several, comma-separated) text that
belongs to one event. Sources produce members as UTF-8 bytes plus int64
offsets (a String column's Arrow buffers, or :func:`instant_members`);
:func:`join_members` writes each event's members, in source order, as one
JSON object ``{m1,m2,...}``, and null for events without any.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.convert.otf2 import records as R

INSTANT_FIELDS = {
    R.PROGRAM_BEGIN: ("program", "arguments"), R.PROGRAM_END: ("exit_status",), R.THREAD_FORK: ("paradigm", "threads"),
    R.THREAD_JOIN: ("paradigm",), R.TEAM_BEGIN: ("team",), R.TEAM_END: ("team",), R.LOCK_ACQUIRE: ("paradigm", "lock", "order"),
    R.LOCK_RELEASE: ("paradigm", "lock", "order"), R.MEASUREMENT_ON_OFF: ("mode",), R.BUFFER_FLUSH: ("stop_ticks",),
    R.RMA_WIN_CREATE: ("window",), R.RMA_WIN_DESTROY: ("window",), R.PARAMETER_STRING: ("parameter", "value"),
    R.PARAMETER_INT: ("parameter", "value"), R.PARAMETER_UINT: ("parameter", "value"),
}
"""Instant record kind -> names of its fields a, b, c (as many as it has) in args."""


def _prefix_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes of every ``"name":`` prefix, their offsets, first prefix index per kind (kinds + 1 entries))."""
    n_kinds = max(INSTANT_FIELDS) + 1
    texts, first = [], np.zeros(n_kinds + 1, np.int64)
    for kind in range(n_kinds):
        first[kind] = len(texts)
        texts += [f'"{f}":'.encode() for f in INSTANT_FIELDS.get(kind, ())]
    first[n_kinds] = len(texts)
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum([len(t) for t in texts], out=offsets[1:])
    return np.frombuffer(b"".join(texts), np.uint8).copy(), offsets, first


_PREFIXES = _prefix_table()


@njit(cache=True)
def _write_int(out, o, v):
    """Decimal digits of int64 ``v`` at out[o:]; returns the new end."""
    if v < 0:
        out[o] = 45  # '-'
        o += 1
    u = np.uint64(-(v + 1)) + np.uint64(1) if v < 0 else np.uint64(v)  # |v|, int64 min included
    n = 1
    t = u
    while t >= 10:
        t //= np.uint64(10)
        n += 1
    for i in range(n - 1, -1, -1):
        out[o + i] = 48 + np.uint8(u % np.uint64(10))
        u //= np.uint64(10)
    return o + n


@njit(cache=True)
def _instant_kernel(kinds, a, b, c, pre, pre_off, first):
    n = kinds.size
    out = np.empty(n * (pre.size + 3 * 21 + 3) + 1, np.uint8)
    offsets = np.zeros(n + 1, np.int64)
    o = 0
    for i in range(n):
        k = kinds[i]
        lo, hi = first[k], first[k + 1]
        for f in range(lo, hi):
            if f > lo:
                out[o] = 44
                o += 1
            for q in range(pre_off[f], pre_off[f + 1]):
                out[o] = pre[q]
                o += 1
            v = a[i] if f == lo else b[i] if f == lo + 1 else c[i]
            o = _write_int(out, o, v)
        offsets[i + 1] = o
    return out[:o], offsets


def instant_members(kinds: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Members ``"field":value,...`` of instant records (fields of :data:`INSTANT_FIELDS`), as UTF-8 bytes and offsets."""
    pre, pre_off, first = _PREFIXES
    kinds = np.clip(np.asarray(kinds, np.int64), 0, first.size - 2)
    return _instant_kernel(kinds, *(np.ascontiguousarray(x, dtype=np.int64) for x in (a, b, c)), pre, pre_off, first)


@njit(cache=True)
def _join_kernel(n_events, event, data, offsets):
    start = np.zeros(n_events + 1, np.int64)  # stable counting sort of the members by event
    for p in range(event.size):
        start[event[p] + 1] += 1
    for e in range(n_events):
        start[e + 1] += start[e]
    order = np.empty(event.size, np.int64)
    fill = start[:-1].copy()
    for p in range(event.size):
        order[fill[event[p]]] = p
        fill[event[p]] += 1
    size = 0
    for p in range(event.size):
        size += offsets[p + 1] - offsets[p] + 1
    out = np.empty(size + 2 * event.size + 1, np.uint8)
    out_off = np.zeros(n_events + 1, np.int64)
    valid = np.zeros(n_events, np.bool_)
    o = 0
    p = 0
    for e in range(n_events):
        if p < order.size and event[order[p]] == e:
            valid[e] = True
            out[o] = 123
            o += 1
            first = True
            while p < order.size and event[order[p]] == e:
                q = order[p]
                if not first:
                    out[o] = 44
                    o += 1
                first = False
                for x in range(offsets[q], offsets[q + 1]):
                    out[o] = data[x]
                    o += 1
                p += 1
            out[o] = 125
            o += 1
        out_off[e + 1] = o
    return out[:o], out_off, valid


def join_members(n_events: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> pl.Series:
    """The ``args`` column: each event's members ``(event rows, UTF-8 bytes, offsets)`` of every part, in order, as one JSON object."""
    import pyarrow as pa

    parts = [p for p in parts if p[0].size]
    if not parts:
        return pl.repeat(None, n_events, dtype=pl.String, eager=True).alias("args")
    event = np.concatenate([np.asarray(p[0], np.int64) for p in parts])
    data = np.concatenate([p[1] for p in parts])
    base = np.cumsum([0] + [p[1].size for p in parts[:-1]])
    offsets = np.concatenate([p[2][:-1] + b for p, b in zip(parts, base)] + [np.array([data.size], np.int64)])
    out, out_off, valid = _join_kernel(n_events, event, data, offsets)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    arr = pa.LargeStringArray.from_buffers(n_events, pa.py_buffer(out_off), pa.py_buffer(out), bitmap)
    return pl.Series("args", arr).cast(pl.String)
