"""``di warmup``: compile every numba kernel of di on this machine, once.

di's kernels are compiled by numba on their first call and cached on disk
(``cache=True``), so the first run of each command pays the compile (seconds
to tens of seconds) and every later run loads the machine code. ``di warmup``
pays it up front: it runs each main path of di (load Kineto/Chrome JSON, the
``.di`` store, Perfetto and OTF2, save each format, analyze) on a small built-in
job (the Kineto-shaped demo, see :mod:`di.demo`), as tasks in worker
processes, as many at once as this process may use CPUs; a task starts when
those it reads from are done, and what the first tasks compile, the later ones
load from the cache. Run it where the cache will be used: in a Dockerfile
after ``pip install`` (``RUN di warmup``), or in a cluster module's install
step as the user who owns the install.

Where the cache goes is numba's choice, made deterministic by
:mod:`di.jitcache`: ``__pycache__`` beside the package when it is writable,
else a per-user directory (``$XDG_CACHE_HOME/di/numba``); ``NUMBA_CACHE_DIR``
wins when set.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from di import process
from di.jitcache import light_cache_loads
from di.errors import DIError

if TYPE_CHECKING:
    from concurrent.futures import Future


COUNTERS = b"""{"traceEvents": [
 {"ph": "X", "name": "step", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
 {"ph": "C", "name": "memory", "pid": 1, "ts": 5, "args": {"allocated": 5, "freed": 2.5}}]}"""
"""A Chrome document with a counter: the kernels of counter samples (the demo job has none)."""

SAVED = ("analysed", "counters")
"""The stores (``NAME.di``) each writer task writes in its format and reads back."""


def _load_kineto(work: Path) -> None:
    """Chrome/Kineto JSON in (scanner, pairing, nesting, counters), the ``.di`` store out and in."""
    import di
    from di.demo.job import write_kineto_job

    write_kineto_job(work / "kineto", ranks=2, steps=2, ops_per_step=8)
    di.save(di.load(work / "kineto"), work / "job.di")
    di.load(work / "job.di")
    (work / "counters.json").write_bytes(COUNTERS)
    di.save(di.load(work / "counters.json"), work / "counters.di")


def _analyze(work: Path) -> None:
    """The engine (breakdown, overlap, imbalance, waits, critical path) and the analysis tracks."""
    import di
    from di.viewers.analysis_tracks import with_analysis

    trace = di.load(work / "job.di")
    di.save(with_analysis(trace, di.analyze(trace, per_step=True)), work / "analysed.di")


def _perfetto(work: Path) -> None:
    """The Perfetto protobuf writer and reader."""
    import di

    for name in SAVED:
        di.save(di.load(work / f"{name}.di"), work / f"{name}.pftrace")
        di.load(work / f"{name}.pftrace")


def _otf2(work: Path) -> None:
    """The OTF2 writer and reader (skipped without the ``otf2`` wheel), and the reader's kernel for the flows of an
    archive of many (:data:`di.convert.otf2.events.FLOW_TEXTS_COMPILED`), which these small archives do not reach."""
    import polars as pl

    import di
    from di.convert.otf2.flowtext import read_flow_lists
    from di.errors import MissingDependencyError

    for name in SAVED:
        try:
            di.save(di.load(work / f"{name}.di"), work / f"{name}.otf2")
        except MissingDependencyError:
            return
        di.load(work / f"{name}.otf2")
    read_flow_lists(pl.Series(['[{"l":0,"k":0,"t":"launch","i":null,"c":null}]']))


def _chrome(work: Path) -> None:
    """The Chrome JSON writer, and the reader of di's own JSON (diTrace)."""
    import di

    for name in SAVED:
        di.save(di.load(work / f"{name}.di"), work / f"{name}.json.gz")
        di.load(work / f"{name}.json.gz")


TRAINING_LOG = "\n".join(
    f" iteration {i}/ 100 | elapsed time per iteration (ms): 81{i}.5 | lm loss: 2.{i} | learning rate: 1.0E-04 |"
    for i in range(1, 9)
)
"""Megatron iteration lines: the kernels of the training-log scans, which di runs on long logs."""


def _logs(work: Path) -> None:
    """The training-log scans (:mod:`di.convert.logs.pairscan`, :mod:`~di.convert.logs.linekinds`) and the NCCL
    parsers' id table (:mod:`di.convert.logs.idtable`), which logs this short would not reach by themselves
    (``training.SCAN_MIN_BYTES``, ``ids.NUMBA_MIN_ROWS``)."""
    import polars as pl

    from di.convert.logs import idtable, training
    from di.convert.logs.text import line_times, own_line_times, read_lines

    path = work / "train.log"
    path.write_text(TRAINING_LOG + "\n")
    lines = read_lines(path).lines
    lines = lines.with_columns(own_line_times(lines))
    training.parse_training(lines.with_columns(line_times(lines, lines.get_column("own_ts"))), scan_min_bytes=0)
    idtable.dense_ids(pl.Series("code", [3, 1, 3], pl.UInt64))


class WarmupError(DIError):
    """A warmup task failed (the message names the task and its error)."""


TASKS: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "kineto": (_load_kineto, ()),
    "analyze": (_analyze, ("kineto",)),
    "perfetto": (_perfetto, ("analyze",)),
    "otf2": (_otf2, ("analyze",)),
    "chrome": (_chrome, ("analyze",)),
    "logs": (_logs, ()),
}
"""Task name -> (function of the work directory, tasks whose outputs it reads)."""


