"""``di record``: run a command under capture, then ingest its shards into one trace.

Two forms:

* wrapping a launcher (or any single command):
  ``di record -o run.di -- mpiexec -n 4 python train.py``. The shims go into
  ``LD_PRELOAD`` of the whole process tree; the samplers run here, once. A
  thread watches the ranks' processes, so that when the launcher ends the job
  because one rank died, the trace names the rank that ended first.
* wrapping each rank: ``mpiexec -n 4 di record -o run.di -- python train.py``,
  detected from the launcher's environment (PMI_RANK, PMIX_RANK,
  OMPI_COMM_WORLD_RANK). Rank 0 prepares ``run.di/raw/``, the others wait for
  it; the first rank of each node (local rank 0) runs that node's samplers;
  every rank reports its command's exit status in ``raw/exit-RANK.json`` and
  rank 0 ingests when all have reported (or ``REPORT_TIMEOUT_S`` after its own
  command ended, saying which ranks never reported). A rank whose command
  failed (killed, crashed, nonzero exit) does not exit before the recording is
  ingested: launchers end the whole job, every di record included, as soon as
  one rank exits abnormally. It waits ``ABNORMAL_GRACE_S`` for the others'
  reports, then ingests what there is, unless another rank is already at it
  (one lock file beside the recording elects the ingesting rank), and then
  ends by the signal that ended its command, if one did, so that the launcher
  ends the job as it would have without di.

The command runs through :mod:`di.capture.child`: it dies with ``di record``
(``PR_SET_PDEATHSIG``), so a SIGKILLed ``di record`` leaves no orphaned rank
and the launcher ends the job at once; and a SIGINT or SIGTERM reaches it
exactly once (a terminal's Ctrl-C is not forwarded a second time). Either way
the command's exit code is this command's exit code (128 + N when ``di record``
received signal N and the command failed), and raw shards stay in
``run.di/raw/`` beside the canonical trace. A recording nobody was left to
ingest (its ``di record`` killed, or the ingest killed) is ingested by the next
``di record --ingest``, ``di info`` or ``di.load`` (:mod:`di.capture.recover`).
``-o`` must be absent, empty, or a di recording or store; only what di wrote
there is replaced.

What the command's processes are given is :mod:`di.capture.environment`'s; the files
through which the ranks of the per-rank form meet are :mod:`di.capture.rendezvous`'s.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from di.capture import child
from di.capture.environment import application_env, child_env, gpu_capture, preload_libs
from di.capture.rendezvous import SETUP_TIMEOUT_S as SETUP_TIMEOUT_S  # re-exported: record's constants before
from di.capture.rendezvous import START_SKEW_S as START_SKEW_S
from di.capture.rendezvous import ingested, lock_path, take_ingest_lock, unreported, wait_for_setup
from di.errors import DIError

RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")
SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE")
LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "SLURM_LOCALID")
REPORT_TIMEOUT_S = 30.0  # rank 0 waits this long for other ranks' exit reports
ABNORMAL_GRACE_S = 1.0  # a rank whose command failed waits this long for the others' reports (ranks ending at once)
INGESTER_POLL_S = 0.05
STOPPING = "stopping"  # raw/STOPPING: di record got SIGINT/SIGTERM (the PMPI shim's MPI_Finalize stops waiting)
_lock_path, _take_ingest_lock = lock_path, take_ingest_lock  # the names di.capture.recover imports
_application = application_env  # the name tests call


@dataclass(frozen=True)
class RecordOptions:
    """What to capture and where (sampler roots are for tests and containers)."""

    output: Path
    mpi: bool = True
    io: bool = True
    host: bool = True
    ib: bool = False
    net: bool = False
    nvml: bool = False
    gpu: bool = False
    """CUPTI activity in Python processes, NCCL calls, torch.profiler traces (:mod:`di.capture.gpu_setup`)."""
    nvtx: bool = True
    """NVTX ranges and marks of every process, through di's NVTX injection library (:file:`shim/nvtx.c`)."""
    python: bool = False
    """The calls of the program's own Python functions (:mod:`di.capture.pycalls`)."""
    python_min_ns: int = 50_000
    """Shortest Python call recorded with ``python`` (ns)."""
    rate_hz: float = 10.0
    proc_root: str = "/proc"
    ib_root: str = "/sys/class/infiniband"
    net_root: str = "/sys/class/net"


def _env_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value and value.lstrip("-").isdigit():
            return int(value)
    return None


