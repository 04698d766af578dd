"""torch.profiler under ``di record --gpu``: note the Kineto traces a program exports, and
hand CUPTI over when torch.profiler starts (CUPTI takes one subscriber per process).

:func:`install` patches ``torch.profiler.profiler._KinetoProfile`` when (and if)
the program imports ``torch.profiler``, through a ``sys.meta_path`` finder, so
programs that never import torch pay nothing. ``export_chrome_trace`` (which
``tensorboard_trace_handler`` calls too) records the written path in the
process's capture header; ingest merges those traces onto the job clock
(:mod:`di.capture.gpu_ingest`). Programs may also write traces into
``$DI_KINETO_DIR`` (set by ``di record``), which ingest scans.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Any

TARGET = "torch.profiler.profiler"


def _patch(module: Any, capture: Any) -> None:
    cls = getattr(module, "_KinetoProfile", None)
    if cls is None or getattr(cls, "_di_patched", False):
        return
    export, start = cls.export_chrome_trace, cls.start

    def export_chrome_trace(self: Any, path: str) -> Any:
        result = export(self, path)
        capture.add_kineto_trace(path)
        return result

    def start_profiler(self: Any) -> Any:
        if capture.header.get("state") == "recording":
            capture.stop("yielded")
            capture.note("CUPTI handed over to torch.profiler when it started; its Kineto trace is merged instead")
        return start(self)

    cls.export_chrome_trace, cls.start, cls._di_patched = export_chrome_trace, start_profiler, True


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of ``torch.profiler.profiler`` to patch it right after it executes."""

    def __init__(self, capture: Any) -> None:
        self.capture = capture

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader, capture = spec.loader, self.capture

        class Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                try:
                    _patch(module, capture)
                except Exception as exc:  # torch changed: say so, keep running
                    capture.note(f"torch.profiler hook not installed: {exc!r}")

        spec.loader = Loader()
        return spec


def install(capture: Any) -> None:
    """Patch torch.profiler now if imported, else when it is imported."""
    if TARGET in sys.modules:
        _patch(sys.modules[TARGET], capture)
    else:
        sys.meta_path.insert(0, _Finder(capture))
