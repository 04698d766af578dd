"""Compile hygiene: each numba kernel of di compiles once on the main paths (issue 15).

Runs every task of ``di warmup`` (load Kineto JSON, the ``.di`` store,
Perfetto and OTF2; save each format; analyze) in a fresh process with an
empty numba cache, then counts the ``signatures`` of every numba dispatcher
in the ``di`` package. Each
signature is one more compile on a cold cache (0.2 s to tens of seconds),
usually from a Python int literal or a caller passing other dtypes; see the
"Compile hygiene" notes in :mod:`di.convert.perfetto.encode`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

ALLOWED = {
    # name: (count, why)
    "di.convert.perfetto.decode._grow_i": (
        4,
        "grows the decoder's 1-D outputs, one per dtype: flow ids (uint64), "
        "flow events (int64), terminating flags (uint8), annotation doubles (float64)",
    ),
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


def test_the_main_paths_reach_the_kernels(dispatchers: dict[str, list[str]]) -> None:
    used = sum(1 for sigs in dispatchers.values() if sigs)
    assert used >= 100, f"only {used} kernels compiled: the warmup tasks no longer reach the main paths"
