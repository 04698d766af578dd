"""Records of each location -> events (regions, instants, RMA copies), in one numba pass.

Input: the rows of :mod:`di.convert.otf2.records` of every location,
concatenated location after location, and ``bounds``: ``rows[bounds[i]:bounds[i+1]]``
are the rows of location ``i`` (dense location index).

Definitions (per location, records in file order = time order):

* Enter/Leave pair up on a stack. A Leave on an empty stack is dropped
  (counted); a Leave whose region differs from the innermost open one still
  closes it (counted). Regions still open at the end close at the location's
  last record time (counted).
* RmaPut/RmaGet open a copy that the first later RmaOpCompleteBlocking with
  the same (window, matching id) closes (first in, first out); a copy never
  completed ends where it starts (counted); a completion without an open copy
  is dropped (counted).
* Records kept as instants (:data:`records.INSTANT_NAMES`) become events with
  ``end == start``.
* Rows other than Enter/Leave (``rec_row``, few in most traces) get
  ``rec_owner``: the event the row belongs to (instants and RMA records:
  their own event; attribute and metric value rows: the owner of the record
  they follow, an Enter's or Leave's included; every other record (MPI,
  collectives, metrics): the innermost region open on its location, or -1),
  and ``rec_head``: the row of the record an attribute row follows (its own
  row for the others).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.convert.otf2 import records as R

EV_REGION, EV_INSTANT, EV_RMA = 0, 1, 2
"""Event types in the ``ev_type`` output."""
N_COUNTS = 5
LEAVE_WITHOUT_ENTER, LEAVE_MISMATCH, UNCLOSED_ENTER, RMA_UNCOMPLETED, RMA_COMPLETE_WITHOUT_OP = range(N_COUNTS)
COUNT_NAMES = ("leave_without_enter", "leave_region_mismatch", "enter_never_left", "rma_never_completed",
               "rma_complete_without_op")


@njit(cache=True)
def _is_instant(kind):
    return kind >= R.PROGRAM_BEGIN and kind <= R.PARAMETER_UINT


@njit(cache=True)
def build(rows, bounds):
    """Events of all locations; see the module docstring.

    Returns:
        (ev_loc int64, ev_start, ev_end (ticks), ev_type, ev_ref (region ref /
        record kind), ev_a, ev_b, ev_c (record fields a..c, 0 for regions),
        rec_row, rec_owner, rec_head, counts).
    """
    n = rows.shape[0]
    cap = max(n, 1)
    ev_loc = np.empty(cap, np.int64)
    ev_start = np.empty(cap, np.int64)
    ev_end = np.empty(cap, np.int64)
    ev_type = np.empty(cap, np.int8)
    ev_ref = np.empty(cap, np.int64)
    ev_a = np.zeros(cap, np.int64)  # zeroed lazily by the OS: only instants and copies write them
    ev_b = np.zeros(cap, np.int64)
    ev_c = np.zeros(cap, np.int64)
    rec_row = np.empty(cap, np.int64)
    rec_owner = np.empty(cap, np.int64)
    rec_head = np.empty(cap, np.int64)
    n_rec = 0
    counts = np.zeros(N_COUNTS, np.int64)
    stack = np.empty(cap, np.int64)
    rma = np.empty(cap, np.int64)  # open copies (event ids), in order
    rma_match = np.empty(cap, np.int64)  # their matching ids
    m = 0
    for li in range(bounds.size - 1):
        i, j = bounds[li], bounds[li + 1]
        if i == j:
            continue
        top = 0
        n_rma = 0
        last = -1
        last_owner = -1
        last_t = rows[j - 1, 1]
        for k in range(i, j):
            kind = rows[k, 0]
            t = rows[k, 1]
            if kind == R.ATTRIBUTE or kind == R.METRIC_VALUE:
                rec_row[n_rec] = k
                rec_owner[n_rec] = last_owner
                rec_head[n_rec] = last if kind == R.ATTRIBUTE else k
                n_rec += 1
                continue
            last = k
            last_owner = -1
            if kind == R.ENTER:
                ev_loc[m] = li
                ev_start[m] = t
                ev_end[m] = t
                ev_type[m] = EV_REGION
                ev_ref[m] = rows[k, 2]
                stack[top] = m
                top += 1
                last_owner = m
                m += 1
            elif kind == R.LEAVE:
                if top == 0:
                    counts[LEAVE_WITHOUT_ENTER] += 1
                    continue
                top -= 1
                e = stack[top]
                if ev_ref[e] != rows[k, 2]:
                    counts[LEAVE_MISMATCH] += 1
                ev_end[e] = t
                last_owner = e
            elif _is_instant(kind) or kind == R.RMA_PUT or kind == R.RMA_GET:
                ev_loc[m] = li
                ev_start[m] = t
                ev_end[m] = t
                ev_type[m] = EV_INSTANT if _is_instant(kind) else EV_RMA
                ev_ref[m] = kind
                ev_a[m] = rows[k, 2]
                ev_b[m] = rows[k, 3]
                ev_c[m] = rows[k, 4]
                last_owner = m
                if kind == R.RMA_PUT or kind == R.RMA_GET:
                    rma[n_rma] = m
                    rma_match[n_rma] = rows[k, 5]
                    n_rma += 1
                m += 1
            elif kind == R.RMA_COMPLETE:
                hit = -1
                for q in range(n_rma):
                    e = rma[q]
                    if ev_a[e] == rows[k, 2] and rma_match[q] == rows[k, 5]:
                        hit = q
                        break
                if hit < 0:
                    counts[RMA_COMPLETE_WITHOUT_OP] += 1
                else:
                    e = rma[hit]
                    ev_end[e] = t
                    last_owner = e
                    for q in range(hit, n_rma - 1):
                        rma[q] = rma[q + 1]
                        rma_match[q] = rma_match[q + 1]
                    n_rma -= 1
            else:
                last_owner = stack[top - 1] if top > 0 else -1
            if kind != R.ENTER and kind != R.LEAVE:
                rec_row[n_rec] = k
                rec_owner[n_rec] = last_owner
                rec_head[n_rec] = k
                n_rec += 1
        counts[UNCLOSED_ENTER] += top
        for q in range(top):
            ev_end[stack[q]] = last_t
        counts[RMA_UNCOMPLETED] += n_rma
    return (ev_loc[:m], ev_start[:m], ev_end[:m], ev_type[:m], ev_ref[:m], ev_a[:m], ev_b[:m], ev_c[:m],
            rec_row[:n_rec], rec_owner[:n_rec], rec_head[:n_rec], counts)


def build_reference(rows: np.ndarray, bounds: np.ndarray) -> tuple:
    """Pure-Python reference of :func:`build` (for tests)."""
    loc = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    events: list[list[int]] = []  # loc, start, end, type, ref, a, b, c
    owner = [-1] * rows.shape[0]
    head = list(range(rows.shape[0]))
    counts = [0] * N_COUNTS
    i = 0
    while i < rows.shape[0]:
        j = i
        while j < rows.shape[0] and loc[j] == loc[i]:
            j += 1
        stack: list[int] = []
        rma: list[tuple[int, int]] = []  # (event, matching id)
        last = -1
        for k in range(i, j):
            kind, t, a, b, c, d = (int(x) for x in rows[k, :6])
            if kind in (R.ATTRIBUTE, R.METRIC_VALUE):
                owner[k] = owner[last] if last >= 0 else -1
                head[k] = last if kind == R.ATTRIBUTE else k
                continue
            last = k
            if kind == R.ENTER:
                stack.append(len(events))
                owner[k] = len(events)
                events.append([int(loc[k]), t, t, EV_REGION, a, 0, 0, 0])
            elif kind == R.LEAVE:
                if not stack:
                    counts[LEAVE_WITHOUT_ENTER] += 1
                    continue
                e = stack.pop()
                counts[LEAVE_MISMATCH] += events[e][4] != a
                events[e][2] = t
                owner[k] = e
            elif R.PROGRAM_BEGIN <= kind <= R.PARAMETER_UINT or kind in (R.RMA_PUT, R.RMA_GET):
                owner[k] = len(events)
                if kind in (R.RMA_PUT, R.RMA_GET):
                    rma.append((len(events), d))
                events.append([int(loc[k]), t, t, EV_RMA if kind in (R.RMA_PUT, R.RMA_GET) else EV_INSTANT, kind, a, b, c])
            elif kind == R.RMA_COMPLETE:
                hit = next((q for q, (e, m) in enumerate(rma) if events[e][5] == a and m == d), None)
                if hit is None:
                    counts[RMA_COMPLETE_WITHOUT_OP] += 1
                    continue
                e, _ = rma.pop(hit)
                events[e][2] = t
                owner[k] = e
            else:
                owner[k] = stack[-1] if stack else -1
        counts[UNCLOSED_ENTER] += len(stack)
        for e in stack:
            events[e][2] = int(rows[j - 1, 1])
        counts[RMA_UNCOMPLETED] += len(rma)
        i = j
    cols = np.array(events, dtype=np.int64).reshape(-1, 8)
    rec = np.flatnonzero((rows[:, 0] != R.ENTER) & (rows[:, 0] != R.LEAVE))
    return (*(cols[:, q] for q in range(8)), rec, np.array(owner, dtype=np.int64)[rec], np.array(head, dtype=np.int64)[rec],
            np.array(counts, dtype=np.int64))
