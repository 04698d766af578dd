"""Process-wide settings of di's commands (di.process): they hold while a command runs, and the caller's come back."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest

from di import process


def test_cli_spaces_full_collections_while_it_runs_and_restores_them(tmp_path: Path) -> None:
    """During a command every collection sees the CLI's thresholds; after it, the caller's are back."""
    import gc

    from di.cli import main
    from di.demo import write_kineto_job

    write_kineto_job(tmp_path / "job", ranks=2, steps=2)
    seen: list[tuple[int, int, int]] = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(gc.get_threshold())

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    gc.callbacks.append(watch)
    try:
        assert main(["info", str(tmp_path / "job")]) == 0
        after = gc.get_threshold()
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*before)
    assert seen, "no collection ran during the command"
    assert {t[2] for t in seen} == {process.FULL_COLLECTION_EVERY}
    assert after == (700, 10, 10)


MALLOC = r"""
import ctypes, sys
from pathlib import Path
from di import process
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss_kb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
"""
"""The children's preamble: glibc's malloc and free, and the process's resident KiB."""


def _freed_below_child(setup: str, blocks: int, size: str) -> str:
    """A child script: ``setup``, then ``blocks`` blocks of ``size`` bytes allocated, touched and freed below a
    live block; it prints the KiB the process gave back to the system."""
    return (
        MALLOC
        + setup
        + f"""
blocks = [libc.malloc({size}) for _ in range({blocks})]
pin = libc.malloc(256 << 10)  # after them, so a heap cannot give their pages back by trimming its top
for b in blocks:
    ctypes.memset(b, 1, {size})
held = rss_kb()
for b in blocks:
    libc.free(b)
print(held - rss_kb())
"""
    )


CHILD = _freed_below_child(
    r"""
if sys.argv[1] == "mapped":
    assert process.map_large_blocks()
libc.free(libc.malloc(8 << 20))  # glibc's own rule: the threshold rises past a freed mapped block
""",
    32,
    "2 << 20",
)


def _returned_kb(script: str, mode: str) -> int:
    """The KiB a child running ``script`` with ``mode`` gave back to the system (glibc's settings from the
    environment left out)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "MALLOC_TOP_PAD_"}
    out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, check=True, env=env)
    return int(out.stdout)


def _glibc() -> bool:
    try:
        return bool(ctypes.CDLL(None).gnu_get_libc_version)
    except (OSError, AttributeError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc's malloc only")
def test_large_blocks_are_mapped_and_given_back_when_freed() -> None:
    """64 MiB in 2 MiB blocks, freed below a live block: glibc's heap keeps them; with map_large_blocks they go back."""
    assert _returned_kb(CHILD, "heap") < 16 << 10  # the control: without it, most of the 64 MiB stays
    assert _returned_kb(CHILD, "mapped") > 60 << 10


TOP_CHILD = (
    MALLOC
    + r"""
assert process.map_large_blocks()
if sys.argv[1] == "padded":
    assert process.keep_heap_top()
blocks = [libc.malloc(512 << 10) for _ in range(64)]  # under the mmap threshold: from the heap, at its top
for b in blocks:
    ctypes.memset(b, 1, 512 << 10)
held = rss_kb()
for b in reversed(blocks):
    libc.free(b)
print(held - rss_kb())
"""
)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc's malloc only")
def test_the_heap_keeps_its_top_for_the_next_blocks() -> None:
    """32 MiB in blocks under the mmap threshold, freed at the top of the heap: glibc trims them away (the next
    blocks would fault their pages in again); with keep_heap_top the heap keeps them."""
    assert _returned_kb(TOP_CHILD, "default") > 24 << 10  # the control: trimmed back to the system
    assert _returned_kb(TOP_CHILD, "padded") < 4 << 10


