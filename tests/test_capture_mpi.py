"""`di record` on real 4-rank MPI jobs whose calls are known (tests/programs/known_calls.*).

Every call per rank, every message (bytes, tag), every collective instance and
the I/O bytes per file must equal what the program did, for mpi4py in both
launcher forms and for a C program built with mpicc.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from capture_helpers import PROGRAMS, build_c_program, need_mpi4py, record_launcher, record_per_rank

import di
from di.capture.iostats import read_file_stats
from di.capture.matching import base_name

RANKS = 4
OTHERS = {  # calls every rank makes besides its sends and receives (base names, no _c)
    "MPI_Allreduce": 2,
    "MPI_Bcast": 1,
    "MPI_Isend": 1,
    "MPI_Irecv": 1,
    "MPI_Waitall": 1,
    "MPI_Barrier": 2,
    "MPI_Comm_split": 1,
    "MPI_Finalize": 1,
}
P2P = {
    0: {"MPI_Send": 1, "MPI_Recv": 3},
    1: {"MPI_Recv": 1, "MPI_Send": 1},
    2: {"MPI_Send": 2},
    3: {"MPI_Recv": 1, "MPI_Send": 1},
}
MESSAGES = sorted(
    [(0, 1, 11, 1000), (2, 3, 12, 24), (1, 0, 21, 8), (2, 0, 22, 16), (3, 0, 23, 24)]
    + [(r, (r + 1) % RANKS, 30, 512) for r in range(RANKS)]
)
COLLECTIVES = sorted(
    [
        ("allreduce", (0, 1, 2, 3), None, 800),
        ("broadcast", (0, 1, 2, 3), 2, 200),
        ("barrier", (0, 1, 2, 3), None, None),
        ("barrier", (0, 1, 2, 3), None, None),
        ("allreduce", (0, 2), None, 40),
        ("allreduce", (1, 3), None, 40),
    ],
    key=str,
)


def expected_calls(rank: int, init: str) -> Counter[str]:
    return Counter({**OTHERS, **P2P[rank], init: 1})


def _check_trace(run: Path, out: Path, init: str, large_count: bool, stdio: bool) -> None:
    trace = di.load(run)
    trace.validate()
    assert trace.ranks == list(range(RANKS))
    ev = trace.events.with_row_index("row").join(trace.locations.select("loc", "rank"), on="loc")
    mpi = ev.filter(pl.col("src_cat") == "mpi")
    for rank in range(RANKS):
        names = mpi.filter(pl.col("rank") == rank).get_column("name").cast(pl.String).to_list()
        assert Counter(base_name(n) for n in names) == expected_calls(rank, init), rank
        # mpi4py 4 calls the MPI-4 large-count forms; the C program the classic ones
        assert any(n.endswith("_c") for n in names) == large_count

    rank_of = dict(zip(ev.get_column("row").to_list(), ev.get_column("rank").to_list()))
    got = sorted(
        (rank_of[s], rank_of[r], t, b)
        for s, r, t, b in trace.messages.select("send", "recv", "tag", "bytes").iter_rows()
    )
    assert got == MESSAGES
    names = ev.get_column("name").cast(pl.String).to_list()
    for send, recv, post in trace.messages.select("send", "recv", "recv_post").iter_rows():
        assert "send" in names[send].lower() and ("recv" in names[recv].lower() or "wait" in names[recv].lower())
        if post is not None:
            assert base_name(names[post]) == "MPI_Irecv" and base_name(names[recv]) == "MPI_Waitall"

    inst = trace.collectives.group_by("instance").agg(
        pl.col("op").first(),
        pl.col("rank").sort(),
        pl.col("root").first(),
        pl.col("bytes").max(),
        pl.col("op").n_unique().alias("ops"),
        pl.col("group_size").first(),
    )
    assert (inst.get_column("ops") == 1).all()
    got_c = sorted(
        (
            (op, tuple(ranks), root, None if op == "barrier" else b)
            for op, ranks, root, b in inst.select("op", "rank", "root", "bytes").iter_rows()
        ),
        key=str,
    )
    assert got_c == COLLECTIVES
    assert (inst.get_column("group_size") == inst.get_column("rank").list.len()).all()

    files = read_file_stats(run).filter(pl.col("file").str.starts_with(str(out)))
    assert files.height == RANKS
    for row in files.iter_rows(named=True):
        rank = int(Path(row["file"]).stem.split("-")[1])
        size = 3 * 4096 * (rank + 1)
        assert row["rank"] == rank and row["bytes_written"] == size and row["bytes_read"] == size
        assert row["writes"] == 3 and row["opens"] == 2
        assert row["reads"] == (1 if stdio else 2)  # os.read loops to EOF; fread reads it at once
    assert not [w for w in trace.meta["warnings"] if "ended abnormally" in w or "without a partner" in w]
    assert trace.meta["clock"]["sync"] == "mpi_ping_pong_linear"


@pytest.fixture(scope="module")
def py_job() -> list[str]:
    need_mpi4py()
    return [sys.executable, str(PROGRAMS / "known_calls.py")]


def test_mpi4py_job_wrapping_the_launcher(tmp_path: Path, py_job: list[str]) -> None:
    run = tmp_path / "run.di"
    proc = record_launcher(run, [*py_job, str(tmp_path)], "--mpi", "--io")
    assert proc.returncode == 0, proc.stderr
    _check_trace(run, tmp_path, "MPI_Init_thread", large_count=True, stdio=False)


def test_mpi4py_job_wrapping_each_rank(tmp_path: Path, py_job: list[str]) -> None:
    run = tmp_path / "run.di"
    proc = record_per_rank(run, [*py_job, str(tmp_path)], "--mpi", "--io", "--host")
    assert proc.returncode == 0, proc.stderr
    _check_trace(run, tmp_path, "MPI_Init_thread", large_count=True, stdio=False)
    info = json.loads((run / "raw" / "run.json").read_text())
    assert info["form"] == "per_rank" and info["exit_codes"] == {str(r): 0 for r in range(RANKS)}
    assert len(list((run / "raw").glob("samples-*.json"))) == 1  # one sampler per node: local rank 0's
    names = di.load(run).series.get_column("name").to_list()
    assert {f"rank {r} rss" for r in range(RANKS)} <= set(names)


def test_c_job_built_with_mpicc(tmp_path: Path) -> None:
    need_mpi4py()
    exe = build_c_program("known_calls", tmp_path)
    run = tmp_path / "run.di"
    proc = record_launcher(run, [str(exe), str(tmp_path)], "--mpi", "--io")
    assert proc.returncode == 0, proc.stderr
    _check_trace(run, tmp_path, "MPI_Init", large_count=False, stdio=True)


def test_no_mpi_compiler_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from di.capture import build
    from di.cli import main

    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build, "cache_dir", lambda: tmp_path / "cache")
    mpi4py = pytest.importorskip("mpi4py")
    monkeypatch.setattr(mpi4py, "get_config", lambda: {})  # an mpi4py built without naming its mpicc
    assert main(["record", "--mpi", "-o", str(tmp_path / "r.di"), "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "no MPI compiler found" in err and "pip install mpich mpi4py" in err and "Traceback" not in err


def _two_rank_job(tmp_path: Path, program: str) -> tuple[di.Trace, pl.DataFrame]:
    """Record PROGRAM on 2 ranks (MPI only): its trace, every message matched, and its events with row and rank."""
    need_mpi4py()
    run = tmp_path / "run.di"
    proc = record_launcher(run, [sys.executable, str(PROGRAMS / program)], "--mpi", np=2)
    assert proc.returncode == 0, proc.stderr
    trace = di.load(run)
    trace.validate()
    assert not [w for w in trace.meta["warnings"] if w.startswith("messages:")]
    return trace, trace.events.with_row_index("row").join(trace.locations.select("loc", "rank"), on="loc")


def test_probes_and_matched_receives_are_recorded_and_matched(tmp_path: Path) -> None:
    # mpi4py's lowercase comm.recv is MPI_Mprobe + MPI_Mrecv: without those wrapped, its messages went unmatched
    trace, ev = _two_rank_job(tmp_path, "probes.py")
    names = Counter(base_name(n) for n in ev.filter(pl.col("rank") == 1).get_column("name").cast(pl.String))
    assert names["MPI_Probe"] == 1 and names["MPI_Iprobe"] >= 1 and names["MPI_Improbe"] >= 1
    assert names["MPI_Mprobe"] == 2 and names["MPI_Mrecv"] == 2 and names["MPI_Imrecv"] == 1 and names["MPI_Recv"] == 2
    msgs = trace.messages.sort("tag")
    assert msgs.get_column("tag").to_list() == [1, 2, 3, 4, 6]
    assert msgs.get_column("bytes").to_list()[:4] == [80, 160, 240, 320]
    row_name = dict(zip(ev.get_column("row").to_list(), ev.get_column("name").cast(pl.String).to_list()))
    assert [base_name(row_name[r]) for r in msgs.get_column("recv")] == [
        "MPI_Recv",
        "MPI_Recv",
        "MPI_Mrecv",
        "MPI_Wait",
        "MPI_Mrecv",
    ]
    assert base_name(row_name[msgs.get_column("recv_post")[3]]) == "MPI_Imrecv"
    # a probe moves no payload of its own
    assert ev.filter(pl.col("name").cast(pl.String).str.contains("(?i)probe")).get_column("bytes").is_null().all()


def test_persistent_requests_are_matched_at_each_start(tmp_path: Path) -> None:
    trace, ev = _two_rank_job(tmp_path, "persistent.py")
    for rank in (0, 1):
        names = Counter(
            base_name(n).removesuffix("_c")
            for n in ev.filter(pl.col("rank") == rank).get_column("name").cast(pl.String)
        )
        assert (names["MPI_Start"], names["MPI_Startall"], names["MPI_Request_free"]) == (3, 2, 3), rank
        assert names["MPI_Send_init"] + names["MPI_Recv_init"] == 3
    row_name = dict(zip(ev.get_column("row").to_list(), ev.get_column("name").cast(pl.String).to_list()))
    msgs = trace.messages.sort("tag", "send")
    assert (
        msgs.select("tag", "bytes", "src_rank", "dst_rank").rows()
        == [(7, 128, 0, 1)] * 3 + [(8, 64, 0, 1)] * 2 + [(9, 64, 1, 0)] * 2
    )
    # the send is the Start that posted it, the receive the Wait that completed it, its post the receiver's Start
    assert {row_name[r] for r in msgs.get_column("send")} == {"MPI_Start", "MPI_Startall"}
    assert {row_name[r] for r in msgs.get_column("recv")} == {"MPI_Wait", "MPI_Waitall"}
    assert {row_name[r] for r in msgs.get_column("recv_post")} == {"MPI_Start", "MPI_Startall"}
    assert msgs.get_column("send_done").is_not_null().all()
