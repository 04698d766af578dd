"""Compile hygiene: each numba kernel of di compiles once on the main paths (issue 15).

Rules read from the kernels themselves (no compile): ``inline='always'`` only
on leaf helpers that inline nothing; the engine's and the shared convert
helpers' kernels allocate nothing (``_nrt=False``: the caller passes the
output arrays, since numba compiles its ``np.empty``/``np.zeros``/``np.full``
once per signature and process, into every cold start).

Then runs every task of ``di warmup`` (load Kineto JSON, the ``.di`` store,
Perfetto and OTF2; save each format; analyze) in a fresh process with an
empty numba cache, then counts the ``signatures`` of every numba dispatcher
in the ``di`` package. Each
signature is one more compile on a cold cache (0.2 s to tens of seconds),
usually from a Python int literal or a caller passing other dtypes; see the
"Compile hygiene" notes in :mod:`di.convert.perfetto.encode`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

ALLOWED: dict[str, tuple[int, str]] = {
    # name: (count, why)
}
"""Dispatchers that may have more than one signature on the main paths, with the reason."""

CHILD = r"""
import json, sys
from pathlib import Path
from numba.core.dispatcher import Dispatcher
from di.warmup import run_tasks
run_tasks(Path(sys.argv[1]))
found = {}
for name, module in list(sys.modules.items()):
    if (name == "di" or name.startswith("di.")) and module is not None:
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == name:
                found[f"{name}.{value.py_func.__qualname__}"] = [str(s) for s in value.signatures]
print(json.dumps(found))
"""
"""Runs in a fresh process: other tests call kernels with their own arrays, which would add signatures here."""


@pytest.fixture(scope="module")
def dispatchers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    # an empty numba cache: kernels called only from other kernels get no signature when their caller is
    # loaded from the cache, so a warm run would hide them (this costs one cold compile, ~40 CPU-s)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "NUMBA_CACHE_DIR": str(tmp_path_factory.mktemp("numba-cache")),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path_factory.mktemp("warmup"))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_main_paths_compile_each_kernel_once(dispatchers: dict[str, list[str]]) -> None:
    over = {name: sigs for name, sigs in dispatchers.items() if len(sigs) > ALLOWED.get(name, (1, ""))[0]}
    assert not over, (
        "kernels compiled more than once (pass np.int64 values, not literals; agree on dtypes):\n"
        + "\n".join(f"{name}: {sigs}" for name, sigs in over.items())
    )


def test_allow_list_is_current(dispatchers: dict[str, list[str]]) -> None:
    stale = [name for name, (count, _) in ALLOWED.items() if len(dispatchers.get(name, [])) < count]
    assert not stale, f"allow-list entries no longer needed: {stale}"


MAIN_PATHS = (
    "di.convert.chrome.",
    "di.convert.perfetto.",
    "di.convert.otf2.",
    "di.engine.",
    "di.convert.lanes.",
    "di.convert.logs.",
)
"""Packages whose kernels the warmup tasks must reach (each main path; the count of kernels per path
falls as kernels are merged, so the test asks for each path rather than a total)."""


def test_the_main_paths_reach_the_kernels(dispatchers: dict[str, list[str]]) -> None:
    used = [name for name, sigs in dispatchers.items() if sigs]
    missed = [path for path in MAIN_PATHS if not any(name.startswith(path) for name in used)]
    assert not missed and len(used) >= 50, (
        f"{len(used)} kernels compiled, none under {missed}: the warmup tasks no longer reach the main paths"
    )


INLINE_CHAINS_KNOWN: set[str] = set()
"""Chains of ``inline='always'`` helpers allowed: none (the Chrome scanner's and the Perfetto encoder's were cut)."""

NO_ALLOCATION = tuple(
    f"di.{m}."
    for m in (
        "engine.intervals",
        "engine.breakdown",
        "engine.critical_path",
        "engine.critical_path_graph",
        "engine.inferred_edges",
        "convert.lanes",
        "convert.columns",
    )
)
"""Modules whose kernels take their outputs from the caller (``_nrt=False``): the analyses' and the
writers' shared helpers, on the path of every command that analyses or writes."""


def _imported_kernels() -> dict[str, object]:
    """Every numba dispatcher defined in a di module that uses ``@njit`` (imported here; a module whose
    optional dependency is missing is left out)."""
    from numba.core.dispatcher import Dispatcher

    found = {}
    for path in sorted((REPO / "di").rglob("*.py")):
        if "@njit" not in path.read_text(encoding="utf-8"):
            continue
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == name:
                found[f"{name}.{value.py_func.__qualname__}"] = value
    return found


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def test_inline_always_only_on_leaf_helpers() -> None:
    kernels = _imported_kernels()
    assert len(kernels) >= 50, f"only {len(kernels)} kernels found: the scan no longer finds di's modules"
    inlined = {k for k, d in kernels.items() if d.targetoptions.get("inline") == "always"}
    chains = []
    for name in inlined:
        func = kernels[name].py_func  # type: ignore[attr-defined]
        for ref in _names(func.__code__):
            callee = func.__globals__.get(ref)
            if getattr(callee, "targetoptions", {}).get("inline") == "always":
                chains.append(f"{name} inlines {ref}")
    chains = [c for c in chains if c not in INLINE_CHAINS_KNOWN]
    assert not chains, "inline='always' on a helper that inlines another (numba copies the IR quadratically):\n" + (
        "\n".join(sorted(chains))
    )


def test_engine_kernels_take_their_outputs_from_the_caller() -> None:
    allocating = [
        name
        for name, d in _imported_kernels().items()
        if name.startswith(NO_ALLOCATION) and d.targetoptions.get("_nrt", True)  # type: ignore[attr-defined]
    ]
    assert not allocating, f"kernels that may allocate (pass the outputs in, decorate with _nrt=False): {allocating}"


def _slice_assignments(func: types.FunctionType) -> list[str]:
    """Assignments in ``func`` to an array slice from anything but a number (``a[i:j] = b``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value.operand if isinstance(node.value, ast.UnaryOp) else node.value
        if isinstance(value, ast.Constant):
            continue
        for target in node.targets:
            subs = [t for t in ast.walk(target) if isinstance(t, ast.Subscript)]
            if any(isinstance(x, ast.Slice) for s in subs for x in ast.walk(s.slice)):
                found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_kernels_copy_arrays_in_loops_not_slice_assignments() -> None:
    """numba's ``a[i:j] = b`` compiles its shape-mismatch error message (string formatting: ~2 s of
    unicode, repr and join overloads) into every process that first runs the kernel; a loop does not."""
    found = {
        name: hits
        for name, d in _imported_kernels().items()
        if (hits := _slice_assignments(d.py_func))  # type: ignore[attr-defined]
    }
    assert not found, f"array slice assignments in kernels (copy in a loop): {found}"
