"""Decode kernels of one TrackEvent (:mod:`di.convert.perfetto.decode`).

:func:`_track_event` reads a packet's TrackEvent into a column of the events array (``EV_*`` rows of
:mod:`.slots`): its type, track, name and up to two categories (:func:`_category`), correlation id, counter
value and timestamp; its flow ids into the flow rows (:func:`_ids`) and its debug annotations into the
annotation columns (:func:`_annotation`). An event that is legacy, has no timestamp or is of an unknown type is
counted in ``stats`` and dropped with its flow ids and annotations.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.perfetto import fields as F
from di.convert.perfetto.interned import _lookup, _sym, _thread_sequence
from di.convert.perfetto.protobuf import double_bits, read_fixed64, read_varint, skip_field
from di.convert.perfetto.slots import (
    _ANNOTATION_NESTED,
    _ANNOTATION_VARINTS,
    _FLOW_FIELDS,
    _NAN_BITS,
    _OLD_FLOW_FIELDS,
    _ONE,
    _TERMINATING_FIELDS,
    _ZERO,
    A_BOOL,
    A_DOUBLE,
    A_INT,
    A_ISTRING,
    A_JSON,
    A_NESTED,
    A_NONE,
    A_POINTER,
    A_STRING,
    A_UINT,
    D_ANNS,
    D_EVENTS,
    D_FLOWS,
    D_GEN,
    D_P_HAS_TS,
    D_P_SEQ,
    D_P_TE0,
    D_P_TE1,
    D_P_TS,
    D_TRACK,
    EV_CAT0,
    EV_CAT1,
    EV_CORR,
    EV_HAS_CORR,
    EV_NAME,
    EV_PACKET,
    EV_TRACK,
    EV_TS,
    EV_TYPE,
    EV_VALUE,
    K_ANN,
    K_CAT,
    K_NAME,
    K_STR,
    ST_BAD_TYPE,
    ST_LEGACY,
    ST_NO_TIMESTAMP,
    _has,
)


@njit(cache=True, _nrt=False, inline="always")
def _category(ev, ne, c):
    """Keep category symbol ``c`` of event ``ne`` in its first free category slot (of two)."""
    if ev[EV_CAT0, ne] < 0:
        ev[EV_CAT0, ne] = c
    elif ev[EV_CAT1, ne] < 0:
        ev[EV_CAT1, ne] = c


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _annotation(buf, a, b, interned, seq, gen, stats, sym, an, na, ne):
    """Column ``na`` of ``an`` for a DebugAnnotation (buf[a:b]) of event ``ne``: event, name symbol, value type,
    value (an int, a double's bits as int64, or a text's span start), a text's span end; the value of the last
    value field stands, as its type does."""
    # the values go straight into its column (see _decode_packets on locals): event, no name, no value, 0, 0
    an[0, na], an[1, na], an[2, na], an[3, na], an[4, na] = ne, -1, A_NONE, 0, 0
    pos = a
    while pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            break
        field, wire = key >> 3, key & 7
        if wire == 0 and _has(_ANNOTATION_VARINTS, field):
            v, pos = read_varint(buf, pos, b)
            if field == F.ANNOTATION_NAME_IID:
                an[1, na] = _lookup(interned, seq, gen, K_ANN, v, stats)
            else:
                an[2, na] = (
                    A_BOOL
                    if field == F.ANNOTATION_BOOL
                    else A_UINT
                    if field == F.ANNOTATION_UINT
                    else A_INT
                    if field == F.ANNOTATION_INT
                    else A_ISTRING
                    if field == F.ANNOTATION_STRING_IID
                    else A_POINTER
                )
                an[3, na] = _lookup(interned, seq, gen, K_STR, v, stats) if field == F.ANNOTATION_STRING_IID else v
        elif wire == 1 and field == F.ANNOTATION_DOUBLE and pos + 8 <= b:
            an[2, na], an[3, na] = A_DOUBLE, np.int64(read_fixed64(buf, pos))
            pos += 8
        elif wire == 2:
            n, pos = read_varint(buf, pos, b)
            if pos < 0 or n < 0 or pos + n > b:
                break
            if field == F.ANNOTATION_NAME:
                an[1, na] = _sym(buf, pos, pos + n, sym, stats)
            elif field == F.ANNOTATION_STRING or field == F.ANNOTATION_LEGACY_JSON:
                an[2, na] = A_STRING if field == F.ANNOTATION_STRING else A_JSON
                an[3, na], an[4, na] = pos, pos + n
            elif _has(_ANNOTATION_NESTED, field):
                an[2, na] = A_NESTED
            pos += n
        else:
            pos = skip_field(buf, pos, b, wire)
            if pos < 0:
                break


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _ids(buf, pos, b, wire, flows, nf, k, term):
    """Append flow ids of one field (fixed64, varint, or packed) to ``flows`` (rows of id bits,
    event, terminating; the caller made room: one row per byte of the field); returns (pos, nf), pos -1 when a
    packed field runs past ``b``."""
    if wire == 1:
        flows[nf, 0], flows[nf, 1], flows[nf, 2] = np.int64(read_fixed64(buf, pos)), k, term & 1
        return pos + 8, nf + 1
    if wire == 0:
        v, pos = read_varint(buf, pos, b)
        flows[nf, 0], flows[nf, 1], flows[nf, 2] = v, k, term & 1
        return pos, nf + 1
    n, pos = read_varint(buf, pos, b)  # packed: fixed64 for flow_ids / terminating_flow_ids, varints for the old fields
    if pos < 0 or n < 0 or n > b - pos:  # runs past the event (the rows made room for its bytes only): malformed
        return np.int64(-1), nf
    q, qe = pos, pos + n
    while 0 <= q < qe:
        if term >= 2:  # old varint fields, packed
            v, q = read_varint(buf, q, qe)
            flows[nf, 0] = v
        else:
            flows[nf, 0] = np.int64(read_fixed64(buf, q))
            q += 8
        flows[nf, 1], flows[nf, 2] = k, term & 1
        nf += 1
    return qe, nf


# numba's own pipeline: di's (ScalarKernelCompiler) compiles this kernel to other code (tests/test_jitpipeline.py)
@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True)
def _track_event(buf, packet, interned, seqs, sym, stats, ev, flows, an, state):
    """Read the TrackEvent of packet ``packet`` (``state[D_P_TE0]:state[D_P_TE1]``, on sequence ``state[D_P_SEQ]``)
    into column ``state[D_EVENTS]`` of ``ev``, its flow ids into ``flows`` and its annotations into ``an`` from
    row ``state[D_FLOWS]`` and column ``state[D_ANNS]``; the three counts grow when the event is kept (a function of
    its own, not part of :func:`_decode_packets`: numba's compile time grows faster than a kernel's size)."""
    ne, nf, na = state[D_EVENTS], state[D_FLOWS], state[D_ANNS]
    seq, gen = state[D_P_SEQ], state[D_GEN]
    ev[EV_PACKET, ne], ev[EV_TS, ne], ev[EV_VALUE, ne] = packet, state[D_P_TS], _NAN_BITS
    ev[EV_TYPE, ne], ev[EV_TRACK, ne], ev[EV_CORR, ne], ev[EV_HAS_CORR, ne] = 0, 0, 0, 0
    ev[EV_NAME, ne], ev[EV_CAT0, ne], ev[EV_CAT1, ne] = -1, -1, -1  # none
    etype, has_track, legacy, us_abs, has_us = _ZERO, False, False, _ZERO, False
    q, te1 = state[D_P_TE0], state[D_P_TE1]
    while q < te1:
        k2, q = read_varint(buf, q, te1)
        if q < 0:
            break
        field, wire = k2 >> 3, k2 & 7
        c = np.int64(-2)  # a category symbol to keep (-2: none)
        if _has(_FLOW_FIELDS, field):
            term = _ONE if _has(_TERMINATING_FIELDS, field) else _ZERO
            if _has(_OLD_FLOW_FIELDS, field):
                term += 2
            q, nf = _ids(buf, q, te1, wire, flows, nf, ne, term)
        elif wire == 0:
            v, q = read_varint(buf, q, te1)
            if field == F.EVENT_TYPE:
                etype = v
            elif field == F.EVENT_TRACK_UUID:
                ev[EV_TRACK, ne], has_track = v, True
            elif field == F.EVENT_NAME_IID:
                ev[EV_NAME, ne] = _lookup(interned, seq, gen, K_NAME, v, stats)
            elif field == F.EVENT_CATEGORY_IIDS:
                c = _lookup(interned, seq, gen, K_CAT, v, stats)
            elif field == F.EVENT_CORRELATION_ID:
                ev[EV_CORR, ne], ev[EV_HAS_CORR, ne] = v, 1
            elif field == F.EVENT_COUNTER_VALUE:
                ev[EV_VALUE, ne] = double_bits(float(v))
            elif field == F.EVENT_TIMESTAMP_ABSOLUTE_US:
                us_abs, has_us = v, True
        elif wire == 1:
            if field == F.EVENT_DOUBLE_COUNTER_VALUE and q + 8 <= te1:
                ev[EV_VALUE, ne] = np.int64(read_fixed64(buf, q))
            q += 8
        elif wire == 2:
            n, q = read_varint(buf, q, te1)
            if q < 0 or n < 0 or q + n > te1:
                break
            if field == F.EVENT_NAME:
                ev[EV_NAME, ne] = _sym(buf, q, q + n, sym, stats)
            elif field == F.EVENT_CATEGORIES:
                c = _sym(buf, q, q + n, sym, stats)
            elif field == F.EVENT_CATEGORY_IIDS:  # packed
                r = q
                while r < q + n:
                    v, r = read_varint(buf, r, q + n)
                    if r < 0:
                        break
                    _category(ev, ne, _lookup(interned, seq, gen, K_CAT, v, stats))
            elif field == F.EVENT_DEBUG_ANNOTATIONS:
                _annotation(buf, q, q + n, interned, seq, gen, stats, sym, an, na, ne)
                na += 1
            elif field == 6:  # legacy_event
                legacy = True
            q += n
        else:
            q = skip_field(buf, q, te1, wire)
        if c != -2:
            _category(ev, ne, c)
        if q < 0:
            break
    has_ts = state[D_P_HAS_TS] != 0
    if not has_ts and has_us:
        ev[EV_TS, ne], has_ts = us_abs * 1000, True
    if legacy and etype == 0:
        stats[ST_LEGACY] += 1
    elif not has_ts:
        stats[ST_NO_TIMESTAMP] += 1
    elif etype < F.TYPE_SLICE_BEGIN or etype > F.TYPE_COUNTER:
        stats[ST_BAD_TYPE] += 1
    else:
        ev[EV_TYPE, ne] = etype
        if not has_track:
            ev[EV_TRACK, ne] = state[D_TRACK]
            if state[D_TRACK] == 0 and _thread_sequence(seqs, seq):
                ev[EV_TRACK, ne] = -(seq + 1)  # sequence_track(seq)
        state[D_EVENTS], state[D_FLOWS], state[D_ANNS] = ne + 1, nf, na
    # else the event was dropped: so are its flow ids and annotations (the counts stay as they were)
