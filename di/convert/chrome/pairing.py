"""numba kernels that pair Chrome records: B with E, flow steps into edges,
flow end points onto slices.

All inputs are numpy columns already sorted as each kernel states; outputs
are row indices (-1 for none). Each kernel has a pure-Python reference in
tests/test_chrome_pairing.py.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def match_begin_end(key, is_begin):
    """Pair begins with ends LIFO within each key.

    Args:
        key: int64 group key per record (a timeline, or an async id), records
            sorted by (key, ts, file order).
        is_begin: True for a begin record, False for an end record.

    Returns:
        (begin_idx, end_idx) of matched pairs, the indices of unmatched begins
        and the indices of unmatched ends.
    """
    n = key.size
    b_out = np.empty(n, dtype=np.int64)
    e_out = np.empty(n, dtype=np.int64)
    lone_e = np.empty(n, dtype=np.int64)
    lone_b = np.empty(n, dtype=np.int64)
    stack = np.empty(max(n, 1), dtype=np.int64)
    top = 0
    m = 0
    ne = 0
    nb = 0
    for k in range(n):
        if k > 0 and key[k] != key[k - 1]:
            for j in range(top):
                lone_b[nb] = stack[j]
                nb += 1
            top = 0
        if is_begin[k]:
            stack[top] = k
            top += 1
        elif top > 0:
            top -= 1
            b_out[m] = stack[top]
            e_out[m] = k
            m += 1
        else:
            lone_e[ne] = k
            ne += 1
    for j in range(top):
        lone_b[nb] = stack[j]
        nb += 1
    return b_out[:m], e_out[:m], lone_b[:nb], lone_e[:ne]


@njit(cache=True, _nrt=False)
def _first_at_or_after(values, lo, hi, x):
    """The first k in [lo, hi) with values[k] >= x (hi when none); values sorted there."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, _nrt=False)
def _first_after(values, lo, hi, x):
    """The first k in [lo, hi) with values[k] > x (hi when none); values sorted there."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if values[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def bind_points(loc_first, start_ns, end_ns, parent, instant, q_loc, q_ts, q_next):
    """The event each flow end point binds to, or -1.

    Args:
        loc_first: row of the first event of each loc (size n_locs + 1) in events
            sorted by (loc, start_ns, -end_ns).
        start_ns, end_ns, parent, instant: event columns in that order;
            points never bind to instants.
        q_loc, q_ts: the point's timeline and time.
        q_next: True binds to the next slice starting at or after q_ts
            (Chrome's default for 'f'); False binds to the innermost slice
            enclosing q_ts (``bp: "e"`` and all 's'/'t').

    Each timeline's search starts where its last one ended and gallops forward from there (steps of 1, 2,
    4, ...) before the binary search, which covers only what is left between the last event passed and the first
    not (or the timeline's start, when the point lies before the last answer): points come in nearly time order
    per timeline (a flow's steps, flows in order of their first), so most searches read a few events near the
    last answer instead of the whole timeline.
    """
    out = np.full(q_loc.size, -1, dtype=np.int64)
    last = np.full(loc_first.size, -1, dtype=np.int64)  # each loc's last answer (-1: none yet)
    for q in range(q_loc.size):
        loc = q_loc[q]
        if loc < 0 or loc + 1 >= loc_first.size:
            continue
        lo = loc_first[loc]
        hi = loc_first[loc + 1]
        ts = q_ts[q]
        nxt = q_next[q]
        # the answer, the first k with start_ns[k] >= ts (nxt) or > ts, lies in [a, b]
        a = lo
        b = hi
        p = last[loc]
        if p >= lo:
            b = p
            step = 1
            while b < hi and (start_ns[b] < ts or (not nxt and start_ns[b] == ts)):
                a = b + 1
                b = min(a + step, hi)
                step *= 2
        if nxt:
            k = _first_at_or_after(start_ns, a, b, ts)
            last[loc] = k
            while k < hi and instant[k]:
                k += 1
            if k < hi:
                out[q] = k
            continue
        k = _first_after(start_ns, a, b, ts)
        last[loc] = k
        k -= 1
        while k >= lo:
            if not instant[k] and start_ns[k] <= ts and (ts < end_ns[k] or ts == start_ns[k]):
                out[q] = k
                break
            k = parent[k]
            if k < 0:
                break
    return out


@njit(cache=True)
def chain_flows(key, step, row):
    """Turn flow steps into edges.

    Args:
        key: flow identity per step (e.g. (cat, id) made dense), steps sorted
            by (key, ts, file order).
        step: 0 = start ('s'), 1 = step ('t'), 2 = end ('f').
        row: event row the step is bound to (-1 when it bound to none).

    Returns:
        (src rows, dst rows, index of the step that ends each edge, step
        indices left without a partner, step indices bound to no slice).
    """
    n = key.size
    src = np.empty(n, dtype=np.int64)
    dst = np.empty(n, dtype=np.int64)
    via = np.empty(n, dtype=np.int64)
    orphan = np.empty(n, dtype=np.int64)
    unbound = np.empty(n, dtype=np.int64)
    m = 0
    no = 0
    nu = 0
    cur = -1
    cur_step = -1
    for k in range(n):
        if k > 0 and key[k] != key[k - 1]:
            if cur_step >= 0:
                orphan[no] = cur_step
                no += 1
            cur = -1
            cur_step = -1
        if row[k] < 0:
            unbound[nu] = k
            nu += 1
            if step[k] == 0:
                if cur_step >= 0:
                    orphan[no] = cur_step
                    no += 1
                cur = -1
                cur_step = -1
            continue
        if step[k] == 0:
            if cur_step >= 0:
                orphan[no] = cur_step
                no += 1
            cur = row[k]
            cur_step = k
        elif cur < 0:
            orphan[no] = k
            no += 1
        else:
            src[m] = cur
            dst[m] = row[k]
            via[m] = k
            m += 1
            if step[k] == 2:
                cur = -1
                cur_step = -1
            else:
                cur = row[k]
                cur_step = -1
    if cur_step >= 0:
        orphan[no] = cur_step
        no += 1
    return src[:m], dst[:m], via[:m], orphan[:no], unbound[:nu]
