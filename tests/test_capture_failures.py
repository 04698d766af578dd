"""A recorded job that loses a rank, a rank's di record, or is interrupted ends within seconds
and keeps what it recorded; a killed ingest is resumed; di record never replaces what is not di's.

Each job is tests/programs/steps.py on 4 ranks, in both forms of di record: wrapping the
launcher (``di record -o run.di -- mpiexec -n 4 python steps.py``) and wrapping each rank
(``mpiexec -n 4 di record -o run.di -- python steps.py``).
"""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import PROGRAMS, di_cmd, env, need_mpi4py, run, tool

import di

NP = 4
READY_S = 120  # 4 ranks starting under capture on a shared 2-core machine
JOB_END_S = 15  # the bound on a job's end after a kill (measured: 0.1-4 s)
FORMS = ["launcher", "per_rank"]


class Job:
    """A recorded steps.py job in its own session (so that a test can signal its process group)."""

    def __init__(self, tmp: Path, form: str, *, tty: int | None = None) -> None:
        self.dir, self.run = tmp, tmp / "run.di"
        rec = di_cmd("record", "--mpi", "--io", "-o", str(self.run), "--")
        job = [sys.executable, str(PROGRAMS / "steps.py"), str(tmp)]
        mpiexec = [tool("mpiexec"), "-n", str(NP)]
        argv = [*rec, *mpiexec, *job] if form == "launcher" else [*mpiexec, *rec, *job]
        self.log = open(tmp / "job.log", "w")  # a file, not a pipe: nothing waits on an orphan's pipe
        io = (
            dict(stdin=tty, stdout=tty, stderr=tty)
            if tty is not None
            else dict(stdout=self.log, stderr=subprocess.STDOUT)
        )
        self.proc = subprocess.Popen(
            argv, cwd=tmp, env=env(), start_new_session=True, preexec_fn=_take_tty if tty is not None else None, **io
        )
        self.ranks: dict[int, int] = {}
        self.wrappers: dict[int, int] = {}

    def wait_ready(self) -> None:
        """Until every rank has done its first steps; notes rank and wrapper pids."""
        deadline = time.monotonic() + READY_S
        while len(self.ranks) < NP:
            assert self.proc.poll() is None, f"the job ended early ({self.proc.returncode}): {self.output()}"
            assert time.monotonic() < deadline, f"not ready after {READY_S} s: {self.output()}"
            for r in range(NP):
                text = (self.dir / f"ready-{r}").read_text() if (self.dir / f"ready-{r}").exists() else ""
                if text.endswith("\n"):
                    self.ranks[r], self.wrappers[r] = map(int, text.split())
            time.sleep(0.05)
        time.sleep(0.2)

    def launcher_pid(self) -> int:
        """mpiexec's pid: the job's top process, or di record's child in the launcher form."""
        if Path(tool("mpiexec")).name in _cmdline(self.proc.pid):
            return self.proc.pid
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return int(children[0])

    def wait_end(self, pids: list[int]) -> float:
        """Seconds until ``pids`` (and the job's top process) are all gone; fails after JOB_END_S."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < JOB_END_S:
            self.proc.poll()
            if not [p for p in pids if _running(p)]:
                took = time.monotonic() - t0
                if self.proc.pid in pids:
                    self.proc.wait(timeout=5)
                return took
            time.sleep(0.02)
        pytest.fail(f"still running {JOB_END_S} s after the kill: {[p for p in pids if _running(p)]}\n{self.output()}")

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "job.log").read_text()

    def kill_all(self) -> None:
        """Leave nothing running: the job's group, its ranks and wrappers."""
        for pid in [*self.ranks.values(), *self.wrappers.values()]:
            _kill(pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()


def _take_tty() -> None:
    """In the child (a new session): make stdin, a pty, its controlling terminal."""
    import fcntl
    import termios

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill(pid: int) -> None:
    """SIGKILL a process of the job, if it still runs (a reused pid is left alone)."""
    if not any(mark in _cmdline(pid) for mark in ("steps.py", "hydra_pmi_proxy", " record ")):
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def job(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Job]:
    need_mpi4py()
    form = request.param
    j = Job(tmp_path, form)
    try:
        j.wait_ready()
        yield j
    finally:
        j.kill_all()


def _assert_steps_recorded(j: Job, trace: di.Trace) -> None:
    """Every rank is in the trace with each step it completed (its steps file) as one Allreduce."""
    ev = trace.events.join(trace.locations.select("loc", "rank"), on="loc")
    calls = (
        ev.filter(pl.col("name").cast(pl.String).str.starts_with("MPI_Allreduce")).group_by("rank").len().sort("rank")
    )
    got = dict(zip(calls.get_column("rank").to_list(), calls.get_column("len").to_list()))
    done = {r: int((j.dir / f"steps-{r}").read_text()) for r in range(NP)}
    assert sorted(got) == list(range(NP)), got
    for r in range(NP):  # the step file is written after the call: the call in flight may be recorded too
        assert done[r] <= got[r] <= done[r] + 1, (r, done, got)
    assert min(done.values()) >= 5
    assert max(done.values()) - min(done.values()) <= 1  # in step with each other


def _info(run_dir: Path) -> subprocess.CompletedProcess[str]:
    return run(di_cmd("info", "--json", str(run_dir)), run_dir.parent, timeout=120)


@pytest.mark.parametrize("job", FORMS, indirect=True)
def test_wrapper_sigkilled_ends_job_and_next_info_ingests(job: Job, request: pytest.FixtureRequest) -> None:
    form = request.node.callspec.params["job"]
    launcher = job.launcher_pid()
    victim = job.proc.pid if form == "launcher" else job.wrappers[2]
    os.kill(victim, signal.SIGKILL)  # as the OOM killer would
    took = job.wait_end(
        [launcher, *job.ranks.values(), *job.wrappers.values()]
        if form == "per_rank"
        else [launcher, *job.ranks.values()]
    )
    print(f"{form}: job ended {took:.2f} s after its di record was SIGKILLed")
    assert not (job.run / "meta.json").exists()  # nobody was left to ingest ...
    info = _info(job.run)  # ... the next di info does, and says so
    assert info.returncode == 0, info.stderr
    assert "holds raw capture shards but no trace; ingesting it" in info.stderr, info.stderr
    assert json.loads(info.stdout)["ranks"] == list(range(NP))
    _assert_steps_recorded(job, di.load(job.run))
    again = _info(job.run)
    assert again.returncode == 0 and "ingesting" not in again.stderr


def _assert_blame(trace: di.Trace, victim: int) -> None:
    """The launcher form names the victim as the rank that failed first, or nobody; never another rank."""
    first = trace.meta["capture"]["first_failed_ranks"]
    warnings = trace.meta["warnings"]
    print("first failed:", first)
    if first:
        assert first == [victim], warnings
        assert any(w.startswith(f"rank {victim} ended abnormally first") for w in warnings), warnings
    else:  # the launcher killed the rest within milliseconds and the victim's cause was not read: nobody is blamed
        assert any(w.startswith(f"rank {victim} ended abnormally (") for w in warnings), warnings
        assert not any("ended by the launcher" in w for w in warnings), warnings


def test_first_failed_by_cause_then_by_clear_gap() -> None:
    """The rule behind ``first_failed_ranks``: a cause other than the launcher's kill names a rank;
    time alone only with a clear gap, as the kernel may report a killed rank's end after the ranks
    the launcher killed because of it (seen here: 4 ms after, on an idle machine)."""
    from di.capture.ingest import FIRST_END_GAP_S, first_failed

    kill = {"signal": int(signal.SIGKILL)}
    inverted = {0: {"after_s": 0.822, **kill}, 1: {"after_s": 0.8175, **kill}, 2: {"after_s": 0.8216}}
    assert first_failed(inverted, [0, 1, 2]) == []  # no blame for rank 1, killed because of rank 2
    segv = {**inverted, 2: {"after_s": 0.8216, "signal": int(signal.SIGSEGV)}}
    assert first_failed(segv, [0, 1, 2]) == [2]  # its own cause, though seen ending last
    code = {**inverted, 0: {"after_s": 0.9, "exit_code": 3}}
    assert first_failed(code, [0, 1, 2]) == [0]
    gap = {0: {"after_s": 1.0}, 1: {"after_s": 1.0 + 2 * FIRST_END_GAP_S}, 2: {"after_s": 1.1}}
    assert first_failed(gap, [0, 1, 2]) == [0]
    assert first_failed({**gap, 1: {"after_s": 1.0 + FIRST_END_GAP_S / 2}}, [0, 1, 2]) == []
    assert first_failed(gap, [0, 1, 2, 3]) == []  # rank 3 not seen ending: it may have been first
    every = {r: {"after_s": 1.0 + r, "signal": int(signal.SIGABRT)} for r in range(3)}
    assert first_failed(every, [0, 1, 2]) == []  # every rank failed on its own: nobody is first by cause


@pytest.mark.parametrize("job", ["launcher"], indirect=True)
def test_rank_aborting_is_named_or_nobody(job: Job) -> None:
    """A rank dying of its own signal (SIGABRT, as an assert does) is named first when its status
    was read before the launcher reaped it, else nobody is; the ranks the launcher killed never are."""
    os.kill(job.ranks[2], signal.SIGABRT)
    job.wait_end([job.proc.pid, *job.ranks.values()])
    trace = di.load(job.run)
    assert 2 in trace.meta["capture"]["abnormal_ranks"]
    _assert_blame(trace, victim=2)


@pytest.mark.parametrize("job", FORMS, indirect=True)
def test_rank_sigkilled_ends_job_with_trace(job: Job, request: pytest.FixtureRequest) -> None:
    form = request.node.callspec.params["job"]
    os.kill(job.ranks[2], signal.SIGKILL)
    took = job.wait_end([job.proc.pid, *job.ranks.values(), *job.wrappers.values()])
    print(f"{form}: job ended {took:.2f} s after rank 2 was SIGKILLed")
    assert job.proc.returncode != 0
    assert (job.run / "meta.json").exists(), job.output()  # di record ingested before the job ended
    trace = di.load(job.run)
    capture = trace.meta["capture"]
    assert 2 in capture["abnormal_ranks"]
    if form == "launcher":
        assert job.proc.returncode == capture["exit_code"] != 0  # mpiexec's, passed on
        _assert_blame(trace, victim=2)
    else:
        info = json.loads((job.run / "raw" / "run.json").read_text())
        assert info["exit_codes"]["2"] == 128 + signal.SIGKILL
    _assert_steps_recorded(job, trace)


@pytest.mark.parametrize("job", FORMS, indirect=True)
def test_ctrl_c_once_stops_job_and_keeps_records(job: Job, request: pytest.FixtureRequest) -> None:
    form = request.node.callspec.params["job"]
    os.killpg(job.proc.pid, signal.SIGINT)  # as a terminal does: to the whole foreground group
    took = job.wait_end([job.proc.pid, *job.ranks.values(), *job.wrappers.values()])
    print(f"{form}: job ended {took:.2f} s after one SIGINT to its process group")
    out = job.output()
    assert "Ctrl-C caught" not in out  # MPICH saw one Ctrl-C (a second one force-aborts the job)
    if form == "launcher":
        assert job.proc.returncode == 130, out
    else:
        assert job.proc.returncode == 130, out  # mpiexec's: every rank's di record exited 130
        exits = json.loads((job.run / "raw" / "run.json").read_text())["exit_codes"]
        assert set(exits.values()) == {130}, exits
    assert (job.run / "meta.json").exists(), out
    _assert_steps_recorded(job, di.load(job.run))


def test_ctrl_c_in_a_terminal_reaches_mpiexec_once(tmp_path: Path) -> None:
    """A real terminal: Ctrl-C typed on a pty, whose driver signals the foreground group."""
    need_mpi4py()
    master, slave = pty.openpty()
    j = Job(tmp_path, "launcher", tty=slave)
    os.close(slave)
    seen = bytearray()
    try:
        j.wait_ready()
        os.write(master, b"\x03")
        deadline = time.monotonic() + JOB_END_S + 30  # the ingest is part of it
        while j.proc.poll() is None and time.monotonic() < deadline:
            seen += _read_some(master)
        seen += _read_some(master)
        assert j.proc.returncode == 130, seen.decode(errors="replace")
    finally:
        j.kill_all()
        os.close(master)
    text = seen.decode(errors="replace")
    assert "Ctrl-C caught" not in text, text
    _assert_steps_recorded(j, di.load(j.run))


def _read_some(fd: int) -> bytes:
    import select

    if not select.select([fd], [], [], 0.1)[0]:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: every writer of the pty closed it
        return b""


@pytest.fixture
def recorded(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """A short steps.py job recorded in the given form, ingested."""
    need_mpi4py()
    out = tmp_path / "run.di"
    job = [sys.executable, str(PROGRAMS / "steps.py"), str(tmp_path), "6"]
    rec = di_cmd("record", "--mpi", "--io", "-o", str(out), "--")
    mpiexec = [tool("mpiexec"), "-n", str(NP)]
    proc = run([*rec, *mpiexec, *job] if request.param == "launcher" else [*mpiexec, *rec, *job], tmp_path)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("recorded", FORMS, indirect=True)
def test_killed_ingest_is_resumed_by_info_and_ingest(recorded: Path) -> None:
    events = di.load(recorded).events.height
    for name in ("meta.json", "events.parquet"):  # what a first ingest killed before its swap leaves
        (recorded / name).unlink()
    info = _info(recorded)
    assert info.returncode == 0 and "ingesting it" in info.stderr, info.stderr
    assert di.load(recorded).events.height == events
    # older di versions hid raw/ beside the store while writing it; a kill left it there
    hidden = recorded.parent / f".{recorded.name}.raw-{2**22 + 12345}"
    (recorded / "raw").rename(hidden)
    (recorded / "meta.json").unlink()
    proc = run(di_cmd("record", "--ingest", "-o", str(recorded)), recorded.parent, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "moved the shards a killed ingest had hidden" in proc.stderr, proc.stderr
    assert not hidden.exists() and di.load(recorded).events.height == events


@pytest.mark.parametrize("recorded", ["launcher"], indirect=True)
def test_shards_changed_after_ingest_are_ingested_again(recorded: Path) -> None:
    """A rank reporting after a failed rank's di record ingested: the trace is redone on load."""
    raw = recorded / "raw"
    info = json.loads((raw / "run.json").read_text())
    (raw / "run.json").write_text(json.dumps({**info, "exit_code": 3}))
    assert di.load(recorded).meta["capture"]["exit_code"] == 3
    assert di.load(recorded).meta["capture"]["exit_code"] == 3


def _record(tmp: Path, out: str, *cmd: str) -> subprocess.CompletedProcess[str]:
    return run(di_cmd("record", "--io", "-o", out, "--", *cmd), tmp, timeout=120)


def test_record_refuses_a_directory_that_is_not_di(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "meta.json").write_text('{"name": "my project"}')
    (proj / "train.py").write_text("print('hi')\n")
    proc = _record(tmp_path, "proj", "true")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "proj: exists and is not a di recording or store" in proc.stderr
    assert (proj / "train.py").read_text() == "print('hi')\n" and (proj / "meta.json").exists()
    for here in (".", "..", str(tmp_path)):
        proc = _record(tmp_path, here, "true")
        assert proc.returncode == 2 and "is the current directory or one of its parents" in proc.stderr, proc.stderr
    (tmp_path / "afile").write_text("x")
    proc = _record(tmp_path, "afile/run.di", "true")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "afile/run.di" in proc.stderr, proc.stderr


def test_record_replaces_only_what_di_wrote(tmp_path: Path) -> None:
    old = tmp_path / "run.di"
    (old / "raw").mkdir(parents=True)
    (old / "raw" / "run.json").write_text(json.dumps({"form": "launcher", "command": "old"}))
    (old / "meta.json").write_text(json.dumps({"format": "di-trace", "schema_version": 1}))
    (old / "events.parquet").write_bytes(b"old")
    (old / "notes.txt").write_text("mine")
    proc = _record(tmp_path, "run.di", "no-such-command-here")  # fails after the old recording was removed
    assert proc.returncode == 2 and "cannot run 'no-such-command-here'" in proc.stderr, proc.stderr
    assert (old / "notes.txt").read_text() == "mine"
    assert not (old / "meta.json").exists() and not (old / "events.parquet").exists()
    assert json.loads((old / "raw" / "run.json").read_text())["command"] == "no-such-command-here"


def test_a_recording_still_being_recorded_is_not_ingested(tmp_path: Path) -> None:
    run_dir = tmp_path / "run.di"
    (run_dir / "raw").mkdir(parents=True)
    recorder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "record"])  # a live "di record"
    try:
        deadline = time.monotonic() + 10
        while "record" not in _cmdline(recorder.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        (run_dir / "raw" / "run.json").write_text(
            json.dumps({"form": "launcher", "recorder": {"host": os.uname().nodename, "pid": recorder.pid}})
        )
        with pytest.raises(di.DIError, match="still being recorded by di record"):
            di.load(run_dir)
    finally:
        recorder.kill()
        recorder.wait()
    assert not (run_dir / "meta.json").exists()
