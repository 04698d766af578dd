"""``di.region``: name a stretch of a program, recorded as a ``user`` event under ``di record``.

::

    import di

    with di.region("forward"):
        loss = model(batch)

    @di.region("checkpoint")
    def save(state): ...

Under ``di record`` the region goes into the rank's shard, on the calling thread, through
di's NVTX injection library (:file:`di/capture/shim/nvtx.c`, loaded with ``ctypes`` from
``$DI_NVTX_LIB``, which ``di record`` sets): the same per-thread stack and record as an NVTX
push/pop range, so regions and NVTX ranges nest with each other and with the thread's MPI
and I/O calls. A region named like ``step 3`` marks a training step for the analyses
(:mod:`di.engine.steps`). Outside ``di record`` a region does nothing and costs one global
lookup per enter and exit. Nothing here needs more than the standard library.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
LIB_VAR = "DI_NVTX_LIB"
"""Environment variable through which ``di record`` names its NVTX library for the job."""

_lib: Any = None  # the loaded library, False when there is none (outside di record), None before the first look
_ids: dict[str, int] = {}


def recorder() -> Any:
    """di's NVTX library of this process (``ctypes.CDLL``) when ``di record`` records it, else None."""
    global _lib
    if _lib is None:
        _lib = False
        path = os.environ.get(LIB_VAR)
        if path and os.environ.get("DI_CAPTURE_DIR"):
            import ctypes

            try:
                lib = ctypes.CDLL(path)
                lib.di_intern_name.argtypes = [ctypes.c_char_p]
                lib.di_intern_name.restype = ctypes.c_uint32
                lib.di_py_call.argtypes = [
                    ctypes.c_uint32,
                    ctypes.c_uint32,
                    ctypes.c_int32,
                    ctypes.c_int64,
                    ctypes.c_int64,
                ]
                lib.di_py_call.restype = None
                if lib.di_nvtx_enabled():
                    _lib = lib
            except (OSError, AttributeError):  # not di's library (or not loadable): regions do nothing
                pass
    return _lib or None


def name_id(name: str) -> int:
    """The string id of ``name`` in this process's shard (0 when not recording)."""
    sid = _ids.get(name)
    if sid is None:
        lib = recorder()
        sid = _ids[name] = int(lib.di_intern_name(name.encode("utf-8", "replace"))) if lib else 0
    return sid


class region:  # a lower-case name: used like a function, di.region("forward")
    """A named region of the program: ``with di.region("forward"): ...`` or ``@di.region("forward")``.

    Args:
        name: the event's name (``step N`` marks training step N).
    """

    __slots__ = ("_id", "name")

    def __init__(self, name: str) -> None:
        self.name = str(name)
        self._id = -1

    def __enter__(self) -> region:  # noqa: PYI034  (typing.Self needs Python 3.11)
        if _lib is not False:  # False: looked, nothing records this process
            lib = recorder()
            if lib:
                if self._id < 0:
                    self._id = name_id(self.name)
                lib.di_region_push(self._id)
        return self

    def __exit__(self, *exc: object) -> None:
        if _lib:
            _lib.di_region_pop()

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"di.region({self.name!r})"
