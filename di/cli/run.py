"""The ``di`` process: :func:`main` (the console script's entry point) tunes the process (:mod:`di.process`),
runs one command through :func:`_run`, which maps its errors to exit codes (:mod:`di.cli.failures`), and
ends the process without the interpreter's teardown when it is the ``di`` program (:func:`_exit_now`).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from di import process, warmup
from di.cli.analyze import _analyze
from di.cli.convert import _convert
from di.cli.dashboard import _dashboard
from di.cli.demo import _demo
from di.cli.diff import _diff
from di.cli.failures import EXIT_PIPE, _bug, _fail, _os_text
from di.cli.info import _info
from di.cli.messages import _notes
from di.cli.parser import _parser
from di.cli.plugins import _plugins
from di.cli.record import _record
from di.cli.report import _report
from di.cli.view import _view


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``di`` console script.

    Exit codes: the command's own (``di record``: the recorded command's), 0 on
    success, :data:`EXIT_INPUT` for bad input or an environment error (one line on
    stderr), 130 on Ctrl-C, :data:`EXIT_BUG` for an internal error (one line naming
    the log file that holds the traceback).
    """
    program = argv is None and _is_the_program()
    if program:  # a program that calls main keeps numba's own cache loading, its BLAS threads, and its process
        from di.jitcache import light_cache_loads

        process.no_blas_threads()  # before numpy loads
        process.huge_pages_for_polars()  # before polars loads
        light_cache_loads()
    collector = process.space_full_collections()
    process.keep_heap_top()
    try:
        with process.small_pages():
            code = _run(argv)
    finally:
        gc.set_threshold(*collector)
    if program:
        _exit_now(code)
    return code


def _is_the_program() -> bool:
    """Whether this process is the ``di`` command (the console script, ``python -m di``), not a
    program that imported di and called :func:`main`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return Path(sys.argv[0]).stem == "di" or getattr(spec, "name", None) == "di.__main__"


def _exit_now(code: int) -> None:
    """End the process with ``code`` once its output is flushed and its ``atexit`` handlers have run,
    without the interpreter's teardown: freeing numba's, polars' and numpy's modules object by
    object took 0.3-0.45 of the 1.1-1.5 CPU-s of a warm ``di info`` (issue 15). Returns (and the
    process ends as usual) where that teardown does work: a non-daemon thread still running, MPI
    (mpi4py finalizes MPI in it), or output that cannot be flushed."""
    import atexit
    import os
    import threading

    main_thread = threading.main_thread()
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's; elsewhere the process ends as usual
    if (
        run_exitfuncs is None
        or "mpi4py.MPI" in sys.modules
        or any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate())
    ):
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None where the fd was closed when Python started (di info x >&-)
                stream.flush()
    except (OSError, ValueError):
        return
    run_exitfuncs()
    os._exit(0 if code is None else code)


def _run(argv: list[str] | None) -> int:
    import logging

    from rich.console import Console

    from di.errors import DIError

    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    process.map_large_blocks(
        process.READING_MMAP_THRESHOLD if args.command in process.READING_COMMANDS else process.MMAP_THRESHOLD
    )
    console = Console(stderr=False, highlight=False)
    err = Console(stderr=True, highlight=False)
    notes = _notes(err, args.command)
    logging.getLogger("di").addHandler(notes)
    try:
        code = {
            "convert": _convert,
            "info": _info,
            "demo": _demo,
            "view": _view,
            "analyze": _analyze,
            "record": _record,
            "report": _report,
            "diff": _diff,
            "dashboard": _dashboard,
            "plugins": _plugins,
            "warmup": warmup.main,
        }[args.command](args, console)
    except (DIError, FileNotFoundError, ValueError) as exc:
        return _fail(err, args.command, str(exc))
    except BrokenPipeError:  # the reader of stdout left (di info --json | head): quiet, as other tools
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush cannot fail again
        return EXIT_PIPE
    except OSError as exc:
        return _fail(err, args.command, _os_text(exc))
    except MemoryError:
        return _fail(
            err, args.command, "out of memory (see --help for limits on input size, or use a machine with more memory)"
        )
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug: one line for the user, the traceback in a log file
        return _bug(err, args.command, argv, exc)
    finally:
        logging.getLogger("di").removeHandler(notes)
    return code if isinstance(code, int) else 0
