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
from numba.extending import intrinsic


def _byte_pointer(context, builder, aryty, ary_value, idx_value, idx_type):
    ary = context.make_array(aryty)(context, builder, ary_value)
    idx = context.cast(builder, idx_value, idx_type, types.intp)
    return builder.bitcast(builder.gep(ary.data, [idx]), ir.IntType(64).as_pointer())


@intrinsic
def load_u64(typingctx, buf, i):
    """The uint64 at bytes buf[i:i+8] (little-endian on the machines di runs on)."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        return builder.load(ptr, align=1)

    return types.uint64(buf, i), codegen


@intrinsic
def store_u64(typingctx, out, o, w):
    """Write the uint64 ``w`` to bytes out[o:o+8]."""
    if not (
        isinstance(out, types.Array)
        and out.dtype == types.uint8
        and isinstance(o, types.Integer)
        and isinstance(w, types.Integer)
    ):
        return None

    def codegen(context, builder, sig, args):
        ptr = _byte_pointer(context, builder, sig.args[0], args[0], args[1], sig.args[1])
        value = context.cast(builder, args[2], sig.args[2], types.uint64)
        builder.store(value, ptr, align=1)
        return context.get_dummy_value()

    return types.void(out, o, w), codegen
