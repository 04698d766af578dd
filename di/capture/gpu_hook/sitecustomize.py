"""Startup hook that ``di record --gpu`` and ``di record --python`` put first on the job's PYTHONPATH.

With ``DI_CAPTURE_PYTHON`` (``--python``: the minimum call duration in ns) it starts
recording the program's own Python calls (:mod:`di.capture.pycalls`).

Python imports ``sitecustomize`` at startup; this one starts CUPTI capture
(:mod:`di.capture.cupti`) in every Python process of the job, stops it at exit,
notes torch.profiler traces the program exports (and hands CUPTI over to
torch.profiler when it starts, since CUPTI takes one subscriber), then runs the
``sitecustomize`` that this one shadows, if any. It never raises: a failure is
written into the process's capture header.
"""

import os
import sys


def _chain_shadowed() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec and spec.loader:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _start() -> None:
    mode = os.environ.get("DI_CAPTURE_GPU")  # "1": CUPTI and torch.profiler; "kineto": no driver, torch.profiler only
    if not os.environ.get("DI_CAPTURE_DIR") or mode not in ("1", "kineto"):
        return
    import atexit

    from di.capture import cupti, torch_hook

    capture = cupti.gpu(os.environ["DI_CAPTURE_DIR"])
    try:
        if mode == "1":
            capture.start()
        torch_hook.install(capture)
    except Exception as exc:  # capture must never break the program
        capture.note(f"GPU capture hook failed: {exc!r}")
    atexit.register(capture.stop)


def _start_python() -> None:
    min_ns = os.environ.get("DI_CAPTURE_PYTHON")
    if not os.environ.get("DI_CAPTURE_DIR") or not min_ns:
        return
    try:
        from di.capture import pycalls

        pycalls.start(int(min_ns))
    except Exception as exc:  # noqa: BLE001  capture must never break the program
        sys.stderr.write(f"di record --python: Python calls not recorded: {exc!r}\n")


_start()
_start_python()
_chain_shadowed()
