"""What the processes of a recorded command are given: their environment and preloaded libraries.

``di record`` (:mod:`di.capture.record`) starts the command with :func:`child_env`: the C shims
of :func:`preload_libs` (MPI calls, file I/O) in ``LD_PRELOAD``, the application layer of
:func:`application_env` (di's NVTX injection library, the Python-call hook) and, with ``gpu``, the
CUPTI, NCCL and torch.profiler setup of :func:`gpu_capture` (:mod:`di.capture.gpu_setup`); the raw
shards go to ``DI_CAPTURE_DIR``. Nothing here starts a process or writes a shard.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from di.errors import DIError
from di.process import program_environ

if TYPE_CHECKING:
    from di.capture.record import RecordOptions


def preload_libs(opts: RecordOptions) -> list[str]:
    """The C shims for ``LD_PRELOAD`` (built on first use, :mod:`di.capture.build`): MPI calls, file I/O."""
    from di.capture import build

    libs = []
    if opts.mpi:
        libs.append(str(build.pmpi_shim()))
    if opts.io:
        libs.append(str(build.io_shim()))
    return libs


def application_env(opts: RecordOptions) -> tuple[dict[str, str], list[str]]:
    """The application layer: (child env, notes). di's NVTX library goes into ``NVTX_INJECTION64_PATH``
    (NVTX's one injection slot per process: with it set, CUPTI never sees NVTX calls, so
    ranges come from one source, whether or not ``--gpu`` runs CUPTI) and ``DI_NVTX_LIB``
    (:mod:`di.region`); ``python`` adds the startup hook that records Python calls."""
    from di.capture import build
    from di.capture.gpu_setup import HOOK_DIR, PACKAGE_ROOT

    try:
        lib = str(build.nvtx_lib())
    except DIError as exc:
        return {}, [f"NVTX ranges, di.region and Python calls not recorded: {exc}"]
    env, notes = {"DI_NVTX_LIB": lib}, []
    current = os.environ.get("NVTX_INJECTION64_PATH")
    if opts.nvtx and current and current != lib:
        notes.append(
            f"NVTX_INJECTION64_PATH was already set ({current}): NVTX ranges go to that tool, not into the trace"
        )
    elif opts.nvtx:
        env["NVTX_INJECTION64_PATH"] = lib
    if opts.python:
        env["DI_CAPTURE_PYTHON"] = str(max(int(opts.python_min_ns), 0))
        env["PYTHONPATH"] = os.pathsep.join(
            [str(HOOK_DIR), str(PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    return env, notes


def child_env(raw: Path, libs: list[str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment (less what di set for itself: :func:`di.process.program_environ`) with
    ``extra``, ``libs`` before any ``LD_PRELOAD`` already set, and ``DI_CAPTURE_DIR`` (where the shards go)
    set to ``raw``."""
    env = program_environ(dict(os.environ))
    env.update(extra or {})
    if libs:
        env["LD_PRELOAD"] = " ".join(libs + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
    env["DI_CAPTURE_DIR"] = str(raw.resolve())
    return env


def gpu_capture(
    raw: Path, opts: RecordOptions, _console: Any
) -> tuple[dict[str, str], list[str], list[str], RecordOptions]:
    """GPU capture setup when asked for: (child env, preload libs, notes said once, options with NVML set)."""
    if not opts.gpu:
        return {}, [], [], opts
    from dataclasses import replace

    from di.capture import gpu_setup

    setup = gpu_setup.prepare(raw)  # its notes reach the user once, as warnings of the ingested trace
    return setup.env, setup.libs, setup.notes, replace(opts, nvml=opts.nvml or setup.driver)
