"""JSON text primitives over a uint8 buffer, for numba scanners.

Positions are byte offsets; a negative return means truncated (``TRUNCATED``)
or bad syntax (``BAD_SYNTAX``) where a function says so.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types

from di.jitpipeline import ScalarKernelCompiler
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from di.convert.bytewords import byte_arrays_and_ints, byte_pointer, load_u64, store_u64

TRUNCATED = -1
"""A position these functions return when the text ends inside the value."""
BAD_SYNTAX = -2
"""A position these functions return when the text is not JSON there."""

# JSON syntax bytes, typed like the buffers' bytes: numba folds them as constants
QUOTE, BACKSLASH, COLON, COMMA = (np.uint8(ord(c)) for c in '"\\:,')
OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY = (np.uint8(ord(c)) for c in "{}[]")
SPACE, TAB, LF, CR = (np.uint8(ord(c)) for c in " \t\n\r")
MINUS, PLUS, DOT, DIGIT_0, DIGIT_9, EXP_LOWER, EXP_UPPER = (np.uint8(ord(c)) for c in "-+.09eE")
TRUE_START, FALSE_START, NULL_START = (np.uint8(ord(c)) for c in "tfn")
"""The first bytes of the literals true, false and null."""
LOWER_A, LOWER_Z, UPPER_A, UPPER_Z = (np.uint8(ord(c)) for c in "azAZ")


def _byte_set(chars: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=np.bool_)
    table[np.frombuffer(chars, dtype=np.uint8)] = True
    return table


NUMBER_BYTES = _byte_set(b"0123456789.-+eE")
"""The bytes a JSON number is written with, as a table indexed by byte."""
_WORD = b"0123456789.-+abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The bytes :func:`copy_value` takes as one number or literal."""

C_OTHER, C_WORD, C_QUOTE, C_OPEN, C_CLOSE, C_SPACE, C_PUNCT = (np.uint8(k) for k in range(7))
"""Classes of bytes for :func:`copy_value`: one table lookup and a
switch on the class instead of a compare per kind of byte (fewer branches to compile)."""


def _byte_classes() -> np.ndarray:
    table = np.full(256, C_OTHER, dtype=np.uint8)
    for chars, k in ((_WORD, C_WORD), (b'"', C_QUOTE), (b"{[", C_OPEN), (b"}]", C_CLOSE), (b" \t\r\n", C_SPACE)):
        table[np.frombuffer(chars, dtype=np.uint8)] = k
    table[np.frombuffer(b",:", dtype=np.uint8)] = C_PUNCT
    return table


BYTE_CLASS = _byte_classes()
"""The class (``C_*``) of each byte."""


@intrinsic
def skip_ws(typingctx, buf, i, n):
    """The index of the first byte at or after i that is not JSON whitespace (n if none; i itself when
    it is negative).

    An intrinsic: its few LLVM instructions are written into each caller, where a numba function
    of its own cost every cold start 0.2 CPU-s of compiling (numba's fixed cost per function)
    and each call site a call; only numba code can call it."""
    if not byte_arrays_and_ints((buf,), (i, n)):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        start = context.cast(builder, args[1], sig.args[1], types.int64)
        end = context.cast(builder, args[2], sig.args[2], types.int64)
        entry = builder.block
        head = builder.append_basic_block("ws.head")
        body = builder.append_basic_block("ws.body")
        step = builder.append_basic_block("ws.step")
        done = builder.append_basic_block("ws.done")
        builder.branch(head)
        builder.position_at_end(head)
        at = builder.phi(ir.IntType(64))
        at.add_incoming(start, entry)
        builder.cbranch(builder.icmp_unsigned("<", at, end), body, done)  # unsigned: a negative i stops here
        builder.position_at_end(body)
        c = builder.load(builder.gep(data, [at]))
        ws = builder.icmp_unsigned("==", c, ir.Constant(ir.IntType(8), int(SPACE)))
        for other in (TAB, LF, CR):
            ws = builder.or_(ws, builder.icmp_unsigned("==", c, ir.Constant(ir.IntType(8), int(other))))
        builder.cbranch(ws, step, done)
        builder.position_at_end(step)
        at.add_incoming(builder.add(at, ir.Constant(ir.IntType(64), 1)), step)
        builder.branch(head)
        builder.position_at_end(done)
        return context.cast(builder, at, types.int64, sig.return_type)

    return types.int64(buf, i, n), codegen


