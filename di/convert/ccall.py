"""Calls of C functions by address from numba kernels (the OTF2 library's writers and callbacks, SQLite's
statement steps, the C library's ``strlen`` and ``memcpy``).

:data:`ccall` and :data:`ccall_i64` are numba intrinsics: each call site becomes one indirect call in the
kernel's own machine code, with no Python in between. Every argument must be an integer (pointers as
integers); the function's address comes from ctypes (``ctypes.cast(fn, ctypes.c_void_p).value``).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic


def _caller(result_bits: int):  # noqa: ANN202
    """An intrinsic ``(fn_address, (a0, a1, ...)) -> int<result_bits>`` calling a C function by address."""

    def call(typingctx, fn, args):  # noqa: ANN001, ANN202
        if not isinstance(fn, types.Integer) or not isinstance(args, types.BaseTuple):
            return None
        if not all(isinstance(t, types.Integer) for t in args.types):
            return None
        sig = types.int32(fn, args) if result_bits == 32 else types.int64(fn, args)
        n = len(args.types)

        def codegen(context, builder, signature, llargs):  # noqa: ANN001, ANN202
            fnty = ir.FunctionType(ir.IntType(result_bits), [ir.IntType(64)] * n)
            target = builder.inttoptr(
                context.cast(builder, llargs[0], signature.args[0], types.uint64), fnty.as_pointer()
            )
            values = []
            for i, ty in enumerate(signature.args[1].types):
                values.append(context.cast(builder, builder.extract_value(llargs[1], i), ty, types.uint64))
            return builder.call(target, values)

        return sig, codegen

    return intrinsic(call)


ccall = _caller(32)
"""``ccall(fn_address, (a0, a1, ...))`` -> int32: call a C function by address (OTF2's error and callback codes).

Every element of ``args`` must be an integer (pointers as integers)."""
ccall_i64 = _caller(64)
"""``ccall_i64(fn_address, (a0, a1, ...))`` -> int64: the same for a C function returning a 64-bit integer or
pointer (``strlen``, ``memcpy``)."""


@intrinsic
def load_at(typingctx, address):
    """The uint64 stored at the memory ``address`` (an integer): for C data a numba kernel reaches only by address
    (a callback's ``void**``)."""
    if not isinstance(address, types.Integer):
        return None

    def codegen(context, builder, signature, llargs):  # noqa: ANN001, ANN202
        at = context.cast(builder, llargs[0], signature.args[0], types.uint64)
        return builder.load(builder.inttoptr(at, ir.IntType(64).as_pointer()), align=8)

    return types.uint64(address), codegen


@intrinsic
def store_at(typingctx, address, value):
    """Store the integer ``value`` as a uint64 at the memory ``address`` (an integer)."""
    if not isinstance(address, types.Integer) or not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, llargs):  # noqa: ANN001, ANN202
        at = context.cast(builder, llargs[0], signature.args[0], types.uint64)
        word = context.cast(builder, llargs[1], signature.args[1], types.uint64)
        builder.store(word, builder.inttoptr(at, ir.IntType(64).as_pointer()), align=8)
        return context.get_dummy_value()

    return types.void(address, value), codegen
