"""Records of each location -> events (regions, instants, RMA copies), in one numba pass per location.

Input: the rows of :mod:`di.convert.otf2.records` of one location at a time
(:class:`Builder`, which the reader feeds as it reads, so the records of one
location are held at a time), or of every location at once (:func:`build`).

Definitions (per location, records in file order = time order):

* Enter/Leave pair up on a stack. A Leave on an empty stack is dropped
  (counted); a Leave whose region differs from the innermost open one still
  closes it (counted). Regions still open at the end close at the location's
  last record time (counted).
* RmaPut/RmaGet open a copy that the first later RmaOpCompleteBlocking with
  the same (window, matching id) closes (first in, first out); a copy never
  completed ends where it starts (counted); a completion without an open copy
  is dropped (counted).
* IoOperationBegin opens an I/O operation event (kind ``IO_OPERATION_READ``
  + its mode) that the first later IoOperationComplete or
  IoOperationCancelled of the same (handle, matching id) closes (with the
  bytes transferred; cancelled: 0 and bit ``IO_CANCELLED_BIT`` in field b);
  one never completed ends where it starts (counted, bytes null); a
  completion without an open operation is dropped (counted). Operation
  records that carry the attribute ``fold_ref`` (di's writer marks the
  operations it wrote inside the I/O event they describe) make no event.
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

from di.jitpipeline import ScalarKernelCompiler

from di.convert.otf2.records import (
    A,
    ATTRIBUTE,
    ATTR_REF,
    B,
    C,
    ENTER,
    IO_BEGIN,
    IO_BYTES,
    IO_CANCELLED,
    IO_COMPLETE,
    IO_FLAGS,
    IO_HANDLE,
    IO_ISSUED,
    IO_MATCHING,
    IO_MODE,
    IO_OPERATION_READ,
    IO_TRY_LOCK,
    KIND,
    LEAVE,
    METRIC_VALUE,
    PARAMETER_UINT,
    PROGRAM_BEGIN,
    REGION,
    RMA_COMPLETE,
    RMA_GET,
    RMA_MATCHING,
    RMA_PUT,
    RMA_WIN,
    TIME,
    WIDTH,
)

EV_REGION, EV_INSTANT, EV_RMA, EV_IO = 0, 1, 2, 3
"""Event types in the ``ev_type`` output."""
EV_COL_A, EV_COL_B, EV_COL_C, EV_COL_D = 4, 5, 6, 7
"""Columns of the events array after loc, start, end, ref: instants' record fields a..c; RMA copies' window, remote
rank, bytes; I/O operations' handle, mode | flags << IO_FLAGS_SHIFT, bytes requested, bytes transferred."""
N_COUNTS = 7
(
    LEAVE_WITHOUT_ENTER,
    LEAVE_MISMATCH,
    UNCLOSED_ENTER,
    RMA_UNCOMPLETED,
    RMA_COMPLETE_WITHOUT_OP,
    IO_UNCOMPLETED,
    IO_COMPLETE_WITHOUT_BEGIN,
) = range(N_COUNTS)
COUNT_NAMES = (
    "Leave records without an Enter",
    "Leave records of another region than the open one",
    "regions entered and never left",
    "RMA operations never completed",
    "RMA completions without an operation",
    "I/O operations never completed",
    "I/O completions without a begin",
)
"""The drop reason of each count (:mod:`di.convert.provenance`'s vocabulary)."""
IO_FLAGS_SHIFT = 8
"""An I/O operation event's field b: mode | operation flags << 8 | cancelled << 40."""
IO_CANCELLED_BIT = 1 << 40


@njit(cache=True, pipeline_class=ScalarKernelCompiler)
def _is_instant(kind):
    return (kind >= PROGRAM_BEGIN and kind <= PARAMETER_UINT) or (kind >= IO_ISSUED and kind <= IO_TRY_LOCK)


@njit(cache=True, inline="always")
def _take(ev, open_ids, open_match, n, ref, match):
    """The first of the ``n`` open events (``open_ids``) whose field a is ``ref`` and matching id ``match``, removed
    from the open list (order kept; the caller decrements its count), or -1 when none is open."""
    for q in range(n):
        if ev[open_ids[q], EV_COL_A] == ref and open_match[q] == match:
            e = open_ids[q]
            for r in range(q, n - 1):
                open_ids[r] = open_ids[r + 1]
                open_match[r] = open_match[r + 1]
            return e
    return -1


@njit(cache=True, pipeline_class=ScalarKernelCompiler)
def _folded(rows, k, fold_ref):
    """True when record k carries attribute ``fold_ref`` (its ATTRIBUTE rows follow it)."""
    q = k + 1
    while fold_ref >= 0 and q < rows.shape[0] and rows[q, KIND] == ATTRIBUTE:
        if rows[q, ATTR_REF] == fold_ref:
            return True
        q += 1
    return False


