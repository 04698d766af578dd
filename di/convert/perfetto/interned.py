"""Decode kernels of each sequence's incremental state (:mod:`di.convert.perfetto.decode`).

Interned entries (event names and categories, debug-annotation names and strings) are kept per sequence,
generation (bumped when the sequence clears its incremental state), kind (``K_*``) and iid in an array hash
table (:mod:`di.convert.inttable`), their strings as symbols of the buffer (:mod:`di.convert.symbols`):
:func:`_interned` stores an InternedData message's entries, :func:`_lookup` finds one (-1, counted, when the
sequence never interned it). The per-sequence table (``Q_*`` columns) holds each sequence's generation, default
track and clock and whether a ThreadDescriptor named its thread (:func:`_seq_row`, :func:`_thread_sequence`);
:func:`sequence_track` is the key of that thread's track. A full table sets ``stats[ST_SYMBOLS_FULL]``, for
the caller to decode again with bigger ones.
"""

from __future__ import annotations

from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.perfetto import fields as F
from di.convert.inttable import NO_KEY, claim, find
from di.convert.perfetto.protobuf import read_varint, skip_field
from di.convert.perfetto.slots import (
    _INTERNED_TABLES,
    K_ANN,
    K_CAT,
    K_NAME,
    K_STR,
    Q_THREAD,
    ST_SYMBOLS_FULL,
    ST_UNRESOLVED_IID,
    _has,
)
from di.convert.symbols import FULL, intern


@njit(cache=True, inline="always")
def sequence_track(seq: int) -> int:
    """Track key of the thread a sequence's (deprecated) ThreadDescriptor names: negative, apart from track uuids."""
    return -(seq + 1)


@njit(cache=True, inline="always")
def _remember(interned, seq, gen, kind, iid, value, stats):
    """Store an interned entry in ``interned`` (an :mod:`~di.convert.inttable` table)."""
    h = claim(interned[0], interned[1], seq * 8 + kind, gen, iid)
    if h < 0:
        stats[ST_SYMBOLS_FULL] = 1
    else:
        interned[2][h, 0] = value


@njit(cache=True, inline="always")
def _lookup(interned, seq, gen, kind, iid, stats):
    """The symbol of an interned entry; -1 (counted) when the sequence never interned it."""
    h = find(interned[0], seq * 8 + kind, gen, iid)
    if h < 0:
        stats[ST_UNRESOLVED_IID] += 1
        return -1
    return interned[2][h, 0]


@njit(cache=True, inline="always")
def _seq_row(seqs, seq, stats):
    """The row of sequence ``seq`` in the per-sequence table, taken when new; -1 when the table is full."""
    h = claim(seqs[0], seqs[1], seq, NO_KEY, NO_KEY)
    if h < 0:
        stats[ST_SYMBOLS_FULL] = 1
    return h


@njit(cache=True, inline="always")
def _thread_sequence(seqs, seq):
    """Whether a ThreadDescriptor named the thread of sequence ``seq``."""
    h = find(seqs[0], seq, NO_KEY, NO_KEY)
    return h >= 0 and seqs[2][h, Q_THREAD] == 1


@njit(cache=True, inline="always")
def _sym(buf, a, b, sym, stats):
    sid = intern(buf, a, b, sym[0], sym[1], sym[2], sym[3])
    if sid == FULL:
        stats[ST_SYMBOLS_FULL] = 1
        return -1
    return sid


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _interned(buf, a, b, interned, seq, gen, sym, stats):
    """Store the entries of an InternedData message (buf[a:b])."""
    pos = a
    while pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            return
        field, wire = key >> 3, key & 7
        if wire == 2 and _has(_INTERNED_TABLES, field):
            n, pos = read_varint(buf, pos, b)
            if pos < 0 or n < 0 or pos + n > b:
                return
            kind = (
                K_CAT
                if field == F.INTERNED_EVENT_CATEGORIES
                else K_NAME
                if field == F.INTERNED_EVENT_NAMES
                else K_ANN
                if field == F.INTERNED_ANNOTATION_NAMES
                else K_STR
            )
            iid, s0, s1 = 0, -1, -1
            q, qe = pos, pos + n
            while q < qe:
                k2, q = read_varint(buf, q, qe)
                if q < 0:
                    break
                if k2 == (F.INTERNED_IID << 3):
                    iid, q = read_varint(buf, q, qe)
                elif k2 == (F.INTERNED_NAME << 3 | 2):
                    m, q = read_varint(buf, q, qe)
                    s0, s1 = q, q + m
                    q = s1
                else:
                    q = skip_field(buf, q, qe, k2 & 7)
                if q < 0:
                    break
            if s0 >= 0 and s1 <= qe:
                _remember(interned, seq, gen, kind, iid, _sym(buf, s0, s1, sym, stats), stats)
            pos += n
        else:
            pos = skip_field(buf, pos, b, wire)
            if pos < 0:
                return