def run_tasks(work: Path, names: list[str] | None = None) -> None:
    """Run the tasks ``names`` (default all, with what they depend on) in this process, in order."""
    for name in names or list(TASKS):
        TASKS[name][0](work)


def _timed(name: str, work: str) -> float:
    process.space_full_collections()  # a worker process of its own: nothing to restore
    light_cache_loads()
    t = time.perf_counter()
    try:
        TASKS[name][0](Path(work))
    except Exception as exc:  # not every exception pickles back from a worker: send its text
        raise WarmupError(f"di warmup: task {name!r} failed: {type(exc).__name__}: {exc}") from None
    return time.perf_counter() - t


def warmup(*, jobs: int | None = None, report: Callable[[str, float], Any] | None = None) -> dict[str, float]:
    """Compile every kernel: run :data:`TASKS` in up to ``jobs`` worker processes.

    Args:
        jobs: worker processes (default: the CPUs this process may use).
        report: called with (task name, wall seconds) as each task ends.

    Returns:
        Wall seconds per task.

    Raises:
        WarmupError: a task failed (the first failure, after the running ones end).
    """
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait  # not on every di command's import
    from multiprocessing import get_context

    jobs = jobs or len(os.sched_getaffinity(0))
    done: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory(prefix="di-warmup-") as work,
        ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=get_context("spawn")) as pool,
    ):
        running: dict[Future[float], str] = {}
        while len(done) < len(TASKS):
            for name, (_, deps) in TASKS.items():
                if name not in done and name not in running.values() and all(d in done for d in deps):
                    running[pool.submit(_timed, name, work)] = name
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                done[name] = future.result()
                if report:
                    report(name, done[name])
    return done


def add_parser(sub: Any, formatter_class: Any) -> None:
    """The ``di warmup`` subcommand (called by :mod:`di.cli`)."""
    w = sub.add_parser(
        "warmup",
        help="compile every numba kernel now (for images and cluster installs), in parallel",
        epilog="examples:\n  di warmup            (once after pip install, e.g. RUN di warmup in a Dockerfile)\n"
        "  di warmup --jobs 4",
        formatter_class=formatter_class,
    )
    w.add_argument("--jobs", type=int, help="worker processes (default: the CPUs available)")


def main(args: Any, console: Any) -> int:
    """``di warmup``: run :func:`warmup`, one line per task and a total."""
    from di.jitcache import cache_dir

    t = time.perf_counter()
    console.print(f"compiling di's kernels into {cache_dir()} ...")
    warmup(jobs=args.jobs, report=lambda name, s: console.print(f"  {name:10} {s:6.1f} s"))
    console.print(f"done in {time.perf_counter() - t:.1f} s; later runs load the compiled kernels")
    return 0
