"""Building the C capture shims on first use, cached per compiler and MPI implementation.

The PMPI shim must match the MPI library the job runs with, so it is compiled
with the job's own ``mpicc``: the one mpi4py was built with
(``mpi4py.get_config()["mpicc"]``), else the ``mpicc`` beside this Python
(a virtual environment with the ``mpich`` wheel), else ``mpicc`` on PATH. The
POSIX-I/O shim needs only ``cc`` (``$CC`` when set). Libraries are cached under
``$XDG_CACHE_HOME/di/shims`` (default ``~/.cache/di/shims``), named by a hash of
the sources and of the compiler's identity (``mpicc -show``, ``cc --version``)
so another MPI gets its own build; a build goes to a temporary name and is
renamed into place, so ranks building at once never see a partial file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from di.errors import DIError, MissingDependencyError

SHIM_DIR = Path(__file__).resolve().parent / "shim"
CFLAGS = ["-O2", "-fPIC", "-shared", "-fvisibility=default", "-Wall"]


def cache_dir() -> Path:
    """Where built shims are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "di" / "shims"


def find_mpicc() -> str:
    """The MPI compiler wrapper of the MPI that mpi4py (or this Python) uses.

    Raises:
        MissingDependencyError: none found.
    """
    try:
        import mpi4py

        configured = mpi4py.get_config().get("mpicc")
        if configured and shutil.which(configured):
            return str(shutil.which(configured))
    except ImportError:
        pass
    beside = Path(sys.executable).parent / "mpicc"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mpicc")
    if found:
        return found
    raise MissingDependencyError(
        "no MPI compiler found for the PMPI shim: mpi4py names none, and there is no "
        "mpicc beside this Python or on PATH (pip install mpich mpi4py, or load your MPI module)"
    )