def _prepare(run: Path) -> Path:
    """Make ``run/raw`` empty, removing only what di wrote there before (:func:`di.capture.recover.check_output`)."""
    from di.capture.recover import check_output, remove_recording

    check_output(run)
    remove_recording(run)
    raw = run / "raw"
    try:
        raw.mkdir(parents=True)
    except OSError as exc:
        raise DIError(f"{run}: cannot create the recording here: {exc.strerror}") from None
    return raw


def _job_pids(raw: Path) -> Any:
    """A callable: {rank: pid} of this host's ranks, from the shard headers written so far."""
    host = socket.gethostname().replace("-", "_")
    known: dict[str, tuple[int, int]] = {}  # header file -> (rank, pid): a rank's header is read once

    def pids() -> dict[int, int]:
        for p in raw.glob(f"mpi-{host}-*.json"):
            if p.name in known:
                continue
            try:
                h = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if h.get("rank", -1) >= 0:
                known[p.name] = (h["rank"], h["pid"])
        return dict(known.values())

    return pids


def _sampler(raw: Path, opts: RecordOptions) -> Any:
    from di.capture.samplers import SamplerOptions, SamplerThread

    sopts = SamplerOptions(
        host=opts.host,
        ib=opts.ib,
        net=opts.net,
        nvml=opts.nvml,
        rate_hz=opts.rate_hz,
        proc_root=opts.proc_root,
        ib_root=opts.ib_root,
        net_root=opts.net_root,
        job_pids=_job_pids(raw),
    )
    if not sopts.any():
        return None
    sampler = SamplerThread(raw, sopts)
    sampler.start()
    return sampler


def _run(command: list[str], env: dict[str, str], samplers: Any, raw: Path, watch: Any = None) -> child.Outcome:
    """Start the samplers (``samplers()``: the sampler thread or None), run the command
    (:mod:`di.capture.child`), stop the samplers. The signals the child module waits for are
    blocked from before any thread starts (threads inherit the mask) until the command ended.
    A SIGINT or SIGTERM received meanwhile makes the exit code 128 + its number, unless the
    command still exited 0."""
    child.block_signals()
    sampler = None
    try:
        sampler = samplers()
        outcome = child.run(command, env, watch=watch, stopping=raw / STOPPING)
    finally:
        if sampler:
            sampler.stop()
        late = child.unblock_signals()
    outcome.interrupted = outcome.interrupted or late
    if outcome.interrupted and outcome.code:
        outcome.code = 128 + outcome.interrupted
    return outcome


def _recorder() -> dict[str, Any]:
    """Who records (run.json): a recording whose recorder is alive is not ingested by others."""
    return {"recorder": {"host": socket.gethostname(), "pid": os.getpid()}}


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def ingest_run(run: Path, console: Any = None) -> Any:
    """Ingest ``run/raw`` and write the trace store at ``run`` (raw shards kept)."""
    from di.capture.ingest import ingest
    from di.store import write_store

    status = console.status("ingesting") if console else None
    if status:
        status.start()
    try:
        trace, _ = ingest(run, progress=(lambda msg: status.update(f"ingesting: {msg}")) if status else None)
        # raw/ is linked into the new store before the swap: the shards never leave sight (io_files is a trace table)
        write_store(trace, run, keep=("raw",))
    finally:
        if status:
            status.stop()
    return trace


def _ingest_after(run: Path, code: int, console: Any) -> Any:
    """Ingest after the command ended; a recording that cannot be ingested is said, not raised,
    so the command's exit code still comes back (a failed command often leaves nothing)."""
    try:
        return ingest_run(run, console)
    except DIError as exc:
        if code == 0:
            raise
        if console is not None:
            console.print(f"[yellow]warning:[/yellow] no trace written: {exc}", markup=True)
        return None


def record(command: list[str], opts: RecordOptions, console: Any = None) -> tuple[int, Any, int | None]:
    """Run ``command`` under capture and ingest.

    Returns:
        Its exit code (128 + N when signal N ended it); the trace, or None where another
        rank ingested; in the per-rank form, the signal that ended the rank's command, by
        which the caller should end too once done (the launcher tells a rank killed from
        one that exited with a code, and ends the job only for the former).
    """
    if not command:
        raise DIError("nothing to record: give the command after --, e.g. di record -o run.di -- python train.py")
    rank = _env_int(RANK_VARS)
    if rank is None:
        return _record_launcher(command, opts, console)
    return _record_rank(command, opts, rank, console)