@intrinsic
def head_word(typingctx, buf, s, e, n):
    """The first min(e - s, 8) bytes of buf[s:e] as a little-endian uint64, zero above (the bytes
    of buf[:n]; the word that ends at n when fewer than eight bytes follow s; zero in a buffer of
    fewer than eight bytes, where no JSON member has room for a key it could be compared with).

    An intrinsic (see :func:`skip_ws`): a numba function of its own cost every cold start
    0.1 CPU-s of compiling."""
    if not byte_arrays_and_ints((buf,), (s, e, n)):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        start, end, size = (context.cast(builder, v, t, types.int64) for v, t in zip(args[1:], sig.args[1:]))
        eight = ir.Constant(i64, 8)
        length = builder.sub(end, start)
        length = builder.select(builder.icmp_signed("<", length, eight), length, eight)
        length = builder.select(builder.icmp_signed("<", length, ir.Constant(i64, 0)), ir.Constant(i64, 0), length)
        entry = builder.block
        load_at = builder.append_basic_block("head.load")
        done = builder.append_basic_block("head.done")
        fits = builder.icmp_signed("<=", builder.add(start, eight), size)
        big = builder.icmp_signed(">=", size, eight)
        builder.cbranch(builder.or_(fits, big), load_at, done)
        builder.position_at_end(load_at)
        at = builder.select(fits, start, builder.sub(size, eight))  # near the end: the last eight bytes
        word = builder.load(byte_pointer(context, builder, sig.args[0], args[0], at, types.int64), align=1)
        shift = builder.select(
            fits, ir.Constant(i64, 0), builder.mul(builder.sub(builder.add(start, eight), size), eight)
        )
        shift = builder.select(builder.icmp_unsigned(">", shift, ir.Constant(i64, 56)), ir.Constant(i64, 56), shift)
        word = builder.lshr(word, shift)
        builder.branch(done)
        builder.position_at_end(done)
        got = builder.phi(i64)
        got.add_incoming(ir.Constant(i64, 0), entry)
        got.add_incoming(word, load_at)
        full = builder.icmp_signed(">=", length, eight)
        low = builder.sub(
            builder.shl(ir.Constant(i64, 1), builder.select(full, ir.Constant(i64, 0), builder.mul(length, eight))),
            ir.Constant(i64, 1),
        )
        mask = builder.select(full, ir.Constant(i64, -1), low)
        return builder.and_(got, mask)

    return types.uint64(buf, s, e, n), codegen


_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def end_string(buf, i, n):
    """i is just after the opening quote; returns the index of the closing quote or ``TRUNCATED``.

    Eight bytes per step: the word holding the closing quote gives its place (the lowest
    flagged byte is exact), unless a backslash comes first; then byte by byte."""
    while i + 8 <= n:
        w = load_u64(buf, i)
        q = w ^ _QUOTES
        b = w ^ _BACKSLASHES
        qm = (q - _ONES) & ~q & _HIGHS
        bm = (b - _ONES) & ~b & _HIGHS
        if qm | bm:
            if qm and (bm == 0 or trailing_zeros(qm) < trailing_zeros(bm)):
                return i + (trailing_zeros(qm) >> 3)
            break
        i += 8
    while i < n:
        c = buf[i]
        if c == QUOTE:
            return i
        if c == BACKSLASH:
            i += 2
        else:
            i += 1
    return TRUNCATED


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def copy_string(buf, i, n, out, o):
    """Copy the JSON string whose opening quote is at buf[i] to out[o:], quotes
    included; returns (index of its closing quote or ``TRUNCATED``, new o).

    Eight bytes per step: a word is stored before it is looked at, so the word
    that holds the closing quote also writes up to seven bytes beyond it, which
    later writes overwrite (``out`` needs those bytes of room, as any buffer the
    size of the input has)."""
    m = out.size
    out[o] = QUOTE
    o += 1
    i += 1
    while i + 8 <= n and o + 8 <= m:
        w = load_u64(buf, i)
        store_u64(out, o, w)
        q = w ^ _QUOTES
        b = w ^ _BACKSLASHES
        qm = (q - _ONES) & ~q & _HIGHS
        bm = (b - _ONES) & ~b & _HIGHS
        if qm | bm:
            if qm and (bm == 0 or trailing_zeros(qm) < trailing_zeros(bm)):
                d = trailing_zeros(qm) >> 3
                return i + d, o + d + 1
            break
        i += 8
        o += 8
    while i < n:
        c = buf[i]
        out[o] = c
        o += 1
        if c == QUOTE:
            return i, o
        if c == BACKSLASH and i + 1 < n:
            out[o] = buf[i + 1]
            o += 1
            i += 2
        else:
            i += 1
    return TRUNCATED, o


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, pipeline_class=ScalarKernelCompiler)
def copy_value(buf, i, n, out, o, copy):
    """Copy the JSON value at i (an object, an array, a literal) to out[o:] without the
    whitespace outside its strings; returns (index just after it, ``TRUNCATED`` or
    ``BAD_SYNTAX``, new o). With ``copy`` False nothing is written: it only finds where the
    value ends (what a separate ``skip_value`` did, whose compile every cold start paid).

    One pass that both checks and copies the value; strings go eight bytes per step
    (:func:`copy_string`, or :func:`end_string` when not copying)."""
    depth = 0
    while i < n:
        c = buf[i]
        k = BYTE_CLASS[c]
        if k == C_QUOTE:
            if copy:
                j, o = copy_string(buf, i, n, out, o)
            else:
                j = end_string(buf, i + 1, n)
            if j < 0:
                return TRUNCATED, o
            i = j + 1
        elif k == C_OPEN or k == C_PUNCT:
            if k == C_PUNCT and depth == 0:
                return BAD_SYNTAX, o
            if copy:
                out[o] = c
                o += 1
            depth += k == C_OPEN
            i += 1
            continue
        elif k == C_CLOSE:
            depth -= 1
            if depth < 0:
                return BAD_SYNTAX, o
            if copy:
                out[o] = c
                o += 1
            i += 1
        elif k == C_SPACE:
            if depth == 0:
                return BAD_SYNTAX, o
            i += 1
            continue
        else:
            start = i
            while i < n and BYTE_CLASS[buf[i]] == C_WORD:
                if copy:
                    out[o] = buf[i]
                    o += 1
                i += 1
            if i == start:
                return BAD_SYNTAX, o
            if i >= n and depth == 0:
                return TRUNCATED, o
        if depth == 0:
            return i, o
    return TRUNCATED, o


COPY, SKIP = np.bool_(True), np.bool_(False)
"""The ``copy`` argument of :func:`copy_value`, typed (one compiled version for both)."""
NO_OUT = np.zeros(1, dtype=np.uint8)
"""The ``out`` of :func:`copy_value` calls from Python that only skip a value."""
