"""di's shorter numba pipeline (di/jitpipeline.py) compiles the kernels given it to the same code as numba's own.

The kernels that ``di convert``, ``di info``, ``di analyze`` and the training-log scans reach are compiled once more here, fresh (no cache), through numba's default
pipeline and through :class:`ScalarKernelCompiler` with the same options and signatures, and the optimised
LLVM of each kernel's own function is compared (value and block names aside, and the order of a phi's
incoming values): a pass left out that a kernel needed shows as a different function (or a compile error).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from numba import njit
from numba.core.dispatcher import Dispatcher

from di.jitpipeline import ScalarKernelCompiler

TRACE = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "kineto" / "hta_trace_filter" / "sampled_rank-0.json.gz"
)


FRESH_CACHE = "DI_TEST_JIT_FRESH_CACHE"
"""Set in the process that runs the check again with an empty numba cache."""


def _function(dispatcher: Dispatcher) -> str:
    """The optimised LLVM of the kernel's own function (not its wrappers or linked callees), normalised."""
    ir = dispatcher.inspect_llvm(dispatcher.signatures[0])
    name = dispatcher.py_func.__name__
    wanted = f"{len(name)}{name}B"
    bodies = []
    for chunk in re.split(r"\n(?=define )", ir):
        head = re.search(r"@(\S+?)\(", chunk)
        if chunk.startswith("define") and head and head.group(1).startswith("_ZN2di") and wanted in head.group(1):
            bodies.append(chunk.split("\n}\n")[0])
    assert len(bodies) == 1, f"{name}: {len(bodies)} functions found"
    text = re.sub(r"\s*;.*$", "", bodies[0], flags=re.M)
    text = re.sub(r"%[\w.$\"-]+", "%v", text)
    text = re.sub(r"^[\w.$-]+:", "L:", text, flags=re.M)
    text = re.sub(r"@[\w.$\"-]+", "@g", text)
    text = re.sub(
        r"(phi [^\[]+)(.*)$", lambda m: m.group(1) + ", ".join(sorted(m.group(2).split(", "))), text, flags=re.M
    )
    return text


def _kernels_reached(work: Path) -> list[Dispatcher]:
    """The dispatchers given :class:`ScalarKernelCompiler`, after ``di convert`` to OTF2, Perfetto and Chrome JSON,
    ``di info`` of each output, ``di analyze`` and ``di warmup``'s training-log task ran (every one of them
    must then have a signature: a kernel only other tests reach is not checked here, so may not have the pipeline)."""
    import di
    from di import cli
    from di.warmup import TASKS

    for ext in ("otf2", "pftrace", "json.gz"):
        cli.main(["convert", str(TRACE), "-o", str(work / f"x.{ext}")])
        cli.main(["info", str(work / f"x.{ext}")])
    cli.main(["analyze", str(TRACE)])
    TASKS["logs"][0](work)
    found = []
    for path in sorted(Path(di.__file__).parent.rglob("*.py")):
        if "ScalarKernelCompiler" not in path.read_text(encoding="utf-8") or path.name == "jitpipeline.py":
            continue
        module = importlib.import_module(".".join(path.relative_to(Path(di.__file__).parents[1]).with_suffix("").parts))
        for value in vars(module).values():
            if (
                isinstance(value, Dispatcher)
                and value.py_func.__module__ == module.__name__
                and value._compiler.pipeline_class is ScalarKernelCompiler
            ):
                found.append(value)
    return found


@pytest.mark.skipif(not TRACE.exists(), reason="shared Kineto data absent")
def test_kernels_compile_to_the_same_code_as_with_numbas_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from di.convert.otf2 import events

    monkeypatch.setattr(events, "FLOW_TEXTS_COMPILED", 0)  # di info reads the OTF2 archive's few flows by the kernel
    given = _kernels_reached(tmp_path)
    unchecked = [f"{k.py_func.__module__}.{k.py_func.__qualname__}" for k in given if not k.signatures]
    if unchecked and FRESH_CACHE not in os.environ:
        # a kernel loaded from numba's cache brings its callees' code without compiling them (no signatures): in
        # a process that found the cache filled, the check runs again in one with an empty cache
        env = {**os.environ, FRESH_CACHE: "1", "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
        test = f"{Path(__file__).resolve()}::test_kernels_compile_to_the_same_code_as_with_numbas_pipeline"
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], env=env)
        assert run.returncode == 0, "the check with an empty numba cache failed (its output is above)"
        return
    assert not unchecked, f"kernels given di's pipeline that this test's commands do not reach: {unchecked}"
    kernels = [k for k in given if k.signatures]
    assert len(kernels) >= 10, f"only {len(kernels)} kernels with ScalarKernelCompiler reached by di convert"
    differ = []
    for kernel in kernels:
        options = {k: v for k, v in kernel.targetoptions.items() if k != "nopython"}
        options.pop("cache", None)
        ours = njit(**options, pipeline_class=ScalarKernelCompiler)(kernel.py_func)
        numbas = njit(**options)(kernel.py_func)
        for fresh in (ours, numbas):
            fresh.compile(kernel.signatures[0])
        if _function(ours) != _function(numbas):
            differ.append(f"{kernel.py_func.__module__}.{kernel.py_func.__qualname__}")
    assert not differ, f"kernels whose code differs with di's pipeline: {differ}"
