"""Eight bytes at a time from a uint8 buffer, for numba scanners.

Byte loops in numba run one compare per byte; hashing, comparing and copying
text eight bytes per step is several times faster. ``load_u64(buf, i)`` reads
the little-endian 64-bit word at byte offset ``i`` (any alignment) and
``store_u64(out, o, w)`` writes one. The caller guarantees ``i + 8 <= buf.size``:
these are unchecked memory accesses, like numba's own indexing without
bounds checks.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def byte_pointer(context, builder, aryty, ary_value, idx_value, idx_type):
    """In an intrinsic's codegen: an i64 pointer to byte ``idx_value`` of the uint8 array ``ary_value``."""
    ary = context.make_array(aryty)(context, builder, ary_value)
    idx = context.cast(builder, idx_value, idx_type, types.intp)
    return builder.bitcast(builder.gep(ary.data, [idx]), ir.IntType(64).as_pointer())


def byte_arrays_and_ints(arrays: tuple, ints: tuple) -> bool:
    """In an intrinsic's typing: whether ``arrays`` are all numba uint8 arrays and ``ints`` all integers (else the
    intrinsic returns None: no match for those argument types)."""
    return all(isinstance(a, types.Array) and a.dtype == types.uint8 for a in arrays) and all(
        isinstance(x, types.Integer) for x in ints
    )


@intrinsic
def load_u64(typingctx, buf, i):
    """The uint64 at bytes buf[i:i+8] (little-endian on the machines di runs on)."""
    if not byte_arrays_and_ints((buf,), (i,)):
        return None

    def codegen(context, builder, sig, args):
        ptr = byte_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return builder.load(ptr, align=1)

    return types.uint64(buf, i), codegen


@intrinsic
def store_u64(typingctx, out, o, w):
    """Write the uint64 ``w`` to bytes out[o:o+8]."""
    if not byte_arrays_and_ints((out,), (o, w)):
        return None

    def codegen(context, builder, sig, args):
        ptr = byte_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        value = context.cast(builder, args[2], sig.args[2], types.uint64)
        builder.store(value, ptr, align=1)
        return context.get_dummy_value()

    return types.void(out, o, w), codegen


@intrinsic
def copy_bytes(typingctx, out, o, src, a, b):
    """Copy src[a:b] to out[o:o + b - a] (one ``memcpy``; the ranges must not overlap) and return o + b - a
    (o when b <= a).

    A byte loop compiles to a vectorised loop with alias checks and tails at every call
    site, which costs LLVM far more time than a call (and runs no faster on short texts).
    Unchecked, like :func:`load_u64`: the caller guarantees both ranges are in bounds."""
    if not byte_arrays_and_ints((out, src), (o, a, b)):
        return None

    def codegen(context, builder, sig, args):
        start = context.cast(builder, args[3], sig.args[3], types.intp)
        stop = context.cast(builder, args[4], sig.args[4], types.intp)
        at = context.cast(builder, args[1], sig.args[1], types.intp)
        size = builder.sub(stop, start)
        size = builder.select(builder.icmp_signed(">", size, size.type(0)), size, size.type(0))
        dst = builder.gep(context.make_array(sig.args[0])(context, builder, args[0]).data, [at])
        from_ = builder.gep(context.make_array(sig.args[2])(context, builder, args[2]).data, [start])
        cgutils.raw_memcpy(builder, dst, from_, size, 1)
        return builder.add(at, size)

    return types.intp(out, o, src, a, b), codegen


@intrinsic
def shift_up(typingctx, arr, a, b):
    """Move the items ``arr[a:b]`` of a 1-D array one place up, to ``arr[a + 1 : b + 1]`` (one ``memmove``; nothing
    when b <= a), for an insertion at ``a``. A loop that moves them one by one compiled, in the Chrome scanner, to
    a vectorised loop with its checks: 0.07 CPU-s more of every cold start. Unchecked: ``arr[b]`` must exist."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and all(isinstance(x, types.Integer) for x in (a, b))):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        start = context.cast(builder, args[1], sig.args[1], types.intp)
        stop = context.cast(builder, args[2], sig.args[2], types.intp)
        count = builder.sub(stop, start)
        count = builder.select(builder.icmp_signed(">", count, count.type(0)), count, count.type(0))
        width = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        src = builder.bitcast(builder.gep(ary.data, [start]), ir.IntType(8).as_pointer())
        dst = builder.bitcast(builder.gep(ary.data, [builder.add(start, start.type(1))]), ir.IntType(8).as_pointer())
        cgutils.raw_memmove(builder, dst, src, count, width)
        return context.get_dummy_value()

    return types.void(arr, a, b), codegen


@intrinsic
def prefetch(typingctx, buf, i):
    """Ask the processor to bring the cache line of byte ``buf[i]`` in ahead of use (``llvm.prefetch``, a read
    with no temporal locality). Only a hint: it never faults, so ``i`` may lie past the buffer's end.

    For loops that hop through a large buffer (a length read at each record says where the next one starts):
    each hop's load waits on the one before, which the hardware's stream prefetcher does not hide. Counting the
    2.4 M packets of a 256 MB Perfetto trace (one cache line of each read) took 45 ns per packet; with the line
    256 bytes ahead asked for at each, 20-35 ns. A scanner that reads every byte gains nothing from it."""
    if not byte_arrays_and_ints((buf,), (i,)):
        return None

    def codegen(context, builder, sig, args):
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        ptr = builder.bitcast(byte_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1]), i8p)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        builder.call(fn, [ptr, i32(0), i32(0), i32(1)])  # read, locality 0 (streaming), data cache
        return context.get_dummy_value()

    return types.void(buf, i), codegen
