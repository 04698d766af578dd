"""Nsight Systems MPI tables -> messages, collectives and wait states.

The shared CloverLeaf export traced no MPI, so the exports here are built with
the MPI tables' real columns (Nsight Systems' SQLite schema reference) for a
2-rank exchange whose answer is known by construction (tests/nsys_cases.py,
``EXCHANGE``): one report per rank as ``nsys profile -o report.%q{RANK}``
writes them, and one report of a whole ``mpirun``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest
from conftest import assert_valid

import di
from tests import nsys_cases as cases

WORLD = {"PMI_SIZE": "2"}
"""The world size, as the launcher's environment recorded in the report says it."""


def _per_rank(tmp_path: Path, **kw) -> list[Path]:
    return [
        cases.add_mpi(cases.build(tmp_path / f"report.{r}.sqlite", env=WORLD), {cases.GTID: r}, **kw) for r in (0, 1)
    ]


def _whole(tmp_path: Path, **kw) -> Path:
    return cases.add_mpi(cases.build(tmp_path / "mpirun.sqlite", env=WORLD), {cases.GTID: 0, cases.GTID2: 1}, **kw)


def _named(t: di.Trace, col: str, table: pl.DataFrame) -> pl.Series:
    """(rank, name) of the events a column of ``table`` points at."""
    ev = t.events.with_row_index("row").join(t.locations.select("loc", "rank"), on="loc")
    rows = table.get_column(col).cast(pl.Int64)
    got = pl.DataFrame({"row": rows}).join(ev.with_columns(pl.col("row").cast(pl.Int64)), on="row", how="left")
    return got.select(pl.concat_str(pl.col("rank").cast(pl.String), pl.lit(":"), pl.col("name").cast(pl.String)))


def _check_exchange(t: di.Trace) -> None:
    m = t.messages.sort("tag")
    assert m.height == 3
    assert m.select("bytes", "tag", "src_rank", "dst_rank").rows() == [(1024, 7, 0, 1), (2048, 8, 1, 0), (64, 9, 0, 1)]
    assert _named(t, "send", m).to_series().to_list() == ["0:MPI_Send", "1:MPI_Isend", "0:MPI_Send"]
    assert _named(t, "recv", m).to_series().to_list() == ["1:MPI_Recv", "0:MPI_Wait", "1:MPI_Recv"]
    assert _named(t, "send_done", m).to_series().to_list() == [None, "1:MPI_Wait", None]
    assert _named(t, "recv_post", m).to_series().to_list() == [None, "0:MPI_Irecv", None]
    recv_start = t.events.get_column("start_ns").gather(m.get_column("recv")) - cases.SESSION_START_NS
    assert recv_start.to_list() == [600, 2020, 7000]  # the MPI_ANY_SOURCE receive took the tag-9 send
    assert m.get_column("comm").n_unique() == 1
    c = t.collectives.sort("instance", "rank")
    assert c.select("instance", "rank", "op", "seq", "group_size").rows() == [
        (0, 0, "allreduce", 0, 2),
        (0, 1, "allreduce", 0, 2),
        (1, 0, "barrier", 1, 2),
        (1, 1, "barrier", 1, 2),
    ]
    assert c.get_column("bytes").to_list() == [4096, 4096, None, None]
    assert set(c.get_column("group_ranks")) == {"[0,1]"}
    names = dict(zip(*[t.events.get_column(k).cast(pl.String).to_list() for k in ("name", "cat")]))
    assert names["MPI_Init"] == "other" and names["MPI_Wait"] == "mpi_p2p" and names["MPI_Barrier"] == "mpi_coll"
    said = [w for w in t.meta["warnings"] if w.startswith("MPI (nsys): ")]
    assert said == [
        "MPI (nsys): 1 receives from MPI_ANY_SOURCE or with MPI_ANY_TAG matched by order, as MPI matches them by arrival"
    ]
    assert "without a matching" not in said[0]


def _check_wait_states(t: di.Trace) -> None:
    waits = di.analyze(t).wait_states
    got = sorted(waits.select("kind", "rank", "cause_rank", "wait_ns").rows())
    assert got == [
        ("late_sender", 0, 1, 3000 - 2020),
        ("late_sender", 1, 0, 1000 - 600),
        ("wait_barrier", 0, 1, 6100 - 6000),
        ("wait_nxn", 0, 1, 4600 - 4000),
    ]


def test_one_report_per_rank_matches_messages_and_collectives_across_reports(tmp_path: Path) -> None:
    t = assert_valid(di.load(_per_rank(tmp_path)))
    assert t.ranks == [0, 1]
    _check_exchange(t)
    _check_wait_states(t)


