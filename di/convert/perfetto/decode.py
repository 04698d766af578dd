"""numba decoder of Perfetto protobuf traces: TracePackets -> flat event columns.

One pass over the bytes keeps each sequence's incremental state (interned
names, categories, debug-annotation names and strings, the default track of
TracePacketDefaults), reset when a packet clears it, and emits per TrackEvent:
packet index, timestamp (ns), type, track uuid, name and up to two category
symbols, correlation id, counter value; per flow id: event, id, terminating;
per debug annotation: event, name, value. Strings are byte spans of the
buffer interned into dense symbols (:mod:`di.convert.symbols`).
TrackDescriptors and di's own packet are returned as spans for Python.

The kernels, one module per part of the message: :mod:`.slots` (the layouts
of the arrays and ``state`` slots they share, the field masks), :mod:`.packets`
(counting the packets, a packet's own fields and its TracePacketDefaults),
:mod:`.interned` (the sequences' interned entries and per-sequence table),
:mod:`.trackevent` (a TrackEvent, its flow ids and debug annotations); the
loop over the packets is here. Every name of the parts is read from here too.

Dropped, and counted in ``stats``: packets with TrackEvents that have no
timestamp, legacy events (``legacy_event`` phases), events of unknown type.

The per-sequence state (interned entries, generation, default track and
clock, thread sequences) and the clocks are array hash tables
(:mod:`di.convert.inttable`), not numba typed Dicts, which cost ~55 compiles;
they are sized from the symbol table and, like it, grow between packets when
three quarters full (:data:`~.slots.NEED_TABLES`); one that fills inside a packet
makes the caller decode again with bigger ones. Counters and ids passed to helpers
are ``np.int64`` (``_ZERO``, the ``K_*`` kinds), never literal ints, so that
each helper compiles once (see :mod:`di.convert.perfetto.encode`).

The kernels allocate nothing (numba compiles its ``np.empty``/``np.zeros``
overloads once per signature into every cold start): :func:`decode_packets`
makes every array, and :func:`_decode_packets` stops before a packet whose
flow, annotation or span rows may not fit, to be called again with bigger
ones. Sets of field numbers are bit masks (:func:`~.slots._has`), not tuple ``in``
tests, and the small helpers that only call other kernels are inlined leaves
(each compiled function costs 0.03-0.1 CPU-s cold beyond its size).

What numba's cold compile costs here (issue 15), and how the kernels keep it
down, measured per kernel (``bench/cold_start.py``):

* Locals assigned on several paths: numba's SSA gives each a copy at every
  join, and its passes (SSA, rewrites, type inference, lowering) walk them
  all. The packet's fields (:func:`~.packets._packet_fields`) live in ``state`` slots
  (``D_P_*``) and the event's values in its column of the events array, not
  in locals: the decode kernel's IR went from 5,453 to 3,137 statements.
* Size: numba's time grows faster than a kernel's size, so the TrackEvent is
  read by a kernel of its own (:func:`~.trackevent._track_event`), called once per event
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
from di.convert.inttable import NO_KEY, find, grown, new_table
from di.convert.symbols import grown_table
from di.convert.perfetto.clocks import CLOCK_WIDTH, MAX_CLOCKS, SNAPSHOT_ROWS, read_snapshot, to_trace_ns
from di.convert.perfetto.interned import _interned, _seq_row
from di.convert.perfetto.packets import _defaults, _packet_fields
from di.convert.perfetto.protobuf import read_varint, skip_field
from di.convert.perfetto.slots import (
    _ONE,
    _SEQ_WIDTH,
    _ZERO,
    D_ANNS,
    D_CLOCK,
    D_EVENTS,
    D_FLOWS,
    D_GEN,
    D_NEED,
    D_P_CLOCK,
    D_P_CS0,
    D_P_CS1,
    D_P_DF0,
    D_P_DF1,
    D_P_FLAGS,
    D_P_HAS_TS,
    D_P_IN0,
    D_P_IN1,
    D_P_SEQ,
    D_P_SPANS0,
    D_P_TE0,
    D_P_TS,
    D_PACKET,
    D_POS,
    D_SEQ,
    D_SNAPSHOT_READ,
    D_SPANS,
    D_TRACK,
    DECODE_SLOTS,
    EV_CAT0,
    EV_CAT1,
    EV_CORR,
    EV_HAS_CORR,
    EV_NAME,
    EV_PACKET,
    EV_ROWS,
    EV_TRACK,
    EV_TS,
    EV_TYPE,
    EV_VALUE,
    NEED_ROWS,
    NEED_SNAPSHOT,
    NEED_SPANS,
    NEED_TABLES,
    Q_CLOCK,
    Q_THREAD,
    Q_TRACK,
    ST_CLOCK_ID,
    ST_SYMBOLS_FULL,
    T_CLOCKS,
    T_INTERNED,
    T_SEQUENCES,
    T_SYMBOLS,
)
from di.convert.perfetto.trackevent import _track_event

# the rest of the names read from this module (the reader, the annotations, the tests), defined in its parts
from di.convert.perfetto.interned import (  # noqa: F401
    _lookup,
    _remember,
    _sym,
    _thread_sequence,
    sequence_track,
)
from di.convert.perfetto.packets import count_packets  # noqa: F401
from di.convert.perfetto.slots import (  # noqa: F401
    _ANNOTATION_NESTED,
    _ANNOTATION_VARINTS,
    _FLOW_FIELDS,
    _INTERNED_TABLES,
    _MINUS_ONE,
    _NAN_BITS,
    _OLD_FLOW_FIELDS,
    _PACKET_VARINTS,
    _TERMINATING_FIELDS,
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
    K_ANN,
    K_CAT,
    K_NAME,
    K_STR,
    Q_GEN,
    ST_BAD_TYPE,
    ST_LEGACY,
    ST_MALFORMED,
    ST_NO_TIMESTAMP,
    ST_UNRESOLVED_IID,
    STAT_NAMES,
    D_P_TE1,
    _has,
    _mask,
)
from di.convert.perfetto.trackevent import _annotation, _category, _ids  # noqa: F401


def decode_packets(
    buf: np.ndarray, n_packets: int, sym: tuple[np.ndarray, ...], stats: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Decode every TracePacket; see the module docstring. Returns (packet, ts, type, track, name,
    categories (2, n), correlation id, has correlation, counter value, flow ids (uint64), flow events,
    flow terminating (uint8), annotations (5, n: rows of event, name, type, value (int, a double's bits or a text's
    span start), text span end; each row contiguous), annotation doubles (the value row as float64: a double's where
    the type is A_DOUBLE), spans (n, 4: kind, start, end, sequence), the symbol table: ``sym``, or a bigger one with
    the same ids when it grew)."""
    slots = sym[0].shape[0]  # a power of two, twice the symbol capacity
    tables = (new_table(slots, _ONE), new_table(max(slots // 16, 16), _SEQ_WIDTH))
    clocks = new_table(max(slots // 16, 16), CLOCK_WIDTH)
    # Every array is made here, not in the kernel: numba compiles its np.empty/np.zeros overloads
    # once per signature into every cold process, and a kernel that returns arrays lowers more code.
    events = np.empty((EV_ROWS, n_packets), np.int64)
    spans = np.empty((max(n_packets, 16), 4), np.int64)
    # room for two annotations a packet (di's slices carry args, bytes and Kineto's ids): pages never written cost
    # nothing, and a trace of five million annotations doubled its rows twenty times from 16; column-wise (a row per
    # field), so that each field is read contiguously
    flows, ann = np.empty((16, 3), np.int64), np.empty((5, max(2 * n_packets, 16)), np.int64)
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
        elif stopped == NEED_TABLES:
            crowded = int(state[D_NEED])
            if crowded & T_SYMBOLS:
                sym = grown_table(buf, sym)
            tables = tuple(grown(t) if crowded & bit else t for t, bit in zip(tables, (T_INTERNED, T_SEQUENCES)))
            if crowded & T_CLOCKS:
                clocks = grown(clocks)
        else:
            flows = _grown(flows, state[D_FLOWS] + state[D_NEED])
            ann = _wider(ann, state[D_ANNS] + state[D_NEED])
    return (*_columns(events, flows, ann, spans, state), sym)


def _columns(
    events: np.ndarray, flows: np.ndarray, ann: np.ndarray, spans: np.ndarray, state: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The rows :func:`_decode_packets` filled (their counts in ``state``) as the columns of :func:`decode_packets`."""
    ne, nf, na, ns = (int(state[k]) for k in (D_EVENTS, D_FLOWS, D_ANNS, D_SPANS))
    ev = events[:, :ne]
    columns = (
        ev[EV_PACKET],
        ev[EV_TS],
        ev[EV_TYPE].astype(np.int8),
        ev[EV_TRACK],
        ev[EV_NAME],
        ev[EV_CAT0 : EV_CAT1 + 1],  # a view: each row contiguous
        ev[EV_CORR],
        ev[EV_HAS_CORR].astype(np.uint8),
        ev[EV_VALUE].view(np.float64),
    )
    flows, spans = flows[:nf], spans[:ns]
    flow_id = np.ascontiguousarray(flows[:, 0]).view(np.uint64)
    ann_fields, ann_double = ann[:, :na], ann[3, :na].view(np.float64)  # views: no copy
    return (*columns, flow_id, flows[:, 1].copy(), flows[:, 2].astype(np.uint8), ann_fields, ann_double, spans)


def _grown(rows: np.ndarray, need: int) -> np.ndarray:
    """``rows``, or a copy with at least ``need`` rows (and at least twice as many) when it has fewer."""
    if rows.shape[0] >= need:
        return rows
    out = np.empty((max(int(need), 2 * rows.shape[0]), rows.shape[1]), rows.dtype)
    out[: rows.shape[0]] = rows
    return out


def _wider(columns: np.ndarray, need: int) -> np.ndarray:
    """``columns`` (a row per field), or a copy with room for at least ``need`` (and at least twice as many)."""
    if columns.shape[1] >= need:
        return columns
    out = np.empty((columns.shape[0], max(int(need), 2 * columns.shape[1])), columns.dtype)
    out[:, : columns.shape[1]] = columns
    return out


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _decode_packets(buf, n_packets, sym, stats, interned, seqs, clocks, primary, ev, spans, flows, an, state):
    """:func:`decode_packets` into the arrays it is given: ``ev`` (:data:`EV_ROWS`, n) int64 rows of the
    events (the counter value as its float64 bits), ``spans`` (kind (0 track descriptor, 1 di packet, 2
    thread descriptor), start, end, sequence), the flows as int64 rows (id bits, event, terminating) and the
    annotations as int64 columns (rows of event, name, type, value (int, double's bits or span start), span
    end). Resumable: it starts and ends at ``state`` (the ``D_*`` slots: packet, byte position, counts of events, flows,
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
                nf + plen > flows.shape[0] or na + plen > an.shape[1]
            ):  # a flow id takes a byte at least, an annotation 2
                stopped, pos = NEED_ROWS, at
                state[D_NEED] = plen
                break
            crowded = (
                T_SYMBOLS * (4 * sym[3][0] > 3 * sym[1].shape[0])
                | T_INTERNED * (4 * interned[1][0] > 3 * (interned[0].shape[0] >> 1))
                | T_SEQUENCES * (4 * seqs[1][0] > 3 * (seqs[0].shape[0] >> 1))
                | T_CLOCKS * (4 * clocks[1][0] > 3 * (clocks[0].shape[0] >> 1))
            )
            if crowded:  # grown before they fill: a table full inside a packet means decoding again
                stopped, pos = NEED_TABLES, at
                state[D_NEED] = crowded
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
