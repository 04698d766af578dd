"""polars' memory in transparent huge pages, as numpy's already is.

polars' Linux wheels allocate with jemalloc, which by default leaves its
memory in 4 KiB pages. Where the kernel gives huge pages only to memory that
asks for them (``/sys/kernel/mm/transparent_hugepage/enabled`` = ``madvise``,
the default of Ubuntu and Debian kernels), every 4 KiB of a fresh table is a
page fault of its own: reading a ``.di`` store of 1.2 M events (280 MB of
columns, ``bench/realshape.py``) spent 0.07-0.12 of its 0.25-0.26 CPU-s in
the kernel, faulting. numpy asks for huge pages for its own arrays of 4 MB and
up (``madvise(MADV_HUGEPAGE)``) by default, so the arrays of di's kernels had
them and polars' tables did not. jemalloc's ``thp:always`` makes it ask too:
the same read takes 0.20-0.21 CPU-s (4.7 -> 5.7-5.9 M events per CPU-s), at
5-10% more peak memory (the last huge page of a table is touched whole).

polars has the switch: ``POLARS_THP=1`` when ``import polars`` runs adds
``thp:always,metadata_thp:always`` to the options it gives jemalloc
(``_RJEM_MALLOC_CONF``, which polars writes into ``os.environ`` before its
allocator starts). :func:`configure` sets ``POLARS_THP=1`` when the user has
not set it and polars is not loaded yet. ``import di`` calls it and loads no
polars, so a program that imports di before polars gets huge pages, and one
that imported polars first keeps jemalloc as it started. Where huge pages are
``never``, jemalloc asks and the kernel declines: nothing changes; where they
are ``always``, memory had them already. The programs ``di record`` runs get
the user's environment back (:func:`child_environ`): neither ``POLARS_THP``
nor the ``_RJEM_MALLOC_CONF`` polars wrote when the user had set neither.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

ENV = "POLARS_THP"
"""polars' variable: ``1`` asks jemalloc for ``madvise(MADV_HUGEPAGE)`` on the memory it maps."""
SETTING = "1"
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
"""The options polars gives its allocator (tikv-jemallocator's prefixed name), written by ``import polars``."""

_set_by_di: tuple[str, ...] = ()
"""The variables this process's environment holds because di set ``POLARS_THP`` (see :func:`child_environ`)."""


def polars_loaded(modules: Mapping[str, object] | None = None) -> bool:
    """Whether polars (so its allocator) is loaded in this process."""
    names = sys.modules if modules is None else modules
    return "polars" in names or any(name.startswith("_polars_runtime") for name in names)


def configure(environ: dict[str, str] | None = None, *, modules: Mapping[str, object] | None = None) -> bool:
    """Set :data:`ENV` to :data:`SETTING` unless the user set it or polars is loaded; see the module docstring.

    Args:
        environ: the environment to read and set (default ``os.environ``).
        modules: the loaded modules (default ``sys.modules``).

    Returns:
        Whether the variable was set.
    """
    global _set_by_di
    env = os.environ if environ is None else environ
    if ENV in env or polars_loaded(modules):
        return False
    env[ENV] = SETTING
    if environ is None:
        _set_by_di = (ENV,) if JEMALLOC_ENV in env else (ENV, JEMALLOC_ENV)
    return True


def child_environ(env: dict[str, str]) -> dict[str, str]:
    """``env`` (a copy of this process's environment) without the variables there because di set ``POLARS_THP``."""
    for name in _set_by_di:
        env.pop(name, None)
    return env
