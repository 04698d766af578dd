"""The ``args`` JSON text of events, assembled in numba from per-source members.

A *member* is one JSON object text ``{"key":value,...}`` that belongs to one
event. Sources produce members as UTF-8 bytes plus int64 offsets (a String
column's Arrow buffers, :func:`instant_members`, :func:`text_int_members`);
:func:`join_members` makes the ``args`` column: each event's members, in
source order, merged into one JSON object (``{m1,m2,...}``), and null for
events without any. The column is an Arrow string-view array: an event with
one member points into its source's bytes (no copy); only events with
several get new text.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from di.convert.otf2.digits import write_int as _write_int
from di.convert.otf2.records import (
    BUFFER_FLUSH,
    IO_ACQUIRE_LOCK,
    IO_CHANGE_STATUS_FLAGS,
    IO_CREATE_HANDLE,
    IO_DELETE_FILE,
    IO_DESTROY_HANDLE,
    IO_DUPLICATE_HANDLE,
    IO_ISSUED,
    IO_RELEASE_LOCK,
    IO_SEEK,
    IO_TEST,
    IO_TRY_LOCK,
    LOCK_ACQUIRE,
    LOCK_RELEASE,
    MEASUREMENT_ON_OFF,
    PARAMETER_INT,
    PARAMETER_STRING,
    PARAMETER_UINT,
    PROGRAM_BEGIN,
    PROGRAM_END,
    RMA_WIN_CREATE,
    RMA_WIN_DESTROY,
    TEAM_BEGIN,
    TEAM_END,
    THREAD_FORK,
    THREAD_JOIN,
)
from di.convert.stringviews import VIEW_BUFFER_BYTES, put_view, string_views

INSTANT_FIELDS = {
    PROGRAM_BEGIN: ("program", "arguments"),
    PROGRAM_END: ("exit_status",),
    THREAD_FORK: ("paradigm", "threads"),
    THREAD_JOIN: ("paradigm",),
    TEAM_BEGIN: ("team",),
    TEAM_END: ("team",),
    LOCK_ACQUIRE: ("paradigm", "lock", "order"),
    LOCK_RELEASE: ("paradigm", "lock", "order"),
    MEASUREMENT_ON_OFF: ("mode",),
    BUFFER_FLUSH: ("stop_ticks",),
    RMA_WIN_CREATE: ("window",),
    RMA_WIN_DESTROY: ("window",),
    PARAMETER_STRING: ("parameter", "value"),
    PARAMETER_INT: ("parameter", "value"),
    PARAMETER_UINT: ("parameter", "value"),
    IO_ISSUED: ("handle", "matching_id"),
    IO_TEST: ("handle", "matching_id"),
    IO_CREATE_HANDLE: ("handle", "access_mode", "creation_flags"),
    IO_DESTROY_HANDLE: ("handle",),
    IO_DUPLICATE_HANDLE: ("handle", "new_handle", "status_flags"),
    IO_SEEK: ("handle", "offset_requested", "offset_result"),
    IO_CHANGE_STATUS_FLAGS: ("handle", "status_flags"),
    IO_DELETE_FILE: ("io_paradigm", "file"),
    IO_ACQUIRE_LOCK: ("handle", "lock_type"),
    IO_RELEASE_LOCK: ("handle", "lock_type"),
    IO_TRY_LOCK: ("handle", "lock_type"),
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
def _instant_kernel(kinds, a, b, c, pre, pre_off, first):
    n = kinds.size
    out = np.empty(n * (pre.size + 3 * 21 + 3) + 1, np.uint8)
    offsets = np.zeros(n + 1, np.int64)
    o = np.int64(0)  # typed: a literal 0 compiles put_view once more
    for i in range(n):
        k = kinds[i]
        lo, hi = first[k], first[k + 1]
        out[o] = 123
        o += 1
        for f in range(lo, hi):
            if f > lo:
                out[o] = 44
                o += 1
            for q in range(pre_off[f], pre_off[f + 1]):
                out[o] = pre[q]
                o += 1
            v = a[i] if f == lo else b[i] if f == lo + 1 else c[i]
            o = _write_int(out, o, v)
        out[o] = 125
        o += 1
        offsets[i + 1] = o
    return out[:o], offsets


def instant_members(kinds: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Members ``{"field":value,...}`` of instant records (fields of :data:`INSTANT_FIELDS`), as UTF-8 bytes and offsets."""
    pre, pre_off, first = _PREFIXES
    kinds = np.clip(np.asarray(kinds, np.int64), 0, first.size - 2)
    return _instant_kernel(kinds, *(np.ascontiguousarray(x, dtype=np.int64) for x in (a, b, c)), pre, pre_off, first)


@njit(cache=True)
def _text_int_kernel(head, texts, text_off, idx, mid, ints):
    n = idx.size
    widest = 0
    for t in range(text_off.size - 1):
        widest = max(widest, text_off[t + 1] - text_off[t])
    out = np.empty(n * (head.size + widest + mid.size + 23) + 1, np.uint8)
    offsets = np.zeros(n + 1, np.int64)
    o = np.int64(0)  # typed: a literal 0 compiles put_view once more
    for i in range(n):
        out[o] = 123
        o += 1
        for q in range(head.size):
            out[o] = head[q]
            o += 1
        for q in range(text_off[idx[i]], text_off[idx[i] + 1]):
            out[o] = texts[q]
            o += 1
        for q in range(mid.size):
            out[o] = mid[q]
            o += 1
        o = _write_int(out, o, ints[i])
        out[o] = 125
        o += 1
        offsets[i + 1] = o
    return out[:o], offsets