def test_one_report_of_the_whole_mpirun(tmp_path: Path) -> None:
    t = assert_valid(di.load(_whole(tmp_path)))
    assert t.ranks == [0, 1]
    _check_exchange(t)
    _check_wait_states(t)


def test_communicator_handles_that_differ_per_rank_are_joined_by_their_uid(tmp_path: Path) -> None:
    """Open MPI's handles are addresses: MPI_COMMUNICATORS' commUid names the communicator job-wide."""
    handles = {0: 0x7F00_0000_1000, 1: 0x7F55_0000_2000}
    t = assert_valid(di.load(_per_rank(tmp_path, handles=handles, communicators=True)))
    _check_exchange(t)
    assert set(t.messages.get_column("comm")) == {"mpi:77"} and set(t.collectives.get_column("comm")) == {"mpi:77"}
    src = t.meta["sources"][0]["info"]["mpi_communicators"]
    assert [r[:5] for r in src] == [[0, handles[0], 77, 0, 2]]


def test_differing_handles_without_communicator_table_are_not_matched_and_said(tmp_path: Path) -> None:
    t = assert_valid(di.load(_per_rank(tmp_path, handles={0: 0x1000, 1: 0x2000})))
    assert t.messages.height == 0
    said = [w for w in t.meta["warnings"] if w.startswith("MPI (nsys): ")]
    assert len(said) == 1 and "3 receives without a matching send, 3 sends without a matching receive" in said[0]
    assert t.collectives.get_column("instance").n_unique() == 4  # each rank's calls on its own communicator


def test_older_collective_size_columns(tmp_path: Path) -> None:
    t = assert_valid(di.load(_whole(tmp_path, old_columns=True)))
    assert t.collectives.sort("instance", "rank").get_column("bytes").to_list() == [4096, 4096, None, None]


def test_a_missing_rank_leaves_its_peer_unmatched(tmp_path: Path) -> None:
    t = assert_valid(di.load(_per_rank(tmp_path)[0]))
    assert t.ranks == [0] and t.messages.height == 0
    said = [w for w in t.meta["warnings"] if w.startswith("MPI (nsys): ")]
    assert len(said) == 1 and "1 receives without a matching send, 2 sends without a matching receive" in said[0]


@pytest.mark.parametrize("out", ["x.di", "x.otf2"])
def test_messages_survive_a_round_trip(tmp_path: Path, out: str) -> None:
    t = di.load(_per_rank(tmp_path))
    di.save(t, tmp_path / out)
    back = assert_valid(di.load(tmp_path / out))
    assert back.messages.height == 3 and back.collectives.height == 4


def test_a_wait_that_recorded_another_of_its_requests_completes_both(tmp_path: Path) -> None:
    """MPI_Waitall with one request handle recorded: an Irecv whose own handle no wait names ends in it too."""
    r0, r1 = _per_rank(tmp_path)
    p2p = "INSERT INTO MPI_P2P_EVENTS VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    with sqlite3.connect(r0) as con:  # a second Irecv (tag 10, request 0xA2) before the Wait on 0xA1
        con.execute(p2p, (2012, 2015, cases.GTID, 24, cases.MPICH_WORLD, 10, 1, 32, 0xA2))
    with sqlite3.connect(r1) as con:
        con.execute(p2p, (3040, 3045, cases.GTID, 25, cases.MPICH_WORLD, 10, 0, 32, 0xB2))
        con.execute("INSERT INTO MPI_START_WAIT_EVENTS VALUES (?, ?, ?, ?, ?)", (3050, 3060, cases.GTID, 23, 0xB2))
    t = assert_valid(di.load([r0, r1]))
    m = t.messages.filter(pl.col("tag") == 10)
    assert _named(t, "recv", m).to_series().to_list() == ["0:MPI_Wait"]
    start = t.events.get_column("start_ns") - cases.SESSION_START_NS
    assert start.gather(m.get_column("recv")).to_list() == [2020]
    assert start.gather(m.get_column("recv_post")).to_list() == [2012]
    assert start.gather(m.get_column("send_done")).to_list() == [3050]


def test_a_call_without_an_end_is_dropped_and_counted(tmp_path: Path) -> None:
    path = _whole(tmp_path)
    with sqlite3.connect(path) as con:  # MPI_Finalize still running when the capture stopped
        con.execute("INSERT INTO MPI_OTHER_EVENTS VALUES (9000, NULL, ?, 27)", (cases.GTID,))
    t = assert_valid(di.load(path))
    assert t.meta["sources"][0]["dropped"]["MPI calls without an end"] == 1
    assert t.events.filter(pl.col("start_ns") == cases.SESSION_START_NS + 9000).height == 0
    _check_exchange(t)