READING_CHILD = _freed_below_child(
    r"""
assert process.map_large_blocks(
    process.READING_MMAP_THRESHOLD if sys.argv[1] == "reading" else process.MMAP_THRESHOLD
)
""",
    8,
    "9 << 20",  # a 1.2 M-event int64 column is 9.6 MB
)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc's malloc only")
def test_reading_commands_keep_column_sized_blocks_for_reuse() -> None:
    """72 MiB in 9 MiB blocks, freed below a live block: mapped on their own (the commands that write a trace) they
    go back to the system, to be faulted in again by the next; under the reading commands' threshold the heap keeps
    them for the next step. Every reading command is a command of the CLI."""
    assert _returned_kb(READING_CHILD, "other") > 64 << 10
    assert _returned_kb(READING_CHILD, "reading") < 8 << 10
    assert set(process.READING_COMMANDS) <= set(_parser_commands())


def _parser_commands() -> list[str]:
    from di.cli.parser import _parser

    actions = [a for a in _parser()._subparsers._group_actions if hasattr(a, "choices")]  # type: ignore[union-attr]
    return list(actions[0].choices)


def test_no_blas_threads_only_where_the_user_did_not_choose_and_numpy_is_not_loaded() -> None:
    env: dict[str, str] = {}
    assert process.no_blas_threads(env, {}) and env == {process.BLAS_THREADS: "1"}
    mine = {process.BLAS_THREADS: "8"}
    assert not process.no_blas_threads(mine, {}) and mine == {process.BLAS_THREADS: "8"}
    late: dict[str, str] = {}
    assert not process.no_blas_threads(late, {"numpy": object()}) and late == {}


@pytest.mark.parametrize("users", [None, "3"])
def test_the_di_command_runs_without_blas_threads_and_the_program_it_records_gets_the_users_setting(
    tmp_path: Path, users: str | None
) -> None:
    """``python -m di`` sets OPENBLAS_NUM_THREADS=1 for itself; ``di record``'s program sees the user's environment."""
    import subprocess

    from tests.capture_helpers import env

    extra = {} if users is None else {process.BLAS_THREADS: users}
    environ = {k: v for k, v in env(**extra).items() if users is not None or k != process.BLAS_THREADS}
    seen = tmp_path / "seen.txt"
    program = f"import os; open({str(seen)!r}, 'w').write(str(os.environ.get('OPENBLAS_NUM_THREADS')))"
    # the di process itself: its own atexit handler reports the variable as the command ends
    own = (
        "import atexit, os, sys; atexit.register(lambda: print('DI', os.environ.get('OPENBLAS_NUM_THREADS')));"
        "sys.argv = ['di', 'record', '-o', sys.argv[1], '--', sys.executable, '-c', sys.argv[2]];"
        "from di.cli import main; sys.exit(main())"
    )
    done = subprocess.run(
        [sys.executable, "-c", own, str(tmp_path / "run.di"), program],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"DI {users or '1'}" in done.stdout
    assert seen.read_text() == str(users)


def test_huge_pages_for_polars_where_the_machine_keeps_its_memory_and_nobody_chose() -> None:
    env: dict[str, str] = {}
    assert process.huge_pages_for_polars(env, {}, reported=False) and env == {process.POLARS_THP: "1"}
    for dear, given, modules in ((True, {}, {}), (False, {process.POLARS_THP: "0"}, {}), (False, {}, {"polars": 1})):
        env = dict(given)
        assert not process.huge_pages_for_polars(env, modules, reported=dear) and env == given


def test_programs_get_the_users_environment_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """What di set for itself (and what polars wrote from it) is put back as the user had it for the programs it runs."""
    monkeypatch.setattr(process, "_USERS", {})
    monkeypatch.delenv(process.BLAS_THREADS, raising=False)
    monkeypatch.delenv(process.POLARS_THP, raising=False)
    monkeypatch.setenv(process.JEMALLOC_OPTIONS, "narenas:2")
    assert process.no_blas_threads(modules={}) and process.huge_pages_for_polars(modules={}, reported=False)
    monkeypatch.setenv(process.JEMALLOC_OPTIONS, "dirty_decay_ms:500,thp:always,narenas:2")  # as polars rewrites it
    assert os.environ[process.BLAS_THREADS] == "1" and os.environ[process.POLARS_THP] == "1"
    env = process.program_environ(dict(os.environ))
    assert process.BLAS_THREADS not in env and process.POLARS_THP not in env
    assert env[process.JEMALLOC_OPTIONS] == "narenas:2"
