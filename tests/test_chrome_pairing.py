"""Chrome pairing kernels and the number scanner against short pure-Python
references (written from the kernels' docstrings) on seeded random inputs,
plus hand cases."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest

import di

from di.convert.chrome.pairing import bind_points, chain_flows, match_begin_end
from di.convert.chrome.numbers import parse_number
from di.nesting import nest

SEEDS = range(30)


# ---- match_begin_end: LIFO per key ----


def match_reference(key: np.ndarray, is_begin: np.ndarray) -> tuple[list[int], ...]:
    stacks: dict[int, list[int]] = {}
    b, e, lone_e = [], [], []
    for k in range(key.size):
        stack = stacks.setdefault(int(key[k]), [])
        if is_begin[k]:
            stack.append(k)
        elif stack:
            b.append(stack.pop())
            e.append(k)
        else:
            lone_e.append(k)
    return b, e, sorted(i for s in stacks.values() for i in s), lone_e


def as_lists(result: tuple[np.ndarray, ...]) -> tuple[list[int], ...]:
    b, e, lone_b, lone_e = (r.tolist() for r in result)
    return b, e, sorted(lone_b), lone_e


@pytest.mark.parametrize("seed", SEEDS)
def test_match_begin_end_random(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    key = np.sort(rng.integers(0, int(rng.integers(1, 8)), n)).astype(np.int64)
    is_begin = rng.random(n) < rng.uniform(0.2, 0.8)
    assert as_lists(match_begin_end(key, is_begin)) == match_reference(key, is_begin)


def test_match_begin_end_hand() -> None:
    key = np.array([0, 0, 0, 0, 0, 1, 1, 2], dtype=np.int64)
    is_begin = np.array([True, True, False, False, False, False, True, True])
    # B0 B1 E2 E3 E4 | E5 B6 | B7: (1,2) (0,3), E4 and E5 alone, B6 and B7 never closed
    assert as_lists(match_begin_end(key, is_begin)) == ([1, 0], [2, 3], [6, 7], [4, 5])


# ---- bind_points: the slice a flow point lands on ----


def bind_reference(loc_first, start, end, instant, q_loc, q_ts, q_next) -> list[int]:
    out = []
    for loc, ts, nxt in zip(q_loc.tolist(), q_ts.tolist(), q_next.tolist()):
        if loc < 0 or loc + 1 >= loc_first.size:
            out.append(-1)
            continue
        rows = range(loc_first[loc], loc_first[loc + 1])
        rows = [r for r in rows if not instant[r]]  # points never bind to instants
        if nxt:  # the next slice starting at or after ts
            out.append(min((r for r in rows if start[r] >= ts), default=-1))
        else:  # the innermost (latest in sort order) slice enclosing ts
            out.append(max((r for r in rows if start[r] <= ts and (ts < end[r] or ts == start[r])), default=-1))
    return out


def timelines(rng: np.random.Generator, n: int, n_locs: int, horizon: int) -> tuple[np.ndarray, ...]:
    loc = rng.integers(0, n_locs, n).astype(np.int64)
    start = rng.integers(0, horizon, n).astype(np.int64)
    end = start + np.where(rng.random(n) < 0.15, 0, rng.integers(1, horizon, n))
    order = np.lexsort((-end, start, loc))
    loc, start, end = loc[order], start[order], end[order]
    loc_first = np.searchsorted(loc, np.arange(n_locs + 1), side="left").astype(np.int64)
    _, parent = nest(loc, start, end)
    instant = (end == start) & (rng.random(n) < 0.5)
    return loc_first, start, end, parent, instant


@pytest.mark.parametrize("seed", SEEDS)
def test_bind_points_random(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_locs, horizon = int(rng.integers(1, 5)), int(rng.integers(2, 80))
    loc_first, start, end, parent, instant = timelines(rng, int(rng.integers(0, 200)), n_locs, horizon)
    m = int(rng.integers(0, 200))
    q_loc = rng.integers(-1, n_locs + 1, m).astype(np.int64)  # includes unknown timelines
    q_ts = rng.integers(-2, 2 * horizon, m).astype(np.int64)
    q_next = rng.random(m) < 0.5
    got = bind_points(loc_first, start, end, parent, instant, q_loc, q_ts, q_next)
    assert got.tolist() == bind_reference(loc_first, start, end, instant, q_loc, q_ts, q_next)


def test_bind_points_hand() -> None:
    # loc 0: A [0,100] > B [10,20], C [30,40]; loc 1: D [5,6]
    loc_first = np.array([0, 3, 4], dtype=np.int64)
    start = np.array([0, 10, 30, 5], dtype=np.int64)
    end = np.array([100, 20, 40, 6], dtype=np.int64)
    parent = np.array([-1, 0, 0, -1], dtype=np.int64)
    q_loc = np.array([0, 0, 0, 0, 0, 1, 1, -1, 2], dtype=np.int64)
    q_ts = np.array([15, 25, 100, 25, 41, 5, 6, 5, 5], dtype=np.int64)
    q_next = np.array([False, False, False, True, True, False, False, False, False])
    got = bind_points(loc_first, start, end, parent, np.zeros(4, dtype=np.bool_), q_loc, q_ts, q_next)
    assert got.tolist() == [1, 0, -1, 2, -1, 3, -1, -1, -1]


# ---- chain_flows: steps -> edges ----


def chain_reference(key: np.ndarray, step: np.ndarray, row: np.ndarray) -> tuple[list[int], ...]:
    """Edges from each bound step to the next one of its flow; a start ('s') that
    never reaches a later step is an orphan, so is a step with no start before it."""
    src, dst, via, orphan, unbound = [], [], [], [], []
    cur, pending = -1, -1  # row the chain is at; index of a start not yet used
    for k in range(key.size):
        if k and key[k] != key[k - 1]:
            orphan += [pending] if pending >= 0 else []
            cur = pending = -1
        if row[k] < 0:
            unbound.append(k)
            if step[k] == 0:
                orphan += [pending] if pending >= 0 else []
                cur = pending = -1
        elif step[k] == 0:
            orphan += [pending] if pending >= 0 else []
            cur, pending = int(row[k]), k
        elif cur < 0:
            orphan.append(k)
        else:
            src.append(cur), dst.append(int(row[k])), via.append(k)
            cur, pending = (-1 if step[k] == 2 else int(row[k])), -1
    orphan += [pending] if pending >= 0 else []
    return src, dst, via, sorted(orphan), unbound


def random_steps(rng: np.random.Generator, unbound_share: float) -> tuple[np.ndarray, ...]:
    n = int(rng.integers(0, 300))
    key = np.sort(rng.integers(0, int(rng.integers(1, 20)), n)).astype(np.int64)
    step = rng.choice(np.array([0, 1, 2], dtype=np.int8), n, p=[0.4, 0.2, 0.4])
    row = rng.integers(0, 1000, n).astype(np.int64)
    row[rng.random(n) < unbound_share] = -1
    return key, step, row


def chain(key: np.ndarray, step: np.ndarray, row: np.ndarray) -> tuple[list[int], ...]:
    src, dst, via, orphan, unbound = (a.tolist() for a in chain_flows(key, step, row))
    return src, dst, via, sorted(orphan), unbound


@pytest.mark.parametrize("seed", SEEDS)
def test_chain_flows_random_all_bound(seed: int) -> None:
    key, step, row = random_steps(np.random.default_rng(seed), 0.0)
    assert chain(key, step, row) == chain_reference(key, step, row)


@pytest.mark.parametrize("seed", SEEDS)
def test_chain_flows_random_edges_with_unbound_steps(seed: int) -> None:
    key, step, row = random_steps(np.random.default_rng(1000 + seed), 0.25)
    got, want = chain(key, step, row), chain_reference(key, step, row)
    assert got == want
    # every step is accounted for exactly once: an edge's end, a start used by an edge, an orphan or unbound
    used_starts = sum(1 for k in range(key.size) if step[k] == 0 and row[k] >= 0 and k not in got[3])
    assert len(got[2]) + used_starts + len(got[3]) + len(got[4]) == key.size


def test_chain_flows_hand() -> None:
    key = np.array([0, 0, 0, 1, 1, 2, 2, 2], dtype=np.int64)
    step = np.array([0, 1, 2, 2, 0, 0, 0, 2], dtype=np.int8)
    row = np.array([10, 11, 12, 13, 14, 15, 16, -1], dtype=np.int64)
    # flow 0: s->t->f; flow 1: f before any s, then a lone s; flow 2: s replaced by s, f unbound
    assert chain(key, step, row) == ([10, 11], [11, 12], [1, 2], [3, 4, 5, 6], [7])


def test_chain_flows_counts_a_start_lost_to_an_unbound_start() -> None:
    key = np.zeros(3, dtype=np.int64)
    step = np.array([0, 0, 2], dtype=np.int8)
    row = np.array([10, -1, 12], dtype=np.int64)
    # every step accounted for once: s0 orphan (start without end), s1 unbound, f2 orphan (end without start)
    assert chain(key, step, row) == ([], [], [], [0, 2], [1])


# ---- parse_number: decimal text -> integer of 10**-shift units ----


def parse(text: str, shift: int = 3) -> tuple[int, int, int]:
    buf = np.frombuffer(text.encode(), np.uint8)
    value, end, status = parse_number(buf, 0, len(buf), shift)
    return int(value), int(end), int(status)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("123", 123000),
        ("123.4567", 123457),
        ("1712168098012345.678", 1712168098012345678),
        ("-0.5", -500),
        ("1e3", 1000000),
        ("1.5e-3", 2),
        ("0.0004", 0),
        ("0.0005", 1),
        ("1E+2", 100000),
        ("0", 0),
        ("-0", 0),
        ("9223372036854775.807", 2**63 - 1),
        ("1e-400", 0),
        ("0e999", 0),
        ("-9223372036854775.807", -(2**63 - 1)),
        ("1712195495519689.047", 1712195495519689047),
    ],
)
def test_parse_number_values(text: str, value: int) -> None:
    assert parse(text) == (value, len(text), 0)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("99999999999999999999", 3),
        ("9223372036854775.808", 3),
        ("9999999999999999.999", 3),
        ("1e30", 3),
        ("abc", 1),
        ("-", 1),
        ("1e", 1),
        ("", 1),
    ],
)
def test_parse_number_errors(text: str, status: int) -> None:
    assert parse(text)[2] == status


@pytest.mark.parametrize(
    ("text", "shift", "value"),
    [
        ("0.9999999999999999999", 0, 1),  # 19 digits all dropped (10**19 divides): the rounding read 2 * rest
        ("-0.9999999999999999999", 0, -1),  # in uint64, which wrapped above 2**63 and rounded down
        ("0.0009999999999999999999", 3, 1),
        ("9500000000000000000e-19", 0, 1),
        ("9400000000000000000e-19", 0, 1),
        ("4999999999999999999e-19", 0, 0),
        ("0.0000000000000000000999", 3, 0),
    ],
)
def test_parse_number_rounds_when_all_nineteen_digits_are_dropped(text: str, shift: int, value: int) -> None:
    assert parse(text, shift) == (value, len(text), 0)


def test_parse_number_stops_at_the_end_of_the_number() -> None:
    assert parse('12.5,"dur"') == (12500, 4, 0)
    assert parse("7}", shift=0) == (7, 1, 0)


@pytest.mark.parametrize("seed", SEEDS)
def test_parse_number_matches_decimal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        int_digits, frac_digits = int(rng.integers(0, 21)), int(rng.integers(0, 7))
        digits = "".join(rng.choice(list("0123456789"), int_digits + frac_digits)) or "0"
        text = (digits[:int_digits] or "0") + ("." + digits[int_digits:] if frac_digits else "")
        if rng.random() < 0.3:
            text += f"e{int(rng.integers(-6, 3))}"
        if rng.random() < 0.3:
            text = "-" + text
        shift = int(rng.integers(0, 4))
        want = (Decimal(text) * 10**shift).quantize(Decimal(1), rounding=ROUND_HALF_UP)
        got = parse(text, shift)
        if abs(want) > 2**63 - 1:
            assert got[2] == 3, text
        else:
            assert got == (int(want), len(text), 0), (text, shift)


# ---- string views over the scanner's args bytes ----


@pytest.mark.parametrize("limit", [48, 60, 1 << 20])  # 48: the longest text
def test_texts_at_offsets_view_every_text_across_buffers(limit: int) -> None:
    from di.convert.stringviews import texts_at_offsets

    texts = [
        "",
        "{}",
        '{"a":1}',
        '{"long key":"a value longer than twelve bytes"}',
        "x",
        '{"ü":"ß"}',
        "",
        "twelve bytes",
    ]
    valid = np.array([False, True, True, True, True, True, True, True])
    data = b"".join(t.encode() for t in texts)
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
    got = texts_at_offsets(np.frombuffer(data, np.uint8), offsets, valid, "args", limit=limit)
    assert got.to_list() == [t if v else None for t, v in zip(texts, valid)]
    assert got.gather([3, 0, 5]).to_list() == [texts[3], None, texts[5]]


# ---- the scanner's result ----


def _scan(text: bytes, capacity: int | None = None):
    from di.convert.chrome import scan as S
    from di.convert.symbols import new_table

    buf = np.frombuffer(text, dtype=np.uint8)  # read-only, as decode passes it
    cols = S.alloc_columns(text.count(b"{") + 1 if capacity is None else capacity)
    abuf = np.empty(len(text) + S.ARGS_SLACK, dtype=np.uint8)
    top = np.empty((8, 4), dtype=np.int64)
    got = S.scan(buf, cols, *new_table(), abuf, top, S.new_progress())
    return got, S.columns(got.cols, got.events), bytes(abuf[: got.args_bytes]), top


EVENTS = b'[{"ph":"X","pid":1,"ts":1,"dur":2,"args":{"a": [1, 2]}},{"ph":"i","tid":"t","ts":3}'


@pytest.mark.parametrize(
    ("text", "events", "error", "at", "keys"),
    [
        (b'{"a":1,"traceEvents":' + EVENTS + b'],"b":[2]}', 2, "E_NONE", None, 2),
        (EVENTS + b"]", 2, "E_NONE", None, 0),
        (EVENTS, 2, "E_NONE", None, 0),  # the array format may end without its ']'
        (EVENTS + b',{"ph":"X","ts":', 2, "E_TRUNCATED", len(EVENTS) + 1, 0),
        (b'{"traceEvents":' + EVENTS + b',{"ph" "X"}]}', 2, "E_SYNTAX", len(EVENTS) + 16, 0),
        (b'{"traceEvents":' + EVENTS + b'] "b":1}', 2, "E_SYNTAX", len(EVENTS) + 17, 0),
        (b'{"other":[{"ph":"X"}]}', 0, "E_NOT_TRACE", None, 1),
        (b"  \xef\xbb\xbf  ", 0, "E_NOT_TRACE", None, 0),
    ],
)
def test_scan_names_what_it_found(text: bytes, events: int, error: str, at: int | None, keys: int) -> None:
    from di.convert.chrome import scan as S

    got, cols, args, top = _scan(text)
    assert (got.events, got.error) == (events, getattr(S, error))
    if at is not None:
        assert got.error_at == at and text[at : at + 1] in (b"{", b'"', b" ")
    assert got.array_format == text.startswith(b"[")
    assert got.top_keys == keys
    if events:
        # fields an event lacks keep the zero the columns start with; name and cat are -1 without a name
        assert cols["ph"].tolist() == [ord("X"), ord("i")][:events]
        assert cols["pid_k"].tolist() == [S.K_INT, S.K_NONE] and cols["tid_k"].tolist() == [S.K_NONE, S.K_STR]
        assert cols["pid"].tolist() == [1, 0] and cols["name"].tolist() == [-1, -1]
        assert cols["ts"].tolist() == [1000, 3000] and cols["dur"].tolist()[0] == 2000
        assert cols["flags"].tolist() == [S.F_TS | S.F_DUR | S.F_ARGS, S.F_TS]
        assert args == b'{"a":[1,2]}'
        assert cols["args_at"].tolist() == [0, 0] and cols["args_end"].tolist() == [len(args), 0]
    if keys == 2:
        names = [text[s:e] for s, e, _, _ in top[: got.top_keys]]
        assert names == [b"a", b"b"] and text[top[1, 2] : top[1, 3]] == b"[2]"


def test_equal_args_texts_are_copied_once() -> None:
    """An args text equal to one copied before points at that copy; texts that differ in their last byte, in a
    middle word, in length or only in a member the scanner lifts stay apart, and each event reads its own text."""
    import json

    from di.convert.chrome import scan as S

    long = {"Input Dims": [[4096, 1024], [1024]], "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}
    variants = [
        long,
        {**long, "Concrete Inputs": ["", "x"]},  # the last bytes differ
        {**long, "Input type": ["float", "floa8"]},  # a middle word differs
        {"a": 1},  # short: inlined in its view
        {**long, "Concrete Inputs": ["", "", ""]},  # longer
    ]
    order = [0, 1, 0, 2, 3, 0, 4, 3, 1, 2]
    events = [
        {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {**variants[v], "External id": i}}
        for i, v in enumerate(order)
    ]
    events.insert(4, {"ph": "i", "name": "no args", "pid": 1, "tid": 1, "ts": 4})
    text = json.dumps({"traceEvents": events}).encode()
    got, cols, args, _ = _scan(text)
    assert got.events == len(events)
    texts = [
        args[a:b].decode() if f & S.F_ARGS else None
        for a, b, f in zip(cols["args_at"].tolist(), cols["args_end"].tolist(), cols["flags"].tolist())
    ]
    assert texts == [
        json.dumps(e["args"] and {k: v for k, v in e["args"].items() if k != "External id"}, separators=(",", ":"))
        if "args" in e
        else None
        for e in events
    ]
    rows = np.array([i for i, e in enumerate(events) if "args" in e])
    assert S.lifted_columns(cols, got.packed_values(), rows, ("ext_id",))["ext_id"].tolist() == list(range(len(order)))
    distinct = {json.dumps(v, separators=(",", ":")) for v in variants}
    assert len(args) == sum(len(t) for t in distinct)  # each distinct text copied once
    firsts = {}
    for t, at in zip(texts, cols["args_at"].tolist()):
        if t is not None:
            assert firsts.setdefault(t, at) == at


def test_more_distinct_args_texts_than_the_memo_holds(tmp_path: Path) -> None:
    """Past ARGS_MEMO_SLOTS distinct texts, slots are taken over by later texts: every event still reads its own
    text, and repeats of recent texts still share a copy."""
    import json

    from di.convert.chrome import scan as S

    n = S.ARGS_MEMO_SLOTS + 5000
    values = [i % (n - 3000) for i in range(n)]  # the last 3000 repeat the first ones, long evicted or not
    events = [
        {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": i, "dur": 1, "args": {"a long key": v, "b": [v]}}
        for i, v in enumerate(values)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    got, cols, args, _ = _scan(path.read_bytes())
    assert got.events == n
    texts = [args[a:b] for a, b in zip(cols["args_at"].tolist(), cols["args_end"].tolist())]
    assert texts == [json.dumps(e["args"], separators=(",", ":")).encode() for e in events]
    assert len(set(texts)) * 20 < len(args) < sum(map(len, texts))  # repeats shared; the distinct ones kept apart
    trace = di.load(path)
    assert trace.events.get_column("args").to_list() == [json.dumps(e["args"], separators=(",", ":")) for e in events]


@pytest.mark.parametrize("capacity", [0, 1, 2, 3, 7])
@pytest.mark.parametrize("array_format", [False, True])
def test_scan_grows_its_columns_and_loses_no_event(capacity: int, array_format: bool) -> None:
    import json

    from di.convert.chrome import scan as S

    events = [
        {"ph": "X", "name": f"e{i % 5}", "pid": i, "tid": f"t{i % 3}", "ts": i, "dur": 1, "args": {"k": i}}
        for i in range(23)
    ]
    for i, e in enumerate(events):  # lifted members on some events: their packed values move with the columns
        e["args"].update({"Python id": 100 + i, "correlation": 200 + i} if i % 2 else {"External id": 300 + i})
    text = json.dumps(events if array_format else {"traceEvents": events, "z": 1}, indent=1).encode()
    got, cols, args, _ = _scan(text, capacity)
    want, want_cols, want_args, _ = _scan(text)
    assert got.cols[0].shape[1] > capacity and want.cols[0].shape[1] == text.count(b"{") + 1
    assert (got.events, got.error, got.error_at, got.top_keys, args) == (
        23,
        want.error,
        want.error_at,
        want.top_keys,
        want_args,
    )
    assert {k: v.tolist() for k, v in cols.items()} == {k: v.tolist() for k, v in want_cols.items()}
    assert cols["pid"].tolist() == list(range(23)) and args.count(b'{"k":') == 23
    assert got.packed_values().tolist() == want.packed_values().tolist() and got.lifted == 23 + 11
    rows = np.arange(23)
    assert S.lifted_columns(cols, got.packed_values(), rows, ("py_id",))["py_id"].tolist() == [
        100 + i if i % 2 else 0 for i in rows
    ]
    assert S.lifted_columns(cols, got.packed_values(), rows, ("ext_id",))["ext_id"].tolist() == [
        0 if i % 2 else 300 + i for i in rows
    ]


# ---- copy_value: where the value ends and its errors (copying or not), whitespace outside strings dropped ----


def _minified_reference(text: bytes) -> bytes:
    out, in_str, k = bytearray(), False, 0
    while k < len(text):
        c = text[k : k + 1]
        if in_str and c == b"\\":
            out += text[k : k + 2]
            k += 2
            continue
        if c == b'"':
            in_str = not in_str
        if in_str or c not in b" \t\r\n":
            out += c
        k += 1
    return bytes(out)


def _value_end_reference(buf: np.ndarray, i: int, n: int) -> int:
    """Where the JSON value at i ends, TRUNCATED or BAD_SYNTAX: the scanner's skip_value as it was
    before copy_value took its place, in Python."""
    from di.convert.chrome import jsontext as J

    depth = 0
    while i < n:
        c = J.BYTE_CLASS[buf[i]]
        if c == J.C_QUOTE:
            j = J.end_string(buf, i + 1, n)
            if j < 0:
                return J.TRUNCATED
            i = j + 1
        elif c == J.C_OPEN:
            depth += 1
            i += 1
            continue
        elif c == J.C_CLOSE:
            depth -= 1
            if depth < 0:
                return J.BAD_SYNTAX
            i += 1
        elif c >= J.C_SPACE:
            if depth == 0:
                return J.BAD_SYNTAX
            i += 1
            continue
        else:
            start = i
            while i < n and J.BYTE_CLASS[buf[i]] == J.C_WORD:
                i += 1
            if i == start:
                return J.BAD_SYNTAX
            if i >= n and depth == 0:
                return J.TRUNCATED
        if depth == 0:
            return i
    return J.TRUNCATED


@pytest.mark.parametrize("seed", SEEDS)
def test_copy_value_ends_where_a_json_value_ends_copying_or_not(seed: int) -> None:
    from di.convert.chrome.jsontext import COPY, SKIP, copy_value

    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b'{}[]"\\\\:,  \n\tab1-.#', dtype=np.uint8)
    starts = np.frombuffer(b'{["tn1-', dtype=np.uint8)
    checked = 0
    for size in range(1, 60):
        for _ in range(20):
            data = rng.choice(alphabet, size).astype(np.uint8)
            data[0] = rng.choice(starts)
            data.flags.writeable = False  # as the scanner's buffers are
            n = np.int64(size)
            out = np.zeros(2 * size + 16, dtype=np.uint8)
            end = _value_end_reference(data, 0, size)
            got, o = copy_value(data, np.int64(0), n, out, np.int64(0), COPY)
            untouched = np.zeros(1, dtype=np.uint8)
            skipped, o_skip = copy_value(data, np.int64(0), n, untouched, np.int64(0), SKIP)
            assert got == skipped == end and o_skip == 0 and untouched[0] == 0, data.tobytes()
            if end >= 0:
                checked += 1
                assert bytes(out[:o]) == _minified_reference(data[:end].tobytes()), data.tobytes()
    assert checked > 100


@pytest.mark.parametrize("seed", range(5))
def test_texts_at_offsets_random_lengths_to_the_last_byte(seed: int) -> None:
    from di.convert.stringviews import texts_at_offsets

    rng = np.random.default_rng(seed)
    texts = ["".join(rng.choice(list("abcdé€xyz0123"), int(rng.integers(0, 30)))) for _ in range(300)]
    data = "".join(texts).encode()
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
    valid = rng.random(len(texts)) > 0.1
    got = texts_at_offsets(np.frombuffer(data, np.uint8), offsets, valid, "t")
    assert got.to_list() == [t if v else None for t, v in zip(texts, valid)]


@pytest.mark.parametrize(
    ("value", "kind", "want"),
    [
        (b"7", "K_INT", 7),
        (b"0012", "K_INT", 12),
        (b"123456789012345678", "K_INT", 123456789012345678),  # 18 digits: read in the scanner's own loop
        (b"1234567890123456789", "K_INT", 1234567890123456789),  # 19: by parse_number
        (b"9223372036854775808", "K_STR", "9223372036854775808"),  # beyond int64: its text
        (b"-3", "K_INT", -3),
        (b"1.5", "K_INT", 2),  # parse_number rounds half up
        (b"2e3", "K_INT", 2000),
        (b'"7"', "K_STR", "7"),
    ],
)
@pytest.mark.parametrize(
    "layout", [b'[{"ph":"X","pid":%s,"tid":1}]', b'[{"ph":"X","pid":%s ,"tid":1}]', b'[{"tid":1,"pid":%s}]']
)
def test_polymorphic_values_as_integers_or_texts(value: bytes, kind: str, want: object, layout: bytes) -> None:
    """pid, tid and id: an integer when the number is one int64 can hold, else its text as a symbol."""
    from di.convert.chrome import scan as S

    text = layout % value
    got, cols, _, _ = _scan(text)
    assert got.events == 1 and got.error == S.E_NONE
    assert int(cols["pid_k"][0]) == getattr(S, kind)
    if kind == "K_INT":
        assert int(cols["pid"][0]) == want
    assert int(cols["tid_k"][0]) == S.K_INT and int(cols["tid"][0]) == 1
