"""Plain-Python references of di's numba kernels: the oracles the tests check the kernels against.

Each is the slow, obvious version of one kernel (named in the comment above it),
written for small inputs and for reading, never called by di itself.
"""

from __future__ import annotations

import numpy as np

from di.convert.otf2 import records as R
from di.convert.perfetto import fields as F
from di.engine.classify import ACTIVITIES
from di.convert.lanes import NO_POINT
from di.convert.otf2.timeline import (
    EV_INSTANT,
    EV_IO,
    EV_REGION,
    EV_RMA,
    IO_CANCELLED_BIT,
    IO_COMPLETE_WITHOUT_BEGIN,
    IO_FLAGS_SHIFT,
    IO_UNCOMPLETED,
    LEAVE_MISMATCH,
    LEAVE_WITHOUT_ENTER,
    N_COUNTS,
    RMA_COMPLETE_WITHOUT_OP,
    RMA_UNCOMPLETED,
    UNCLOSED_ENTER,
    _folded,
)
from di.convert.chrome.lines import ARGS, FRAG, NO_TIME, TEXT, TIME, us_text
from di.engine.breakdown import GPU_PRIORITY, HOST_PRIORITY


# di.nesting
def nest_reference(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pure-Python reference of :func:`nest` (for tests)."""
    depth = np.zeros(loc.size, dtype=np.int32)
    parent = np.full(loc.size, -1, dtype=np.int64)
    stack: list[int] = []
    for k in range(loc.size):
        if k and loc[k] != loc[k - 1]:
            stack = []
        s = start_ns[k]
        while stack:
            p = stack[-1]
            if s < end_ns[p] or (s == start_ns[p] and (end_ns[k] == s or end_ns[p] == start_ns[p])):
                break
            stack.pop()
        if stack:
            parent[k] = stack[-1]
        depth[k] = len(stack)
        stack.append(k)
    return depth, parent


# di.convert.lanes
def assign_lanes_reference(loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Pure-Python version of :func:`assign_lanes`, for tests (same rule, lists as stacks)."""
    lanes = np.zeros(len(loc), dtype=np.int32)
    stacks: list[list[int]] = []  # per lane: ends of the open events, innermost last
    for i, (where, s, e) in enumerate(zip(loc.tolist(), start_ns.tolist(), end_ns.tolist())):
        if i == 0 or where != loc[i - 1]:
            stacks = []
        k = 0
        while True:
            if k == len(stacks):
                stacks.append([])
            stack = stacks[k]
            while stack and stack[-1] <= s:
                stack.pop()
            if not stack or stack[-1] >= e:
                stack.append(e)
                lanes[i] = k
                break
            k += 1
    return lanes


# di.convert.lanes
def innermost_points_reference(
    loc: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, rows: np.ndarray, lower_ns: np.ndarray
) -> np.ndarray:
    """Pure-Python version of :func:`innermost_points`: tries every ns from the bound to the event's end."""
    out = []
    for r, t in zip(rows.tolist(), lower_ns.tolist()):
        later = [j for j in range(r + 1, len(loc)) if loc[j] == loc[r]]
        last = max(int(end_ns[r]), t)
        found = NO_POINT
        for cand in range(t, last + 1):
            inside = cand < end_ns[r] or cand == start_ns[r] == end_ns[r]
            if inside and not any(start_ns[j] <= cand and (cand < end_ns[j] or cand == start_ns[j]) for j in later):
                found = cand
                break
        out.append(found)
    return np.array(out, dtype=np.int64)


# di.convert.otf2.timeline
def build_reference(rows: np.ndarray, bounds: np.ndarray, fold_ref: int = -1) -> tuple:
    """Pure-Python reference of :func:`build` (for tests)."""
    loc = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    events: list[list[int]] = []  # loc, start, end, type, ref, a, b, c, d
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
        io: list[tuple[int, int]] = []  # (event, matching id)
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
                events.append([int(loc[k]), t, t, EV_REGION, a, 0, 0, 0, 0])
            elif kind == R.LEAVE:
                if not stack:
                    counts[LEAVE_WITHOUT_ENTER] += 1
                    continue
                e = stack.pop()
                counts[LEAVE_MISMATCH] += events[e][4] != a
                events[e][2] = t
                owner[k] = e
            elif (
                R.PROGRAM_BEGIN <= kind <= R.PARAMETER_UINT
                or R.IO_ISSUED <= kind <= R.IO_TRY_LOCK
                or kind in (R.RMA_PUT, R.RMA_GET)
            ):
                owner[k] = len(events)
                if kind in (R.RMA_PUT, R.RMA_GET):
                    rma.append((len(events), d))
                events.append(
                    [int(loc[k]), t, t, EV_RMA if kind in (R.RMA_PUT, R.RMA_GET) else EV_INSTANT, kind, a, b, c, 0]
                )
            elif kind == R.IO_BEGIN and not _folded(rows, k, fold_ref):
                owner[k] = len(events)
                io.append((len(events), int(rows[k, 6])))
                events.append(
                    [
                        int(loc[k]),
                        t,
                        t,
                        EV_IO,
                        R.IO_OPERATION_READ + min(max(b, 0), 2),
                        a,
                        b | (c << IO_FLAGS_SHIFT),
                        d,
                        -1,
                    ]
                )
            elif kind in (R.IO_COMPLETE, R.IO_CANCELLED) and not _folded(rows, k, fold_ref):
                hit = next((q for q, (e, m) in enumerate(io) if events[e][5] == a and m == int(rows[k, 6])), None)
                if hit is None:
                    counts[IO_COMPLETE_WITHOUT_BEGIN] += 1
                    owner[k] = stack[-1] if stack else -1
                    continue
                e, _ = io.pop(hit)
                events[e][2] = t
                events[e][8] = d if kind == R.IO_COMPLETE else 0
                if kind == R.IO_CANCELLED:
                    events[e][6] |= IO_CANCELLED_BIT
                owner[k] = e
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
        counts[IO_UNCOMPLETED] += len(io)
        i = j
    cols = np.array(events, dtype=np.int64).reshape(-1, 9)
    rec = np.flatnonzero((rows[:, 0] != R.ENTER) & (rows[:, 0] != R.LEAVE))
    return (
        *(cols[:, q] for q in range(9)),
        rec,
        np.array(owner, dtype=np.int64)[rec],
        np.array(head, dtype=np.int64)[rec],
        np.array(counts, dtype=np.int64),
    )


# di.convert.chrome.lines
def _args_reference(text: bytes, corr: int, nbytes: int, key: bytes, corr_key: bytes, bytes_key: bytes) -> bytes:
    if corr == NO_TIME and nbytes == NO_TIME:
        return key + text if text else b""
    adds = ([corr_key + b"%d" % corr] if corr != NO_TIME else []) + (
        [bytes_key + b"%d" % nbytes] if nbytes != NO_TIME else []
    )
    body = text.lstrip(b"{ \t\r\n")
    return key + b"{" + b",".join(adds) + (b"," + body if body and not body.startswith(b"}") else b"}")


# di.convert.chrome.lines
def assemble_reference(
    ops: np.ndarray,
    lo: int,
    hi: int,
    frag: np.ndarray,
    times: np.ndarray,
    ints: np.ndarray,
    pool: np.ndarray,
    pool_off: np.ndarray,
    text: np.ndarray,
    text_off: np.ndarray,
) -> bytes:
    """Pure-Python version of :func:`_assemble_kernel`, for tests."""
    out = bytearray()
    frags = [pool[pool_off[f] : pool_off[f + 1]].tobytes() for f in range(len(pool_off) - 1)]
    for i in range(lo, hi):
        out += b",\n"
        row_text = text[text_off[i - lo] : text_off[i - lo + 1]].tobytes()
        for op, c in ops.tolist():
            if op == TIME:
                out += us_text(int(times[c, i])).encode() if times[c, i] != NO_TIME else b""
            elif op == TEXT:
                out += row_text
            elif op == ARGS:
                out += _args_reference(row_text, int(ints[0, i]), int(ints[1, i]), *frags[c : c + 3])
            elif (f := frag[c, i] if op == FRAG else c) >= 0:
                out += frags[f]
    return bytes(out)


# di.convert.perfetto.pairing
def pair_slices_reference(track: np.ndarray, ts: np.ndarray, etype: np.ndarray, order: np.ndarray, last_ns: int):
    """Pure-Python version of :func:`pair_slices`, for tests."""
    begin, end_ns, instant = [], [], []
    slice_of = np.full(len(track), -1, np.int64)
    stacks: dict[int, list[int]] = {}
    unmatched = 0
    for i in order.tolist():
        stack = stacks.setdefault(int(track[i]), [])
        if etype[i] == F.TYPE_SLICE_END:
            if not stack:
                unmatched += 1
                continue
            s = stack.pop()
            end_ns[s] = int(ts[i])
            slice_of[i] = s
            continue
        slice_of[i] = len(begin)
        begin.append(i)
        end_ns.append(int(ts[i]))
        instant.append(int(etype[i] == F.TYPE_INSTANT))
        if etype[i] != F.TYPE_INSTANT:
            stack.append(len(begin) - 1)
    unclosed = 0
    for stack in stacks.values():
        for s in stack:
            end_ns[s] = last_ns
            unclosed += 1
    return (
        np.array(begin, np.int64),
        np.array(end_ns, np.int64),
        np.array(instant, np.uint8),
        slice_of,
        unmatched,
        unclosed,
    )


# di.convert.perfetto.pairing
def chain_flows_reference(
    fid: np.ndarray, slice_id: np.ndarray, terminating: np.ndarray, order: np.ndarray, slice_start: np.ndarray
) -> tuple[list[int], list[int], list[int]]:
    """Pure-Python :func:`chain_flows` (a dict of active ids), for tests."""
    active: dict[int, int] = {}
    src, dst, ids = [], [], []
    for k in order.tolist():
        s = int(slice_id[k])
        if s < 0:
            continue
        f = int(fid[k])
        if f in active:
            prev = active.pop(f)
            a, b = (s, prev) if slice_start[prev] > slice_start[s] else (prev, s)
            src.append(a)
            dst.append(b)
            ids.append(f)
            if not terminating[k]:
                active[f] = s
        elif not terminating[k]:
            active[f] = s
    return src, dst, ids


# di.engine.breakdown
def sweep_reference(group, start, end, act, host_group, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Pure-Python reference of :func:`_sweep` by sampling every ns (small inputs, tests only)."""
    n_act = len(ACTIVITIES)
    excl = np.zeros((n_groups, n_act), np.int64)
    union = np.zeros((n_groups, n_act), np.int64)
    for g in range(n_groups):
        mine = [(int(s), int(e), int(a)) for gg, s, e, a in zip(group, start, end, act) if gg == g]
        if not mine:
            continue
        prio = HOST_PRIORITY if host_group[g] else GPU_PRIORITY
        for t in range(min(s for s, _, _ in mine), max(e for _, e, _ in mine)):
            active = {a for s, e, a in mine if s <= t < e}
            for a in active:
                union[g, a] += 1
            top = next((a for a in prio if a in active), None)
            if top is not None:
                excl[g, top] += 1
    return excl, union


# di.engine.intervals
def union_reference(group, start_ns, end_ns) -> list[tuple[int, int, int]]:
    """Pure-Python reference of :func:`union` as (group, start, end) tuples."""
    out: list[list[int]] = []
    for g, s, e in sorted(zip(map(int, group), map(int, start_ns), map(int, end_ns))):
        if e <= s:
            continue
        if out and out[-1][0] == g and s <= out[-1][2]:
            out[-1][2] = max(out[-1][2], e)
        else:
            out.append([g, s, e])
    return [tuple(x) for x in out]  # type: ignore[misc]


# di.engine.intervals
def points_reference(tuples: list[tuple[int, int, int]]) -> set[tuple[int, int]]:
    """Every covered (group, ns) point of small reference sets (tests only)."""
    return {(g, t) for g, s, e in tuples for t in range(s, e)}


# di.engine.critical_path
def longest_reference(order, first_of_loc, local_w, src, dst, cross_w) -> np.ndarray:
    """Pure-Python reference of :func:`_longest`'s distances (tests only)."""
    pos = {int(v): k for k, v in enumerate(order)}
    dist = [0] * len(order)
    for v in map(int, order):
        best = 0 if first_of_loc[v] else dist[v - 1] + int(local_w[v])
        for u, d, w in zip(src, dst, cross_w):
            if d == v and pos[int(u)] < pos[v]:
                best = max(best, dist[int(u)] + int(w))
        dist[v] = best
    return np.asarray(dist, np.int64)


# di.engine.inferred_edges
def queue_reference(call_t: list[int], kern_t: list[int], kern_end: list[int], skew_ns: int, lost_ns: int) -> list[int]:
    """Pure-Python reference of :func:`_queue` for one group (tests only)."""
    out, j, prev_end = [], 0, None
    for t, end in zip(kern_t, kern_end):
        while (
            j + 1 < len(call_t)
            and abs(call_t[j + 1] - t) <= skew_ns
            and t - call_t[j] > lost_ns
            and (prev_end is None or prev_end <= call_t[j])
        ):
            j += 1
        if j < len(call_t) and call_t[j] <= t + skew_ns:
            out.append(j)
            j += 1
        else:
            out.append(-1)
        prev_end = end if prev_end is None else max(prev_end, end)
    return out
