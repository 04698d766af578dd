"""A compiled scanner for Chrome Trace Event JSON: bytes in, columns out.

One numba pass over the UTF-8 bytes of a trace finds every event object of
``traceEvents`` (object format) or of the top-level array (array format) and
fills one numpy column per field the reader needs:

- ``ts``/``dur`` parsed from their decimal text straight to int64 ns
  (microseconds x 1000, exact for any number of digits up to 19 significant
  ones; sub-ns digits are rounded half up), never through float64;
- strings (``name``, ``cat``, string ``pid``/``tid``/``id``) interned into
  dense ids over the raw byte spans (an open-addressing table that compares
  bytes, so equal ids mean equal text);
- ``args`` copied, whitespace removed, into one buffer with each event's int64
  span there (so a string column views it without a Python loop), less
  the members that columns of the model hold (:func:`di.schema.args_keys`:
  ``correlation``, ``bytes`` and Kineto's per-event ids such as ``External id``),
  whose integer values are lifted out and packed, each record's one after
  another (:func:`lifted_columns`). Those ids
  made almost every event's args text distinct (a real-shaped 1.2 M-event
  profile: 1.2 M distinct texts, 177 MB); without them the texts repeat, and a
  text equal to one copied before is not kept twice: its event's span points at
  the earlier copy (:func:`_seen_args`; that profile's 114 MB of texts take
  375 distinct copies).

The scanner stops at the first syntax error and reports its byte offset;
everything before it is kept. No Python object is created per event.

Compile hygiene (see :mod:`di.convert.perfetto.encode`): each numba function
is compiled on its own and linked, with its callees, into every caller, and a
cold start pays for each (typing, LLVM, the cache entry a warm start loads).
So the per-event parser is written out in :func:`_scan_array` itself (not an
``inline="always"`` helper, whose IR numba copies: that cost 0.7 s of compile)
and the pid/tid/id values and the args copy with it; what stays a function is
shared by several callers (:mod:`jsontext`,
:func:`di.convert.symbols.intern`, :func:`di.convert.chrome.numbers.parse_number`),
and the smallest helpers (``skip_ws``, ``head_word``) are intrinsics, LLVM written into
each caller with no numba function of their own. Names and categories of at most 16
bytes are looked up in a small memo (their length and two words) before ``intern``.
Numba's passes cost per branch (each ``if`` is a typed ``bool`` call, a block,
SSA and liveness work), so the event keys are found by a perfect hash into one
table of what to do with each (:data:`_EVENT_KEYS`), not by a switch of compares:
that and an event's flags and status kept in locals cut the kernel from 252 to
172 blocks and its compile by about a quarter.
Arguments that select a behaviour are typed (``_AS_IS``, ``_US_TO_NS``), never
literal ints, which numba would compile a version for each. Bytes are copied by
:func:`di.convert.bytewords.copy_bytes` (one ``memcpy``), not a byte loop, which
LLVM would vectorise, with alias checks and tails, at each copy site.
The kernels compile through :class:`di.jitpipeline.ScalarKernelCompiler` (numba's
pipeline less the passes they do not need, and no cfunc wrapper): a tuple result is
unpacked (``i, _ = copy_value(...)``), not indexed, as that pipeline asks. Moving
the ``args`` copy into a function of its own was measured and dropped: the new
function compiled for 1.5 CPU-s while the kernel's own compile fell by 0.5 (each
caller re-optimises and emits, in LLVM, the callees linked into it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from di.jitpipeline import ScalarKernelCompiler

from di.convert.bytewords import copy_bytes, load_u64, shift_up, store_u64
from di.convert.chrome.jsontext import (
    BAD_SYNTAX,
    CLOSE_ARRAY,
    CLOSE_OBJECT,
    COLON,
    COMMA,
    DIGIT_0,
    DIGIT_9,
    MINUS,
    OPEN_ARRAY,
    OPEN_OBJECT,
    QUOTE,
    TRUE_START,
    TRUNCATED,
    NUMBER_BYTES,
    copy_string,
    COPY,
    SKIP,
    NO_OUT,
    copy_value,
    end_string,
    head_word,
    skip_ws,
)
from di.convert.chrome.numbers import parse_number
from di.convert.symbols import FULL, grown_table, intern
from di.schema import args_keys


# Per-event status codes (0 = sound). Named in di.convert.chrome.reader.
ST_OK = 0
ST_BAD_TS = 1
ST_BAD_DUR = 2
ST_OVERFLOW = 3

# Kinds of a polymorphic value (pid, tid, id, bind_id).
K_NONE = 0
K_INT = 1
K_STR = 2

# Scan-level error codes. Inside the kernels a failure travels as a negative
# position, -E_*: jsontext's TRUNCATED and BAD_SYNTAX are exactly those of E_TRUNCATED and E_SYNTAX.
E_NONE = 0
E_TRUNCATED = -TRUNCATED
E_SYNTAX = -BAD_SYNTAX
E_NOT_TRACE = 3
E_FULL = 4  # the symbol table filled up: :func:`scan` goes on with a bigger one (never returned by it)
E_ROWS = 5  # the columns filled up: :func:`scan` resumes with bigger ones (never returned by it)


# The scanner's output (:data:`Columns`): three 2-D arrays, one row per field and one column per
# event, so that each field is a contiguous row (a zero-copy column) and the
# kernels take four arrays instead of twenty-two; the fourth holds the lifted members' values, packed.
LIFTED_IDS = ("ext_id", "seq", "ev_idx", "rf_id", "py_id", "py_parent")
"""The optional id columns lifted out of args, the first of :data:`LIFTED`."""
LIFTED = (*LIFTED_IDS, "corr", "bytes")
"""The columns whose args members the scanner lifts out of the text (bit ``1 << j`` of a record's ``lifted`` field
for ``LIFTED[j]``; their values packed, :func:`lifted_columns`). Written out here, not read from the schema, as the
kernel's tables are constants of its cached machine code (a change of the schema alone would not recompile it); the
import checks them against :func:`di.schema.args_keys`."""
LIFTED_BIT = {column: 1 << j for j, column in enumerate(LIFTED)}
"""Lifted column -> its bit of the ``lifted`` field."""
U8_FIELDS = ("ph", "pid_k", "tid_k", "id_k", "bind_k", "flags", "scope", "bp", "status", "lifted")
I32_FIELDS = ("name", "cat")
I64_FIELDS = ("ts", "dur", "pid", "tid", "id", "bind", "xs", "xe", "args_at", "args_end", "lifted_at")
B_PH, B_PID_K, B_TID_K, B_ID_K, B_BIND_K, B_FLAGS, B_SCOPE, B_BP, B_STATUS, B_LIFTED = range(len(U8_FIELDS))
S_NAME, S_CAT = range(len(I32_FIELDS))
I_TS, I_DUR, I_PID, I_TID, I_ID, I_BIND, I_XS, I_XE, I_ARGS_AT, I_ARGS_END, I_LIFTED_AT = range(len(I64_FIELDS))
COLUMNS = U8_FIELDS + I32_FIELDS + I64_FIELDS
Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""The scanner's output: (uint8, int32, int64) field arrays, one row per field, and the lifted values packed."""

