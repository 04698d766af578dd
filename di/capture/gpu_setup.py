"""What ``di record --gpu`` prepares for the job: the startup hook, the NCCL shim, the notes.

* the driver check: ``libcuda.so.1`` loadable; without it one note says that no
  GPU/driver was found and CUPTI, NCCL and NVML capture are skipped (the rest
  is recorded; torch.profiler traces are still picked up);
* ``PYTHONPATH``: :mod:`di.capture.gpu_hook` (a ``sitecustomize``) and the
  directory holding this ``di`` package, so every Python process of the job
  starts CUPTI capture (``DI_CAPTURE_GPU=1``) or only watches torch.profiler
  (``DI_CAPTURE_GPU=kineto``);
* ``DI_KINETO_DIR``: ``raw/kineto/``, where programs may write Kineto traces;
* NCCL, when a driver is there and an ``nccl.h`` is found (:func:`nccl_capture`):
  the profiler plugin (:file:`shim/nccl_profiler.c`) in ``NCCL_PROFILER_PLUGIN``
  when the NCCL found is 2.26 or later (or its version is unknown), with the
  LD_PRELOAD shim (:file:`shim/nccl.c`) as the fallback: it records until the
  plugin starts in a process, so an NCCL that refuses the plugin is still
  recorded, and after that only the calls on 1-rank communicators (which NCCL
  runs without its profiler); older NCCL gets the shim alone. The trace meta's ``capture.nccl``
  says which path recorded each process.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path

HOOK_DIR = Path(__file__).resolve().parent / "gpu_hook"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class GpuSetup:
    env: dict[str, str] = field(default_factory=dict)
    libs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    driver: bool = False


def driver_present() -> tuple[bool, str]:
    """Whether the CUDA driver library loads here, and why not."""
    try:
        ctypes.CDLL("libcuda.so.1")
        return True, ""
    except OSError as exc:
        return False, str(exc)


def prepare(raw: Path) -> GpuSetup:
    """The environment, preload libraries and notes for a job recorded with ``--gpu``."""
    from di.errors import DIError

    setup = GpuSetup()
    setup.driver, why = driver_present()
    kineto = raw / "kineto"
    kineto.mkdir(parents=True, exist_ok=True)
    path = [str(HOOK_DIR), str(PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    setup.env = {
        "PYTHONPATH": os.pathsep.join(path),
        "DI_CAPTURE_GPU": "1" if setup.driver else "kineto",
        "DI_KINETO_DIR": str(kineto.resolve()),
    }
    if not setup.driver:
        setup.notes.append(
            f"no GPU/driver found ({why}): CUPTI, NCCL and NVML capture skipped; "
            "the rest is recorded, torch.profiler traces are still merged"
        )
        return setup
    try:
        env, libs, note = nccl_capture()
    except DIError as exc:
        setup.notes.append(f"NCCL calls not recorded: {exc}")
        return setup
    setup.env.update(env)
    setup.libs += libs
    if note:
        setup.notes.append(note)
    return setup


def nccl_capture() -> tuple[dict[str, str], list[str], str]:
    """How NCCL calls are recorded, by the NCCL version found: (env, preload libraries, note or "").

    Raises:
        DIError: the shim or plugin cannot be built (no nccl.h, no compiler).
    """
    from di.capture import build

    shim = str(build.nccl_shim())
    if os.environ.get("NCCL_PROFILER_PLUGIN"):
        return (
            {},
            [shim],
            (
                f"NCCL_PROFILER_PLUGIN is already set ({os.environ['NCCL_PROFILER_PLUGIN']}): "
                "di records NCCL calls with its LD_PRELOAD shim (enqueue times only)"
            ),
        )
    found = build.nccl_version()
    if found is not None and found[0] < build.PROFILER_PLUGIN_MIN_VERSION:
        return (
            {},
            [shim],
            (
                f"NCCL {found[0]} ({found[1]}) predates the profiler plugin API v4 (2.26): "
                "NCCL calls are recorded by the LD_PRELOAD shim (enqueue times only)"
            ),
        )
    return {"NCCL_PROFILER_PLUGIN": str(build.nccl_plugin())}, [shim], ""