def text_int_members(
    head: str, texts: list[str], idx: np.ndarray, mid: str, ints: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Members ``{head texts[idx[i]] mid str(ints[i])}`` per row, as UTF-8 bytes and offsets (texts are
    written as given: quote them first where they are JSON strings)."""
    encoded = [t.encode() for t in texts]
    text_off = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(t) for t in encoded], out=text_off[1:])
    return _text_int_kernel(
        np.frombuffer(head.encode(), np.uint8),
        np.frombuffer(b"".join(encoded) or b"\0", np.uint8),
        text_off,
        np.ascontiguousarray(idx, np.int64),
        np.frombuffer(mid.encode(), np.uint8),
        np.ascontiguousarray(ints, np.int64),
    )


@njit(cache=True)
def _buffer_of(offsets, limit):
    """Split member bytes into Arrow data buffers of at most ``limit`` bytes at member boundaries: (buffer of each
    member, buffer starts + end)."""
    m = offsets.size - 1
    which = np.empty(m, np.int64)
    starts = np.zeros(m + 2, np.int64)
    n = 1
    for q in range(m):
        if offsets[q + 1] - starts[n - 1] > limit:
            starts[n] = offsets[q]
            n += 1
        which[q] = n - 1
    starts[n] = offsets[m]
    return which, starts[: n + 1]


@njit(cache=True)
def _counting_order(n_events, event):
    """The members in stable order of their event (a counting sort: for members about as many as events)."""
    start = np.zeros(n_events + 1, np.int64)
    for p in range(event.size):
        start[event[p] + 1] += 1
    for e in range(n_events):
        start[e + 1] += start[e]
    order = np.empty(event.size, np.int64)
    for p in range(event.size):
        order[start[event[p]]] = p
        start[event[p]] += 1
    return order


@njit(cache=True)
def _join_kernel(event, order, data, offsets, limit, views, valid):
    """Fill the string views (16 bytes per event, zero = null) and validity of every event with members (``order``:
    the members in stable event order); returns (member buffer starts, joined text, its buffer starts). Events with
    one member view it in ``data`` (buffers 0..k-1), those with several view their joined text (buffers k..).
    Only the events that have members are touched."""
    which, data_starts = _buffer_of(offsets, limit)
    n_data = data_starts.size - 1
    m = order.size
    size = 0
    p = 0
    while p < m:
        h = p
        while h < m and event[order[h]] == event[order[p]]:
            h += 1
        if h - p > 1:
            for r in range(p, h):
                size += offsets[order[r] + 1] - offsets[order[r]]
        p = h
    out = np.empty(size + 1, np.uint8)
    out_starts = np.zeros(m + 2, np.int64)
    n_out = 1
    o = np.int64(0)  # typed: a literal 0 compiles put_view once more
    p = 0
    while p < m:
        e = event[order[p]]
        h = p
        while h < m and event[order[h]] == e:
            h += 1
        valid[e] = True
        if h - p == 1:
            q = order[p]
            put_view(views, e, data, offsets[q], offsets[q + 1], which[q], offsets[q] - data_starts[which[q]])
            p = h
            continue
        length = 0
        for r in range(p, h):
            length += offsets[order[r] + 1] - offsets[order[r]]
        if o + length - out_starts[n_out - 1] > limit:
            out_starts[n_out] = o
            n_out += 1
        first = o
        out[o] = 123
        o += 1
        for r in range(p, h):
            q = order[r]
            if r > p:
                out[o] = 44
                o += 1
            for x in range(offsets[q] + 1, offsets[q + 1] - 1):
                out[o] = data[x]
                o += 1
        out[o] = 125
        o += 1
        put_view(views, e, out, first, o, n_data + n_out - 1, first - out_starts[n_out - 1])
        p = h
    out_starts[n_out] = o
    return data_starts, out[:o], out_starts[: n_out + 1]


def join_members(
    n_events: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], *, limit: int = VIEW_BUFFER_BYTES
) -> pl.Series:
    """The ``args`` column: each event's members ``(event rows, UTF-8 bytes, offsets)`` of every part, in order, merged into
    one JSON object (``limit``: the most bytes of one Arrow data buffer; smaller only in tests)."""
    parts = [p for p in parts if p[0].size]
    if not parts:
        return pl.repeat(None, n_events, dtype=pl.String, eager=True).alias("args")
    event = np.concatenate([np.asarray(p[0], np.int64) for p in parts])
    data = np.concatenate([p[1] for p in parts])
    base = np.cumsum([0] + [p[1].size for p in parts[:-1]])
    offsets = np.concatenate([p[2][:-1] + b for p, b in zip(parts, base)] + [np.array([data.size], np.int64)])
    order = _counting_order(n_events, event) if 8 * event.size >= n_events else np.argsort(event, kind="stable")
    views = np.zeros(16 * n_events, np.uint8)  # numpy's zeros map zero pages: the null events' views are never touched
    valid = np.zeros(n_events, np.bool_)
    data_starts, out, out_starts = _join_kernel(event, order, data, offsets, limit, views, valid)
    return string_views(n_events, views, [(data, data_starts), (out, out_starts)], valid, "args")
