"""``di record --python``: the calls of the program's own Python functions, as ``python`` events.

Started in every Python process of the job by the startup hook (:mod:`di.capture.gpu_hook`,
``DI_CAPTURE_PYTHON`` = the minimum duration in ns). A call is recorded when

* its function lives in one of the program's own files: not the standard library, not
  site-packages (nor any other install directory of this Python), not di itself (but
  its demo job, :mod:`di.demo.train`), not frozen or generated code (``<string>``);
  decided once per code object;
* it lasted at least the minimum duration (``RecordOptions.python_min_ns``): the many
  short calls of a program cost the callback but write nothing.

Python 3.12+ uses ``sys.monitoring`` (PEP 669: events PY_START, PY_RETURN, PY_UNWIND
under the profiler tool id; a function outside the program's files disables its own
events, so library code runs at full speed after its first call); older Pythons use
``sys.setprofile`` (and ``threading.setprofile`` for new threads), whose callback every
call pays. Each recorded call goes to the thread's shard through di's NVTX library
(``di_py_call``, :mod:`di.region`) with its ``time.monotonic_ns()`` times, its qualified
name, file and first line.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from types import CodeType, FrameType
from typing import Any

from di.region import name_id, recorder

DEFAULT_MIN_NS = 50_000
"""Shortest call recorded by default (50 us: a function worth seeing on a step's timeline)."""


def _library_dirs() -> tuple[str, ...]:
    """Directories whose files are not the program's: this Python's install paths, site dirs, di."""
    import site

    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    dirs.update(getattr(site, "getsitepackages", list)())
    dirs.add(getattr(site, "getusersitepackages", lambda: "")() or "")
    dirs.update(p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages")))
    dirs.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # di itself
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


class Recorder:
    """Decides per code object whether it is the program's, and writes the calls that last long enough."""

    def __init__(self, lib: Any, min_ns: int) -> None:
        self.lib = lib
        self.min_ns = min_ns
        self.skip = _library_dirs()
        self.demo = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "demo", "")
        self.ids: dict[CodeType, tuple[int, int, int] | None] = {}
        self.local = threading.local()

    def info(self, code: CodeType) -> tuple[int, int, int] | None:
        """(name id, file id, line) of a function of the program, None for other code."""
        try:
            return self.ids[code]
        except KeyError:
            pass
        path = code.co_filename
        real = os.path.realpath(path)
        own = not path.startswith("<") and (not real.startswith(self.skip) or real.startswith(self.demo))
        name = getattr(code, "co_qualname", code.co_name)
        got = (name_id(name), name_id(path), code.co_firstlineno) if own else None
        self.ids[code] = got
        return got

    def write(self, info: tuple[int, int, int], t0: int, t1: int) -> None:
        if t1 - t0 >= self.min_ns:
            self.lib.di_py_call(info[0], info[1], info[2], t0, t1)


def start(min_ns: int = DEFAULT_MIN_NS) -> bool:
    """Record the program's Python calls in this process; False when ``di record`` does not record it."""
    lib = recorder()
    if not lib:
        return False
    rec = Recorder(lib, min_ns)
    if sys.version_info >= (3, 12):
        _monitor(rec)
    else:
        _profile(rec)
    return True


def _profile(rec: Recorder) -> None:
    """sys.setprofile: one callback per call and return of any Python function."""
    now = time.monotonic_ns
    info_of = rec.info

    def make() -> Any:
        stack: list[tuple[FrameType, tuple[int, int, int], int]] = []

        def prof(frame: FrameType, event: str, _arg: Any) -> None:
            if event == "call":
                info = info_of(frame.f_code)
                if info is not None:
                    stack.append((frame, info, now()))
            elif event == "return" and stack and stack[-1][0] is frame:
                _, info, t0 = stack.pop()
                rec.write(info, t0, now())

        return prof

    def thread_start(frame: FrameType, event: str, arg: Any) -> None:
        prof = make()
        sys.setprofile(prof)
        prof(frame, event, arg)

    threading.setprofile(thread_start)
    sys.setprofile(make())


def _monitor(rec: Recorder) -> None:
    """sys.monitoring (3.12+): PY_START/PY_RETURN, disabled per code object outside the program."""
    mon = sys.monitoring  # type: ignore[attr-defined]
    tool = mon.PROFILER_ID
    try:
        mon.use_tool_id(tool, "di")
    except ValueError:  # another profiler holds the id: try the next free one
        tool = next((t for t in range(6) if mon.get_tool(t) is None), None)
        if tool is None:
            return
        mon.use_tool_id(tool, "di")
    now = time.monotonic_ns
    info_of = rec.info
    local = rec.local
    disable = mon.DISABLE

    def stack() -> list[tuple[CodeType, tuple[int, int, int], int]]:
        s = getattr(local, "s", None)
        if s is None:
            s = local.s = []
        return s

    def on_start(code: CodeType, _offset: int) -> Any:
        info = info_of(code)
        if info is None:
            return disable
        stack().append((code, info, now()))
        return None

    def on_return(code: CodeType, _offset: int, _value: Any) -> Any:
        if info_of(code) is None:
            return disable
        s = stack()
        if s and s[-1][0] is code:
            _, info, t0 = s.pop()
            rec.write(info, t0, now())
        return None

    def on_unwind(code: CodeType, _offset: int, _exc: BaseException) -> None:
        s = stack()
        if s and s[-1][0] is code:
            _, info, t0 = s.pop()
            rec.write(info, t0, now())

    events = mon.events
    mon.register_callback(tool, events.PY_START, on_start)
    mon.register_callback(tool, events.PY_RETURN, on_return)
    mon.register_callback(tool, events.PY_UNWIND, on_unwind)
    mon.set_events(tool, events.PY_START | events.PY_RETURN | events.PY_UNWIND)
