"""Protocol Buffers wire format: the few pieces di needs, for numba and for Python.

Wire format (https://protobuf.dev/programming-guides/encoding/): a message is
a sequence of fields, each a tag ``(field_number << 3) | wire_type`` as a
varint, then the value: wire type 0 = varint, 1 = 8 bytes little-endian,
2 = varint length + bytes, 5 = 4 bytes little-endian. A varint holds 7 bits
per byte, least significant group first, the high bit set on every byte but
the last; negative int64 values take 10 bytes (two's complement as uint64).

The numba functions write into / read from uint8 arrays at a position and
return the new position; the plain-Python ones build the bytes of the few
messages written once per track.

Compile hygiene (for every numba module of di): ``inline="always"`` only on
leaf helpers that inline nothing themselves. The writers and readers here are
plain calls (the encoder writes ~40 fields per packet; the decoder calls them
~60 times and numba's IR inliner grows quadratically with inlined bodies (a
reader inlined six times cost ~2 s; LLVM still inlines them where it pays,
after numba's typing). Callers of plain calls pass ``np.int64`` values, never
Python int literals, which numba would compile one version for each.
Kernels called only from other kernels are compiled without a CPython
wrapper (``no_cpython_wrapper=True``: the wrapper unboxes every argument and
is lowered, optimised and linked into each caller, ~10% of a small kernel's
compile); calling one of them from Python crashes.
"""

from __future__ import annotations


import numpy as np
from llvmlite import ir
from numba import njit, types

from di.jitpipeline import ScalarKernelCompiler
from numba.extending import intrinsic

from di.convert.bytewords import load_u64

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
"""Wire types."""


def tag(field: int, wire: int) -> int:
    """The tag value of a field (before varint encoding)."""
    return (field << 3) | wire


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def varint_size(v: int) -> int:
    """Bytes the varint of ``v`` takes (``v`` as uint64: negative -> 10)."""
    if v < 0:
        return 10
    if v < 128:
        return 1
    n = 1
    while v >= 128:
        v >>= 7
        n += 1
    return n


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def put_varint(out: np.ndarray, pos: int, v: int) -> int:
    """Write ``v`` (as uint64) as a varint at ``pos``; return the position after it."""
    if 0 <= v < 128:
        out[pos] = v
        return pos + 1
    u = np.uint64(v)
    while u >= np.uint64(128):
        out[pos] = np.uint8((u & np.uint64(127)) | np.uint64(128))
        u >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(u)
    return pos + 1


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def read_varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """(value as int64, new position); new position -1 when the varint runs past ``end`` or is over 10 bytes."""
    if pos < end and buf[pos] < 128:
        return np.int64(buf[pos]), pos + 1
    result = np.uint64(0)
    shift = np.uint64(0)
    while pos < end:
        b = np.uint64(buf[pos])
        pos += 1
        result |= (b & np.uint64(127)) << shift
        if b < np.uint64(128):
            return np.int64(result), pos
        shift += np.uint64(7)
        if shift >= np.uint64(70):
            return 0, -1
    return 0, -1


@njit(cache=True, _nrt=False, inline="always")
def read_fixed64(buf: np.ndarray, pos: int) -> np.uint64:
    """8 bytes little-endian at ``pos`` as uint64 (the caller checks the field's bounds; 0 past the buffer's end).
    A leaf inlined where it is used: one load, no function of its own to compile."""
    if pos + 8 <= buf.shape[0]:
        return load_u64(buf, pos)
    return np.uint64(0)


@intrinsic
def as_double(typingctx, bits):
    """The float64 whose IEEE 754 bits are the integer ``bits`` (a fixed64 double field): a bit cast,
    not an array view (numba's ``view`` overloads cost compiling on every cold start)."""
    if not isinstance(bits, types.Integer) or bits.bitwidth != 64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(bits), codegen


@intrinsic
def double_bits(typingctx, value):
    """The IEEE 754 bits of the float64 ``value`` as an int64 (the inverse of :func:`as_double`): a bit cast."""
    if not isinstance(value, types.Float) or value.bitwidth != 64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(value), codegen


@njit(cache=True, _nrt=False, no_cfunc_wrapper=True, no_cpython_wrapper=True, pipeline_class=ScalarKernelCompiler)
def skip_field(buf: np.ndarray, pos: int, end: int, wire: int) -> int:
    """Position after the value of a field of wire type ``wire`` at ``pos``; -1 when malformed."""
    if wire == 0:
        _, pos = read_varint(buf, pos, end)
        return pos
    if wire == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wire == 2:
        n, pos = read_varint(buf, pos, end)
        if pos < 0 or n < 0 or pos + n > end:
            return -1
        return pos + n
    if wire == 5:
        return pos + 4 if pos + 4 <= end else -1
    return -1


def varint_bytes(v: int) -> bytes:
    """The varint encoding of ``v`` (negative: as uint64)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 128:
        out.append((v & 127) | 128)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_varint(field: int, v: int) -> bytes:
    """A varint field (int32/int64/uint64/bool/enum)."""
    return varint_bytes(tag(field, VARINT)) + varint_bytes(int(v))


def field_len(field: int, payload: bytes) -> bytes:
    """A length-delimited field: bytes, string or a sub-message."""
    return varint_bytes(tag(field, LEN)) + varint_bytes(len(payload)) + payload


def field_str(field: int, text: str) -> bytes:
    """A string field (UTF-8)."""
    return field_len(field, text.encode())


def iter_fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field, wire type, value) of each field of a small message; raises ValueError when malformed."""
    out: list[tuple[int, int, int | bytes]] = []
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _py_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = _py_varint(data, pos)
            out.append((field, wire, value))
        elif wire == LEN:
            n, pos = _py_varint(data, pos)
            if pos + n > end:
                raise ValueError("length-delimited field runs past the end of its message")
            out.append((field, wire, data[pos : pos + n]))
            pos += n
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if pos + size > end:
                raise ValueError("fixed-size field runs past the end of its message")
            out.append((field, wire, int.from_bytes(data[pos : pos + size], "little")))
            pos += size
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def _py_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated or overlong varint")
        b = data[pos]
        pos += 1
        result |= (b & 127) << shift
        if b < 128:
            return result, pos
        shift += 7


def as_int64(u: int) -> int:
    """A uint64 read from the wire as the int64 it encodes."""
    return u - (1 << 64) if u >= 1 << 63 else u
