"""numba kernels writing TrackEvent packets straight into a byte buffer.

One packet sequence per track. Its first packet clears the incremental state
and sets the sequence's default track (TracePacketDefaults), so event packets
carry no track uuid; each later packet is flagged as needing that state.
An event packet interns a name, category or debug-annotation name the first
time its sequence uses it (``iid`` = 1 + the string's code within its kind,
the same on every sequence). Per track, events come in (start, -end) order
and nest (:mod:`di.convert.lanes`); a stack closes them: every slice ending at
or before the next event's start gets its end packet first, so at equal
timestamps END comes before BEGIN. Zero-length slices get BEGIN and END at
once; instants one INSTANT packet.

The kernels are resumable: they write into ``out`` from a given position
(the bytes before it are the caller's: the part of a disk block not yet
written, :class:`di.convert.perfetto.writer._Output`), stop when the next
packet might not fit and return where they stopped; the caller writes the
bytes out and calls again with the same state array, so memory stays
bounded whatever the trace size.

The kernels take grouped arrays, one row per field (the row names below),
as the Chrome scanner does (:mod:`di.convert.chrome.scan`):

* ``events``, a tuple of ``len(EVENT_ROWS)`` int64 arrays of n (read-only, so that the tuple has one type): per
  event its times (ns, >= 0) and args spans, the columns as they are, not
  copied into one matrix (on the 1.2 M-event real-shaped trace the matrix was 58 MB of fresh memory, 14,000 first
  touches of a page); ``ints``, ``valid``, ``int_cols``: the nullable integer columns read in place
  (:mod:`di.convert.intcolumns`), ``corr`` (:data:`I_CORR`), ``bytes`` (:data:`I_BYTES`), then the optional
  columns of :data:`LIFTED` the trace has, each written as the integer debug annotation whose name is row
  ``int_cols[INT_NAME, c]`` of ``strings``; its strings (:mod:`di.convert.perfetto.strings`): name
  ``code_row[CODE_NAME, name_of[i]]`` and ``src_cat`` ``code_row[CODE_SRC, src_of[i]]`` (-1: none), rows of
  ``strings`` by uint32 code; ``flags`` (uint8): :data:`FLAG_INSTANT`, :data:`FLAG_ARGS_NULL` and the canonical
  category's index from bit :data:`CAT_SHIFT` on (row ``FIRST_CAT +`` it of ``strings``); the args JSON text of
  event i
  is ``args[events[E_ARGS_START][i]:events[E_ARGS_END][i]]`` (spans, not offsets: a loaded trace's texts are read
  where they are, in the order of their buffer).
* ``strings``, int64 (``len(STRING_ROWS)``, m + 1): for every string that
  may be interned (annotation names, categories, event names) its offset in
  ``string_bytes``, its iid, the InternedData field it goes into, and the
  last track whose sequence interned it (-1: none yet; written by the kernel).
* ``tracks``, int64 (``len(TRACK_ROWS)``, tracks + 1): the events of track t
  are ``emit[ptr[t]:ptr[t + 1]]``, written on sequence ``seq[t]`` with default
  track ``uuid[t]``.
* flows: the flow ids of event i are ``flow_id[flow_ptr[i]:flow_ptr[i + 1]]``,
  each with :data:`FLOW_TERMINATING` / :data:`FLOW_AT_END` bits in ``flow_bits``.

Compile hygiene (numba's cold compile, issue 15; the rule for every numba
module of di): ``inline="always"`` only on leaf helpers that inline nothing
themselves. Chains of inlined helpers (``put_varint`` -> ``_put_interned`` ->
``_begin_packet``, 206 inlined bodies) made numba's IR inliner quadratic:
~90 s for one kernel. The protobuf writers and size helpers are plain calls
(LLVM inlines the small ones after numba's typing). The BEGIN and END packet
writers are written out in :func:`encode_events` itself, once each (a
zero-length slice is closed through the stack at the next step, which writes
its END right after its BEGIN as before): as calls that pass every array
field by field they made the kernel twice as slow, and as ``inline="always"``
helpers numba's inliner deep-copied their IR, ~25% of the kernel's compile.
The per-packet helpers (``_packet_head``, ``_put_flows``) are
plain calls, as fast as inlined (``bench/realshape.py``). Every integer passed
to a plain call is typed (``np.int64``), never a Python int
literal, so each function compiles once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler
from di.schema import optional_args_keys

from di.convert.perfetto import fields as F
from di.convert.bytewords import copy_bytes, store_u64
from di.convert.intcolumns import INT_AT, INT_ROWS, INT_VALID, NULL, value_at
from di.convert.perfetto.protobuf import LEN, VARINT, FIXED64, put_varint, tag, varint_size

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

LIFTED = optional_args_keys()
"""(column, args key) of the optional events columns lifted out of ``args`` (Kineto's ids: ``ext_id`` <->
"External id", ...), in schema order: each non-null value is written as the integer debug annotation named by
its key."""
ANNOTATION_NAMES = ("args", "bytes", *(key for _, key in LIFTED))
"""Interned debug-annotation names: iid 1 = "args" (the event's args JSON text), 2 = "bytes", 3... = the keys
of :data:`LIFTED`. They are the first rows of ``strings``."""
STR_ARGS, STR_BYTES, STR_LIFTED = np.int64(0), np.int64(1), np.int64(2)
"""Rows of ``strings`` of the annotation names, the first of :data:`LIFTED`'s (typed: passed to plain calls)."""
ANN_ARGS, ANN_BYTES = np.int64(1), np.int64(2)
"""Their iids."""
assert len(ANNOTATION_NAMES) < 128  # their iids and rows are stored as one byte (B_ANN_ARGS, lifted ids' iids)
LIFTED_BYTES = np.int64(32 + max((len(key.encode()) for _, key in LIFTED), default=0))
"""Bytes one lifted id may add to a packet: its annotation (tag, length, name iid, int tag, 10-byte varint: 15)
and its name's InternedData entry (tag, length, iid, name tag and length, the name: 6 + the name)."""

EVENT_ROWS = ("start", "end", "args_start", "args_end")
E_START, E_END, E_ARGS_START, E_ARGS_END = range(len(EVENT_ROWS))
I_CORR, I_BYTES, I_LIFTED = np.int64(0), np.int64(1), np.int64(2)
"""Columns of ``int_cols``: ``corr``, ``bytes``, then the lifted ones the trace has."""
INT_NAME = len(INT_ROWS)
"""Row of ``int_cols`` after :data:`~di.convert.intcolumns.INT_ROWS`: the row of ``strings`` of a lifted
column's annotation name."""
CODE_NAME, CODE_SRC = 0, 1
"""Rows of ``code_row``."""
FLAG_INSTANT, FLAG_ARGS_NULL, CAT_SHIFT = 1, 2, 2
"""Bits of ``flags``: an instant; its args text is null; the category's index from this bit on."""
FIRST_CAT = np.int64(len(ANNOTATION_NAMES))
"""Row of ``strings`` of the first canonical category (after the annotation names)."""

STRING_ROWS = ("off", "iid", "field", "seen")
STR_OFF, STR_IID, STR_FIELD, STR_SEEN = range(len(STRING_ROWS))

TRACK_ROWS = ("ptr", "seq", "uuid")
TRK_PTR, TRK_SEQ, TRK_UUID = range(len(TRACK_ROWS))

FLOW_TERMINATING, FLOW_AT_END = 1, 2
"""Bits of ``flow_bits``: the id goes into terminating_flow_ids (else flow_ids); on the slice's end packet
(else on its begin or instant packet)."""

SLACK = 192
"""Bytes reserved per packet beyond its strings and flow ids (fixed fields, varints at most 10 bytes)."""
FLOW_BYTES = 10
"""Bytes of one flow id field: tag (2) and fixed64 (8)."""

NONE = NULL
"""An absent integer (a null corr, bytes or lifted id); a value equal to it is written as absent too."""

# state array slots
S_TRACK, S_CURSOR, S_HEADER, S_SP, S_NEED = 0, 1, 2, 3, 4
STATE_SLOTS = 5

# field values the kernels write, typed (see the module docstring)
_STATE_CLEARED = np.int64(F.SEQ_INCREMENTAL_STATE_CLEARED)
_COUNTER = np.int64(F.TYPE_COUNTER)
_AT_BEGIN, _AT_END = np.uint8(0), np.uint8(FLOW_AT_END)
"""Which flow ids a packet carries: those of the slice's start, or of its end (``flow_bits & FLOW_AT_END``)."""
_COUNTER_EVENT = np.int64(2 + 2 + 8)
"""Bytes of a counter TrackEvent: type, double value tag, 8 value bytes."""
_FIXED = np.int64(2 + 1)
"""Bytes of the sequence flags field and of the TrackEvent's tag, beside the varints of a packet."""


def _byte(v: int) -> np.uint8:
    """A tag or field value whose varint is one byte (below 128), written by a plain store."""
    assert 0 <= v < 128, v
    return np.uint8(v)


B_PACKET, B_TS, B_SEQ, B_FLAGS = _byte(T_PACKET), _byte(T_TS), _byte(T_SEQ), _byte(T_FLAGS)
B_EVENT, B_TYPE, B_NAME_IID, B_CAT_IID = _byte(T_EVENT), _byte(T_TYPE), _byte(T_NAME_IID), _byte(T_CAT_IID)
B_INTERNED, B_I_IID, B_I_NAME = _byte(T_INTERNED), _byte(T_I_IID), _byte(T_I_NAME)
B_ANN, B_A_NAME_IID, B_A_JSON, B_A_INT = _byte(T_ANN), _byte(T_A_NAME_IID), _byte(T_A_JSON), _byte(T_A_INT)
B_NEEDS_STATE, B_ANN_ARGS, B_ANN_BYTES = _byte(F.SEQ_NEEDS_INCREMENTAL_STATE), _byte(ANN_ARGS), _byte(ANN_BYTES)
B_SLICE_BEGIN, B_SLICE_END, B_INSTANT = _byte(F.TYPE_SLICE_BEGIN), _byte(F.TYPE_SLICE_END), _byte(F.TYPE_INSTANT)
"""One-byte varints (``B_`` + the name of the ``T_`` tag or value): stores, not calls of ``put_varint``, in the
per-packet code (fewer call sites for numba to type and lower; issue 15)."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _interned_size(strings, s):
    """Bytes string ``s`` adds to a packet's InternedData: its field tag, length, iid and name."""
    size = strings[STR_OFF, s + 1] - strings[STR_OFF, s]
    entry = 1 + varint_size(strings[STR_IID, s]) + 1 + varint_size(size) + size
    return 1 + varint_size(entry) + entry


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _put_interned(out, pos, strings, string_bytes, s):
    a, b = strings[STR_OFF, s], strings[STR_OFF, s + 1]
    iid = strings[STR_IID, s]
    pos = put_varint(out, pos, strings[STR_FIELD, s])
    pos = put_varint(out, pos, 1 + varint_size(iid) + 1 + varint_size(b - a) + b - a)
    out[pos] = B_I_IID
    pos = put_varint(out, pos + 1, iid)
    out[pos] = B_I_NAME
    pos = put_varint(out, pos + 1, b - a)
    return copy_bytes(out, pos, string_bytes, a, b)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _packet_head(out, pos, body, ts, seq):
    """Tag and length of a packet of ``body`` bytes, then its timestamp, sequence id and 'needs state' flag."""
    out[pos] = B_PACKET
    pos = put_varint(out, pos + 1, body)
    out[pos] = B_TS
    pos = put_varint(out, pos + 1, ts)
    out[pos] = B_SEQ
    pos = put_varint(out, pos + 1, seq)
    out[pos] = B_FLAGS
    out[pos + 1] = B_NEEDS_STATE
    return pos + 2


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _header(out, pos, seq, uuid):
    """The first packet of a sequence: state cleared, default track uuid."""
    ev_def = 1 + varint_size(uuid)
    defaults = 1 + (varint_size(ev_def) + ev_def)
    body = 1 + varint_size(seq) + 2 + 2 + (varint_size(defaults) + defaults)
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


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _flow_bytes(flow_ptr, flow_bits, i, at):
    """Bytes of the flow id fields of event i's packet ``at`` (its begin or its end): counted here, where the marks
    are read anyway, not in two columns of n made by the caller (50 MB of fresh memory on 1.2 M events)."""
    count = np.int64(0)
    for m in range(flow_ptr[i], flow_ptr[i + 1]):
        if flow_bits[m] & FLOW_AT_END == at:
            count += 1
    return FLOW_BYTES * count


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _put_flows(out, pos, flow_ptr, flow_id, flow_bits, i, at):
    for m in range(flow_ptr[i], flow_ptr[i + 1]):
        if flow_bits[m] & FLOW_AT_END == at:
            pos = put_varint(out, pos, T_TERM if flow_bits[m] & FLOW_TERMINATING else T_FLOW)
            store_u64(out, pos, flow_id[m])
            pos += 8
    return pos


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def encode_events(
    state,
    stack,
    out,
    start,
    tracks,
    emit,
    events,
    ints,
    valid,
    int_cols,
    name_of,
    src_of,
    code_row,
    flags,
    args,
    strings,
    string_bytes,
    flow_ptr,
    flow_id,
    flow_bits,
):
    """Write event packets of the tracks from ``state`` on into ``out`` from byte ``start`` (np.int64) until
    ``out`` is full; return the position after the last byte written.

    The arrays are described in the module docstring. ``state`` = [track, cursor in track, header written,
    stack size, bytes the next packets need], updated in place; ``stack`` holds the open slices. A return
    of ``start`` with tracks left means the next packets need more than ``out`` has left: ``state[S_NEED]``
    bytes.
    """
    pos = start  # np.int64, not a literal 0, which would compile the helpers it is passed to once more
    cap = out.shape[0]
    t, k, header, sp = state[S_TRACK], state[S_CURSOR], state[S_HEADER], state[S_SP]
    ntracks = tracks.shape[1] - 1
    nlifted = int_cols.shape[1] - I_LIFTED
    # the rows used per event, as 1-D arrays: numba lowers each 2-D index into more code
    start, end = events[E_START], events[E_END]
    args_start, args_end = events[E_ARGS_START], events[E_ARGS_END]
    text, iid_of, seen_by = strings[STR_OFF], strings[STR_IID], strings[STR_SEEN]
    track_ptr, track_seq, track_uuid = tracks[TRK_PTR], tracks[TRK_SEQ], tracks[TRK_UUID]
    int_at, int_valid, lifted_names = int_cols[INT_AT], int_cols[INT_VALID], int_cols[INT_NAME, I_LIFTED:]
    name_row, src_row = code_row[CODE_NAME], code_row[CODE_SRC]
    while t < ntracks:
        seq = track_seq[t]
        if header == 0:
            if pos + SLACK > cap:
                state[S_NEED] = SLACK
                break
            pos = _header(out, pos, seq, track_uuid[t])
            header = 1
        n = track_ptr[t + 1] - track_ptr[t]
        i = emit[track_ptr[t] + k] if k < n else -1
        if sp > 0 and (i < 0 or end[stack[sp - 1]] <= start[i]):
            top = stack[sp - 1]
            need = SLACK + FLOW_BYTES * (flow_ptr[top + 1] - flow_ptr[top])
            if pos + need > cap:
                state[S_NEED] = need
                break
            # the END packet of slice top
            ts = end[top]
            ev = 2 + _flow_bytes(flow_ptr, flow_bits, top, _AT_END)
            body = 1 + varint_size(ts) + 1 + varint_size(seq) + _FIXED + (varint_size(ev) + ev)
            pos = _packet_head(out, pos, body, ts, seq)
            out[pos] = B_EVENT
            pos = put_varint(out, pos + 1, ev)
            out[pos] = B_TYPE
            out[pos + 1] = B_SLICE_END
            pos += 2
            pos = _put_flows(out, pos, flow_ptr, flow_id, flow_bits, top, _AT_END)
            sp -= 1
            continue
        if i < 0:
            t += 1
            k = 0
            header = 0
            continue
        # an upper bound of the bytes of event i's begin and end packets together
        bits = flags[i]
        name, cat, src = name_row[name_of[i]], FIRST_CAT + (bits >> CAT_SHIFT), src_row[src_of[i]]
        need = text[name + 1] - text[name] + text[cat + 1] - text[cat] + args_end[i] - args_start[i]
        if src >= 0:
            need += text[src + 1] - text[src]
        need += 2 * SLACK + 32 + 2 * FLOW_BYTES * (flow_ptr[i + 1] - flow_ptr[i]) + LIFTED_BYTES * nlifted
        if pos + need > cap:
            state[S_NEED] = need
            break
        # the BEGIN or INSTANT packet of event i, interning what track t's sequence has not seen
        is_instant = bits & FLAG_INSTANT != 0
        corr = value_at(ints, valid, int_at[I_CORR], int_valid[I_CORR], i)
        nbytes = value_at(ints, valid, int_at[I_BYTES], int_valid[I_BYTES], i)
        has_args = bits & FLAG_ARGS_NULL == 0
        has_bytes = nbytes != NONE
        name_iid, cat_iid = iid_of[name], iid_of[cat]
        src_iid = iid_of[src] if src >= 0 else 0
        # interned entries this packet adds
        new_name = seen_by[name] != t
        new_cat = seen_by[cat] != t
        new_src = src >= 0 and seen_by[src] != t
        new_args = has_args and seen_by[STR_ARGS] != t
        new_bytes = has_bytes and seen_by[STR_BYTES] != t
        interned = 0
        if new_name:
            interned += _interned_size(strings, name)
        if new_cat:
            interned += _interned_size(strings, cat)
        if new_src:
            interned += _interned_size(strings, src)
        if new_args:
            interned += _interned_size(strings, STR_ARGS)
        if new_bytes:
            interned += _interned_size(strings, STR_BYTES)
        a0, a1 = args_start[i], args_end[i]
        ann_args = 2 + 1 + (varint_size(a1 - a0) + a1 - a0)
        ann_bytes = 2 + 1 + varint_size(nbytes)
        ev = 2 + 1 + varint_size(name_iid) + 1 + varint_size(cat_iid) + _flow_bytes(flow_ptr, flow_bits, i, _AT_BEGIN)
        if src >= 0:
            ev += 1 + varint_size(src_iid)
        if corr != NONE:
            ev += 2 + varint_size(corr)
        if has_args:
            ev += 1 + (varint_size(ann_args) + ann_args)
        if has_bytes:
            ev += 1 + (varint_size(ann_bytes) + ann_bytes)
        present = 0  # bit j: lifted id j is there
        for j in range(nlifted):  # the lifted ids: integer annotations, their names interned as "bytes" is
            v = value_at(ints, valid, int_at[I_LIFTED + j], int_valid[I_LIFTED + j], i)
            if v != NONE:
                present |= 1 << j
                s = lifted_names[j]
                if seen_by[s] != t:
                    interned += _interned_size(strings, s)
                ev += 2 + (2 + 1 + varint_size(v))  # tag, length (< 128), then name iid (< 128), int tag, value
        ts = start[i]
        body = 1 + varint_size(ts) + 1 + varint_size(seq) + _FIXED + (varint_size(ev) + ev)
        if interned:
            body += 1 + (varint_size(interned) + interned)
        pos = _packet_head(out, pos, body, ts, seq)
        if interned:
            out[pos] = B_INTERNED
            pos = put_varint(out, pos + 1, interned)
            if new_name:
                pos = _put_interned(out, pos, strings, string_bytes, name)
                seen_by[name] = t
            if new_cat:
                pos = _put_interned(out, pos, strings, string_bytes, cat)
                seen_by[cat] = t
            if new_src:
                pos = _put_interned(out, pos, strings, string_bytes, src)
                seen_by[src] = t
            if new_args:
                pos = _put_interned(out, pos, strings, string_bytes, STR_ARGS)
                seen_by[STR_ARGS] = t
            if new_bytes:
                pos = _put_interned(out, pos, strings, string_bytes, STR_BYTES)
                seen_by[STR_BYTES] = t
            for j in range(nlifted):
                s = lifted_names[j]
                if present >> j & 1 and seen_by[s] != t:
                    pos = _put_interned(out, pos, strings, string_bytes, s)
                    seen_by[s] = t
        out[pos] = B_EVENT
        pos = put_varint(out, pos + 1, ev)
        out[pos] = B_TYPE
        out[pos + 1] = B_INSTANT if is_instant else B_SLICE_BEGIN
        out[pos + 2] = B_NAME_IID
        pos = put_varint(out, pos + 3, name_iid)
        out[pos] = B_CAT_IID
        pos = put_varint(out, pos + 1, cat_iid)
        if src >= 0:
            out[pos] = B_CAT_IID
            pos = put_varint(out, pos + 1, src_iid)
        if corr != NONE:
            pos = put_varint(out, pos, T_CORR)
            pos = put_varint(out, pos, corr)
        if has_args:
            out[pos] = B_ANN
            pos = put_varint(out, pos + 1, ann_args)
            out[pos] = B_A_NAME_IID
            out[pos + 1] = B_ANN_ARGS
            out[pos + 2] = B_A_JSON
            pos = put_varint(out, pos + 3, a1 - a0)
            pos = copy_bytes(out, pos, args, a0, a1)  # one memcpy, no function of its own to compile
        if has_bytes:
            out[pos] = B_ANN
            pos = put_varint(out, pos + 1, ann_bytes)
            out[pos] = B_A_NAME_IID
            out[pos + 1] = B_ANN_BYTES
            out[pos + 2] = B_A_INT
            pos = put_varint(out, pos + 3, nbytes)
        for j in range(nlifted):
            if present >> j & 1:
                v = ints[int_at[I_LIFTED + j] + i]
                out[pos] = B_ANN
                out[pos + 1] = 2 + 1 + varint_size(v)
                out[pos + 2] = B_A_NAME_IID
                out[pos + 3] = iid_of[lifted_names[j]]
                out[pos + 4] = B_A_INT
                pos = put_varint(out, pos + 5, v)
        pos = _put_flows(out, pos, flow_ptr, flow_id, flow_bits, i, _AT_BEGIN)
        if not is_instant:  # a zero-length slice ends before the next event starts: at the next step
            stack[sp] = i
            sp += 1
        k += 1
    state[S_TRACK], state[S_CURSOR], state[S_HEADER], state[S_SP] = t, k, header, sp
    return pos


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def encode_counters(state, out, start, series_ptr, order, series_seq, series_uuid, ts, value_bits):
    """Write counter packets (double values, bits as uint64) of the series from ``state`` on; see :func:`encode_events`
    (the next packet needs at most :data:`SLACK` bytes)."""
    pos = start
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
        body = 1 + varint_size(ts[j]) + 1 + varint_size(seq) + _FIXED + (varint_size(_COUNTER_EVENT) + _COUNTER_EVENT)
        pos = _packet_head(out, pos, body, ts[j], seq)
        pos = put_varint(out, pos, T_EVENT)
        pos = put_varint(out, pos, _COUNTER_EVENT)
        pos = put_varint(out, pos, T_TYPE)
        pos = put_varint(out, pos, _COUNTER)
        pos = put_varint(out, pos, T_DOUBLE)
        store_u64(out, pos, value_bits[j])
        pos += 8
        k += 1
    state[S_TRACK], state[S_CURSOR], state[S_HEADER] = t, k, header
    return pos