# flags bits (16 and 32 free)
F_TS, F_DUR, F_FLOW_IN, F_FLOW_OUT, F_ARGS, F_COLL = 1, 2, 4, 8, 64, 128
"""Bits of the ``flags`` column: ts, dur, flow_in, flow_out found; args present; args has a ``"Collective name"``
member (Kineto's collective calls)."""

# parse_number shifts; numpy scalars, not literals, so one compiled version serves both
_AS_IS = np.int64(0)
_US_TO_NS = np.int64(3)


def _word(text: bytes) -> np.uint64:
    """Up to eight ASCII bytes as the little-endian word :func:`~di.convert.chrome.jsontext.head_word` loads."""
    return np.uint64(int.from_bytes(text[:8], "little"))


# What the scanner does with an args member, by its key (A_COPY: copies it).
A_COPY, A_COLL, A_LIFT = 0, 1, 2

_LIFTED_KEYS = {
    b"External id": "ext_id",
    b"Sequence number": "seq",
    b"Ev Idx": "ev_idx",
    b"Record function id": "rf_id",
    b"Python id": "py_id",
    b"Python parent id": "py_parent",
    b"correlation": "corr",
    b"bytes": "bytes",
}
_ARGS_KEYS = {
    b"Collective name": (A_COLL, F_COLL),
    **{key: (A_LIFT, LIFTED_BIT[column]) for key, column in _LIFTED_KEYS.items()},
}
"""Args key -> (action, bit): ``Collective name`` sets the F_COLL flag (and is copied); the members of
:func:`di.schema.args_keys` are lifted, each with its bit of ``lifted``."""
if {(column, key.decode()) for key, column in _LIFTED_KEYS.items()} != set(args_keys()):
    raise AssertionError(f"the scanner lifts {sorted(_LIFTED_KEYS)}, the schema names {sorted(args_keys())}")


def lifted(c: dict[str, np.ndarray], column: str, rows: np.ndarray) -> np.ndarray:
    """Whether each of the scanner ``rows`` had the args member that ``column`` holds (:data:`LIFTED`)."""
    return (c["lifted"][rows] & LIFTED_BIT[column]) != 0


