"""Running the recorded command as ``di record``'s child: it dies with ``di record``, and
every interrupt reaches it exactly once.

* **Dying together.** The command starts through ``di-exec`` (:file:`shim/exec.c`, built on
  first use with ``cc``; without a compiler, the same steps run in a ``preexec_fn``), which
  sets ``PR_SET_PDEATHSIG(SIGKILL)``: when ``di record`` is SIGKILLed (an OOM killer, a user),
  the kernel kills its command too. No rank is left orphaned holding the launcher's pipes,
  so ``mpiexec`` sees the process end and ends the job.
* **Signals once.** ``di record`` blocks SIGINT, SIGTERM and SIGCHLD (:func:`block_signals`,
  before any thread starts) and waits for them with ``sigtimedwait``, which tells who sent
  each. In a terminal's foreground process group the command stays in that group (job
  control as without ``di``): a Ctrl-C from the terminal (``si_code == SI_KERNEL``) reached
  the command already and is not forwarded; a signal sent to ``di record`` alone (``kill``)
  is. Anywhere else (no terminal, a batch job, a rank under ``mpiexec``), the command runs
  in a process group of its own, which a signal to ``di record``'s group does not reach,
  and each SIGINT or SIGTERM ``di record`` receives is sent once to the command's group.
  Forwarding twice would make MPICH's ``mpiexec`` abort the job (exit 255).
* **Who ended first.** With ``watch`` (the launcher form), a thread watches the job's rank
  processes of this host (pids from the shard headers) through pidfds, and notes when each
  ended and, when still readable, how: when one rank is killed the launcher kills the
  others moments later, and the first is the one to name.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from di.errors import DIError, MissingDependencyError

WAITED = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
FORWARDED = (signal.SIGINT, signal.SIGTERM)
SI_KERNEL = 0x80  # si_code of a signal the kernel sent: a terminal's Ctrl-C (<asm-generic/siginfo.h>)
POLL_S = 0.25  # the wait loop's safety-net period (SIGCHLD normally wakes it at once)
WATCH_POLL_S = 0.1  # how often the watcher looks for new rank processes


@dataclass
class Outcome:
    """How the command ended."""

    code: int
    """Its exit code; 128 + N when a signal N ended it."""
    signal: int | None = None
    """The signal that ended it, if one did."""
    interrupted: int | None = None
    """The first SIGINT/SIGTERM that ``di record`` received while the command ran, if any."""
    rank_ends: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Watched ranks: rank -> {"after_s": when its process ended (s after the command
    started), "signal"/"exit_code": how, when it could still be read}."""


def block_signals() -> None:
    """Block the signals :func:`run` waits for; call before any thread starts (threads inherit it)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)


def unblock_signals() -> int | None:
    """Take pending interrupts (returning the first one's number) and unblock them again."""
    got = None
    while (info := signal.sigtimedwait(WAITED, 0)) is not None:
        if info.si_signo in FORWARDED and got is None:
            got = info.si_signo
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WAITED)
    return got


def _foreground() -> bool:
    """Whether this process is in its controlling terminal's foreground process group."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def _resolve(command: list[str], env: dict[str, str]) -> None:
    """Raise the error of a command that cannot be run, before anything starts it."""
    exe = command[0]
    found = exe if "/" in exe else shutil.which(exe, path=env.get("PATH", os.defpath))
    if not found or not os.path.isfile(found):
        raise DIError(f"cannot run {exe!r}: no such file or command (PATH searched)")
    if not os.access(found, os.X_OK):
        raise DIError(f"cannot run {exe!r}: permission denied")


def _launch(
    command: list[str], env: dict[str, str], own_group: bool
) -> tuple[list[str], dict[str, str], Callable[[], None] | None]:
    """argv, environment and preexec_fn that start ``command`` through di-exec (or its fallback)."""
    from di.capture import build

    try:
        wrapper = build.exec_wrapper()
    except (MissingDependencyError, DIError):
        wrapper = None
    if wrapper is not None:
        env = dict(env)
        if "LD_PRELOAD" in env:
            env["DI_EXEC_LD_PRELOAD"] = env["LD_PRELOAD"]
            if os.environ.get("LD_PRELOAD"):
                env["LD_PRELOAD"] = os.environ["LD_PRELOAD"]
            else:
                del env["LD_PRELOAD"]
        return [str(wrapper), str(os.getpid()), *(["--own-group"] if own_group else []), *command], env, None
    return command, env, _preexec(own_group)


def _preexec(own_group: bool) -> Callable[[], None] | None:
    """The fallback of di-exec's steps, for a machine without a C compiler (Linux only)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return os.setpgrp if own_group else None
    parent = os.getpid()

    def steps() -> None:
        if own_group:
            os.setpgrp()
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(128 + signal.SIGKILL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])

    return steps


