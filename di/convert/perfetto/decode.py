"""numba decoder of Perfetto protobuf traces: TracePackets -> flat event columns.

One pass over the bytes keeps each sequence's incremental state (interned
names, categories, debug-annotation names and strings, the default track of
TracePacketDefaults), reset when a packet clears it, and emits per TrackEvent:
packet index, timestamp (ns), type, track uuid, name and up to two category
symbols, correlation id, counter value; per flow id: event, id, terminating;
per debug annotation: event, name, value. Strings are byte spans of the
buffer interned into dense symbols (:mod:`di.convert.symbols`).
TrackDescriptors and di's own packet are returned as spans for Python.

Dropped, and counted in ``stats``: packets with TrackEvents that have no
timestamp, legacy events (``legacy_event`` phases), events of unknown type.

The per-sequence state (interned entries, generation, default track and
clock, thread sequences) and the clocks are array hash tables
(:mod:`di.convert.inttable`), not numba typed Dicts, which cost ~55 compiles;
they are sized from the symbol table and, like it, make the caller decode
again with bigger ones when they fill up. Counters and ids passed to helpers
are ``np.int64`` (``_ZERO``, the ``K_*`` kinds), never literal ints, so that
each helper compiles once (see :mod:`di.convert.perfetto.encode`).

The kernels allocate nothing (numba compiles its ``np.empty``/``np.zeros``
overloads once per signature into every cold start): :func:`decode_packets`
makes every array, and :func:`_decode_packets` stops before a packet whose
flow, annotation or span rows may not fit, to be called again with bigger
ones. Sets of field numbers are bit masks (:func:`_has`), not tuple ``in``
tests, and the small helpers that only call other kernels are inlined leaves
(each compiled function costs 0.1-0.3 CPU-s cold, whatever its size).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.perfetto import fields as F
from di.convert.inttable import NO_KEY, claim, find, new_table
from di.convert.perfetto.clocks import CLOCK_WIDTH, MAX_CLOCKS, SNAPSHOT_ROWS, read_snapshot, to_trace_ns
from di.convert.perfetto.protobuf import as_double, read_fixed64, read_varint, skip_field
from di.convert.symbols import FULL, intern

# annotation value types
A_NONE, A_BOOL, A_UINT, A_INT, A_DOUBLE, A_STRING, A_JSON, A_POINTER, A_ISTRING, A_NESTED = range(10)
# stats slots
ST_NO_TIMESTAMP, ST_LEGACY, ST_BAD_TYPE, ST_CLOCK_ID, ST_MALFORMED, ST_UNRESOLVED_IID, ST_SYMBOLS_FULL = range(7)
STAT_NAMES = (
    "events without a timestamp",
    "legacy (phase-based) events",
    "events of unknown type",
    "packets on clocks no snapshot defines (timestamps kept as they are)",
    "malformed packets",
    "interned names not found",
)
"""Reasons for the first stats slots; the last slot (ST_SYMBOLS_FULL) asks the caller to retry with a bigger
symbol table (and with it bigger hash tables)."""
# kinds of interned tables (for the lookup key), typed
K_NAME, K_CAT, K_ANN, K_STR = np.int64(1), np.int64(2), np.int64(3), np.int64(4)
# columns of the per-sequence table: generation (incremental state resets), default track uuid,
# default timestamp clock, 1 when a ThreadDescriptor named the sequence's thread
Q_GEN, Q_TRACK, Q_CLOCK, Q_THREAD = 0, 1, 2, 3
_SEQ_WIDTH = np.int64(4)
_ZERO, _ONE = np.int64(0), np.int64(1)


def _mask(*fields: int) -> np.int64:
    """A set of field numbers (each below 63) as bits, tested with :func:`_has` (no tuple ``in``: see below)."""
    assert all(0 < f < 63 for f in fields), fields
    return np.int64(sum(1 << f for f in set(fields)))


_PACKET_VARINTS = _mask(
    F.PACKET_TIMESTAMP,
    F.PACKET_SEQUENCE_ID,
    F.PACKET_SEQUENCE_FLAGS,
    F.PACKET_INCREMENTAL_STATE_CLEARED,
    F.PACKET_TIMESTAMP_CLOCK_ID,
)
_FLOW_FIELDS = _mask(
    F.EVENT_FLOW_IDS, F.EVENT_TERMINATING_FLOW_IDS, F.EVENT_FLOW_IDS_OLD, F.EVENT_TERMINATING_FLOW_IDS_OLD
)
_TERMINATING_FIELDS = _mask(F.EVENT_TERMINATING_FLOW_IDS, F.EVENT_TERMINATING_FLOW_IDS_OLD)
_OLD_FLOW_FIELDS = _mask(F.EVENT_FLOW_IDS_OLD, F.EVENT_TERMINATING_FLOW_IDS_OLD)
_INTERNED_TABLES = _mask(
    F.INTERNED_EVENT_CATEGORIES, F.INTERNED_EVENT_NAMES, F.INTERNED_ANNOTATION_NAMES, F.INTERNED_ANNOTATION_STRINGS
)
_ANNOTATION_VARINTS = _mask(
    F.ANNOTATION_NAME_IID,
    F.ANNOTATION_BOOL,
    F.ANNOTATION_UINT,
    F.ANNOTATION_INT,
    F.ANNOTATION_POINTER,
    F.ANNOTATION_STRING_IID,
)
_ANNOTATION_NESTED = _mask(F.ANNOTATION_NESTED, F.ANNOTATION_DICT_ENTRIES, F.ANNOTATION_ARRAY_VALUES)

# state of a resumable decode (:func:`_decode_packets`): where it stopped, its counts, the current sequence's state
D_PACKET, D_POS, D_EVENTS, D_FLOWS, D_ANNS, D_SPANS, D_SEQ, D_GEN, D_TRACK, D_CLOCK, D_NEED = range(11)
DECODE_SLOTS = 11
NEED_ROWS, NEED_SPANS = np.int64(1), np.int64(2)
"""What :func:`_decode_packets` returns when it stopped before a packet: its flow and annotation rows may not
fit (``state[D_NEED]`` more rows of each, at most), or its span rows do not; 0 when every packet is decoded."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, inline="always")
def _has(mask, field):
    """Whether field number ``field`` is in ``mask`` (:func:`_mask`)."""
    return 0 <= field < 63 and (mask >> field) & 1 != 0


