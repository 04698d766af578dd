"""Decode kernels of the TracePacket frame (:mod:`di.convert.perfetto.decode`).

:func:`count_packets` counts the complete TracePackets of the buffer and says where its readable part ends;
:func:`_packet_fields` reads one packet's own fields (timestamp, sequence id and flags, clock) and the byte
spans of its TrackEvent, InternedData, TracePacketDefaults and ClockSnapshot into the ``D_P_*`` slots of the
decode's ``state`` (:mod:`.slots`), and appends the spans of its descriptors and di packet for Python;
:func:`_defaults` reads a TracePacketDefaults into the sequence's default track and clock.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import prefetch
from di.convert.perfetto import fields as F
from di.convert.perfetto.protobuf import read_varint, skip_field
from di.convert.perfetto.slots import (
    _MINUS_ONE,
    _PACKET_VARINTS,
    _ZERO,
    D_CLOCK,
    D_P_CLOCK,
    D_P_CS0,
    D_P_DF0,
    D_P_FLAGS,
    D_P_HAS_TS,
    D_P_IN0,
    D_P_SEQ,
    D_P_SPANS0,
    D_P_TE0,
    D_P_TS,
    D_SPANS,
    D_TRACK,
    ST_MALFORMED,
    _has,
)


_AHEAD = np.int64(256)
"""Bytes ahead of the packet being read whose cache line is asked for."""


@njit(cache=True, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def count_packets(buf: np.ndarray) -> tuple[int, int]:
    """(number of complete TracePackets, byte offset where the readable part ends)."""
    pos, end, n = _ZERO, buf.shape[0], _ZERO  # typed: a literal 0 compiles read_varint twice
    while pos < end:
        prefetch(buf, pos + _AHEAD)  # each hop waits on the length read before it (bytewords.prefetch)
        key, p = read_varint(buf, pos, end)
        if p < 0 or key >> 3 == 0:
            return n, pos
        q = skip_field(buf, p, end, key & 7)
        if q < 0:
            return n, pos
        if key == 10:
            n += 1
        pos = q
    return n, pos


# numba's own pipeline: di's (ScalarKernelCompiler) compiles this kernel to other code (tests/test_jitpipeline.py)
@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True)
def _defaults(buf, a, b, state, stats):
    """Read TracePacketDefaults (buf[a:b]): its track_event_defaults' track_uuid into ``state[D_TRACK]`` and its
    timestamp_clock_id into ``state[D_CLOCK]``, each when present; True when either was. A track_event_defaults
    running past the defaults is malformed (counted): what was read before it stands."""
    uuid, clock = _MINUS_ONE, _MINUS_ONE
    pos = a
    while 0 <= pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            break
        if key == (F.DEFAULTS_TIMESTAMP_CLOCK_ID << 3):
            clock, pos = read_varint(buf, pos, b)
        elif key == (F.DEFAULTS_TRACK_EVENT << 3 | 2):
            n, pos = read_varint(buf, pos, b)
            if pos < 0 or n < 0 or n > b - pos:  # runs past the defaults (read to its end, it read past the buffer)
                stats[ST_MALFORMED] += 1
                break
            q, qe = pos, pos + n
            while 0 <= q < qe:
                k2, q = read_varint(buf, q, qe)
                if q < 0:
                    break
                if k2 == (F.EVENT_DEFAULTS_TRACK_UUID << 3):
                    uuid, q = read_varint(buf, q, qe)
                else:
                    q = skip_field(buf, q, qe, k2 & 7)
            pos = qe
        else:
            pos = skip_field(buf, pos, b, key & 7)
    if uuid >= 0:
        state[D_TRACK] = uuid
    if clock >= 0:
        state[D_CLOCK] = clock
    return uuid >= 0 or clock >= 0


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _packet_fields(buf, a, b, spans, state, stats):
    """Read the fields of the TracePacket buf[a:b] into the ``D_P_*`` slots of ``state``, and append its
    descriptor and di packet spans to ``spans`` (from row ``state[D_SPANS]``, without their sequence, which
    may come later); False, with nothing kept, when ``spans`` has no room for them."""
    state[D_P_TS], state[D_P_HAS_TS], state[D_P_SEQ], state[D_P_FLAGS] = 0, 0, 0, 0
    for k in range(D_P_CLOCK, D_P_SPANS0):  # the clock and the spans: none
        state[k] = -1
    ns0 = state[D_SPANS]
    state[D_P_SPANS0] = ns0
    q = a
    while q < b:
        k2, q = read_varint(buf, q, b)
        if q < 0:
            break
        field, wire = k2 >> 3, k2 & 7
        if wire == 0 and _has(_PACKET_VARINTS, field):
            v, q = read_varint(buf, q, b)
            if field == F.PACKET_TIMESTAMP:
                state[D_P_TS], state[D_P_HAS_TS] = v, 1
            elif field == F.PACKET_SEQUENCE_ID:
                state[D_P_SEQ] = v
            elif field == F.PACKET_SEQUENCE_FLAGS:
                state[D_P_FLAGS] |= v
            elif field == F.PACKET_INCREMENTAL_STATE_CLEARED:
                if v:
                    state[D_P_FLAGS] |= F.SEQ_INCREMENTAL_STATE_CLEARED
            else:
                state[D_P_CLOCK] = v
        elif wire == 2:
            n, q = read_varint(buf, q, b)
            if q < 0 or n < 0 or q + n > b:
                stats[ST_MALFORMED] += 1
                break
            slot = (
                D_P_TE0
                if field == F.PACKET_TRACK_EVENT
                else D_P_IN0
                if field == F.PACKET_INTERNED_DATA
                else D_P_DF0
                if field == F.PACKET_DEFAULTS
                else D_P_CS0
                if field == F.PACKET_CLOCK_SNAPSHOT
                else -1
            )
            if slot >= 0:
                state[slot], state[slot + 1] = q, q + n
            elif (
                field == F.PACKET_TRACK_DESCRIPTOR or field == F.PACKET_DI_TRACE or field == F.PACKET_THREAD_DESCRIPTOR
            ):
                ns = state[D_SPANS]
                if ns == spans.shape[0]:
                    state[D_SPANS] = ns0
                    return False
                spans[ns, 0] = 0 if field == F.PACKET_TRACK_DESCRIPTOR else 1 if field == F.PACKET_DI_TRACE else 2
                spans[ns, 1], spans[ns, 2] = q, q + n
                state[D_SPANS] = ns + 1
            q += n
        else:
            q = skip_field(buf, q, b, wire)
        if q < 0:
            stats[ST_MALFORMED] += 1
            break
    return True
