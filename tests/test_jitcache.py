"""Where numba caches di's kernels (di.jitcache): a read-only install compiles once per user.

The install test copies the ``di`` package onto a tmpfs mounted read-only
(root cannot write there, unlike a ``chmod a-w`` directory), runs a kernel in
two fresh processes and checks that the first compiled into the per-user
directory and the second compiled nothing (numba's compile events) but loaded
from there. It needs root and ``mount``; it skips, saying why, without them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from di import jitcache

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, sys
from numba.core import event
compiles = []
class Count(event.Listener):
    def on_start(self, e): compiles.append(e.data["dispatcher"].py_func.__qualname__)
    def on_end(self, e): pass
event.register("numba:compile", Count())
import numpy as np
import di
from di import nesting
depth, parent = nesting.nest(np.zeros(3, np.int64), np.arange(3), np.arange(3) + 5)
print(json.dumps({"file": di.__file__, "cache": os.environ.get("NUMBA_CACHE_DIR"), "compiles": compiles,
                  "hits": sum(nesting._nest.stats.cache_hits.values()), "parent": parent.tolist()}))
"""


def test_a_writable_package_is_left_to_numba(tmp_path: Path) -> None:
    env: dict[str, str] = {}
    assert jitcache.configure(env, package_dir=tmp_path) is None
    assert env == {}


def test_the_users_numba_cache_dir_wins(tmp_path: Path) -> None:
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "mine")}
    assert jitcache.configure(env, package_dir=Path("/proc")) is None  # /proc: not writable
    assert env == {"NUMBA_CACHE_DIR": str(tmp_path / "mine")}


def test_user_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert jitcache.user_cache_dir() == tmp_path / "di" / "numba"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert jitcache.user_cache_dir() == Path.home() / ".cache" / "di" / "numba"


@pytest.fixture
def readonly_install(tmp_path: Path):
    """A copy of the ``di`` package on a read-only tmpfs; yields the directory to put on PYTHONPATH."""
    site = tmp_path / "site"
    site.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root and mount(8) to mount a read-only tmpfs (chmod does not stop root writing)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(site)], capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        shutil.copytree(REPO / "di", site / "di", ignore=shutil.ignore_patterns("__pycache__"))
        remount = subprocess.run(["mount", "-o", "remount,ro", str(site)], capture_output=True, text=True)
        if remount.returncode:
            pytest.skip(f"cannot remount the tmpfs read-only: {remount.stderr.strip()}")
        yield site
    finally:
        subprocess.run(["umount", str(site)], check=False)


def _child(site: Path, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env.update(PYTHONPATH=str(site), HOME=str(home), XDG_CACHE_HOME=str(home / "xdg"))
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=home, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_read_only_install_compiles_once_into_the_user_cache(readonly_install: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    user_dir = home / "xdg" / "di" / "numba"
    first = _child(readonly_install, home)
    assert first["file"].startswith(str(readonly_install))
    assert first["cache"] == str(user_dir)
    assert "_nest" in first["compiles"] and first["parent"] == [-1, 0, 1]
    assert any(user_dir.rglob("nesting._nest-*.nbi")), "no numba index file in the per-user cache"
    assert not list(readonly_install.rglob("__pycache__"))
    second = _child(readonly_install, home)
    assert second["compiles"] == [], "the second process compiled again"
    assert second["hits"] >= 1 and second["parent"] == [-1, 0, 1]


STALE_CHILD = r"""
import sys
from pathlib import Path
from di import jitcache
if sys.argv[2] == "drop":
    jitcache.drop_stale_kernels(Path(sys.argv[1]) / "pkg")
sys.path.insert(0, sys.argv[1])
from pkg.caller import twice
print(twice(21))
"""


def _write_package(root: Path, value: int) -> None:
    pkg = root / "pkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "callee.py").write_text(f"from numba import njit\n\n@njit(cache=True)\ndef base():\n    return {value}\n")
    (pkg / "caller.py").write_text(
        "from numba import njit\nfrom pkg.callee import base\n\n@njit(cache=True)\ndef twice(x):\n    return 2 * x + base()\n"
    )


@pytest.mark.parametrize("drop", [False, True])
def test_a_change_to_a_called_kernels_module_alone_recompiles_its_callers_only_when_dropped(
    tmp_path: Path, drop: bool
) -> None:
    """numba checks a cached kernel against its own module only: after an edit of the callee's module alone,
    the caller's cache still holds the old callee (the control shows it); drop_stale_kernels removes it."""
    env = {k: v for k, v in os.environ.items() if k != jitcache.ENV}
    env["PYTHONPATH"] = str(REPO)

    def run() -> int:
        mode = "drop" if drop else "keep"
        out = subprocess.run(
            [sys.executable, "-c", STALE_CHILD, str(tmp_path), mode], env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    _write_package(tmp_path, 1)
    assert run() == 43
    (tmp_path / "pkg" / "callee.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef base():\n    return 1000\n"
    )
    assert run() == (1042 if drop else 43)


def test_drop_stale_kernels_removes_cache_files_once_per_change_of_the_sources(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    kernel = pkg / "__pycache__" / "a.f-1.py311.nbi"
    kernel.write_bytes(b"x")
    assert jitcache.drop_stale_kernels(pkg) == 1  # no stamp yet: whatever is cached has no known sources
    kernel.write_bytes(b"x")
    assert jitcache.drop_stale_kernels(pkg) == 0
    assert kernel.exists()
    (pkg / "a.py").write_text("x = 22\n")
    assert jitcache.drop_stale_kernels(pkg) == 1
    assert not kernel.exists()


LOAD_CHILD = r"""
import json, sys
import numpy as np
import di
if sys.argv[1:] == ["cli"]:
    from di.jitcache import light_cache_loads
    light_cache_loads()  # as the di command and di warmup's workers do
from di.convert.chrome.numbers import parse_number
from numba import njit
buf = np.frombuffer(b"1712195495519689.047,", dtype=np.uint8)
value = parse_number(buf, np.int64(0), np.int64(buf.size), np.int64(3))[0]
refreshed = "numba.core.typing.cffi_utils" in sys.modules  # imported by numba's refresh of its compiler only
later = njit(lambda x: x + 1)(41)  # a compile after a load refreshes as numba does
from numba.core.caching import Cache
print(json.dumps({"value": int(value), "hits": sum(parse_number.stats.cache_hits.values()), "refreshed": refreshed,
                  "later": later, "patched": Cache.load_overload.__module__}))
"""


def test_cached_kernels_load_without_refreshing_numbas_compiler(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}

    def child(*args: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", LOAD_CHILD, *args], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold, warm = child("cli"), child("cli")
    assert cold["value"] == warm["value"] == 1712195495519689047
    assert cold["hits"] == 0 and cold["refreshed"]  # compiled: numba refreshed its compiler
    assert warm["hits"] == 1 and not warm["refreshed"]  # loaded: no refresh
    assert warm["later"] == cold["later"] == 42
    assert warm["patched"] == "di.jitcache"
    library = child()  # a program that only imports di keeps numba's own loading
    assert library["hits"] == 1 and library["refreshed"] and library["patched"] != "di.jitcache"


def test_light_cache_loads_leaves_an_unknown_cache_class_alone() -> None:
    class Other:
        def load_overload(self, sig, target_context):  # type: ignore[no-untyped-def]
            return "numba's own"

    module = type(sys)("fake_caching")
    module.Cache = Other  # type: ignore[attr-defined]
    jitcache._patch_cache(module)
    assert Other.load_overload(None, None, None) == "numba's own"  # type: ignore[arg-type]
