"""Where numba caches di's compiled kernels, also when the install is read-only.

Every kernel is ``@njit(cache=True)``: numba writes its machine code to an
index and data file per function and loads them in later processes instead of
compiling again. By default numba puts them in ``__pycache__`` beside each
module. When that directory is not writable (a system or image install, a
read-only cluster module), numba (0.68, checked on a read-only mount) falls
back, per function and silently, to its user-wide cache
``$XDG_CACHE_HOME/numba/`` (``UserWideCacheLocator``, chosen after trying to
create a file in each candidate directory), so the compile is kept, but where
is nowhere said and depends on which directories a try happened to write.

:func:`configure` makes that choice once and explicitly: when the user has
not set ``NUMBA_CACHE_DIR`` and di's package directory is not writable, it
sets ``NUMBA_CACHE_DIR`` to :func:`user_cache_dir` (``$XDG_CACHE_HOME/di/numba``,
``~/.cache/di/numba`` by default) in ``os.environ``, so that the place is
fixed, named by ``di warmup`` and inherited by the processes di starts (the
ranks of ``di record``). ``import di`` calls it,
before any kernel module imports numba. Side effects, on read-only installs
only: numba code of other packages in the same process (and its children,
which inherit the variable) caches under that directory too, and a process
that imported numba before di gets ``numba.config.CACHE_DIR`` set as well.
A writable install (``pip install -e .``, a virtualenv) is left exactly as
numba does it. ``di warmup`` fills whichever directory this picks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "NUMBA_CACHE_DIR"
"""numba's variable: the root of its cache, instead of ``__pycache__`` beside each module."""

PACKAGE_DIR = Path(__file__).resolve().parent


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/di/numba`` (``~/.cache/di/numba`` when XDG_CACHE_HOME is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "di" / "numba"


def package_writable(package_dir: Path = PACKAGE_DIR) -> bool:
    """Whether numba can write its cache beside di's modules (``__pycache__``, or the package to create it in).

    ``os.access`` reports a read-only file system as not writable even to root,
    and a directory without write permission as not writable to other users.
    """
    pycache = package_dir / "__pycache__"
    return os.access(pycache if pycache.is_dir() else package_dir, os.W_OK)


def configure(environ: dict[str, str] | None = None, *, package_dir: Path = PACKAGE_DIR) -> str | None:
    """Point numba's cache at :func:`user_cache_dir` when di's package is read-only; see the module docstring.

    Args:
        environ: the environment to read and set (default ``os.environ``).
        package_dir: di's package directory (a test may point it elsewhere).

    Returns:
        The directory set, or None when nothing was set (the user's own
        ``NUMBA_CACHE_DIR``, or a writable package: numba's ``__pycache__``).
    """
    env = os.environ if environ is None else environ
    if env.get(ENV):
        return None
    if package_writable(package_dir):
        drop_stale_kernels(package_dir)
        return None
    path = str(user_cache_dir())
    env[ENV] = path
    config = sys.modules.get("numba.core.config")
    if config is not None and environ is None:  # numba read the environment already
        config.CACHE_DIR = path  # type: ignore[attr-defined]
    return path


def cache_dir() -> str:
    """Where di's kernels are cached in this process, in words."""
    return os.environ.get(ENV) or str(PACKAGE_DIR / "**" / "__pycache__")


STAMP = "di-sources.stamp"
"""File in the package's ``__pycache__`` naming the sources its numba kernels were compiled from."""


def sources_fingerprint(package_dir: Path = PACKAGE_DIR) -> str:
    """A digest of every ``.py`` file's relative path, size and mtime (ns) under ``package_dir``."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(root, name))
                h.update(
                    f"{os.path.relpath(os.path.join(root, name), package_dir)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode()
                )
    return h.hexdigest()


def drop_stale_kernels(package_dir: Path = PACKAGE_DIR) -> int:
    """Remove the package's cached numba kernels when any of its sources changed since they were compiled;
    returns how many cache files were removed.

    numba checks a cached kernel against its own module's file only. A kernel that
    calls kernels of other modules holds their machine code too, so after a change
    to one of those alone (a ``git pull`` into an editable install, which rewrites
    only the files that changed) numba would go on loading the old code: wrong
    results or a crash. Here any change to any source of the package (size or
    mtime) drops every cached kernel of the package once, and the next runs
    compile again. A ``pip install`` rewrites every file, so it drops them too.
    Used on writable installs only, where numba caches beside the modules; a
    read-only install does not change under its cache, and a user's own
    ``NUMBA_CACHE_DIR`` is left alone.
    """
    pycache = package_dir / "__pycache__"
    stamp = pycache / STAMP
    now = sources_fingerprint(package_dir)
    try:
        if stamp.read_text() == now:
            return 0
    except OSError:
        pass
    removed = 0
    for root, dirs, files in os.walk(package_dir):
        if os.path.basename(root) != "__pycache__":
            continue
        for name in files:
            if name.endswith((".nbi", ".nbc")):
                try:
                    os.unlink(os.path.join(root, name))
                    removed += 1
                except OSError:  # another process removed it, or a file system that refuses: numba recompiles
                    pass
    try:
        pycache.mkdir(exist_ok=True)
        part = pycache / f".{STAMP}.{os.getpid()}"
        part.write_text(now)
        os.replace(part, stamp)
    except OSError:
        pass
    return removed


def light_cache_loads() -> None:
    """Load cached kernels without refreshing numba's compiler first, from the moment numba is imported.

    numba's ``Cache.load_overload`` starts with ``target_context.refresh()``, which
    imports and registers every typing and lowering module of numba (cffi and its C
    parser among them): 0.1-0.2 of the 0.6-1.2 CPU-s of a warm ``di info``, spent
    before loading machine code that needs none of it. The replacement starts numba's
    runtime (NRT, which loaded code may call) and loads; a compile still refreshes
    everything first (numba's compiler does, for every function it compiles).
    Nothing changes on a numba whose cache class has another shape.

    Only di's own processes call it (the ``di`` command, :mod:`di.warmup`'s workers): a program
    that imports di keeps numba's own loading for its kernels and di's.
    """
    caching = sys.modules.get("numba.core.caching")
    if caching is not None:
        _patch_cache(caching)
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def _load_overload(self, sig, target_context):  # type: ignore[no-untyped-def]
    """numba's ``Cache.load_overload`` (0.68) less the refresh of the target context."""
    from numba.core.runtime import rtsys

    rtsys.initialize(target_context)
    with self._guard_against_spurious_io_errors():
        return self._load_overload(sig, target_context)


def _patch_cache(caching: object) -> None:
    cache = getattr(caching, "Cache", None)
    if all(hasattr(cache, name) for name in ("load_overload", "_load_overload", "_guard_against_spurious_io_errors")):
        cache.load_overload = _load_overload  # type: ignore[union-attr]


class _AfterImport:
    """A finder that lets ``numba.core.caching`` load as usual, then patches it (:func:`light_cache_loads`)."""

    def find_spec(self, fullname: str, path: object, target: object = None) -> object:
        if fullname != "numba.core.caching":
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)  # type: ignore[arg-type]
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: object) -> None:
            run(module)
            _patch_cache(module)

        loader.exec_module = exec_module
        return spec
