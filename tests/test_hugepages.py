"""polars' allocator asks for transparent huge pages once di is imported (di.hugepages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from di import hugepages

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")

_CHILD = """
import json, os, sys
first = sys.argv[1]
if first == "di":
    import di
import polars as pl
import di
from di.capture.environment import child_env

def huge_kb():
    return sum(int(line.split()[1]) for line in open("/proc/self/smaps") if line.startswith("AnonHugePages:"))

before = huge_kb()
column = pl.Series("x", range(32_000_000), dtype=pl.Int64) * 2  # 256 MB
print(json.dumps({
    "huge_kb": huge_kb() - before,
    "env": [os.environ.get("POLARS_THP"), os.environ.get("_RJEM_MALLOC_CONF")],
    "child": [child_env(__import__("pathlib").Path("."), []).get(k) for k in ("POLARS_THP", "_RJEM_MALLOC_CONF")],
}))
"""


def _child(first: str, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in (hugepages.ENV, hugepages.JEMALLOC_ENV)} | env
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, first], capture_output=True, text=True, env=environ, timeout=120, check=True
    )
    return json.loads(out.stdout)


def test_configure_sets_the_variable_only_when_the_user_has_not_and_polars_is_not_loaded() -> None:
    env: dict[str, str] = {}
    assert hugepages.configure(env, modules={}) and env == {hugepages.ENV: hugepages.SETTING}
    mine = {hugepages.ENV: "0"}
    assert not hugepages.configure(mine, modules={}) and mine == {hugepages.ENV: "0"}
    late: dict[str, str] = {}
    assert not hugepages.configure(late, modules={"_polars_runtime_32": object()}) and late == {}
    assert not hugepages.configure(late, modules={"polars": object()}) and late == {}


def test_import_di_before_polars_sets_it_for_this_process_and_not_for_the_programs_di_records() -> None:
    first = _child("di")
    assert first["env"][0] == "1" and "thp:always" in first["env"][1], first
    assert first["child"] == [None, None]  # the traced program sees the user's environment
    late = _child("polars")  # polars' allocator started already: di leaves it as it is
    assert late["env"][0] is None and "thp:always" not in late["env"][1], late
    assert late["child"] == late["env"]  # polars' own setting, which any program importing polars passes on
    users = _child("di", POLARS_THP="0", _RJEM_MALLOC_CONF="narenas:2")
    assert users["env"][0] == "0" and "thp" not in users["env"][1] and users["env"][1].endswith("narenas:2")
    assert users["child"] == users["env"]


@pytest.mark.skipif(
    not THP.is_file() or "[madvise]" not in THP.read_text(),
    reason="transparent huge pages are not 'madvise' here: jemalloc's asking changes nothing to measure",
)
def test_polars_memory_is_in_huge_pages_when_di_came_first() -> None:
    with_di, without = _child("di"), _child("polars")
    assert with_di["huge_kb"] >= 64 * 1024, with_di  # of 256 MB; the kernel may decline some under fragmentation
    assert without["huge_kb"] < with_di["huge_kb"] // 4, (without, with_di)