def lifted_columns(
    c: dict[str, np.ndarray], packed: np.ndarray, rows: np.ndarray, columns: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """The int64 values of the lifted members ``columns`` (of :data:`LIFTED`) of the scanner ``rows``, by column, 0
    where a row has none (:func:`lifted`): one pass over the rows for all of them (:func:`_unpack`).

    The values are packed, not a column each: a record's are ``packed[lifted_at:]`` in the order of
    :data:`LIFTED`, one per bit of its ``lifted`` field, so a record without any writes nothing. Eight int64
    columns, most rows empty, made the scan write (and the system zero) 115 MB for a real-shaped 1.2 M-event profile,
    where its values take 24 MB (issue 16). ``packed`` holds one more value than the records' (the place of a value
    after a record's last), so every row reads one."""
    if not columns:
        return {}
    wanted = np.uint8(sum(LIFTED_BIT[column] for column in columns))
    out = np.empty((len(LIFTED), rows.size), dtype=np.int64)
    _unpack(packed, c["lifted_at"], c["lifted"], rows.astype(np.int64, copy=False), wanted, out)
    return {column: out[LIFTED.index(column)] for column in columns}


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _unpack(packed, first, bits, rows, wanted, out):
    """Row j of ``out``, for each bit ``1 << j`` of ``wanted``: the lifted value j of each of the scanner ``rows``
    (0 where it has none)."""
    for r in range(rows.size):
        k = rows[r]
        have = bits[k]
        at = first[k]
        for j in range(out.shape[0]):
            bit = np.uint8(1 << j)
            v = 0
            if have & bit:
                v = packed[at]
                at += 1
            if wanted & bit:
                out[j, r] = v


POPCOUNT = np.array([bin(bits).count("1") for bits in range(1 << len(LIFTED))], dtype=np.int64)
"""The number of bits set in each byte: the number of lifted values of a record's ``lifted`` bits, and a record's
value j is the ``POPCOUNT[bits & ((1 << j) - 1)]``-th of its packed ones."""


def repacked(c: dict[str, np.ndarray], packed: np.ndarray, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Give the scanner ``rows`` new lifted values: ``values`` (int64, a row of :data:`LIFTED` values each, those of the
    bits set in ``c["lifted"][rows]``, set first) packed after ``packed`` and pointed at; returns the new packed
    values (the caller keeps them with ``c``). For a reader that moves values between records (a B/E pair)."""
    bits = c["lifted"][rows]
    has = ((bits[:, None] >> np.arange(len(LIFTED), dtype=np.uint8)) & 1).astype(bool)
    counts = POPCOUNT[bits]
    used = packed.size - 1
    c["lifted_at"][rows] = used + np.cumsum(counts) - counts
    return np.concatenate([packed[:used], values[has], np.zeros(1, dtype=np.int64)])


_ARG_MULT = np.uint64(0xE4B06CE60741C7A9)
_ARG_SHIFT = np.uint64(59)
"""The args keys hash into 32 slots: ``((head + 31 * tail + length) * _ARG_MULT) >> _ARG_SHIFT`` (wrapping),
where head and tail are the words of the key's first and last eight bytes (tail = head below eight bytes);
the multiplier is one that gives each key of :data:`_ARGS_KEYS` a slot of its own (checked at import)."""


def _arg_tables() -> tuple[np.ndarray, np.ndarray]:
    """(each slot's (head, tail) words; each slot's key length (-1: empty), action and bit),
    checking that no two keys share a slot and that each one's length has its bit in :data:`_ARG_LENGTHS`."""
    words = np.zeros((32, 2), dtype=np.uint64)
    table = np.zeros((32, 3), dtype=np.int64)
    table[:, 0] = -1
    for key, row in _ARGS_KEYS.items():
        head = int(_word(key))
        tail = int(_word(key[-8:])) if len(key) >= 8 else head
        slot = (((head + 31 * tail + len(key)) * int(_ARG_MULT)) & (2**64 - 1)) >> int(_ARG_SHIFT)
        if table[slot, 0] >= 0:
            raise AssertionError(f"args keys {key!r} and another share slot {slot}")
        if len(key) > ARG_LONGEST:
            raise AssertionError(f"args key {key!r}: outside the lengths the scanner hashes")
        words[slot] = (head, tail)
        table[slot] = (len(key), *row)
    return words, table


ARG_LONGEST = 63
"""The longest key :data:`_ARG_LENGTHS` has a bit for."""
_ARG_LENGTHS = np.uint64(np.bitwise_or.reduce([1 << len(key) for key in _ARGS_KEYS]))
"""Bit L set for each length L of a key of :data:`_ARGS_KEYS`: a member of another length is copied unhashed (most of
Kineto's: ``queued``, ``grid``, ``Input Dims``, ``registers per thread`` ...)."""


# What the scanner does with an event member's value, by its key (G_SKIP: skipped).
G_SKIP, G_CHAR, G_SYMBOL, G_NUMBER, G_POLY, G_DIFLOW, G_FLOW, G_ARGS = range(8)
_EVENT_KEYS = {
    # key: (action, the value's first byte that action needs (0: any), row of w8, of w32, of w64, flags bit, status)
    b"ph": (G_CHAR, QUOTE, B_PH, 0, 0, 0, 0),
    b"s": (G_CHAR, QUOTE, B_SCOPE, 0, 0, 0, 0),
    b"bp": (G_CHAR, QUOTE, B_BP, 0, 0, 0, 0),
    b"name": (G_SYMBOL, QUOTE, 0, S_NAME, 0, 0, 0),
    b"cat": (G_SYMBOL, QUOTE, 0, S_CAT, 0, 0, 0),
    b"ts": (G_NUMBER, 0, 0, 0, I_TS, F_TS, ST_BAD_TS),
    b"dur": (G_NUMBER, 0, 0, 0, I_DUR, F_DUR, ST_BAD_DUR),
    b"pid": (G_POLY, 0, B_PID_K, 0, I_PID, 0, 0),
    b"tid": (G_POLY, 0, B_TID_K, 0, I_TID, 0, 0),
    b"id": (G_POLY, 0, B_ID_K, 0, I_ID, 0, 0),
    b"bind_id": (G_POLY, 0, B_BIND_K, 0, I_BIND, 0, 0),
    b"di_flow": (G_DIFLOW, OPEN_OBJECT, 0, 0, 0, 0, 0),
    b"flow_in": (G_FLOW, 0, 0, 0, 0, F_FLOW_IN, 0),
    b"flow_out": (G_FLOW, 0, 0, 0, 0, F_FLOW_OUT, 0),
    b"args": (G_ARGS, OPEN_OBJECT, 0, 0, 0, 0, 0),
}
"""The event keys the scanner reads (each of at most eight bytes) and what it does with their values."""
_KEY_MULT = np.uint64(0xBCFBB050ACAB1A6B)
_MEMO_SHIFT = np.uint64(58)
"""The memo of short symbols has 64 slots (the top six bits of a multiplicative hash)."""
_ONE = np.uint64(1)
_KEY_SHIFT = np.uint64(59)
"""A perfect hash of the keys' words into 32 slots: ``(word * _KEY_MULT) >> _KEY_SHIFT`` (wrapping)."""


def _key_tables() -> tuple[np.ndarray, np.ndarray]:
    """(the words of the slots' keys, zero in an empty slot; one row per slot: key length (-1 in an
    empty slot) and the fields of :data:`_EVENT_KEYS`), checking that no two keys share a slot."""
    words = np.zeros(32, dtype=np.uint64)
    table = np.zeros((32, 8), dtype=np.int64)
    table[:, 0] = -1
    for key, row in _EVENT_KEYS.items():
        w = int(_word(key))
        slot = ((w * int(_KEY_MULT)) & (2**64 - 1)) >> int(_KEY_SHIFT)
        if table[slot, 0] >= 0:
            raise AssertionError(f"event keys {key!r} and another share slot {slot}")
        words[slot] = w
        table[slot] = (len(key), *row)
    return words, table


_KEY_WORDS, _KEY_TABLE = _key_tables()
T_LEN, T_ACTION, T_NEEDS, T_ROW8, T_ROW32, T_ROW64, T_FLAG, T_STATUS = range(8)
_ARG_WORDS, _ARG_TABLE = _arg_tables()


ARGS_MEMO_SLOTS = 1 << 16
"""Slots of the memo of args texts copied (:func:`new_args_memo`): one text each, the last one whose hash fell
there, so a trace with more distinct texts than slots keeps some equal texts twice (its column is right, only
larger)."""
_ARGS_SHIFT = np.uint64(64 - 16)
_WORD = 8
ARGS_SLACK = _WORD
"""Bytes the args buffer has beyond the most text it can hold (the input's size): the memo reads whole words."""


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _seen_args(abuf, a, b, seen):
    """The start of an args text copied before that equals ``abuf[a:b]``, or ``a`` when none is in the memo
    ``seen`` (which then remembers this one): a hash of the text's words picks the slot, whose (hash, start,
    length) must match and whose bytes must be equal. Reads whole words, the last one masked: ``abuf`` has
    :data:`ARGS_SLACK` bytes past the end of the texts."""
    n = b - a
    h = np.uint64(n)
    p = np.int64(0)
    while p < n:
        w = load_u64(abuf, a + p)
        if n - p < _WORD:
            w &= (_ONE << np.uint64(8 * (n - p))) - _ONE
        h = (h ^ w) * _KEY_MULT
        h ^= h >> np.uint64(29)
        p += _WORD
    slot = (h * _KEY_MULT) >> _ARGS_SHIFT
    key = np.int64(h >> _ONE)
    at = seen[slot, 1]
    if seen[slot, 0] == key and seen[slot, 2] == n:
        p = 0
        while p < n:
            x = load_u64(abuf, at + p) ^ load_u64(abuf, a + p)
            if n - p < _WORD:
                x &= (_ONE << np.uint64(8 * (n - p))) - _ONE
            if x:
                break
            p += _WORD
        if p >= n:
            return at
    seen[slot, 0] = key
    seen[slot, 1] = a
    seen[slot, 2] = n
    return a


@njit(cache=True, nogil=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def _scan_array(buf, i, k, o, c, slots, starts, ends, count, abuf, progress, memo, seen):
    """Events of the array whose '[' (or, resuming, the ',' before the next event) is at
    buf[i], into rows k... of the columns ``c`` and abuf[o:]; returns (next index, n events,
    error, error offset, args bytes used).

    Each event object is parsed here, in this one kernel (key codes, numbers, symbols,
    the ``args`` object copied). An error inside an event reports the
    event's '{' and keeps the rows before it. ``E_ROWS``: the columns are full; the next
    index is where to resume with bigger ones. ``progress[0]`` is set to the byte offset
    reached every 65,536 events; the kernel runs without the GIL so that another thread
    can watch it. ``progress[1]`` counts the ``di_flow`` members, ``progress[2]`` the lifted values packed into the
    fourth array of ``c`` (:func:`lifted_columns`; an event that fails gives its values back). ``memo`` (:func:`new_memo`)
    holds the symbol ids of texts of at most 16 bytes interned by this scan, ``seen`` (:func:`new_args_memo`) the args
    texts copied (an event's args span: ``args_at``, ``args_end``)."""
    w8, w32, w64, lv = c
    nv = progress[2]
    n = buf.size
    cap = w8.shape[1]
    sep = i
    i = skip_ws(buf, i + 1, n)
    while i < n:
        if buf[i] == CLOSE_ARRAY:
            progress[2] = nv
            return i + 1, k, E_NONE, -1, o
        if buf[i] != OPEN_OBJECT:
            progress[2] = nv
            return i, k, E_SYNTAX, i, o
        if k >= cap:
            progress[2] = nv
            return sep, k, E_ROWS, i, o
        ev = i
        o0 = o
        lbase = nv
        # the columns start zeroed (alloc_columns), the value of every absent field but name and cat; the lifted
        # members' bits are set one by one as their values are packed, so an event read again (E_FULL) starts afresh
        w32[S_NAME, k] = -1
        w32[S_CAT, k] = -1
        w8[B_LIFTED, k] = 0
        err = E_NONE
        flags = 0
        status = ST_OK
        i = skip_ws(buf, i + 1, n)
        if i < n and buf[i] == CLOSE_OBJECT:
            i += 1
        else:
            while True:
                if i >= n:
                    err = E_TRUNCATED
                    break
                if buf[i] != QUOTE:
                    err = E_SYNTAX
                    break
                j = end_string(buf, i + 1, n)
                if j < 0:
                    err = E_TRUNCATED
                    break
                ks, ke = i + 1, j
                i = skip_ws(buf, j + 1, n)
                if i >= n:
                    err = E_TRUNCATED
                    break
                if buf[i] != COLON:
                    err = E_SYNTAX
                    break
                i = skip_ws(buf, i + 1, n)
                if i >= n:
                    err = E_TRUNCATED
                    break
                v0 = buf[i]
                # the key's slot in the tables (a perfect hash of its word), its action
                # G_SKIP unless the key and the value's first byte are those it reads
                L = ke - ks
                w = head_word(buf, ks, ke, n)
                t = (w * _KEY_MULT) >> _KEY_SHIFT
                act = G_SKIP
                if _KEY_WORDS[t] == w and _KEY_TABLE[t, T_LEN] == L:
                    need = _KEY_TABLE[t, T_NEEDS]
                    if need == 0 or v0 == need:
                        act = _KEY_TABLE[t, T_ACTION]
                if act == G_CHAR:
                    j = end_string(buf, i + 1, n)
                    if j < 0:
                        err = E_TRUNCATED
                        break
                    row = _KEY_TABLE[t, T_ROW8]
                    first = buf[i + 1] if j > i + 1 else 0
                    w8[row, k] = 0 if row == B_PH and j != i + 2 else first
                    i = j + 1
                elif act == G_SYMBOL:
                    j = end_string(buf, i + 1, n)
                    if j < 0:
                        err = E_TRUNCATED
                        break
                    # a text of at most 16 bytes is its length and two words (its first eight bytes and
                    # the eight that end it): found in the memo of those seen (most names and categories)
                    # without a call to intern
                    L = j - i - 1
                    a = head_word(buf, i + 1, j, n)
                    b = head_word(buf, j - 8, j, n)
                    slot = ((a ^ (b << _ONE) ^ np.uint64(L)) * _KEY_MULT) >> _MEMO_SHIFT
                    if L <= 16 and ((memo[slot, 0] ^ a) | (memo[slot, 1] ^ b) | (memo[slot, 2] ^ np.uint64(L))) == 0:
                        sid = np.int64(memo[slot, 3])
                    else:
                        sid = intern(buf, i + 1, j, slots, starts, ends, count)
                        if sid == FULL:
                            err = E_FULL
                            break
                        if L <= 16:
                            memo[slot, 0] = a
                            memo[slot, 1] = b
                            memo[slot, 2] = np.uint64(L)
                            memo[slot, 3] = np.uint64(sid)
                    w32[_KEY_TABLE[t, T_ROW32], k] = sid
                    i = j + 1
                elif act == G_NUMBER:
                    v, e, st = parse_number(buf, i, n, _US_TO_NS)
                    if st == 0:
                        w64[_KEY_TABLE[t, T_ROW64], k] = v
                        flags |= _KEY_TABLE[t, T_FLAG]
                        i = e
                    else:
                        if status == ST_OK:
                            status = ST_OVERFLOW if st == 3 else _KEY_TABLE[t, T_STATUS]
                        i, _ = copy_value(buf, i, n, abuf, o, SKIP)
                elif act == G_POLY:
                    # a polymorphic value: an int64, else its text as a symbol
                    kind = K_NONE
                    v = 0
                    if v0 == QUOTE:
                        j = end_string(buf, i + 1, n)
                        if j < 0:
                            err = E_TRUNCATED
                            break
                        v = intern(buf, i + 1, j, slots, starts, ends, count)
                        kind = K_STR
                        i = j + 1
                    else:
                        number = v0 == MINUS or DIGIT_0 <= v0 <= DIGIT_9
                        st = 1
                        if number:
                            v, e, st = parse_number(buf, i, n, _AS_IS)
                        if st == 0:
                            kind = K_INT
                            i = e
                        else:
                            e, _ = copy_value(buf, i, n, abuf, o, SKIP)
                            if e >= 0 and number:
                                # beyond int64 (or not an integer): keep its text as a symbol
                                v = intern(buf, i, e, slots, starts, ends, count)
                                kind = K_STR
                            i = e
                    if kind == K_STR and v == FULL:
                        err = E_FULL
                        break
                    w8[_KEY_TABLE[t, T_ROW8], k] = kind
                    w64[_KEY_TABLE[t, T_ROW64], k] = v
                elif act == G_DIFLOW:
                    progress[1] += 1
                    e, _ = copy_value(buf, i, n, abuf, o, SKIP)
                    w64[I_XS, k] = i
                    w64[I_XE, k] = e
                    i = e
                elif act == G_FLOW:
                    if v0 == TRUE_START:
                        flags |= _KEY_TABLE[t, T_FLAG]
                    i, _ = copy_value(buf, i, n, abuf, o, SKIP)
                elif act == G_ARGS:
                    # args: copied to abuf minified, less the members lifted into int64 rows
                    abuf[o] = OPEN_OBJECT
                    o += 1
                    i = skip_ws(buf, i + 1, n)
                    if i < n and buf[i] == CLOSE_OBJECT:
                        abuf[o] = CLOSE_OBJECT
                        o += 1
                        i += 1
                    else:
                        while True:
                            if i >= n:
                                err = E_TRUNCATED
                                break
                            if buf[i] != QUOTE:
                                err = E_SYNTAX
                                break
                            om = o  # where this member starts in abuf: a lifted one is taken back
                            j, o = copy_string(buf, i, n, abuf, o)
                            if j < 0:
                                err = E_TRUNCATED
                                break
                            ks, ke = i + 1, j
                            abuf[o] = COLON
                            o += 1
                            i = skip_ws(buf, j + 1, n)
                            if i >= n:
                                err = E_TRUNCATED
                                break
                            if buf[i] != COLON:
                                err = E_SYNTAX
                                break
                            i = skip_ws(buf, i + 1, n)
                            if i >= n:
                                err = E_TRUNCATED
                                break
                            # the members lifted or flagged (_ARG_TABLE), found by length and the words of
                            # their first and last eight bytes (a perfect hash of the keys di knows)
                            L = ke - ks
                            lift = A_COPY
                            slot = np.uint64(0)
                            if L <= ARG_LONGEST and (_ARG_LENGTHS >> np.uint64(L)) & _ONE:
                                hw = head_word(buf, ks, ke, n)
                                tw = head_word(buf, ke - 8, ke, n) if L >= 8 else hw
                                slot = ((hw + tw * np.uint64(31) + np.uint64(L)) * _ARG_MULT) >> _ARG_SHIFT
                                if _ARG_TABLE[slot, 0] == L and _ARG_WORDS[slot, 0] == hw and _ARG_WORDS[slot, 1] == tw:
                                    lift = _ARG_TABLE[slot, 1]
                                    if lift == A_COLL:
                                        flags |= F_COLL
                            v0 = buf[i]
                            dropped = False
                            if v0 == QUOTE:  # a string value: copied while it is scanned
                                j, o = copy_string(buf, i, n, abuf, o)
                                if j < 0:
                                    err = E_TRUNCATED
                                    break
                                e = j + 1
                            elif DIGIT_0 <= v0 <= DIGIT_9 or v0 == MINUS:  # a number: found, then copied
                                if lift == A_LIFT:
                                    v, e, st = parse_number(buf, i, n, _AS_IS)
                                    if st == 0:  # lifted: into its place among the record's packed values, its bit
                                        bit = _ARG_TABLE[slot, 2]  # set; the member taken back from the text
                                        bits = w8[B_LIFTED, k]
                                        place = lbase + POPCOUNT[bits & (bit - 1)]
                                        if bits & bit == 0:  # a new one: those after its place move up
                                            shift_up(lv, place, nv)
                                            nv += 1
                                            w8[B_LIFTED, k] = bits | bit
                                        lv[place] = v
                                        dropped = True
                                        o = om
                                    else:
                                        e, _ = copy_value(buf, i, n, abuf, o, SKIP)  # beyond int64: kept as written
                                        if e < 0:
                                            err = -e
                                            break
                                        o = copy_bytes(abuf, o, buf, i, e)
                                else:
                                    e = i
                                    while e < n and NUMBER_BYTES[buf[e]]:
                                        e += 1
                                    if e >= n:
                                        err = E_TRUNCATED
                                        break
                                    if (
                                        e - i <= _WORD and i + _WORD <= n and o + _WORD <= abuf.size
                                    ):  # most numbers: a word, no memcpy call
                                        store_u64(abuf, o, load_u64(buf, i))
                                        o += e - i
                                    else:
                                        o = copy_bytes(abuf, o, buf, i, e)
                            else:  # an object, an array or a literal
                                e, o = copy_value(buf, i, n, abuf, o, COPY)
                                if e < 0:
                                    err = -e
                                    break
                            i = skip_ws(buf, e, n)
                            if i >= n:
                                err = E_TRUNCATED
                                break
                            if buf[i] == COMMA:
                                if not dropped:
                                    abuf[o] = COMMA
                                    o += 1
                                i = skip_ws(buf, i + 1, n)
                            elif buf[i] == CLOSE_OBJECT:
                                if abuf[o - 1] == COMMA:  # the last member was lifted: the comma before it goes
                                    o -= 1
                                abuf[o] = CLOSE_OBJECT
                                o += 1
                                i += 1
                                break
                            else:
                                err = E_SYNTAX
                                break
                        if err != E_NONE:
                            break
                    flags |= F_ARGS
                else:
                    i, _ = copy_value(buf, i, n, abuf, o, SKIP)
                if i < 0:
                    err = -i
                    break
                i = skip_ws(buf, i, n)
                if i >= n:
                    err = E_TRUNCATED
                    break
                if buf[i] == COMMA:
                    i = skip_ws(buf, i + 1, n)
                elif buf[i] == CLOSE_OBJECT:
                    i += 1
                    break
                else:
                    err = E_SYNTAX
                    break
        if err != E_NONE:  # its values dropped too (E_FULL: resumed, like E_ROWS, from the separator before the event)
            progress[2] = lbase
            return (sep if err == E_FULL else ev), k, err, ev, o0
        if nv != lbase:
            w64[I_LIFTED_AT, k] = lbase
        w8[B_FLAGS, k] = flags
        if status != ST_OK:
            w8[B_STATUS, k] = status
        if flags & F_ARGS:
            at = _seen_args(abuf, o0, o, seen)
            w64[I_ARGS_AT, k] = at
            w64[I_ARGS_END, k] = at + o - o0
            if at != o0:  # copied before: the copy just made is given back
                o = o0
        k += 1
        if (k & 0xFFFF) == 0:
            progress[0] = i  # for a thread that releases the pages behind (see decode)
        i = skip_ws(buf, i, n)
        if i < n and buf[i] == COMMA:
            sep = i
            i = skip_ws(buf, i + 1, n)
        elif i < n and buf[i] != CLOSE_ARRAY:
            progress[2] = nv
            return i, k, E_SYNTAX, i, o
    progress[2] = nv
    return n, k, E_TRUNCATED, n, o


_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark that may start a document."""


def _document_start(buf: np.ndarray) -> int:
    """The offset of the document's first value: after whitespace and a byte order mark
    (looked at a block at a time: whitespace before a document is short)."""
    i = _skip_space(buf, 0)
    if bytes(buf[i : i + len(_BOM)]) == _BOM:
        i = _skip_space(buf, i + len(_BOM))
    return i


_EVENTS_KEY = b"traceEvents"


def _skip_space(buf: np.ndarray, i: int) -> int:
    """The offset of the first byte at or after i that is not JSON whitespace (looked at a
    block at a time, in Python: the whitespace between top-level members is short)."""
    n = buf.size
    while i < n:
        block = bytes(buf[i : i + 4096])
        rest = block.lstrip(_SPACE)
        i += len(block) - len(rest)
        if rest:
            break
    return i


def _members(
    buf: np.ndarray, i: int, after_value: bool, find_events: bool, top: np.ndarray, ntop: int
) -> tuple[int, int, int, int]:
    """The members of the document's top-level object from i, up to its end or to
    the ``traceEvents`` array (only when ``find_events``).

    i is just after the '{' or, with ``after_value``, just after a member's value.
    Each other member's (key start, key end, value start, value end) goes to
    ``top[ntop:]``. Returns (offset, error, ntop, offset of the events array or -1):
    the offset after the closing '}' or where the error is.

    A loop over the top-level members in Python (a trace has a handful), calling the
    compiled :mod:`jsontext` kernels that the events' scan compiles anyway: a kernel of
    its own cost 0.3-0.5 CPU-s of compiling on every cold start.
    """
    n = buf.size
    i = _skip_space(buf, i)
    if after_value:
        if i < n and buf[i] == COMMA:
            i = _skip_space(buf, i + 1)
        elif i < n and buf[i] != CLOSE_OBJECT:
            return i, E_SYNTAX, ntop, -1
    while i < n:
        if buf[i] == CLOSE_OBJECT:
            return i, E_NONE, ntop, -1
        if buf[i] != QUOTE:
            return i, E_SYNTAX, ntop, -1
        j = end_string(buf, i + 1, n)
        if j < 0:
            break
        ks, ke = i + 1, j
        i = _skip_space(buf, j + 1)
        if i >= n or buf[i] != COLON:
            return i, (E_TRUNCATED if i >= n else E_SYNTAX), ntop, -1
        i = _skip_space(buf, i + 1)
        if i >= n:
            break
        if find_events and buf[i] == OPEN_ARRAY and ke - ks == len(_EVENTS_KEY) and bytes(buf[ks:ke]) == _EVENTS_KEY:
            return i, E_NONE, ntop, i
        e = int(copy_value(buf, i, n, NO_OUT, 0, SKIP)[0])
        if e < 0:
            return i, -e, ntop, -1
        if ntop < top.shape[0]:
            top[ntop] = ks, ke, i, e
            ntop += 1
        i = _skip_space(buf, e)
        if i < n and buf[i] == COMMA:
            i = _skip_space(buf, i + 1)
        elif i < n and buf[i] != CLOSE_OBJECT:
            return i, E_SYNTAX, ntop, -1
    return n, E_TRUNCATED, ntop, -1


class Scanned(NamedTuple):
    """What :func:`scan` found."""

    events: int
    """Event objects scanned into the columns (all before the first error)."""
    error: int
    """An ``E_*`` code."""
    error_at: int
    """The byte offset of the error (where the scan stopped)."""
    array_format: bool
    """True for a document that is an array of events, False for an object with ``traceEvents``."""
    top_keys: int
    """The rows of ``top`` filled."""
    args_bytes: int
    """The bytes of args text written to ``abuf``."""
    cols: Columns
    """The columns filled: those given, or bigger ones when they filled up."""
    symbols: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    """The symbol table (slots, starts, ends, count): the one given, or a bigger one when it filled up."""

    lifted: int
    """The number of lifted values of those events, packed in ``cols[3]`` (:func:`lifted_columns`)."""

    def packed_values(self) -> np.ndarray:
        """The lifted values the events hold, packed (:func:`lifted_columns`), and the one value more."""
        return self.cols[3][: self.lifted + 1]


def scan(
    buf: np.ndarray,
    c: Columns,
    slots: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    count: np.ndarray,
    abuf: np.ndarray,
    top: np.ndarray,
    progress: np.ndarray,
) -> Scanned:
    """Scan a whole document (read-only uint8 ``buf``) into the columns ``c`` (:func:`alloc_columns`), the args
    texts into ``abuf`` (uint8, the document's size and :data:`ARGS_SLACK` bytes more).

    When the events outnumber the columns, the scan goes on in bigger ones
    (``Scanned.cols``). ``top`` receives (key start, key end, value start,
    value end) of each other top-level key of the object format, for the
    caller to decode. When the symbol table (slots, starts, ends, count) fills up, the scan goes on with a
    bigger one holding the same ids (``Scanned.symbols``, :func:`di.convert.symbols.grown_table`). ``progress[1]``
    counts the ``di_flow`` members seen, ``progress[2]`` the lifted values packed (both zeroed here). ``progress[0]``
    is set to the byte offset reached
    every 65,536 events. The events array is one kernel, called from Python
    (not linked into a caller, which would compile it again); the few
    top-level members are read in Python (:func:`_members`).
    """
    if abuf.size < buf.size + ARGS_SLACK:
        raise ValueError(f"the args buffer has {abuf.size} bytes, fewer than the document's {buf.size} + {ARGS_SLACK}")
    progress[1:3] = 0
    table = (slots, starts, ends, count)
    n = buf.size
    i = _document_start(buf)
    if i >= n:
        return Scanned(0, E_NOT_TRACE, 0, False, 0, 0, c, table, int(progress[2]))
    if buf[i] == OPEN_ARRAY:
        _, nev, err, where, used, c, table = _events(buf, i, c, table, abuf, progress, new_memo(), new_args_memo())
        # the array format may end without its ']' (Trace Event Format spec): truncated
        # at the end, not inside an event (there ``where`` is the event's '{')
        if err == E_TRUNCATED and where >= n:
            err = E_NONE
        return Scanned(nev, err, where, True, 0, used, c, table, int(progress[2]))
    if buf[i] != OPEN_OBJECT:
        return Scanned(0, E_NOT_TRACE, i, False, 0, 0, c, table, int(progress[2]))
    i, err, ntop, events_at = _members(buf, i + 1, False, True, top, 0)
    if events_at < 0:
        return Scanned(0, E_NOT_TRACE if err == E_NONE else err, i, False, ntop, 0, c, table, int(progress[2]))
    i, nev, err, where, used, c, table = _events(buf, events_at, c, table, abuf, progress, new_memo(), new_args_memo())
    if err != E_NONE:
        return Scanned(nev, err, where, False, ntop, used, c, table, int(progress[2]))
    i, err, ntop, _ = _members(buf, i, True, False, top, ntop)
    return Scanned(nev, err, i, False, ntop, used, c, table, int(progress[2]))


Table = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""A symbol table: (slots, starts, ends, count) of :mod:`di.convert.symbols`."""


def _events(
    buf: np.ndarray,
    i: int,
    c: Columns,
    table: Table,
    abuf: np.ndarray,
    progress: np.ndarray,
    memo: np.ndarray,
    seen: np.ndarray,
) -> tuple[int, int, int, int, int, Columns, Table]:
    """:func:`_scan_array` from the '[' at i, resumed in columns twice as big (or as
    big as the bytes scanned so far predict) each time they fill up, and with a symbol table sixteen times as big
    (the same ids) each time it fills up."""
    k = o = 0
    while True:
        i, k, err, where, o = _scan_array(buf, i, k, o, c, *table, abuf, progress, memo, seen)
        if err == E_FULL:
            table = grown_table(buf, table)
            continue
        if err != E_ROWS:
            return i, k, err, where, o, c, table
        grown = alloc_columns(max(2 * k, int(k * 1.25 * buf.size / max(where, 1))) + 1)
        for old, new in zip(c[:3], grown[:3]):
            new[:, :k] = old[:, :k]
        grown[3][: progress[2]] = c[3][: progress[2]]
        c = grown


def new_args_memo() -> np.ndarray:
    """An empty memo of the args texts one scan copied (:data:`ARGS_MEMO_SLOTS`; per slot the text's hash, its
    start and its length in the args buffer; -1: empty)."""
    return np.full((ARGS_MEMO_SLOTS, 3), -1, dtype=np.int64)


def new_progress() -> np.ndarray:
    """The counters :func:`scan` keeps for its caller: the byte offset reached, the ``di_flow`` members seen, the
    lifted values packed."""
    return np.zeros(3, dtype=np.int64)


def new_memo() -> np.ndarray:
    """An empty memo of short symbols for one scan (its ids are those of that scan's table):
    per slot the text's first word, its last (or its length), its length and its id."""
    return np.full((64, 4), np.iinfo(np.uint64).max, dtype=np.uint64)


def capacity_guess(size: int) -> int:
    """Columns to start a scan of a ``size``-byte document with: an event of a
    real trace takes 100 to 400 bytes, so this is rarely grown, and the rows not
    filled cost no memory (see :func:`alloc_columns`)."""
    return size // 128 + 1024


def alloc_columns(capacity: int) -> Columns:
    """Zeroed (uint8, int32, int64) field arrays for ``capacity`` events, and room for their lifted values packed
    (:func:`lifted_columns`: eight each at most, and the one value more that a read of a value after the last may touch).

    Zero is the value of an absent field (``K_NONE``, ``ST_OK``, no flags, pid 0),
    so the scanner writes only the fields an event has. The zeroing costs
    nothing up front: the pages come zeroed from the system as they are first
    written, and a field no event has (``di_flow`` spans, ``bind_id``) is never
    touched at all. One set of columns serves one scan: a rescan takes new ones."""
    return (
        np.zeros((len(U8_FIELDS), capacity), dtype=np.uint8),
        np.zeros((len(I32_FIELDS), capacity), dtype=np.int32),
        np.zeros((len(I64_FIELDS), capacity), dtype=np.int64),
        np.zeros(len(LIFTED) * capacity + 1, dtype=np.int64),
    )


def columns(c: Columns, n: int) -> dict[str, np.ndarray]:
    """The first ``n`` events' fields by name (views)."""
    out = {name: c[0][r, :n] for r, name in enumerate(U8_FIELDS)}
    out.update({name: c[1][r, :n] for r, name in enumerate(I32_FIELDS)})
    out.update({name: c[2][r, :n] for r, name in enumerate(I64_FIELDS)})
    return out