def find_cc() -> str:
    """The C compiler for the I/O shim: $CC, else cc, gcc or clang on PATH."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    raise MissingDependencyError("no C compiler found for the I/O shim: install gcc or clang, or set CC")


def _identity(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)


def _build(
    name: str,
    compiler: str,
    identity: str,
    sources: list[Path],
    extra: list[str],
    linker: str | None = None,
    flags: list[str] = CFLAGS,
    suffix: str = ".so",
) -> Path:
    """Compile ``sources`` into a cached shared library (``linker``: compile with ``compiler``
    and link the object with this one instead, leaving the compiler's libraries out; ``flags``
    and ``suffix`` for a program instead of a library)."""
    digest = hashlib.sha256(identity.encode())
    for src in sorted(SHIM_DIR.iterdir()):
        if src.suffix in (".c", ".h"):
            digest.update(src.name.encode() + src.read_bytes())
    target = cache_dir() / f"{name}-{digest.hexdigest()[:16]}{suffix}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=suffix, dir=target.parent)
    os.close(fd)
    if linker is None:
        steps = [[compiler, *flags, f"-I{SHIM_DIR}", "-o", tmp, *map(str, sources), *extra]]
    else:
        obj = tmp + ".o"
        steps = [
            [compiler, *CFLAGS[:2], "-c", "-Wall", f"-I{SHIM_DIR}", "-o", obj, *map(str, sources)],
            [linker, "-shared", "-o", tmp, obj, *extra],
        ]
    try:
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                os.unlink(tmp)
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
                raise DIError(f"building the {name} shim with {cmd[0]} failed: " + " | ".join(tail))
    finally:
        if linker is not None and os.path.exists(tmp + ".o"):
            os.unlink(tmp + ".o")
    os.chmod(tmp, 0o755)  # mkstemp makes it 0600; di-exec is a program
    os.replace(tmp, target)
    return target


def _is_mpich(mpicc: str) -> bool:
    """Whether mpi.h is MPICH's (or a derivative's: Intel MPI, MVAPICH): integer handles, so
    the shim references no data symbol of the MPI library and can bind to it lazily."""
    try:
        out = subprocess.run(
            [mpicc, "-dM", "-E", "-x", "c", "-"], input="#include <mpi.h>\n", capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "#define MPICH_VERSION" in out


def pmpi_shim() -> Path:
    """The PMPI shim for this Python's MPI, built on first use.

    With an MPICH-family MPI it is compiled with ``mpicc`` but linked without the MPI
    library (see ``expose_mpi`` in shim/pmpi.c): processes of the job that never use
    MPI, the launcher first, then do not load it.
    """
    mpicc = find_mpicc()
    ident = _identity([mpicc, "-show"]) + mpicc
    if _is_mpich(mpicc):
        return _build("pmpi", mpicc, ident + " lazy", [SHIM_DIR / "pmpi.c"], ["-ldl", "-lpthread"], linker=find_cc())
    return _build("pmpi", mpicc, ident, [SHIM_DIR / "pmpi.c"], ["-ldl", "-lpthread"])


def io_shim() -> Path:
    """The POSIX-I/O shim, built on first use."""
    cc = find_cc()
    return _build("posixio", cc, _identity([cc, "--version"]) + cc, [SHIM_DIR / "posixio.c"], ["-ldl", "-lpthread"])


def nvtx_lib() -> Path:
    """di's NVTX injection library (:file:`shim/nvtx.c`; also di.region and Python calls), built on
    first use with ``cc``: NVTX loads it from ``NVTX_INJECTION64_PATH``."""
    cc = find_cc()
    return _build("nvtx", cc, _identity([cc, "--version"]) + cc, [SHIM_DIR / "nvtx.c"], ["-ldl", "-lpthread"])


def exec_wrapper() -> Path:
    """``di-exec`` (:file:`shim/exec.c`), the program through which ``di record`` starts the
    recorded command so that it dies with ``di record``; built on first use.

    Raises:
        MissingDependencyError: no C compiler.
        DIError: the build failed.
    """
    cc = find_cc()
    return _build(
        "di-exec", cc, _identity([cc, "--version"]) + cc, [SHIM_DIR / "exec.c"], [], flags=["-O2", "-Wall"], suffix=""
    )


def find_nccl_include() -> Path:
    """The directory of an ``nccl.h``: the ``nvidia-nccl-cu12``/``-cu13`` wheel's, ``$NCCL_HOME/include``,
    or the system's.

    Raises:
        MissingDependencyError: none found.
    """
    candidates = []
    try:
        import nvidia.nccl

        candidates += [Path(p) / "include" for p in nvidia.nccl.__path__]
    except ImportError:
        pass
    if os.environ.get("NCCL_HOME"):
        candidates.append(Path(os.environ["NCCL_HOME"]) / "include")
    candidates += [Path("/usr/include"), Path("/usr/local/include")]
    for c in candidates:
        if (c / "nccl.h").is_file():
            return c
    raise MissingDependencyError("no nccl.h found for the NCCL shim (pip install nvidia-nccl-cu12, or set NCCL_HOME)")


def find_cuda_include() -> Path:
    """CUDA's headers (``$CUDA_HOME/include``, /usr/local/cuda*/include), else di's stand-in
    (nccl.h needs only ``cudaStream_t`` from them for what the shim uses)."""
    roots = [
        os.environ.get("CUDA_HOME", ""),
        "/usr/local/cuda",
        *sorted(map(str, Path("/usr/local").glob("cuda-*")), reverse=True),
    ]
    for root in filter(None, roots):
        if (Path(root) / "include" / "cuda_runtime.h").is_file():
            return Path(root) / "include"
    return SHIM_DIR / "cuda_standin"


def nccl_shim() -> Path:
    """The NCCL shim (:file:`shim/nccl.c`), built on first use against the nccl.h found."""
    cc = find_cc()
    nccl, cuda = find_nccl_include(), find_cuda_include()
    ident = _identity([cc, "--version"]) + cc + (nccl / "nccl.h").read_text(errors="replace")[:4096] + str(cuda)
    return _build("nccl", cc, ident, [SHIM_DIR / "nccl.c"], [f"-I{nccl}", f"-I{cuda}", "-ldl", "-lpthread"])


def nccl_plugin() -> Path:
    """The NCCL profiler plugin (:file:`shim/nccl_profiler.c`, profiler API v4-v6), built on first use
    against the nccl.h found; NCCL loads it from ``NCCL_PROFILER_PLUGIN``."""
    cc = find_cc()
    nccl, cuda = find_nccl_include(), find_cuda_include()
    ident = _identity([cc, "--version"]) + cc + (nccl / "nccl.h").read_text(errors="replace")[:4096] + str(cuda)
    return _build(
        "nccl_plugin", cc, ident, [SHIM_DIR / "nccl_profiler.c"], [f"-I{nccl}", f"-I{cuda}", "-ldl", "-lpthread"]
    )


PROFILER_PLUGIN_MIN_VERSION = 22600
"""NCCL_VERSION_CODE of NCCL 2.26.0, the first with the v4 profiler API that di's plugin implements."""


def nccl_version() -> tuple[int, str] | None:
    """(NCCL_VERSION_CODE, library path) of the NCCL a job would load: the ``nvidia-nccl-cu12``/``-cu13``
    wheel's ``libnccl.so.2``, else the system's; None when none loads (``ncclGetVersion`` through ctypes)."""
    import ctypes
    import ctypes.util

    candidates = []
    try:
        import nvidia.nccl

        candidates += [str(Path(p) / "lib" / "libnccl.so.2") for p in nvidia.nccl.__path__]
    except ImportError:
        pass
    if os.environ.get("NCCL_HOME"):
        candidates.append(str(Path(os.environ["NCCL_HOME"]) / "lib" / "libnccl.so.2"))
    candidates += [c for c in (ctypes.util.find_library("nccl"), "libnccl.so.2") if c]
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            code = ctypes.c_int(0)
            if lib.ncclGetVersion(ctypes.byref(code)) == 0 and code.value > 0:
                return code.value, path
        except (OSError, AttributeError):
            continue
    return None