@njit(cache=True, inline="always")
def sequence_track(seq: int) -> int:
    """Track key of the thread a sequence's (deprecated) ThreadDescriptor names: negative, apart from track uuids."""
    return -(seq + 1)


@njit(cache=True, no_cfunc_wrapper=True)
def count_packets(buf: np.ndarray) -> tuple[int, int]:
    """(number of complete TracePackets, byte offset where the readable part ends)."""
    pos, end, n = _ZERO, buf.shape[0], _ZERO  # typed: a literal 0 compiles read_varint twice
    while pos < end:
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


@njit(cache=True, no_cfunc_wrapper=True)
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


@njit(cache=True, inline="always")
def _defaults(buf, a, b):
    """(track_uuid of track_event_defaults, timestamp_clock_id) of TracePacketDefaults (buf[a:b]); -1 when absent."""
    uuid, clock = -1, -1
    pos = a
    while 0 <= pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            break
        if key == (F.DEFAULTS_TIMESTAMP_CLOCK_ID << 3):
            clock, pos = read_varint(buf, pos, b)
        elif key == (F.DEFAULTS_TRACK_EVENT << 3 | 2):
            n, pos = read_varint(buf, pos, b)
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
    return uuid, clock


@njit(cache=True, no_cfunc_wrapper=True)
def _annotation(buf, a, b, interned, seq, gen, stats, sym):
    """(name symbol, value type, int value, double value's bits as int64, span start, span end) of a DebugAnnotation."""
    name, vtype, ival, dval, s0, s1 = -1, A_NONE, 0, _ZERO, 0, 0
    pos = a
    while pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            break
        field, wire = key >> 3, key & 7
        if wire == 0 and _has(_ANNOTATION_VARINTS, field):
            v, pos = read_varint(buf, pos, b)
            if field == F.ANNOTATION_NAME_IID:
                name = _lookup(interned, seq, gen, K_ANN, v, stats)
            elif field == F.ANNOTATION_STRING_IID:
                vtype, ival = A_ISTRING, _lookup(interned, seq, gen, K_STR, v, stats)
            else:
                vtype = (
                    A_BOOL
                    if field == F.ANNOTATION_BOOL
                    else A_UINT
                    if field == F.ANNOTATION_UINT
                    else A_INT
                    if field == F.ANNOTATION_INT
                    else A_POINTER
                )
                ival = v
        elif wire == 1 and field == F.ANNOTATION_DOUBLE and pos + 8 <= b:
            vtype = A_DOUBLE
            dval = np.int64(read_fixed64(buf, pos))
            pos += 8
        elif wire == 2:
            n, pos = read_varint(buf, pos, b)
            if pos < 0 or n < 0 or pos + n > b:
                break
            if field == F.ANNOTATION_NAME:
                name = _sym(buf, pos, pos + n, sym, stats)
            elif field == F.ANNOTATION_STRING or field == F.ANNOTATION_LEGACY_JSON:
                vtype, s0, s1 = (A_STRING if field == F.ANNOTATION_STRING else A_JSON), pos, pos + n
            elif _has(_ANNOTATION_NESTED, field):
                vtype = A_NESTED
            pos += n
        else:
            pos = skip_field(buf, pos, b, wire)
            if pos < 0:
                break
    return name, vtype, ival, dval, s0, s1


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True)
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


