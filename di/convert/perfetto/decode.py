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
(each compiled function costs 0.03-0.1 CPU-s cold beyond its size).

What numba's cold compile costs here (issue 15), and how the kernels keep it
down, measured per kernel (``bench/cold_start.py``):

* Locals assigned on several paths: numba's SSA gives each a copy at every
  join, and its passes (SSA, rewrites, type inference, lowering) walk them
  all. The packet's fields (:func:`_packet_fields`) live in ``state`` slots
  (``D_P_*``) and the event's values in its column of the events array, not
  in locals: the decode kernel's IR went from 5,453 to 3,137 statements.
* Size: numba's time grows faster than a kernel's size, so the TrackEvent is
  read by a kernel of its own (:func:`_track_event`), called once per event
  (same speed; 1.7 CPU-s became 0.76 + 0.72).
* Reach: a kernel compiles every function it may call. ClockSnapshots (only
  other producers' traces have them, a few) are read by the caller between
  two calls of the kernel (:data:`NEED_SNAPSHOT`), so
  :func:`~.clocks.read_snapshot` compiles only when a trace has one.
* Kernels called only from kernels have no CPython wrapper
  (``no_cpython_wrapper``; see :mod:`di.convert.perfetto.protobuf`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.perfetto import fields as F
from di.convert.inttable import NO_KEY, claim, find, new_table
from di.convert.perfetto.clocks import CLOCK_WIDTH, MAX_CLOCKS, SNAPSHOT_ROWS, read_snapshot, to_trace_ns
from di.convert.perfetto.protobuf import double_bits, read_fixed64, read_varint, skip_field
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
_ZERO, _ONE, _MINUS_ONE = np.int64(0), np.int64(1), np.int64(-1)


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
# the current packet's fields (:func:`_packet_fields`): timestamp, whether it has one, sequence id, flags, timestamp
# clock, byte spans of its TrackEvent, InternedData, TracePacketDefaults and ClockSnapshot, its first span row
(D_P_TS, D_P_HAS_TS, D_P_SEQ, D_P_FLAGS, D_P_CLOCK, D_P_TE0, D_P_TE1, D_P_IN0, D_P_IN1, D_P_DF0, D_P_DF1, D_P_CS0,
 D_P_CS1, D_P_SPANS0) = range(11, 25)  # fmt: skip
D_SNAPSHOT_READ = 25
"""1 when the kernel stopped at a packet's ClockSnapshot and the caller has read it: go on with that packet."""
DECODE_SLOTS = 26
# rows of the events array (int64; the counter value as its float64 bits)
EV_PACKET, EV_TS, EV_TYPE, EV_TRACK, EV_NAME, EV_CAT0, EV_CAT1, EV_CORR, EV_HAS_CORR, EV_VALUE = range(10)
EV_ROWS = 10
_NAN_BITS = int(np.array(np.nan, np.float64).view(np.int64))
"""A counter value's default, NaN, as its bits."""
NEED_ROWS, NEED_SPANS, NEED_SNAPSHOT = np.int64(1), np.int64(2), np.int64(3)
"""What :func:`_decode_packets` returns when it stopped before a packet: its flow and annotation rows may not
fit (``state[D_NEED]`` more rows of each, at most), or its span rows do not; or within a packet, for the caller
to read its ClockSnapshot (``state[D_P_CS0]:state[D_P_CS1]``); 0 when every packet is decoded."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, inline="always")
def _has(mask, field):
    """Whether field number ``field`` is in ``mask`` (:func:`_mask`)."""
    return ((mask >> (field & 63)) & 1 != 0) & (field >> 6 == 0)  # no chained or short-circuit test: no branches


@njit(cache=True, inline="always")
def sequence_track(seq: int) -> int:
    """Track key of the thread a sequence's (deprecated) ThreadDescriptor names: negative, apart from track uuids."""
    return -(seq + 1)


@njit(cache=True, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
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


@njit(cache=True, _nrt=False, inline="always")
def _category(ev, ne, c):
    """Keep category symbol ``c`` of event ``ne`` in its first free category slot (of two)."""
    if ev[EV_CAT0, ne] < 0:
        ev[EV_CAT0, ne] = c
    elif ev[EV_CAT1, ne] < 0:
        ev[EV_CAT1, ne] = c


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _annotation(buf, a, b, interned, seq, gen, stats, sym, an, na, ne):
    """Row ``na`` of ``an`` for a DebugAnnotation (buf[a:b]) of event ``ne``: event, name symbol, value type, int
    value, span start, span end, double value's bits as int64."""
    # the values go straight into the row (see _decode_packets on locals): event, no name, no value, int 0,
    # empty span, double bits 0
    an[na, 0], an[na, 1], an[na, 2] = ne, -1, A_NONE
    for k in range(3, 7):
        an[na, k] = 0
    pos = a
    while pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            break
        field, wire = key >> 3, key & 7
        if wire == 0 and _has(_ANNOTATION_VARINTS, field):
            v, pos = read_varint(buf, pos, b)
            if field == F.ANNOTATION_NAME_IID:
                an[na, 1] = _lookup(interned, seq, gen, K_ANN, v, stats)
            else:
                an[na, 2] = (
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
                an[na, 3] = _lookup(interned, seq, gen, K_STR, v, stats) if field == F.ANNOTATION_STRING_IID else v
        elif wire == 1 and field == F.ANNOTATION_DOUBLE and pos + 8 <= b:
            an[na, 2], an[na, 6] = A_DOUBLE, np.int64(read_fixed64(buf, pos))
            pos += 8
        elif wire == 2:
            n, pos = read_varint(buf, pos, b)
            if pos < 0 or n < 0 or pos + n > b:
                break
            if field == F.ANNOTATION_NAME:
                an[na, 1] = _sym(buf, pos, pos + n, sym, stats)
            elif field == F.ANNOTATION_STRING or field == F.ANNOTATION_LEGACY_JSON:
                an[na, 2] = A_STRING if field == F.ANNOTATION_STRING else A_JSON
                an[na, 4], an[na, 5] = pos, pos + n
            elif _has(_ANNOTATION_NESTED, field):
                an[na, 2] = A_NESTED
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
    events = np.empty((EV_ROWS, n_packets), np.int64)
    spans = np.empty((max(n_packets, 16), 4), np.int64)
    flows, ann = np.empty((16, 3), np.int64), np.empty((16, 7), np.int64)
    primary = np.full(1, F.CLOCK_BOOTTIME, np.int64)
    snapshot = np.empty((SNAPSHOT_ROWS, MAX_CLOCKS), np.int64)
    state = np.zeros(DECODE_SLOTS, np.int64)
    state[D_SEQ] = -1
    while True:  # the kernel stops before a packet whose rows may not fit (grow them) or at a ClockSnapshot
        stopped = _decode_packets(
            buf, n_packets, sym, stats, *tables, clocks, primary, events, spans, flows, ann, state
        )
        if not stopped:
            break
        if stopped == NEED_SNAPSHOT:
            # read here, not called from the kernel: a kernel compiles every function it calls, and only
            # other producers' traces have ClockSnapshots (a few: one per sequence reset)
            if not read_snapshot(buf, state[D_P_CS0], state[D_P_CS1], state[D_P_SEQ], clocks, primary, snapshot):
                stats[ST_SYMBOLS_FULL] = 1
            state[D_SNAPSHOT_READ] = 1
        elif stopped == NEED_SPANS:
            spans = _grown(spans, 2 * spans.shape[0])
        else:
            flows = _grown(flows, state[D_FLOWS] + state[D_NEED])
            ann = _grown(ann, state[D_ANNS] + state[D_NEED])
    ne, nf, na, ns = (int(state[k]) for k in (D_EVENTS, D_FLOWS, D_ANNS, D_SPANS))
    ev = events[:, :ne]
    columns = (
        ev[EV_PACKET],
        ev[EV_TS],
        ev[EV_TYPE].astype(np.int8),
        ev[EV_TRACK],
        ev[EV_NAME],
        np.ascontiguousarray(ev[EV_CAT0 : EV_CAT1 + 1].T),
        ev[EV_CORR],
        ev[EV_HAS_CORR].astype(np.uint8),
        ev[EV_VALUE].view(np.float64),
    )
    flows, ann, spans = flows[:nf], ann[:na], spans[:ns]
    flow_id = np.ascontiguousarray(flows[:, 0]).view(np.uint64)
    ann_double = np.ascontiguousarray(ann[:, 6]).view(np.float64)
    return (*columns, flow_id, flows[:, 1].copy(), flows[:, 2].astype(np.uint8), ann[:, :6].copy(), ann_double, spans)


def _grown(rows: np.ndarray, need: int) -> np.ndarray:
    """``rows``, or a copy with at least ``need`` rows (and at least twice as many) when it has fewer."""
    if rows.shape[0] >= need:
        return rows
    out = np.empty((max(int(need), 2 * rows.shape[0]), rows.shape[1]), rows.dtype)
    out[: rows.shape[0]] = rows
    return out


# numba's own pipeline: di's (ScalarKernelCompiler) compiles this kernel to other code (tests/test_jitpipeline.py)
@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True)
def _track_event(buf, packet, interned, seqs, sym, stats, ev, flows, an, state):
    """Read the TrackEvent of packet ``packet`` (``state[D_P_TE0]:state[D_P_TE1]``, on sequence ``state[D_P_SEQ]``)
    into column ``state[D_EVENTS]`` of ``ev``, its flow ids into ``flows`` and its annotations into ``an`` from
    rows ``state[D_FLOWS]`` and ``state[D_ANNS]``; the three counts grow when the event is kept (a function of
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


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _decode_packets(buf, n_packets, sym, stats, interned, seqs, clocks, primary, ev, spans, flows, an, state):
    """:func:`decode_packets` into the arrays it is given: ``ev`` (:data:`EV_ROWS`, n) int64 rows of the
    events (the counter value as its float64 bits), ``spans`` (kind (0 track descriptor, 1 di packet, 2
    thread descriptor), start, end, sequence), the flows as int64 rows (id bits, event, terminating) and the
    annotations as int64 rows (event, name, type, int value, span start, end, double's bits). Resumable: it
    starts and ends at ``state`` (the ``D_*`` slots: packet, byte position, counts of events, flows,
    annotations and spans, the current sequence's state; the ``D_P_*`` slots hold the packet's fields) and
    returns 0 when done, :data:`NEED_ROWS` / :data:`NEED_SPANS` when it stopped before a packet whose rows
    may not fit (grow them and call again), or :data:`NEED_SNAPSHOT` when it stopped at a packet's
    ClockSnapshot (read it, set ``state[D_SNAPSHOT_READ]`` and call again: it goes on with that packet).

    Compile hygiene: the packet's fields and the event's values live in ``state`` and ``ev``, not in
    locals: numba's SSA gives every local assigned on several paths a copy at each join, which made this
    kernel's IR half copies (issue 15)."""
    p, pos, end = state[D_PACKET], state[D_POS], buf.shape[0]
    ne, nf, na = state[D_EVENTS], state[D_FLOWS], state[D_ANNS]
    stopped = _ZERO
    while True:
        if not state[D_SNAPSHOT_READ]:  # else: go on with the packet whose ClockSnapshot the caller read
            if p >= n_packets:
                break
            at = pos
            key, pos = read_varint(buf, pos, end)
            if key != 10:
                pos = skip_field(buf, pos, end, key & 7)
                continue
            plen, pos = read_varint(buf, pos, end)
            if (
                nf + plen > flows.shape[0] or na + plen > an.shape[0]
            ):  # a flow id takes a byte at least, an annotation 2
                stopped, pos = NEED_ROWS, at
                state[D_NEED] = plen
                break
            b = pos + plen
            if not _packet_fields(buf, pos, b, spans, state, stats):  # nothing of this packet is kept yet
                stopped, pos = NEED_SPANS, at  # decode it again with more span rows
                break
            pos = b
            p += 1
            seq = state[D_P_SEQ]
            for k in range(state[D_P_SPANS0], state[D_SPANS]):  # the packet's sequence id may come after its descriptor
                spans[k, 3] = seq
                if spans[k, 0] == 2:
                    h = _seq_row(seqs, seq, stats)
                    if h >= 0:
                        seqs[2][h, Q_THREAD] = 1
            if seq != state[D_SEQ]:  # the sequence's state, kept in ``state`` while its packets follow each other
                state[D_SEQ] = seq
                h = find(seqs[0], seq, NO_KEY, NO_KEY)
                for k in range(3):  # Q_GEN, Q_TRACK, Q_CLOCK -> D_GEN, D_TRACK, D_CLOCK
                    state[D_GEN + k] = seqs[2][h, k] if h >= 0 else 0
            if state[D_P_FLAGS] & F.SEQ_INCREMENTAL_STATE_CLEARED:
                state[D_GEN] += 1
                state[D_TRACK], state[D_CLOCK] = 0, 0
                h = _seq_row(seqs, seq, stats)
                if h >= 0:
                    for k in range(3):
                        seqs[2][h, k] = state[D_GEN + k]
            if state[D_P_CS0] >= 0:  # the caller reads it (clocks.read_snapshot) and calls again
                stopped = NEED_SNAPSHOT
                break
        state[D_SNAPSHOT_READ] = 0
        seq, gen, cs0 = state[D_P_SEQ], state[D_GEN], state[D_P_CS0]
        if state[D_P_DF0] >= 0 and _defaults(buf, state[D_P_DF0], state[D_P_DF1], state, stats):
            h = _seq_row(seqs, seq, stats)
            if h >= 0:
                seqs[2][h, Q_TRACK], seqs[2][h, Q_CLOCK] = state[D_TRACK], state[D_CLOCK]
        if state[D_P_HAS_TS] and cs0 < 0:  # a snapshot packet's own timestamp does not advance its clocks
            clock = state[D_P_CLOCK]
            ts, known = to_trace_ns(clocks, primary, seq, clock if clock >= 0 else state[D_CLOCK], state[D_P_TS])
            state[D_P_TS] = ts
            if not known:
                stats[ST_CLOCK_ID] += 1
        if state[D_P_IN0] >= 0:
            _interned(buf, state[D_P_IN0], state[D_P_IN1], interned, seq, gen, sym, stats)
        if state[D_P_TE0] < 0:
            continue
        state[D_EVENTS], state[D_FLOWS], state[D_ANNS] = ne, nf, na
        _track_event(buf, p - 1, interned, seqs, sym, stats, ev, flows, an, state)
        ne, nf, na = state[D_EVENTS], state[D_FLOWS], state[D_ANNS]
    state[D_PACKET], state[D_POS], state[D_EVENTS], state[D_FLOWS], state[D_ANNS] = p, pos, ne, nf, na
    return stopped