def run(
    command: list[str],
    env: dict[str, str],
    *,
    watch: Callable[[], dict[int, int]] | None = None,
    stopping: Path | None = None,
) -> Outcome:
    """Run ``command`` to its end (signals blocked by :func:`block_signals`); see the module doc.

    Args:
        watch: {rank: pid} of the job's rank processes on this host, called repeatedly.
        stopping: a file created when a SIGINT or SIGTERM arrives: the PMPI shim's clock
            sync in MPI_Finalize then stops waiting for ranks that will not come.

    Raises:
        DIError: the command cannot be started.
    """
    _resolve(command, env)
    own_group = not _foreground()
    argv, env, preexec = _launch(command, env, own_group)
    try:  # inherited descriptors stay open: under mpiexec the rank reaches its launcher through them (PMI_FD)
        child = subprocess.Popen(argv, env=env, close_fds=False, preexec_fn=preexec)
    except OSError as exc:
        raise DIError(f"cannot run {command[0]!r}: {exc.strerror}") from None
    watcher = _Watcher(watch) if watch is not None else None
    outcome = Outcome(code=0)
    while child.poll() is None:
        info = signal.sigtimedwait(WAITED, POLL_S)
        if info is None or info.si_signo not in FORWARDED:
            continue
        outcome.interrupted = outcome.interrupted or info.si_signo
        if stopping is not None:
            _touch(stopping)
        if own_group:
            _signal_group(child, info.si_signo)
        elif info.si_code != SI_KERNEL:  # a terminal's signal reached our whole group, the command too
            child.send_signal(info.si_signo)
    code = child.returncode
    outcome.code, outcome.signal = (128 - code, -code) if code < 0 else (code, None)
    if watcher is not None:
        outcome.rank_ends = watcher.stop()
    return outcome


def _signal_group(child: subprocess.Popen[bytes], num: int) -> None:
    """Send ``num`` to the command's process group (to the command alone in the moment
    before di-exec has made that group)."""
    try:
        os.killpg(child.pid, num)
    except ProcessLookupError:
        child.send_signal(num)


def _touch(path: Path) -> None:
    try:
        path.touch()
    except OSError:
        pass


class _Watcher(threading.Thread):
    """Notes when each watched rank process ends (pidfds; Linux 5.3 and later, else nothing)."""

    def __init__(self, pids: Callable[[], dict[int, int]]) -> None:
        super().__init__(name="di-rank-watcher", daemon=True)
        self.pids, self.started_s = pids, time.monotonic()
        self.ends: dict[int, dict[str, Any]] = {}
        self.done = threading.Event()
        self.start()

    def stop(self) -> dict[int, dict[str, Any]]:
        self.done.set()
        self.join(timeout=2)
        return dict(sorted(self.ends.items()))

    def run(self) -> None:
        if not hasattr(os, "pidfd_open"):
            return
        poller, fds = select.poll(), {}  # fd -> (rank, pid)
        seen: set[int] = set()
        try:
            while not self.done.is_set():
                for rank, pid in self.pids().items():
                    if rank not in seen:
                        seen.add(rank)
                        try:
                            fd = os.pidfd_open(pid)
                        except OSError:
                            continue
                        fds[fd] = (rank, pid)
                        poller.register(fd, select.POLLIN)
                ended = poller.poll(WATCH_POLL_S * 1000)
                # one time per wake-up: ranks seen ending together must not be ordered by how long reading
                # the ones before them in this list took (on a loaded machine, milliseconds each)
                after_s = round(time.monotonic() - self.started_s, 4)
                for fd, _ in ended:
                    rank, pid = fds[fd]
                    self.ends[rank] = {"after_s": after_s, **_how_ended(pid)}
                    poller.unregister(fd)
        finally:
            for fd in fds:
                os.close(fd)


def _how_ended(pid: int) -> dict[str, int]:
    """A zombie's exit status from /proc/PID/stat (field 52), while its parent has not reaped it."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        status = int(fields[49])
    except (OSError, IndexError, ValueError):
        return {}
    return {"signal": status & 0x7F} if status & 0x7F else {"exit_code": status >> 8}
