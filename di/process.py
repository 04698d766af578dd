"""Process-wide settings a di command runs under: Python's cyclic collector, glibc's malloc, numpy's and polars'
pages and OpenBLAS's threads.

The CLI (:func:`di.cli.main`) and ``di warmup``'s worker processes apply them;
a program that imports di as a library keeps its own, except numpy's pages,
which :func:`di.load`, :func:`di.save` and :func:`di.analyze` set for their
own duration (:func:`small_pages`). The programs a command runs (``di record``'s)
get the user's environment back (:func:`program_environ`).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path

FULL_COLLECTION_EVERY = 1000
"""Young collections between two full ones of Python's cyclic collector while a
di command runs (Python's default: 10)."""

MMAP_THRESHOLD = 1 << 20
"""Bytes from which glibc's malloc maps each allocation on its own (its default
starts at 128 KiB and rises, up to 32 MiB, with every large block freed)."""

READING_MMAP_THRESHOLD = 16 << 20
"""The mmap threshold of the commands that read traces and write only what they find (:data:`READING_COMMANDS`),
set once the command is known. Reading and analysing allocate and free many columns of a few MiB (an int64 column of
1.2 M events is 9.6 MB): from the heap, the next one reuses the pages the last one freed, where mapped on its own each
one faults its pages in afresh. On this project's 2-core VM, on the real-shaped 1.2 M-event profile (issue 16):

- ``di analyze`` of its JSON: 1.20-1.50 instead of 2.79-3.35 s of system time (0.33-0.36 M page faults instead of
  0.69-0.91 M), 45-55 MB (4%) more peak RSS; of its ``.di`` store: 0.91-1.14 instead of 1.46-1.78 s, 50 MB more;
- ``di info`` of its JSON: 0.70-0.81 instead of 0.96-1.02 s, the same peak;
- ``di analyze`` of a 64-rank 1.2 M-event store: 0.84-0.99 instead of 1.98-2.24 s, 0-20 MB more.

The commands that write a trace (``di convert``, ``view``, ``demo``) keep :data:`MMAP_THRESHOLD`: they hold the
trace while they encode it, and at 16 MiB the peak of a ``di convert`` of the same JSON to Perfetto rose from
1,544-1,565 to 1,813 MB."""
READING_COMMANDS = ("analyze", "report", "diff", "info")
"""The ``di`` commands that read traces and write no trace of their own: analyses, reports, summaries."""

_M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter number for the mmap threshold (malloc.h)."""

HEAP_TOP_PAD = 64 << 20
"""Bytes of free memory glibc's malloc keeps at the top of a heap when it trims it (its default: 128 KiB)."""
_M_TOP_PAD = -2
"""glibc's ``mallopt`` parameter number for the top pad (malloc.h)."""

BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""OpenBLAS's variable: the threads it starts when it loads (with numpy, whose Linux wheels link it)."""

POLARS_THP = "POLARS_THP"
"""polars' variable: ``1`` when ``import polars`` runs gives its allocator (jemalloc) ``thp:always``."""
JEMALLOC_OPTIONS = "_RJEM_MALLOC_CONF"
"""The options ``import polars`` writes into ``os.environ`` for its allocator (from ``POLARS_THP`` among others)."""

_USERS: dict[str, str | None] = {}
"""The user's values (None: unset) of the variables this process changed for itself (see :func:`program_environ`)."""


def no_blas_threads(environ: dict[str, str] | None = None, modules: Mapping[str, object] | None = None) -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` unless the user set it or numpy (so OpenBLAS) is loaded; returns whether it did.

    di calls no BLAS routine, but OpenBLAS starts a thread per core when numpy loads, and each spins (busy-waits
    for work) for a while before it sleeps: on this project's 2-core VM, ``import numpy`` took 0.16-0.17 CPU-s with
    its thread and 0.06 without, and a warm ``di info`` of a 2,000-event Kineto file 0.48 against 0.38 CPU-s; a
    node of 64 cores starts 63 such threads. Only the ``di`` command sets it: a program that imports di keeps its
    BLAS threads, and the programs ``di record`` runs do not inherit it (:func:`program_environ`).
    """
    env = os.environ if environ is None else environ
    if BLAS_THREADS in env or "numpy" in (sys.modules if modules is None else modules):
        return False
    _remember(env, environ is None, BLAS_THREADS)
    env[BLAS_THREADS] = "1"
    return True


def huge_pages_for_polars(
    environ: dict[str, str] | None = None, modules: Mapping[str, object] | None = None, *, reported: bool | None = None
) -> bool:
    """Set ``POLARS_THP=1`` (polars' tables in transparent huge pages, as numpy's arrays are) unless the user set
    it, polars is loaded, or the host takes back the guest's free memory (:func:`free_memory_reported`, where
    :func:`small_pages` holds for numpy too); returns whether it did.

    With pages the machine holds, reading back a 1.2 M-event ``.di`` store took 0.21-0.22 CPU-s instead of
    0.25-0.27 (see :func:`small_pages` for all the steps). Only the ``di`` command sets it, before polars
    loads: a program that imports di keeps its allocator as it is, and the programs ``di record`` runs get
    the user's environment back (:func:`program_environ`), without the allocator options polars wrote from it.
    """
    env = os.environ if environ is None else environ
    names = sys.modules if modules is None else modules
    dear = free_memory_reported() if reported is None else reported
    if dear or POLARS_THP in env or "polars" in names or any(m.startswith("_polars_runtime") for m in names):
        return False
    _remember(env, environ is None, POLARS_THP, JEMALLOC_OPTIONS)
    env[POLARS_THP] = "1"
    return True


def _remember(env: Mapping[str, str], own: bool, *names: str) -> None:
    """Keep the user's values of ``names`` before this process changes them (only for its own environment)."""
    if own:
        for name in names:
            _USERS.setdefault(name, env.get(name))


def program_environ(env: dict[str, str]) -> dict[str, str]:
    """``env`` (a copy of this process's environment, for a program di runs) with the user's values of the
    variables this process changed for itself (:func:`no_blas_threads`, :func:`huge_pages_for_polars`)."""
    for name, value in _USERS.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def space_full_collections() -> tuple[int, int, int]:
    """Make full collections of Python's cyclic collector rare; returns the thresholds to restore.

    numba's compiler makes millions of short-lived Python objects. With Python's
    default thresholds a cold ``di analyze`` ran 7 full collections over them and
    over numba's own modules: 1.0-1.2 of its 8-9 CPU-s. With
    :data:`FULL_COLLECTION_EVERY` it runs none, 0.26 CPU-s in all collections,
    for 18 MB more peak RSS (issue 15). di's data lives in numpy and polars
    buffers, which the collector does not walk, so only cyclic garbage of Python
    objects waits longer to be freed.
    """
    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], FULL_COLLECTION_EVERY)
    return before


def map_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes (:data:`MMAP_THRESHOLD`, or :data:`READING_MMAP_THRESHOLD`
    for the commands that only read traces); False where malloc is not glibc's or refuses the value.

    With glibc's rising threshold, the engine's arrays of a few MiB to 32 MiB
    come from the heap, and what one analysis frees stays in the heap's
    fragments instead of returning to the system, so the steps' peaks add up.
    Mapped on their own, they are returned when freed: the whole-process peak of
    ``di analyze`` on a 64-rank, 2 M-event job fell from 762-779 to 679-702 MB,
    and on a 1.2 M-event Kineto profile from 1,226-1,235 to 1,121-1,163 MB, CPU
    within noise (issue 19). It holds until it is set again.
    """
    return _mallopt(_M_MMAP_THRESHOLD, threshold)


def keep_heap_top() -> bool:
    """Set glibc's top pad to :data:`HEAP_TOP_PAD`; False where malloc is not glibc's or the user set it.

    The blocks under :data:`MMAP_THRESHOLD` come from heaps that glibc trims, by default, down to 128 KiB of
    free memory at their top whenever more is freed there, so the next step's blocks touch fresh pages again:
    each first touch of a page is a fault, which a VM whose host takes back the guest's free memory makes dear.
    On the real-shaped 1.2 M-event profile (bench/realshape.py, this project's 2-core VM, issue 16):

    - ``di analyze`` of its ``.di``: 950-960 k page faults, 2.8-3.0 s of system time and 6.5-6.7 CPU-s in all
      with glibc's default; 545-559 k, 1.5-1.9 s and 4.7-5.3 CPU-s with this pad; peak RSS 1,101 -> 1,118-1,123 MiB;
    - ``di convert`` of its JSON to Perfetto: 1.51-1.52 M faults and 11.3-12.8 CPU-s; 0.98-1.02 M and
      9.0-10.0 CPU-s; peak RSS 1,434-1,455 -> 1,526-1,553 MiB.

    A pad of 256 MiB took the faults of ``di analyze`` down to 400 k for no less CPU and up to 150 MiB more
    peak; raising the trim threshold instead (``M_TRIM_THRESHOLD``, up to 1 GiB) changed nothing. Memory is
    kept only up to the pad: a block freed below a live one stays where :func:`map_large_blocks` says.
    ``MALLOC_TOP_PAD_`` or a ``glibc.malloc.top_pad`` tunable set in the environment (the user's own choice)
    is left alone.
    """
    if "MALLOC_TOP_PAD_" in os.environ or "glibc.malloc.top_pad" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    return _mallopt(_M_TOP_PAD, HEAP_TOP_PAD)


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt(param, value)``; False where it refused or malloc is not glibc's (musl's does nothing
    and says so, other systems have none)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(param, value))
    except (OSError, AttributeError):
        return False


_PAGES_LOCK = threading.Lock()
_PAGES = [0, True]
"""Callers inside :func:`small_pages` now, and numpy's huge-page advice before the first of them."""


def _huge_pages(enabled: bool) -> bool:
    """Set whether numpy advises transparent huge pages for its large arrays; returns the setting before."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]
    except ImportError:  # numpy 1.x
        from numpy.core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined,no-redef]
    return bool(_set_madvise_hugepage(enabled))


VIRTIO_DEVICES = Path("/sys/bus/virtio/devices")
"""Where Linux lists a VM's virtio devices (``device``: the device id, ``features``: one 0/1 per feature bit)."""
_VIRTIO_BALLOON = "0x0005"
"""The virtio device id of a memory balloon."""
_BALLOON_F_REPORTING = 5
"""The balloon's feature bit of free page reporting (``VIRTIO_BALLOON_F_REPORTING``, linux/virtio_balloon.h)."""


@cache
def free_memory_reported(devices: Path = VIRTIO_DEVICES) -> bool:
    """Whether this machine is a VM that reports its free memory to its host, which takes it back: a virtio
    balloon with free page reporting (Firecracker's, some clouds'). There the first touch of memory the guest
    freed a while ago costs a fault in the host as well, and a transparent huge page costs 512 of them at once
    (see :func:`small_pages`). Other hypervisors' reporting (Hyper-V's balloon) is not read: there
    ``NUMPY_MADVISE_HUGEPAGE=0 POLARS_THP=0`` in the environment keeps small pages."""
    try:
        for dev in devices.iterdir():
            if (dev / "device").read_text().strip() == _VIRTIO_BALLOON:
                bits = (dev / "features").read_text().strip()
                if len(bits) > _BALLOON_F_REPORTING and bits[_BALLOON_F_REPORTING] == "1":
                    return True
    except OSError:  # no virtio bus (not a VM, not Linux), or a device going away
        return False
    return False


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's arrays in ordinary 4 KiB pages inside the block, not the transparent huge pages numpy
    advises (``madvise``) for arrays of 4 MB and more, on a VM whose host takes back the guest's free
    memory (:func:`free_memory_reported`); elsewhere numpy's own advice holds.

    Each first touch of a fresh huge page makes the kernel find (or compact) and zero 2 MB; where the
    host took that memory back, it faults in the host too. On this project's 2-core VM (Firecracker,
    free page reporting), reading back a real-shaped 1.2 M-event OTF2 archive took 5.9-7.7 s of system
    time with huge pages and 0.9-1.0 s without (user time equal), a 1.2 M-event Kineto load 3.6-4.4 s
    against 0.35-0.49 s, and, with polars' tables in huge pages too (``POLARS_THP=1``), reading back its
    ``.di`` store 0.30-0.90 CPU-s against 0.25-0.27 (issue 16). With pages the guest holds (touched and
    freed just before, ``bench/realshape.py --provision 1024``: what a machine whose memory is its own
    gives), huge pages win every step, two runs each (M events per CPU-s, small -> huge): Kineto load
    0.99-1.01 -> 1.11-1.14 (system time 0.22-0.30 -> 0.11-0.14 s), Perfetto read 0.90 -> 1.05, OTF2 read
    1.21-1.23 -> 1.49-1.59, ``.di`` read 4.47-4.71 -> 5.51-5.78, ``.di`` write 2.27-2.28 -> 2.38-2.46,
    the Perfetto and OTF2 writes alike, peak RSS 2-4% more. numpy's setting is process-wide: the first
    caller in turns the advice off, the last one out restores it; ``NUMPY_MADVISE_HUGEPAGE`` set in the
    environment (the user's own choice) is left alone.
    """
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ or not free_memory_reported():
        yield
        return
    with _PAGES_LOCK:
        if _PAGES[0] == 0:
            _PAGES[1] = _huge_pages(False)
        _PAGES[0] += 1
    try:
        yield
    finally:
        with _PAGES_LOCK:
            _PAGES[0] -= 1
            if _PAGES[0] == 0:
                _huge_pages(_PAGES[1])
