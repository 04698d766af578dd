"""The OTF2 C library that the ``otf2`` wheel ships, reached without Python per event.

The wheel's extension ``_otf2/_otf2*.so`` exports the whole OTF2 C API. This
module opens it with its own :class:`ctypes.CDLL` (so argtypes set here never
clash with the ones ``_otf2`` sets on its handle), looks up symbol addresses,
and provides :func:`ccall`: a numba intrinsic that calls a C function given
its address as an integer. Jitted code thus calls OTF2 through addresses held
in plain int64 arrays, which keeps every kernel cacheable (``cache=True``):
no ctypes object is frozen into compiled code.

Calling convention: every argument is passed as a 64-bit integer and the
result is read as int32 (``OTF2_ErrorCode``, ``OTF2_CallbackCode``). That is
exact on x86-64 / AArch64 for the integer and pointer parameters OTF2 takes
(narrower unsigned parameters read the low bits of their register); no OTF2
function used here takes a floating-point value by value. A call may pass
more integer arguments than the function declares (:mod:`emit` writes every
attachment record through one call of eight): on both ABIs the caller places
and removes the arguments and the callee reads only its own, so the extra
trailing ones are ignored.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


from di.convert import ccall as ccall_of
from di.errors import MissingDependencyError

__all__ = [
    "library",
    "address",
    "addresses",
    "ccall",
    "ccall_i64",
    "libc_addresses",
    "error_text",
    "collected_errors",
    "UNDEFINED_UINT32",
    "UNDEFINED_UINT64",
]

UNDEFINED_UINT32 = 0xFFFFFFFF
"""OTF2_UNDEFINED_UINT32 (and every *Ref type's undefined value)."""
UNDEFINED_UINT64 = 0xFFFFFFFFFFFFFFFF
"""OTF2_UNDEFINED_UINT64 / OTF2_UNDEFINED_TIMESTAMP."""


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The wheel's compiled OTF2 library.

    Raises:
        MissingDependencyError: the ``otf2`` package is not installed.
    """
    try:
        import _otf2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("reading or writing OTF2 needs the 'otf2' package: pip install otf2") from exc
    found = sorted(Path(_otf2.__file__).parent.glob("_otf2*.so"))
    if not found:  # pragma: no cover - a broken install
        raise MissingDependencyError(f"the 'otf2' package has no compiled library next to {_otf2.__file__}")
    lib = ctypes.CDLL(str(found[0]))
    lib.OTF2_Error_GetName.restype = ctypes.c_char_p
    lib.OTF2_Error_GetName.argtypes = [ctypes.c_int]
    lib.OTF2_Error_GetDescription.restype = ctypes.c_char_p
    lib.OTF2_Error_GetDescription.argtypes = [ctypes.c_int]
    return lib


def address(symbol: str) -> int:
    """Address of an exported OTF2 function, as an int."""
    return ctypes.cast(getattr(library(), symbol), ctypes.c_void_p).value or 0


def addresses(*symbols: str) -> list[int]:
    """Addresses of several OTF2 functions, in order."""
    return [address(s) for s in symbols]


def error_text(code: int) -> str:
    """``NAME: description`` of an OTF2_ErrorCode."""
    lib = library()
    name = (lib.OTF2_Error_GetName(code) or b"?").decode()
    desc = (lib.OTF2_Error_GetDescription(code) or b"").decode()
    return f"{name}: {desc}" if desc else name


_ERROR_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_char_p,
    ctypes.c_uint64,
    ctypes.c_char_p,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_void_p,
)
"""OTF2_ErrorCallback: (userData, file, line, function, errorCode, msgFormatString, va_list) -> errorCode."""


@contextmanager
def collected_errors() -> Iterator[list[int]]:
    """Within the block the OTF2 library's errors are collected (their codes, in order)
    instead of printed to stderr, where they would bury di's one-line message."""
    codes: list[int] = []

    def record(_user: int, _file: bytes, _line: int, _function: bytes, code: int, _fmt: bytes, _va: int) -> int:
        codes.append(code)
        return code

    callback = _ERROR_CALLBACK(record)
    lib = library()
    lib.OTF2_Error_RegisterCallback.restype = ctypes.c_void_p
    lib.OTF2_Error_RegisterCallback.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    previous = lib.OTF2_Error_RegisterCallback(ctypes.cast(callback, ctypes.c_void_p), None)
    try:
        yield codes
    finally:
        lib.OTF2_Error_RegisterCallback(previous, None)


def handle(ptr: object) -> int:
    """The address a ctypes pointer (as ``_otf2`` returns handles) points to."""
    return ctypes.cast(ptr, ctypes.c_void_p).value or 0


ccall = ccall_of.ccall
"""See :data:`di.convert.ccall.ccall` (OTF2's error and callback codes are int32)."""
ccall_i64 = ccall_of.ccall_i64
"""See :data:`di.convert.ccall.ccall_i64`."""


def libc_addresses(*symbols: str) -> list[int]:
    """Addresses of C library functions (``strlen``, ``memcpy``), as ints."""
    libc = ctypes.CDLL(None)
    return [ctypes.cast(getattr(libc, s), ctypes.c_void_p).value or 0 for s in symbols]