def decode_packets(
    buf: np.ndarray, n_packets: int, sym: tuple[np.ndarray, ...], stats: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Decode every TracePacket; see the module docstring. Returns (packet, ts, type, track, name,
    categories (n, 2), correlation id, has correlation, counter value, flow ids (uint64), flow events,
    flow terminating (uint8), annotations (n, 6: event, name, type, int value, span start, end),
    annotation doubles, spans (n, 4: kind, start, end, sequence))."""
    slots = sym[0].shape[0]  # a power of two, twice the symbol capacity
    tables = (new_table(slots, _ONE), new_table(max(slots // 16, 16), _SEQ_WIDTH))
    clocks = new_table(max(slots // 16, 16), CLOCK_WIDTH)
    # Every array is made here, not in the kernel: numba compiles its np.empty/np.zeros overloads
    # once per signature into every cold process, and a kernel that returns arrays lowers more code.
    events = (
        np.empty(n_packets, np.int64),  # packet
        np.empty(n_packets, np.int64),  # ts
        np.empty(n_packets, np.int8),  # type
        np.empty(n_packets, np.int64),  # track
        np.empty(n_packets, np.int64),  # name
        np.empty((n_packets, 2), np.int64),  # categories
        np.empty(n_packets, np.int64),  # correlation id
        np.zeros(n_packets, np.uint8),  # has correlation id
        np.empty(n_packets, np.float64),  # counter value
    )
    spans = np.empty((max(n_packets, 16), 4), np.int64)
    flows, ann = np.empty((16, 3), np.int64), np.empty((16, 7), np.int64)
    primary = np.full(1, F.CLOCK_BOOTTIME, np.int64)
    snapshot = np.empty((SNAPSHOT_ROWS, MAX_CLOCKS), np.int64)
    state = np.zeros(DECODE_SLOTS, np.int64)
    state[D_SEQ] = -1
    while True:  # the kernel stops before a packet whose rows may not fit; grow them and go on
        stopped = _decode_packets(
            buf, n_packets, sym, stats, *tables, clocks, primary, snapshot, *events, spans, flows, ann, state
        )
        if not stopped:
            break
        if stopped == NEED_SPANS:
            spans = _grown(spans, 2 * spans.shape[0])
        else:
            flows = _grown(flows, state[D_FLOWS] + state[D_NEED])
            ann = _grown(ann, state[D_ANNS] + state[D_NEED])
    ne, nf, na, ns = (int(state[k]) for k in (D_EVENTS, D_FLOWS, D_ANNS, D_SPANS))
    events = tuple(a[:ne] for a in events)
    flows, ann, spans = flows[:nf], ann[:na], spans[:ns]
    flow_id = np.ascontiguousarray(flows[:, 0]).view(np.uint64)
    ann_double = np.ascontiguousarray(ann[:, 6]).view(np.float64)
    return (*events, flow_id, flows[:, 1].copy(), flows[:, 2].astype(np.uint8), ann[:, :6].copy(), ann_double, spans)


def _grown(rows: np.ndarray, need: int) -> np.ndarray:
    """``rows``, or a copy with at least ``need`` rows (and at least twice as many) when it has fewer."""
    if rows.shape[0] >= need:
        return rows
    out = np.empty((max(int(need), 2 * rows.shape[0]), rows.shape[1]), rows.dtype)
    out[: rows.shape[0]] = rows
    return out


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True)
def _decode_packets(
    buf,
    n_packets,
    sym,
    stats,
    interned,
    seqs,
    clocks,
    primary,
    snapshot,
    ev_packet,
    ev_ts,
    ev_type,
    ev_track,
    ev_name,
    ev_cat,
    ev_corr,
    ev_has_corr,
    ev_value,
    spans,
    flows,
    an,
    state,
):
    """:func:`decode_packets` into the arrays it is given (``spans``: kind (0 track descriptor, 1 di
    packet, 2 thread descriptor), start, end, sequence), with the flows as int64 rows (id bits, event,
    terminating) and the annotations as int64 rows (event, name, type, int value, span start, end,
    double's bits); ``snapshot`` is scratch for :func:`~.clocks.read_snapshot`. Resumable: it starts and
    ends at ``state`` (the ``D_*`` slots: packet, byte position, counts of events, flows, annotations and
    spans, the current sequence's state) and returns 0 when done, or :data:`NEED_ROWS` / :data:`NEED_SPANS`
    when it stopped before a packet whose rows may not fit (grow them and call again)."""
    p, pos, end = state[D_PACKET], state[D_POS], buf.shape[0]
    ne, nf, na, ns = state[D_EVENTS], state[D_FLOWS], state[D_ANNS], state[D_SPANS]
    cur_seq, cur_gen, cur_track, cur_clock = state[D_SEQ], state[D_GEN], state[D_TRACK], state[D_CLOCK]
    stopped = _ZERO
    while p < n_packets:
        at = pos
        key, pos = read_varint(buf, pos, end)
        if key != 10:
            pos = skip_field(buf, pos, end, key & 7)
            continue
        plen, pos = read_varint(buf, pos, end)
        if nf + plen > flows.shape[0] or na + plen > an.shape[0]:  # a flow id takes a byte at least, an annotation 2
            stopped, pos = NEED_ROWS, at
            state[D_NEED] = plen
            break
        a, b = pos, pos + plen
        pos = b
        p += 1
        ts, has_ts, seq, flags, te0, te1, in0, in1, df0, df1 = 0, False, 0, 0, -1, -1, -1, -1, -1, -1
        clock, cs0, cs1 = -1, -1, -1
        ns0, full = ns, False
        q = a
        while q < b:
            k2, q = read_varint(buf, q, b)
            if q < 0:
                break
            field, wire = k2 >> 3, k2 & 7
            if wire == 0 and _has(_PACKET_VARINTS, field):
                v, q = read_varint(buf, q, b)
                if field == F.PACKET_TIMESTAMP:
                    ts, has_ts = v, True
                elif field == F.PACKET_SEQUENCE_ID:
                    seq = v
                elif field == F.PACKET_SEQUENCE_FLAGS:
                    flags |= v
                elif field == F.PACKET_INCREMENTAL_STATE_CLEARED:
                    flags |= F.SEQ_INCREMENTAL_STATE_CLEARED if v else 0
                else:
                    clock = v
            elif wire == 2:
                n, q = read_varint(buf, q, b)
                if q < 0 or n < 0 or q + n > b:
                    stats[ST_MALFORMED] += 1
                    break
                if field == F.PACKET_TRACK_EVENT:
                    te0, te1 = q, q + n
                elif field == F.PACKET_INTERNED_DATA:
                    in0, in1 = q, q + n
                elif field == F.PACKET_DEFAULTS:
                    df0, df1 = q, q + n
                elif field == F.PACKET_CLOCK_SNAPSHOT:
                    cs0, cs1 = q, q + n
                elif (
                    field == F.PACKET_TRACK_DESCRIPTOR
                    or field == F.PACKET_DI_TRACE
                    or field == F.PACKET_THREAD_DESCRIPTOR
                ):
                    if ns == spans.shape[0]:
                        full = True
                        break
                    kind = 0 if field == F.PACKET_TRACK_DESCRIPTOR else 1 if field == F.PACKET_DI_TRACE else 2
                    spans[ns, 0], spans[ns, 1], spans[ns, 2] = kind, q, q + n
                    ns += 1
                q += n
            else:
                q = skip_field(buf, q, b, wire)
            if q < 0:
                stats[ST_MALFORMED] += 1
                break
        if full:  # nothing of this packet is kept yet: decode it again with more span rows
            stopped, pos, p, ns = NEED_SPANS, at, p - 1, ns0
            break
        for k in range(ns0, ns):  # the packet's sequence id may come after its descriptor
            spans[k, 3] = seq
            if spans[k, 0] == 2:
                h = _seq_row(seqs, seq, stats)
                if h >= 0:
                    seqs[2][h, Q_THREAD] = 1
        if seq != cur_seq:  # the sequence's state, kept in locals while its packets follow each other
            h = find(seqs[0], seq, NO_KEY, NO_KEY)
            cur_seq = seq
            if h >= 0:
                cur_gen, cur_track, cur_clock = seqs[2][h, Q_GEN], seqs[2][h, Q_TRACK], seqs[2][h, Q_CLOCK]
            else:
                cur_gen, cur_track, cur_clock = _ZERO, _ZERO, _ZERO
        if flags & F.SEQ_INCREMENTAL_STATE_CLEARED:
            cur_gen, cur_track, cur_clock = cur_gen + 1, _ZERO, _ZERO
            h = _seq_row(seqs, seq, stats)
            if h >= 0:
                seqs[2][h, Q_GEN], seqs[2][h, Q_TRACK], seqs[2][h, Q_CLOCK] = cur_gen, 0, 0
        gen = cur_gen
        if cs0 >= 0 and not read_snapshot(buf, cs0, cs1, seq, clocks, primary, snapshot):
            stats[ST_SYMBOLS_FULL] = 1
        if df0 >= 0:
            uuid, dclock = _defaults(buf, df0, df1)
            if uuid >= 0:
                cur_track = uuid
            if dclock >= 0:
                cur_clock = dclock
            if uuid >= 0 or dclock >= 0:
                h = _seq_row(seqs, seq, stats)
                if h >= 0:
                    seqs[2][h, Q_TRACK], seqs[2][h, Q_CLOCK] = cur_track, cur_clock
        if (
            has_ts and cs0 < 0
        ):  # a snapshot packet's own timestamp does not advance its clocks (as in the trace processor)
            ts, known = to_trace_ns(clocks, primary, seq, clock if clock >= 0 else cur_clock, ts)
            if not known:
                stats[ST_CLOCK_ID] += 1
        if in0 >= 0:
            _interned(buf, in0, in1, interned, seq, gen, sym, stats)
        if te0 < 0:
            continue
        # TrackEvent
        etype, track, has_track, name, c0, c1, corr, has_corr, value, legacy = (
            0,
            0,
            False,
            -1,
            -1,
            -1,
            0,
            0,
            np.nan,
            False,
        )
        us_abs, has_us = 0, False
        nf0, na0 = nf, na
        q = te0
        while q < te1:
            k2, q = read_varint(buf, q, te1)
            if q < 0:
                break
            field, wire = k2 >> 3, k2 & 7
            if _has(_FLOW_FIELDS, field):
                term = (_ONE if _has(_TERMINATING_FIELDS, field) else _ZERO) + (
                    np.int64(2) if _has(_OLD_FLOW_FIELDS, field) else _ZERO
                )
                q, nf = _ids(buf, q, te1, wire, flows, nf, ne, term)
            elif wire == 0:
                v, q = read_varint(buf, q, te1)
                if field == F.EVENT_TYPE:
                    etype = v
                elif field == F.EVENT_TRACK_UUID:
                    track, has_track = v, True
                elif field == F.EVENT_NAME_IID:
                    name = _lookup(interned, seq, gen, K_NAME, v, stats)
                elif field == F.EVENT_CATEGORY_IIDS:
                    c = _lookup(interned, seq, gen, K_CAT, v, stats)
                    if c0 < 0:
                        c0 = c
                    elif c1 < 0:
                        c1 = c
                elif field == F.EVENT_CORRELATION_ID:
                    corr, has_corr = v, 1
                elif field == F.EVENT_COUNTER_VALUE:
                    value = float(v)
                elif field == F.EVENT_TIMESTAMP_ABSOLUTE_US:
                    us_abs, has_us = v, True
            elif wire == 1:
                if field == F.EVENT_DOUBLE_COUNTER_VALUE and q + 8 <= te1:
                    value = as_double(read_fixed64(buf, q))
                q += 8
            elif wire == 2:
                n, q = read_varint(buf, q, te1)
                if q < 0 or n < 0 or q + n > te1:
                    break
                if field == F.EVENT_NAME:
                    name = _sym(buf, q, q + n, sym, stats)
                elif field == F.EVENT_CATEGORIES:
                    c = _sym(buf, q, q + n, sym, stats)
                    if c0 < 0:
                        c0 = c
                    elif c1 < 0:
                        c1 = c
                elif field == F.EVENT_CATEGORY_IIDS:  # packed
                    r = q
                    while r < q + n:
                        v, r = read_varint(buf, r, q + n)
                        if r < 0:
                            break
                        c = _lookup(interned, seq, gen, K_CAT, v, stats)
                        if c0 < 0:
                            c0 = c
                        elif c1 < 0:
                            c1 = c
                elif field == F.EVENT_DEBUG_ANNOTATIONS:
                    nm, vt, iv, dv, s0, s1 = _annotation(buf, q, q + n, interned, seq, gen, stats, sym)
                    an[na, 0], an[na, 1], an[na, 2], an[na, 3], an[na, 4], an[na, 5] = ne, nm, vt, iv, s0, s1
                    an[na, 6] = dv
                    na += 1
                elif field == 6:  # legacy_event
                    legacy = True
                q += n
            else:
                q = skip_field(buf, q, te1, wire)
            if q < 0:
                break
        if not has_ts and has_us:
            ts, has_ts = us_abs * 1000, True
        if legacy and etype == 0:
            stats[ST_LEGACY] += 1
        elif not has_ts:
            stats[ST_NO_TIMESTAMP] += 1
        elif etype < F.TYPE_SLICE_BEGIN or etype > F.TYPE_COUNTER:
            stats[ST_BAD_TYPE] += 1
        else:
            ev_packet[ne], ev_ts[ne], ev_type[ne] = p - 1, ts, etype
            ev_track[ne] = (
                track
                if has_track
                else cur_track
                if cur_track != 0 or not _thread_sequence(seqs, seq)
                else sequence_track(seq)
            )
            ev_name[ne], ev_cat[ne, 0], ev_cat[ne, 1] = name, c0, c1
            ev_corr[ne], ev_has_corr[ne], ev_value[ne] = corr, has_corr, value
            ne += 1
            continue
        nf, na = nf0, na0  # the event was dropped: so are its flow ids and annotations
    state[D_PACKET], state[D_POS], state[D_EVENTS], state[D_FLOWS], state[D_ANNS], state[D_SPANS] = (
        p,
        pos,
        ne,
        nf,
        na,
        ns,
    )
    state[D_SEQ], state[D_GEN], state[D_TRACK], state[D_CLOCK] = cur_seq, cur_gen, cur_track, cur_clock
    return stopped
