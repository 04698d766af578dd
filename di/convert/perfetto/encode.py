"""numba kernels writing TrackEvent packets straight into a byte buffer.

One packet sequence per track. Its first packet clears the incremental state
and sets the sequence's default track (TracePacketDefaults), so event packets
carry no track uuid; each later packet is flagged as needing that state.
An event packet interns a name, category or debug-annotation name the first
time its sequence uses it (``iid`` = global code + 1, the same on every
sequence). Per track, events come in (start, -end) order and nest
(:mod:`di.convert.lanes`); a stack closes them: every slice ending at or
before the next event's start gets its end packet first, so at equal
timestamps END comes before BEGIN. Zero-length slices get BEGIN and END at
once; instants one INSTANT packet.

The kernels are resumable: they stop when the next packet might not fit in
``out`` and return, the caller flushes the bytes and calls again with the
same state array, so memory stays bounded whatever the trace size.

Compile hygiene (numba's cold compile, issue 15): the protobuf writers
(:mod:`~di.convert.perfetto.protobuf`) and the size helpers are plain calls;
chains of inlined helpers (``put_varint`` -> ``_put_interned`` ->
``_begin_packet``, 206 inlined bodies) made numba's IR inliner quadratic:
~90 s for :func:`encode_events`, now ~3 s. Two inline levels are kept, measured:
``_begin_packet`` and ``_end_packet`` (one call per packet, with ~30 array
arguments that an out-of-line call passes field by field) are
``inline="always"``, and so are the small per-packet helpers they call
(``_packet_head``, ``_flow_size``, ``_put_flows``); out of line they made the
writer 30-50 % slower. Every integer passed to a helper is an ``np.int64``
(the ``T_*`` tags and the other module constants below), never a Python int
literal, so each helper compiles once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.perfetto import fields as F
from di.convert.perfetto.protobuf import LEN, VARINT, FIXED64, put_bytes, put_fixed64, put_varint, tag, varint_size

# tags as varint values (np.int64: typed constants, see the module docstring)
T_PACKET = np.int64(tag(F.TRACE_PACKET, LEN))
T_TS = np.int64(tag(F.PACKET_TIMESTAMP, VARINT))
T_SEQ = np.int64(tag(F.PACKET_SEQUENCE_ID, VARINT))
T_FLAGS = np.int64(tag(F.PACKET_SEQUENCE_FLAGS, VARINT))
T_EVENT = np.int64(tag(F.PACKET_TRACK_EVENT, LEN))
T_INTERNED = np.int64(tag(F.PACKET_INTERNED_DATA, LEN))
T_DEFAULTS = np.int64(tag(F.PACKET_DEFAULTS, LEN))
T_DEF_EVENT = np.int64(tag(F.DEFAULTS_TRACK_EVENT, LEN))
T_DEF_UUID = np.int64(tag(F.EVENT_DEFAULTS_TRACK_UUID, VARINT))
T_TYPE = np.int64(tag(F.EVENT_TYPE, VARINT))
T_NAME_IID = np.int64(tag(F.EVENT_NAME_IID, VARINT))
T_CAT_IID = np.int64(tag(F.EVENT_CATEGORY_IIDS, VARINT))
T_CORR = np.int64(tag(F.EVENT_CORRELATION_ID, VARINT))
T_ANN = np.int64(tag(F.EVENT_DEBUG_ANNOTATIONS, LEN))
T_FLOW = np.int64(tag(F.EVENT_FLOW_IDS, FIXED64))
T_TERM = np.int64(tag(F.EVENT_TERMINATING_FLOW_IDS, FIXED64))
T_DOUBLE = np.int64(tag(F.EVENT_DOUBLE_COUNTER_VALUE, FIXED64))
T_I_NAMES = np.int64(tag(F.INTERNED_EVENT_NAMES, LEN))
T_I_CATS = np.int64(tag(F.INTERNED_EVENT_CATEGORIES, LEN))
T_I_ANN = np.int64(tag(F.INTERNED_ANNOTATION_NAMES, LEN))
T_I_IID = np.int64(tag(F.INTERNED_IID, VARINT))
T_I_NAME = np.int64(tag(F.INTERNED_NAME, LEN))
T_A_NAME_IID = np.int64(tag(F.ANNOTATION_NAME_IID, VARINT))
T_A_INT = np.int64(tag(F.ANNOTATION_INT, VARINT))
T_A_JSON = np.int64(tag(F.ANNOTATION_LEGACY_JSON, LEN))

ANN_ARGS, ANN_BYTES = np.int64(1), np.int64(2)
"""Interned debug-annotation names: iid 1 = "args" (the event's args JSON text), 2 = "bytes"."""
ANNOTATION_NAMES = ("args", "bytes")

SLACK = 192
"""Bytes reserved per packet beyond its strings and flow ids (fixed fields, varints at most 10 bytes)."""

NONE = np.iinfo(np.int64).min
"""An absent integer (corr, bytes) in the kernels' int64 columns."""
_NONE = NONE

# state array slots
S_TRACK, S_CURSOR, S_HEADER, S_SP = 0, 1, 2, 3

# field values the kernels write, typed (see the module docstring)
_NEEDS_STATE = np.int64(F.SEQ_NEEDS_INCREMENTAL_STATE)
_STATE_CLEARED = np.int64(F.SEQ_INCREMENTAL_STATE_CLEARED)
_SLICE_BEGIN, _SLICE_END = np.int64(F.TYPE_SLICE_BEGIN), np.int64(F.TYPE_SLICE_END)
_INSTANT, _COUNTER = np.int64(F.TYPE_INSTANT), np.int64(F.TYPE_COUNTER)
_AT_BEGIN, _AT_END = np.int64(0), np.int64(1)
"""Which flow ids an event packet carries: those of the slice's start, or of its end."""
_COUNTER_EVENT = np.int64(2 + 2 + 8)
"""Bytes of a counter TrackEvent: type, double value tag, 8 value bytes."""


@njit(cache=True, _nrt=False)
def _ld(n: int) -> int:
    """Size of a length-delimited value of n bytes, without its tag."""
    return varint_size(n) + n


@njit(cache=True, _nrt=False)
def _interned_entry(iid: int, size: int) -> int:
    return 1 + varint_size(iid) + 1 + varint_size(size) + size


@njit(cache=True, _nrt=False)
def _put_interned(out, pos, field_tag, iid, pool, a, b):
    body = 1 + varint_size(iid) + 1 + _ld(b - a)
    pos = put_varint(out, pos, field_tag)
    pos = put_varint(out, pos, body)
    pos = put_varint(out, pos, T_I_IID)
    pos = put_varint(out, pos, iid)
    pos = put_varint(out, pos, T_I_NAME)
    pos = put_varint(out, pos, b - a)
    return put_bytes(out, pos, pool, a, b)


@njit(cache=True, inline="always", _nrt=False)
def _packet_head(out, pos, body, ts, seq):
    """Tag and length of a packet of ``body`` bytes, then its timestamp, sequence id and 'needs state' flag."""
    pos = put_varint(out, pos, T_PACKET)
    pos = put_varint(out, pos, body)
    pos = put_varint(out, pos, T_TS)
    pos = put_varint(out, pos, ts)
    pos = put_varint(out, pos, T_SEQ)
    pos = put_varint(out, pos, seq)
    pos = put_varint(out, pos, T_FLAGS)
    return put_varint(out, pos, _NEEDS_STATE)


@njit(cache=True, _nrt=False)
def _header(out, pos, seq, uuid):
    """The first packet of a sequence: state cleared, default track uuid."""
    ev_def = 1 + varint_size(uuid)
    defaults = 1 + _ld(ev_def)
    body = 1 + varint_size(seq) + 2 + 2 + _ld(defaults)
    pos = put_varint(out, pos, T_PACKET)
    pos = put_varint(out, pos, body)
    pos = put_varint(out, pos, T_SEQ)
    pos = put_varint(out, pos, seq)
    pos = put_varint(out, pos, T_FLAGS)
    pos = put_varint(out, pos, _STATE_CLEARED)
    pos = put_varint(out, pos, T_DEFAULTS)
    pos = put_varint(out, pos, defaults)
    pos = put_varint(out, pos, T_DEF_EVENT)
    pos = put_varint(out, pos, ev_def)
    pos = put_varint(out, pos, T_DEF_UUID)
    return put_varint(out, pos, uuid)


@njit(cache=True, inline="always", _nrt=False)
def _flow_size(i, at_end, fptr, fend):
    n = 0
    for m in range(fptr[i], fptr[i + 1]):
        if fend[m] == at_end:
            n += 10
    return n


@njit(cache=True, inline="always", _nrt=False)
def _put_flows(out, pos, i, at_end, fptr, fid, fterm, fend):
    for m in range(fptr[i], fptr[i + 1]):
        if fend[m] == at_end:
            pos = put_varint(out, pos, T_TERM if fterm[m] else T_FLOW)
            pos = put_fixed64(out, pos, fid[m])
    return pos


@njit(cache=True, inline="always", _nrt=False)
def _end_packet(out, pos, seq, ts, i, fptr, fid, fterm, fend):
    ev = 2 + _flow_size(i, _AT_END, fptr, fend)
    body = 1 + varint_size(ts) + 1 + varint_size(seq) + 2 + 1 + _ld(ev)
    pos = _packet_head(out, pos, body, ts, seq)
    pos = put_varint(out, pos, T_EVENT)
    pos = put_varint(out, pos, ev)
    pos = put_varint(out, pos, T_TYPE)
    pos = put_varint(out, pos, _SLICE_END)
    return _put_flows(out, pos, i, _AT_END, fptr, fid, fterm, fend)


@njit(cache=True, inline="always", _nrt=False)
def _begin_packet(
    out,
    pos,
    seq,
    t,
    i,
    kind,
    ts,
    ev_name,
    ev_cat,
    ev_src_cat,
    corr,
    nbytes,
    args,
    args_off,
    args_null,
    names,
    name_off,
    cats,
    cat_off,
    ann,
    ann_off,
    seen_name,
    seen_cat,
    seen_ann,
    fptr,
    fid,
    fterm,
    fend,
):
    """A BEGIN or INSTANT packet of event i (interning what sequence t has not seen)."""
    name_iid = ev_name[i] + 1
    cat_iid = ev_cat[i] + 1
    src_iid = ev_src_cat[i] + 1
    has_args = args_null[i] == 0
    a0, a1 = args_off[i], args_off[i + 1]
    has_corr = corr[i] != _NONE
    has_bytes = nbytes[i] != _NONE
    # interned entries this packet adds
    new_name = seen_name[ev_name[i]] != t
    new_cat = seen_cat[ev_cat[i]] != t
    new_src = src_iid > 0 and seen_cat[ev_src_cat[i]] != t
    new_args = has_args and seen_ann[0] != t
    new_bytes = has_bytes and seen_ann[1] != t
    interned = 0
    if new_name:
        interned += 1 + _ld(_interned_entry(name_iid, name_off[ev_name[i] + 1] - name_off[ev_name[i]]))
    if new_cat:
        interned += 1 + _ld(_interned_entry(cat_iid, cat_off[ev_cat[i] + 1] - cat_off[ev_cat[i]]))
    if new_src:
        interned += 1 + _ld(_interned_entry(src_iid, cat_off[ev_src_cat[i] + 1] - cat_off[ev_src_cat[i]]))
    if new_args:
        interned += 1 + _ld(_interned_entry(ANN_ARGS, ann_off[1] - ann_off[0]))
    if new_bytes:
        interned += 1 + _ld(_interned_entry(ANN_BYTES, ann_off[2] - ann_off[1]))
    ann_args = 2 + 1 + _ld(a1 - a0)
    ann_bytes = 2 + 1 + varint_size(nbytes[i])
    ev = 2 + 1 + varint_size(name_iid) + 1 + varint_size(cat_iid) + _flow_size(i, _AT_BEGIN, fptr, fend)
    if src_iid > 0:
        ev += 1 + varint_size(src_iid)
    if has_corr:
        ev += 2 + varint_size(corr[i])
    if has_args:
        ev += 1 + _ld(ann_args)
    if has_bytes:
        ev += 1 + _ld(ann_bytes)
    body = 1 + varint_size(ts) + 1 + varint_size(seq) + 2 + 1 + _ld(ev)
    if interned:
        body += 1 + _ld(interned)
    pos = _packet_head(out, pos, body, ts, seq)
    if interned:
        pos = put_varint(out, pos, T_INTERNED)
        pos = put_varint(out, pos, interned)
        if new_name:
            pos = _put_interned(out, pos, T_I_NAMES, name_iid, names, name_off[ev_name[i]], name_off[ev_name[i] + 1])
            seen_name[ev_name[i]] = t
        if new_cat:
            pos = _put_interned(out, pos, T_I_CATS, cat_iid, cats, cat_off[ev_cat[i]], cat_off[ev_cat[i] + 1])
            seen_cat[ev_cat[i]] = t
        if new_src:
            pos = _put_interned(out, pos, T_I_CATS, src_iid, cats, cat_off[ev_src_cat[i]], cat_off[ev_src_cat[i] + 1])
            seen_cat[ev_src_cat[i]] = t
        if new_args:
            pos = _put_interned(out, pos, T_I_ANN, ANN_ARGS, ann, ann_off[0], ann_off[1])
            seen_ann[0] = t
        if new_bytes:
            pos = _put_interned(out, pos, T_I_ANN, ANN_BYTES, ann, ann_off[1], ann_off[2])
            seen_ann[1] = t
    pos = put_varint(out, pos, T_EVENT)
    pos = put_varint(out, pos, ev)
    pos = put_varint(out, pos, T_TYPE)
    pos = put_varint(out, pos, kind)
    pos = put_varint(out, pos, T_NAME_IID)
    pos = put_varint(out, pos, name_iid)
    pos = put_varint(out, pos, T_CAT_IID)
    pos = put_varint(out, pos, cat_iid)
    if src_iid > 0:
        pos = put_varint(out, pos, T_CAT_IID)
        pos = put_varint(out, pos, src_iid)
    if has_corr:
        pos = put_varint(out, pos, T_CORR)
        pos = put_varint(out, pos, corr[i])
    if has_args:
        pos = put_varint(out, pos, T_ANN)
        pos = put_varint(out, pos, ann_args)
        pos = put_varint(out, pos, T_A_NAME_IID)
        pos = put_varint(out, pos, ANN_ARGS)
        pos = put_varint(out, pos, T_A_JSON)
        pos = put_varint(out, pos, a1 - a0)
        pos = put_bytes(out, pos, args, a0, a1)
    if has_bytes:
        pos = put_varint(out, pos, T_ANN)
        pos = put_varint(out, pos, ann_bytes)
        pos = put_varint(out, pos, T_A_NAME_IID)
        pos = put_varint(out, pos, ANN_BYTES)
        pos = put_varint(out, pos, T_A_INT)
        pos = put_varint(out, pos, nbytes[i])
    return _put_flows(out, pos, i, _AT_BEGIN, fptr, fid, fterm, fend)


@njit(cache=True, _nrt=False)
def encode_events(
    state,
    stack,
    out,
    track_ptr,
    emit,
    track_seq,
    track_uuid,
    start,
    end,
    instant,
    ev_name,
    ev_cat,
    ev_src_cat,
    corr,
    nbytes,
    args,
    args_off,
    args_null,
    names,
    name_off,
    cats,
    cat_off,
    ann,
    ann_off,
    seen_name,
    seen_cat,
    seen_ann,
    fptr,
    fid,
    fterm,
    fend,
    begin_cost,
    end_cost,
):
    """Write event packets of the tracks from ``state`` on until ``out`` is full; return the bytes written.

    ``track_ptr``/``emit``: the events of track t are ``emit[track_ptr[t]:track_ptr[t+1]]``, in (start, -end)
    order; ``state`` = [track, cursor in track, header written, stack size], updated in place; ``stack``
    holds the open slices. Times are ns >= 0; ``corr``/``nbytes`` are NONE where absent.
    """
    pos = np.int64(0)  # typed: a literal 0 would compile the helpers it is passed to once more
    cap = out.shape[0]
    t, k, header, sp = state[S_TRACK], state[S_CURSOR], state[S_HEADER], state[S_SP]
    ntracks = track_ptr.shape[0] - 1
    while t < ntracks:
        seq = track_seq[t]
        if header == 0:
            if pos + SLACK > cap:
                break
            pos = _header(out, pos, seq, track_uuid[t])
            header = 1
        n = track_ptr[t + 1] - track_ptr[t]
        i = emit[track_ptr[t] + k] if k < n else -1
        if sp > 0 and (i < 0 or end[stack[sp - 1]] <= start[i]):
            top = stack[sp - 1]
            if pos + end_cost[top] > cap:
                break
            pos = _end_packet(out, pos, seq, end[top], top, fptr, fid, fterm, fend)
            sp -= 1
            continue
        if i < 0:
            t += 1
            k = 0
            header = 0
            continue
        if pos + begin_cost[i] + end_cost[i] > cap:
            break
        kind = _INSTANT if instant[i] else _SLICE_BEGIN
        pos = _begin_packet(
            out,
            pos,
            seq,
            t,
            i,
            kind,
            start[i],
            ev_name,
            ev_cat,
            ev_src_cat,
            corr,
            nbytes,
            args,
            args_off,
            args_null,
            names,
            name_off,
            cats,
            cat_off,
            ann,
            ann_off,
            seen_name,
            seen_cat,
            seen_ann,
            fptr,
            fid,
            fterm,
            fend,
        )
        if not instant[i]:
            if end[i] == start[i]:
                pos = _end_packet(out, pos, seq, end[i], i, fptr, fid, fterm, fend)
            else:
                stack[sp] = i
                sp += 1
        k += 1
    state[S_TRACK], state[S_CURSOR], state[S_HEADER], state[S_SP] = t, k, header, sp
    return pos


@njit(cache=True, _nrt=False)
def encode_counters(state, out, series_ptr, order, series_seq, series_uuid, ts, value_bits):
    """Write counter packets (double values, bits as uint64) of the series from ``state`` on; see :func:`encode_events`."""
    pos = np.int64(0)
    cap = out.shape[0]
    t, k, header = state[S_TRACK], state[S_CURSOR], state[S_HEADER]
    nseries = series_ptr.shape[0] - 1
    while t < nseries:
        seq = series_seq[t]
        if pos + SLACK > cap:
            break
        if header == 0:
            pos = _header(out, pos, seq, series_uuid[t])
            header = 1
        if k == series_ptr[t + 1] - series_ptr[t]:
            t += 1
            k = 0
            header = 0
            continue
        j = order[series_ptr[t] + k]
        body = 1 + varint_size(ts[j]) + 1 + varint_size(seq) + 2 + 1 + _ld(_COUNTER_EVENT)
        pos = _packet_head(out, pos, body, ts[j], seq)
        pos = put_varint(out, pos, T_EVENT)
        pos = put_varint(out, pos, _COUNTER_EVENT)
        pos = put_varint(out, pos, T_TYPE)
        pos = put_varint(out, pos, _COUNTER)
        pos = put_varint(out, pos, T_DOUBLE)
        pos = put_fixed64(out, pos, value_bits[j])
        k += 1
    state[S_TRACK], state[S_CURSOR], state[S_HEADER] = t, k, header
    return pos