@njit(cache=True, pipeline_class=ScalarKernelCompiler)
def _build_location(rows, li, base, ev, ev_type, rec, rec_idx, counts, state, fold_ref):
    """Events and kept records of one location (rows = its records; see the module docstring).

    ``ev`` (cap, 8) int64 columns loc, start, end, ref, a, b, c, d (d: bytes an I/O operation transferred); ``rec``
    (cap, WIDTH) copies of the rows other than Enter/Leave; ``rec_idx`` (cap, 4)
    their (row, owner, head, kind of head), rows counted from ``base``.
    ``state`` = [events so far, records kept so far], updated.
    """
    n = rows.shape[0]
    if n == 0:
        return
    m = state[0]
    n_rec = state[1]
    stack = np.empty(n, np.int64)
    rma = np.empty(n, np.int64)  # open copies (event ids), in order
    rma_match = np.empty(n, np.int64)  # their matching ids
    io = np.empty(n, np.int64)  # open I/O operations (event ids), in order
    io_match = np.empty(n, np.int64)  # their matching ids
    top = 0
    n_rma = 0
    n_io = 0
    last = -1
    last_kind = 0
    last_owner = -1
    last_t = rows[n - 1, TIME]
    for k in range(n):
        kind = rows[k, KIND]
        t = rows[k, TIME]
        if kind == ATTRIBUTE or kind == METRIC_VALUE:
            for q in range(WIDTH):
                rec[n_rec, q] = rows[k, q]
            rec_idx[n_rec, 0] = base + k
            rec_idx[n_rec, 1] = last_owner
            rec_idx[n_rec, 2] = (base + last if last >= 0 else -1) if kind == ATTRIBUTE else base + k
            rec_idx[n_rec, 3] = last_kind if kind == ATTRIBUTE else kind
            n_rec += 1
            continue
        last = k
        last_kind = kind
        last_owner = -1
        if kind == ENTER:
            ev[m, 0] = li
            ev[m, 1] = t
            ev[m, 2] = t
            ev[m, 3] = rows[k, REGION]
            ev_type[m] = EV_REGION
            stack[top] = m
            top += 1
            last_owner = m
            m += 1
        elif kind == LEAVE:
            if top == 0:
                counts[LEAVE_WITHOUT_ENTER] += 1
            else:
                top -= 1
                e = stack[top]
                if ev[e, 3] != rows[k, REGION]:
                    counts[LEAVE_MISMATCH] += 1
                ev[e, 2] = t
                last_owner = e
        elif _is_instant(kind) or kind == RMA_PUT or kind == RMA_GET:
            ev[m, 0] = li
            ev[m, 1] = t
            ev[m, 2] = t
            ev[m, 3] = kind
            ev[m, EV_COL_A] = rows[k, A]  # an RMA copy: window, remote rank, bytes
            ev[m, EV_COL_B] = rows[k, B]
            ev[m, EV_COL_C] = rows[k, C]
            ev_type[m] = EV_INSTANT if _is_instant(kind) else EV_RMA
            last_owner = m
            if kind == RMA_PUT or kind == RMA_GET:
                rma[n_rma] = m
                rma_match[n_rma] = rows[k, RMA_MATCHING]
                n_rma += 1
            m += 1
        elif kind == IO_BEGIN and not _folded(rows, k, fold_ref):
            ev[m, 0] = li
            ev[m, 1] = t
            ev[m, 2] = t
            ev[m, 3] = IO_OPERATION_READ + min(max(rows[k, IO_MODE], 0), 2)
            ev[m, EV_COL_A] = rows[k, IO_HANDLE]
            ev[m, EV_COL_B] = rows[k, IO_MODE] | (rows[k, IO_FLAGS] << IO_FLAGS_SHIFT)
            ev[m, EV_COL_C] = rows[k, IO_BYTES]
            ev[m, EV_COL_D] = -1
            ev_type[m] = EV_IO
            last_owner = m
            io[n_io] = m
            io_match[n_io] = rows[k, IO_MATCHING]
            n_io += 1
            m += 1
        elif (kind == IO_COMPLETE or kind == IO_CANCELLED) and not _folded(rows, k, fold_ref):
            e = _take(ev, io, io_match, n_io, rows[k, IO_HANDLE], rows[k, IO_MATCHING])
            if e < 0:
                counts[IO_COMPLETE_WITHOUT_BEGIN] += 1
                last_owner = stack[top - 1] if top > 0 else -1
            else:
                n_io -= 1
                ev[e, 2] = t
                if kind == IO_COMPLETE:
                    ev[e, EV_COL_D] = rows[k, IO_BYTES]
                else:
                    ev[e, EV_COL_D] = 0
                    ev[e, EV_COL_B] |= IO_CANCELLED_BIT
                last_owner = e
        elif kind == RMA_COMPLETE:
            e = _take(ev, rma, rma_match, n_rma, rows[k, RMA_WIN], rows[k, RMA_MATCHING])
            if e < 0:
                counts[RMA_COMPLETE_WITHOUT_OP] += 1
            else:
                n_rma -= 1
                ev[e, 2] = t
                last_owner = e
        else:
            last_owner = stack[top - 1] if top > 0 else -1
        if kind != ENTER and kind != LEAVE:
            for q in range(WIDTH):
                rec[n_rec, q] = rows[k, q]
            rec_idx[n_rec, 0] = base + k
            rec_idx[n_rec, 1] = last_owner
            rec_idx[n_rec, 2] = base + k
            rec_idx[n_rec, 3] = kind
            n_rec += 1
    counts[UNCLOSED_ENTER] += top
    for q in range(top):
        ev[stack[q], 2] = last_t
    counts[RMA_UNCOMPLETED] += n_rma
    counts[IO_UNCOMPLETED] += n_io
    state[0] = m
    state[1] = n_rec


