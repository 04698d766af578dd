"""Layouts the Perfetto decode kernels share (:mod:`di.convert.perfetto.decode`).

The int64 columns and slots each kernel reads and writes, by name: annotation value types (``A_*``), the
``stats`` slots (``ST_*``) and what they count (:data:`STAT_NAMES`), the kinds of interned entries (``K_*``),
the per-sequence table's columns (``Q_*``), the resumable decode's ``state`` slots (``D_*``, the packet's fields
``D_P_*``), the events array's rows (``EV_*``) and why a decode stopped (``NEED_*``); typed constants, so that
each kernel compiles once (``_ZERO``, ``_ONE``, ``_MINUS_ONE``); and sets of field numbers as bit masks
(:func:`_mask`) with their test (:func:`_has`), a leaf kernel inlined where it is called.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.perfetto import fields as F

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
NEED_ROWS, NEED_SPANS, NEED_SNAPSHOT, NEED_TABLES = np.int64(1), np.int64(2), np.int64(3), np.int64(4)
"""What :func:`_decode_packets` returns when it stopped before a packet: its flow and annotation rows may not
fit (``state[D_NEED]`` more rows of each, at most), or its span rows do not, or a table is three quarters full
(``state[D_NEED]``: the ``T_*`` bits of those that are); or within a packet, for the caller to read its
ClockSnapshot (``state[D_P_CS0]:state[D_P_CS1]``); 0 when every packet is decoded."""
T_SYMBOLS, T_INTERNED, T_SEQUENCES, T_CLOCKS = np.int64(1), np.int64(2), np.int64(4), np.int64(8)
"""Bits of the tables :data:`NEED_TABLES` asks to grow: the symbols, the interned entries, the per-sequence table,
the clocks. Grown at three quarters, between packets, they never fill inside a packet but for one that adds more
entries than a quarter of a table holds (16,384 symbols at first); then the caller decodes again from the start with
bigger ones (``stats[ST_SYMBOLS_FULL]``)."""


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, inline="always")
def _has(mask, field):
    """Whether field number ``field`` is in ``mask`` (:func:`_mask`)."""
    return ((mask >> (field & 63)) & 1 != 0) & (field >> 6 == 0)  # no chained or short-circuit test: no branches
