"""Packet timestamps on other clocks -> the trace clock, from ClockSnapshots (numba).

A ClockSnapshot gives each clock's value at one instant; the trace clock is
its ``primary_trace_clock`` (BOOTTIME by default). A packet whose
``timestamp_clock_id`` (or its sequence's default) names another clock gets
``trace_ns = primary_at_snapshot + (value - value_at_snapshot) * unit_multiplier_ns``,
from the latest snapshot holding that clock. Clock ids 64-127 belong to their
sequence; an incremental one carries deltas from the sequence's previous
timestamp on that clock (what the Perfetto SDK writes for TrackEvents).
Timestamps on a clock no snapshot defines are kept as they are (counted).

The clocks are an array hash table (:mod:`di.convert.inttable`) keyed by
(scope: the sequence for its own clocks, else -1; clock id), one row of
:data:`CLOCK_WIDTH` values each, not a numba typed Dict (see
:mod:`di.convert.perfetto.decode`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.perfetto import fields as F
from di.convert.inttable import NO_KEY, claim, find
from di.convert.perfetto.protobuf import read_varint, skip_field

C_INCREMENTAL, C_MULT, C_AT_SNAPSHOT, C_TRACE_AT_SNAPSHOT, C_LAST = range(5)
CLOCK_WIDTH = np.int64(5)
"""Values per clock: incremental, unit multiplier ns, value at snapshot, trace ns at snapshot, last value."""
MAX_CLOCKS = 64
"""Clocks read from one ClockSnapshot (more are ignored)."""
SNAPSHOT_ROWS = 4
"""Rows of the scratch array :func:`read_snapshot` takes: ids, values, incremental, unit multipliers."""


@njit(cache=True, no_cfunc_wrapper=True)
def read_snapshot(buf, a, b, seq, clocks, primary, snapshot):
    """Record the clocks of a ClockSnapshot (buf[a:b]) in ``clocks`` (keys, count, values); ``primary[0]``
    is the trace clock id; ``snapshot`` is int64 scratch (:data:`SNAPSHOT_ROWS`, :data:`MAX_CLOCKS`), made by
    the caller (numba would compile its allocation overloads into every cold start). False when the clock
    table is full (decode again with a bigger one)."""
    ids, values, incremental, mult = snapshot[0], snapshot[1], snapshot[2], snapshot[3]
    for k in range(MAX_CLOCKS):
        ids[k], values[k], incremental[k], mult[k] = 0, 0, 0, 1
    n = 0
    pos = a
    while pos < b:
        key, pos = read_varint(buf, pos, b)
        if pos < 0:
            return True
        if key == (F.SNAPSHOT_PRIMARY_CLOCK << 3):
            v, pos = read_varint(buf, pos, b)
            primary[0] = v
        elif key == (F.SNAPSHOT_CLOCKS << 3 | 2) and n < MAX_CLOCKS:
            m, pos = read_varint(buf, pos, b)
            if pos < 0 or m < 0 or m > b - pos:  # runs past the snapshot: malformed, the clocks read so far stand
                break
            q, qe = pos, pos + m
            while 0 <= q < qe:
                k2, q = read_varint(buf, q, qe)
                if q < 0:
                    break
                if k2 & 7 == 0:
                    v, q = read_varint(buf, q, qe)
                    field = k2 >> 3
                    if field == F.CLOCK_ID:
                        ids[n] = v
                    elif field == F.CLOCK_TIMESTAMP:
                        values[n] = v
                    elif field == F.CLOCK_IS_INCREMENTAL:
                        incremental[n] = v
                    elif field == F.CLOCK_UNIT_MULTIPLIER_NS and v > 0:
                        mult[n] = v
                else:
                    q = skip_field(buf, q, qe, k2 & 7)
            n += 1
            pos = qe
        else:
            pos = skip_field(buf, pos, b, key & 7)
            if pos < 0:
                return True
    anchor = -1
    for k in range(n):
        if ids[k] == primary[0]:
            anchor = k
    if anchor < 0:
        return True
    trace_ns = values[anchor] * mult[anchor]
    for k in range(n):
        scope = seq if ids[k] >= F.FIRST_SEQUENCE_CLOCK else -1
        h = claim(clocks[0], clocks[1], scope, ids[k], NO_KEY)
        if h < 0:
            return False
        row = clocks[2][h]
        row[C_INCREMENTAL], row[C_MULT], row[C_AT_SNAPSHOT] = incremental[k], mult[k], values[k]
        row[C_TRACE_AT_SNAPSHOT], row[C_LAST] = trace_ns, values[k]
    return True


@njit(cache=True, _nrt=False, inline="always")
def to_trace_ns(clocks, primary, seq, clock_id, ts):
    """(trace ns, True) for a timestamp on ``clock_id``; (ts, False) when no snapshot defines that clock."""
    if clock_id == 0 or clock_id == primary[0]:
        return ts, True
    h = find(clocks[0], seq if clock_id >= F.FIRST_SEQUENCE_CLOCK else -1, clock_id, NO_KEY)
    if h < 0:
        return ts, False
    row = clocks[2][h]
    value = ts
    if row[C_INCREMENTAL]:
        value = row[C_LAST] + ts
        row[C_LAST] = value
    return row[C_TRACE_AT_SNAPSHOT] + (value - row[C_AT_SNAPSHOT]) * row[C_MULT], True