class Builder:
    """Builds the events of an archive location by location, so only one location's records are held at a time.

    After the last :meth:`add`, the attributes hold the results: ``ev_loc``,
    ``ev_start``, ``ev_end`` (ticks), ``ev_type``, ``ev_ref`` (region ref /
    record kind), ``ev_a``, ``ev_b``, ``ev_c`` (record fields a..c, 0 for
    regions); the kept records ``rec`` (n, WIDTH) with ``rec_row``,
    ``rec_owner``, ``rec_head`` and ``rec_after`` (kind of the head record); ``counts``.
    """

    def __init__(self, expected_records: int = 0, fold_ref: int = -1) -> None:
        cap = max(expected_records, 1024)
        self._ev = np.zeros((cap, 8), np.int64, order="F")  # columns contiguous; zeroed lazily by the OS
        self._ev_type = np.empty(cap, np.int8)
        self._rec = np.empty((cap, WIDTH), np.int64, order="F")  # as _ev: each field one contiguous column
        self._rec_idx = np.empty((cap, 4), np.int64, order="F")
        self.counts = np.zeros(N_COUNTS, np.int64)
        self._state = np.zeros(2, np.int64)
        self._rows = 0
        self._fold_ref = (
            fold_ref  # attribute marking I/O operation records that make no event (see the module docstring)
        )

    def add(self, rows: np.ndarray, li: int) -> None:
        """Add the records of location ``li`` (rows are read only, and may be reused afterwards)."""
        need = rows.shape[0]
        m, n_rec = int(self._state[0]), int(self._state[1])
        if m + need > self._ev.shape[0]:
            self._ev, self._ev_type = _grown(self._ev, m, m + need), _grown(self._ev_type, m, m + need)
        if n_rec + need > self._rec.shape[0]:
            self._rec, self._rec_idx = (
                _grown(self._rec, n_rec, n_rec + need),
                _grown(self._rec_idx, n_rec, n_rec + need),
            )
        _build_location(
            rows,
            li,
            self._rows,
            self._ev,
            self._ev_type,
            self._rec,
            self._rec_idx,
            self.counts,
            self._state,
            self._fold_ref,
        )
        self._rows += need

    def finish(self) -> None:
        """Expose the results as attributes (views)."""
        m, n_rec = int(self._state[0]), int(self._state[1])
        ev = self._ev[:m]
        self.ev_loc, self.ev_start, self.ev_end, self.ev_ref = (ev[:, q] for q in range(4))  # contiguous columns
        self.ev_a, self.ev_b, self.ev_c, self.ev_d = (ev[:, q] for q in (EV_COL_A, EV_COL_B, EV_COL_C, EV_COL_D))
        self.ev_type = self._ev_type[:m]
        self.rec = self._rec[:n_rec]
        self.rec_row, self.rec_owner, self.rec_head, self.rec_after = (self._rec_idx[:n_rec, q] for q in range(4))

    def events(self) -> tuple:
        """(ev_loc, ev_start, ev_end, ev_type, ev_ref, ev_a, ev_b, ev_c, ev_d)."""
        return (
            self.ev_loc,
            self.ev_start,
            self.ev_end,
            self.ev_type,
            self.ev_ref,
            self.ev_a,
            self.ev_b,
            self.ev_c,
            self.ev_d,
        )


def _grown(a: np.ndarray, used: int, need: int) -> np.ndarray:
    out = np.zeros((max(need, 2 * a.shape[0]), *a.shape[1:]), a.dtype, order="F" if a.flags.f_contiguous else "C")
    out[:used] = a[:used]
    return out


def build(rows: np.ndarray, bounds: np.ndarray, fold_ref: int = -1) -> tuple:
    """Events of all locations at once (rows of location i: ``rows[bounds[i]:bounds[i+1]]``).

    Returns:
        (ev_loc, ev_start, ev_end, ev_type, ev_ref, ev_a, ev_b, ev_c, ev_d, rec_row, rec_owner, rec_head, counts).
    """
    b = Builder(rows.shape[0], fold_ref)
    for li in range(bounds.size - 1):
        b.add(rows[bounds[li] : bounds[li + 1]], li)
    b.finish()
    return (*b.events(), b.rec_row, b.rec_owner, b.rec_head, b.counts)