def _record_launcher(command: list[str], opts: RecordOptions, console: Any) -> tuple[int, Any, int | None]:
    run = Path(opts.output)
    raw = _prepare(run)
    libs = preload_libs(opts)
    app_env, notes = application_env(opts)
    gpu_env, gpu_libs, gpu_notes, opts = gpu_capture(raw, opts, console)
    notes += gpu_notes
    _write_json(
        raw / "run.json",
        {
            "command": " ".join(command),
            "form": "launcher",
            "options": _options(opts),
            "started_unix_s": time.time(),
            "notes": notes,
            **_recorder(),
        },
    )
    outcome = _run(
        command,
        child_env(raw, libs + gpu_libs, {**app_env, **gpu_env}),
        lambda: _sampler(raw, opts),
        raw,
        watch=_job_pids(raw),
    )
    code = outcome.code
    ends = (
        {} if outcome.interrupted else {str(r): e for r, e in outcome.rank_ends.items()}
    )  # interrupted: all fail at once
    _write_json(raw / "run.json", {**json.loads((raw / "run.json").read_text()), "exit_code": code, "rank_ends": ends})
    return code, _ingest_after(run, code, console), None


def _record_rank(command: list[str], opts: RecordOptions, rank: int, console: Any) -> tuple[int, Any, int | None]:
    run = Path(opts.output)
    size = _env_int(SIZE_VARS) or 1
    started = time.time()
    if rank == 0:
        raw = _prepare(run)
        _write_json(
            raw / "run.json",
            {
                "command": " ".join(command),
                "form": "per_rank",
                "options": _options(opts),
                "started_unix_s": started,
                "world_size": size,
                **_recorder(),
            },
        )
    else:
        raw = run / "raw"
        wait_for_setup(raw / "run.json", started)
    libs = preload_libs(opts)
    app_env, notes = application_env(opts)
    gpu_env, gpu_libs, gpu_notes, opts = gpu_capture(raw, opts, console if rank == 0 else None)
    notes += gpu_notes
    if rank == 0 and notes:
        _write_json(raw / "run.json", {**json.loads((raw / "run.json").read_text()), "notes": notes})
    local = _env_int(LOCAL_RANK_VARS)
    node_first = local == 0 or (local is None and rank == 0)  # runs the node's samplers
    outcome = _run(
        command,
        child_env(raw, libs + gpu_libs, {**app_env, **gpu_env}),
        lambda: _sampler(raw, opts) if node_first else None,
        raw,
    )
    code = outcome.code
    _write_json(raw / f"exit-{rank}.json", {"rank": rank, "exit_code": code, "host": socket.gethostname()})
    if rank != 0 and code == 0:
        return code, None, None
    return code, _finish_per_rank(run, size, rank, code, console), outcome.signal


def _finish_per_rank(run: Path, size: int, rank: int, code: int, console: Any) -> Any:
    """Rank 0, or a failed rank: wait for the other ranks' reports, then ingest unless another
    rank does (then wait until it is done). The trace, or None when another rank ingested."""
    raw = run / "raw"
    deadline = time.monotonic() + (REPORT_TIMEOUT_S if rank == 0 and code == 0 else ABNORMAL_GRACE_S)
    while True:
        if ingested(run):
            return None
        missing = unreported(raw, size)
        if missing is not None and (not missing or time.monotonic() > deadline):
            lock = take_ingest_lock(run)
            if lock is not None:
                try:
                    if ingested(run):
                        return None
                    return _ingest_per_rank(run, size, missing, code, console)
                finally:
                    lock.unlink(missing_ok=True)
        time.sleep(INGESTER_POLL_S)


def _ingest_per_rank(run: Path, size: int, missing: list[int], code: int, console: Any) -> Any:
    raw = run / "raw"
    info = json.loads((raw / "run.json").read_text())
    codes = {}
    for r in range(size):
        path = raw / f"exit-{r}.json"
        if path.exists():
            codes[str(r)] = json.loads(path.read_text())["exit_code"]
    worst = next((c for c in codes.values() if c), 0)
    _write_json(raw / "run.json", {**info, "exit_code": worst, "exit_codes": codes, "unreported_ranks": missing})
    return _ingest_after(run, worst or code, console)


def _options(opts: RecordOptions) -> dict[str, Any]:
    return {
        k: getattr(opts, k)
        for k in ("mpi", "io", "host", "ib", "net", "nvml", "gpu", "nvtx", "python", "python_min_ns", "rate_hz")
    }
