"""Compile hygiene: each numba kernel of di compiles once on the main paths (issue 15).

Runs every task of ``di warmup`` (load Kineto JSON, the ``.di`` store,
Perfetto and OTF2; save each format; analyze) in this process, then counts
the ``signatures`` of every numba dispatcher in the ``di`` package. Each
signature is one more compile on a cold cache (0.2 s to tens of seconds),
usually from a Python int literal or a caller passing other dtypes; see the
"Compile hygiene" notes in :mod:`di.convert.perfetto.encode`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from di.warmup import run_tasks

ALLOWED = {
    # name: (count, why)
    "di.convert.perfetto.decode._grow_i": (4, "grows the decoder's 1-D outputs, one per dtype: flow ids (uint64), "
                                              "flow events (int64), terminating flags (uint8), annotation doubles (float64)"),
}
"""Dispatchers that may have more than one signature on the main paths, with the reason."""


def _dispatchers() -> dict[str, object]:
    from numba.core.dispatcher import Dispatcher

    found = {}
    for name, module in list(sys.modules.items()):
        if not (name == "di" or name.startswith("di.")) or module is None:
            continue
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value.py_func.__module__ == name:
                found[f"{name}.{value.py_func.__qualname__}"] = value
    return found


@pytest.fixture(scope="module")
def dispatchers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    run_tasks(Path(tmp_path_factory.mktemp("warmup")))
    return _dispatchers()


def test_main_paths_compile_each_kernel_once(dispatchers: dict[str, object]) -> None:
    over = {}
    for name, d in dispatchers.items():
        allowed = ALLOWED.get(name, (1, ""))[0]
        if len(d.signatures) > allowed:  # type: ignore[attr-defined]
            over[name] = [str(s) for s in d.signatures]  # type: ignore[attr-defined]
    assert not over, "kernels compiled more than once (pass np.int64 values, not literals; agree on dtypes):\n" + \
        "\n".join(f"{name}: {sigs}" for name, sigs in over.items())


def test_allow_list_is_current(dispatchers: dict[str, object]) -> None:
    stale = [name for name, (count, _) in ALLOWED.items()
             if name not in dispatchers or len(dispatchers[name].signatures) < count]  # type: ignore[attr-defined]
    assert not stale, f"allow-list entries no longer needed: {stale}"


def test_the_main_paths_reach_the_kernels(dispatchers: dict[str, object]) -> None:
    used = sum(1 for d in dispatchers.values() if d.signatures)  # type: ignore[attr-defined]
    assert used >= 100, f"only {used} kernels compiled: the warmup tasks no longer reach the main paths"
