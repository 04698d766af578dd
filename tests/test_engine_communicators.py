"""Communicators (di.engine.communicators): an NCCL log whose members, hosts and transports are known by
construction (a socket link across nodes, shared memory inside one, an init that never completed), a real one, and
the same table under mpiexec."""

from __future__ import annotations

from pathlib import Path

import pytest
from analyze_cli import MPIEXEC, analyze_json, analyze_text, one_and_many
from conftest import DATA

import di
from di.engine.communicators import COLUMNS, communicators

INIT = "{host}:{pid}:{pid}1 [{dev}] NCCL INFO ncclCommInitRank comm 0x{pid} rank {rank} nranks 4 cudaDev {dev} busId {dev}b000 commId 0xfeed - Init {state}"
MEMBERS = [("hosta", 100, 0), ("hosta", 110, 1), ("hostb", 200, 0), ("hostb", 210, 1)]
LINKS = [  # (printing member, line): rank 0 -> 1 peer-to-peer, 1 -> 2 and 3 -> 0 over sockets, 2 -> 3 through SHM
    (0, "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read"),
    (1, "Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0"),
    (2, "Channel 00/0 : 1[1] -> 2[0] [receive] via NET/Socket/0"),
    (2, "Channel 00/0 : 2[0] -> 3[1] via SHM/direct/direct"),
    (3, "Channel 00/0 : 3[1] -> 0[0] [send] via NET/Socket/0"),
    (0, "Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0"),
]


def nccl_log(tmp_path: Path) -> Path:
    lines = []
    for rank, (host, pid, dev) in enumerate(MEMBERS):
        lines.append(f"{host}:{pid}:{pid}1 [{dev}] NCCL INFO NCCL version 2.21.5+cuda12.4")
        lines.append(INIT.format(host=host, pid=pid, dev=dev, rank=rank, state="START"))
    for member, text in LINKS:
        host, pid, dev = MEMBERS[member]
        lines.append(f"{host}:{pid}:{pid}5 [{dev}] NCCL INFO {text}")
    for rank, (host, pid, dev) in enumerate(MEMBERS[:3]):  # rank 3's init never completes
        lines.append(INIT.format(host=host, pid=pid, dev=dev, rank=rank, state="COMPLETE"))
    path = tmp_path / "nccl.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_members_hosts_and_transports_are_told(tmp_path: Path) -> None:
    got = communicators(di.load(nccl_log(tmp_path)))
    assert got.schema == dict(COLUMNS)
    (row,) = got.to_dicts()
    assert row == {
        "comm": "0xfeed",
        "version": "2.21.5+cuda12.4",
        "members": 4,
        "nranks": 4,
        "init_incomplete": 1,
        "hosts": 2,
        "max_ranks_per_host": 2,
        "nchannels": None,
        "intra_node": "P2P/IPC/read (1), SHM/direct/direct (1)",
        "inter_node": "NET/Socket/0 (2)",  # each printed by its send and its receive end: two connections
        "socket_links": 2,
        "shm_links": 1,
    }


def test_di_analyze_of_the_log_names_what_looks_wrong(tmp_path: Path) -> None:
    log = nccl_log(tmp_path)
    assert analyze_json(log, tmp_path / "r.json")["communicators"][0]["socket_links"] == 2
    shown = analyze_text(log)
    assert "over TCP sockets (2 connections" in shown and "through host memory inside a node (1 connections" in shown
    assert "1 member(s) of communicator 0xfeed never completed their init" in shown


def test_a_real_four_node_log() -> None:
    path = DATA / "logs" / "nccl" / "torch_allreduce_bench_nccl2.10.3_a100_4node.log"
    if not path.is_file():
        pytest.skip("shared test data absent")
    (row,) = communicators(di.load(path)).to_dicts()
    assert (row["members"], row["nranks"], row["hosts"], row["max_ranks_per_host"]) == (32, 32, 4, 8)
    assert row["inter_node"].startswith("NET/IB/") and row["socket_links"] == row["shm_links"] == 0
    assert row["intra_node"].startswith("P2P/IPC/read")


@pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec of the mpich wheel not installed")
def test_the_same_table_under_mpiexec(tmp_path: Path) -> None:
    one, many = one_and_many(di.load(nccl_log(tmp_path)), tmp_path, 2, 1)
    assert one["communicators"] == many["communicators"] and one["communicators"][0]["members"] == 4


def test_the_report_shows_them_with_the_hints(tmp_path: Path) -> None:
    from di.viewers.report import build_report

    trace = di.load(nccl_log(tmp_path))
    page, problems = build_report(trace, di.analyze(trace), plugins=False)
    assert not problems and 'data-table="communicators"' in page
    assert "sends across nodes over TCP sockets (2 connections" in page and "(1 connections, SHM)" in page
