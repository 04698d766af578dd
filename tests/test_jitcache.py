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
