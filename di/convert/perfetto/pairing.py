"""Slices from BEGIN/END/INSTANT events, and flow edges from flow ids, as Perfetto's trace processor forms them.

Slices: per track, events in (timestamp, packet) order; BEGIN opens a slice,
END closes the innermost open one (an END with none open is counted and
dropped), INSTANT is a zero-length slice. Slices still open at the end of the
trace end at the trace's last timestamp (counted).

Flows (other producers): marks in processing order (timestamp, packet); per
flow id, a mark in ``flow_ids`` links the id's previous slice to its own and
becomes the id's current slice; a mark in ``terminating_flow_ids`` links and
ends the id (ignored when the id is not active). Each edge goes from the
slice that starts earlier to the one that starts later (ties: the earlier mark).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.perfetto import fields as F


def pair_slices(
    track: np.ndarray, ts: np.ndarray, etype: np.ndarray, order: np.ndarray, last_ns: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Pair the slice events listed in ``order`` (sorted by track, ts, packet).

    Returns:
        begin: event index of each slice's BEGIN or INSTANT; end_ns: its end; instant: uint8;
        slice_of: slice of every event index (-1: none); unmatched END count; unclosed count.
    """
    n = order.shape[0]
    # made here, not in the kernel: numba compiles its allocation overloads into every cold start
    begin, end_ns, stack = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(max(n, 1), np.int64)
    instant, slice_of = np.zeros(n, np.uint8), np.full(track.shape[0], -1, np.int64)
    counts = np.zeros(3, np.int64)
    _pair_slices(track, ts, etype, order, np.int64(last_ns), begin, end_ns, instant, slice_of, stack, counts)
    ns, unmatched, unclosed = (int(c) for c in counts)
    return begin[:ns], end_ns[:ns], instant[:ns], slice_of, unmatched, unclosed


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _pair_slices(track, ts, etype, order, last_ns, begin, end_ns, instant, slice_of, stack, counts):
    """:func:`pair_slices` into the arrays it is given; ``counts`` = [slices, unmatched ENDs, unclosed]."""
    n = order.shape[0]
    sp = ns = unmatched = unclosed = 0
    for j in range(n):
        i = order[j]
        if j > 0 and track[i] != track[order[j - 1]]:
            while sp > 0:
                sp -= 1
                end_ns[stack[sp]] = last_ns
                unclosed += 1
        if etype[i] == F.TYPE_SLICE_END:
            if sp == 0:
                unmatched += 1
                continue
            sp -= 1
            end_ns[stack[sp]] = ts[i]
            slice_of[i] = stack[sp]
            continue
        begin[ns] = i
        end_ns[ns] = ts[i]
        slice_of[i] = ns
        if etype[i] == F.TYPE_INSTANT:
            instant[ns] = 1
        else:
            stack[sp] = ns
            sp += 1
        ns += 1
    while sp > 0:
        sp -= 1
        end_ns[stack[sp]] = last_ns
        unclosed += 1
    counts[0], counts[1], counts[2] = ns, unmatched, unclosed


def chain_flows(
    fid: np.ndarray, slice_id: np.ndarray, terminating: np.ndarray, order: np.ndarray, slice_start: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src slice, dst slice, flow id) of every edge the marks in ``order`` form; see the module docstring.

    Flow ids become dense codes first, so the kernel keeps each id's current slice in an array
    (no numba typed Dict: see :mod:`di.convert.inttable`)."""
    ids, code = np.unique(fid, return_inverse=True)
    n = order.shape[0]
    active = np.full(ids.size, -1, np.int64)  # the current slice of each flow id (code), -1 when none
    src, dst, edge_ids = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.uint64)
    m = _chain_flows(
        fid, code.astype(np.int64).ravel(), slice_id, terminating, order, slice_start, active, src, dst, edge_ids
    )
    return src[:m], dst[:m], edge_ids[:m]


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True)
def _chain_flows(fid, code, slice_id, terminating, order, slice_start, active, src, dst, ids):
    """:func:`chain_flows` into the arrays it is given; returns the number of edges."""
    n = order.shape[0]
    m = 0
    for j in range(n):
        k = order[j]
        s = slice_id[k]
        if s < 0:
            continue
        f = code[k]
        prev = active[f]
        if prev >= 0:
            if slice_start[prev] > slice_start[s]:
                src[m], dst[m] = s, prev
            else:
                src[m], dst[m] = prev, s
            ids[m] = fid[k]
            m += 1
            active[f] = -1 if terminating[k] else s
        elif not terminating[k]:
            active[f] = s
    return m
