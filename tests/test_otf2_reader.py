"""OTF2 reader against the official ``otf2`` Python reader, on every shared Score-P archive.

Per location: the Enter/Leave times (ns, after clock offsets), the numbers of
send and receive records, collective records and metric values must equal
what the official high-level reader sees; every p2p message of the tagged
and the non-blocking archives is matched.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import assert_valid, otf2_archive, otf2_archives

import di

ARCHIVES = otf2_archives()
otf2 = pytest.importorskip("otf2")


def official(anchor: Path) -> dict[str, Any]:
    """Per-location record lists from the official reader (ticks as recorded)."""
    per: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    with otf2.reader.open(str(anchor)) as tr:
        clock = tr.definitions.clock_properties
        for loc, ev in tr.events:
            name = type(ev).__name__
            if name == "Metric":
                per[loc._ref]["metric_values"].extend(float(v) for v in ev.values)
            per[loc._ref][name].append(ev.time)
        return {"per": per, "resolution": clock.timer_resolution, "offset": clock.global_offset}


def to_ns(ticks: list[int], resolution: int, offset: int) -> list[int]:
    """The reader's tick -> ns definition, in Python integers."""
    return [(t - offset) * 10**9 // resolution for t in ticks]


def _by_tid(trace: di.Trace) -> dict[int, list[int]]:
    locs = trace.locations.filter(pl.col("kind") != "counter")
    out: dict[int, list[int]] = defaultdict(list)
    for loc, tid in zip(locs["loc"].to_list(), locs["tid"].to_list()):
        out[tid].append(loc)
    return out


@pytest.mark.skipif(not ARCHIVES, reason="shared test data absent: ../shared/data/otf2 not found")
@pytest.mark.parametrize("anchor", ARCHIVES, ids=[p.parent.name for p in ARCHIVES])
def test_counts_and_times_equal_the_official_reader(anchor: Path) -> None:
    trace = assert_valid(di.load(anchor))
    ref = official(anchor)
    ev = trace.events.with_row_index("row")
    regions = ev.filter(pl.col("src_cat") != "otf2_record").filter(pl.col("src_cat") != "otf2/rma")
    for tid, locs in _by_tid(trace).items():
        rec = ref["per"][tid]
        mine = regions.filter(pl.col("loc").is_in(locs))
        want_start = sorted(to_ns(rec["Enter"], ref["resolution"], ref["offset"]))
        want_end = sorted(to_ns(rec["Leave"], ref["resolution"], ref["offset"]))
        assert sorted(mine["start_ns"].to_list()) == want_start, f"location {tid}: Enter times"
        assert sorted(mine["end_ns"].to_list()) == want_end, f"location {tid}: Leave times"
        rows = set(ev.filter(pl.col("loc").is_in(locs))["row"].to_list())
        sends = sum(1 for s in trace.messages["send"].to_list() if s in rows)
        recvs = sum(1 for r in trace.messages["recv"].to_list() if r in rows)
        assert sends == len(rec["MpiSend"]) + len(rec["MpiIsend"]), f"location {tid}: sends"
        assert recvs == len(rec["MpiRecv"]) + len(rec["MpiIrecv"]), f"location {tid}: receives"
        colls = sum(1 for e in trace.collectives["event"].to_list() if e in rows)
        assert colls == len(rec["MpiCollectiveEnd"]), f"location {tid}: collectives"
        rma = ev.filter(pl.col("loc").is_in(locs) & (pl.col("src_cat") == "otf2/rma")).height
        assert rma == len(rec["RmaPut"]) + len(rec["RmaGet"]), f"location {tid}: RMA copies"
    want_values = sorted(v for r in ref["per"].values() for v in r["metric_values"])
    assert sorted(trace.samples["value"].to_list()) == want_values
    assert not {k for k in trace.meta["sources"][0]["dropped"] if "without a matching" in k}


@pytest.mark.parametrize("name", ["casita_10_scorep_mpi_tags", "casita_2_cloverleaf_oaccregions_cudafull"])
def test_every_message_is_matched(name: str) -> None:
    trace = assert_valid(di.load(otf2_archive(name)))
    ev = trace.events
    loc_rank = dict(zip(trace.locations["loc"].to_list(), trace.locations["rank"].to_list()))
    sends = ev[trace.messages["send"].to_list()]
    recvs = ev[trace.messages["recv"].to_list()]
    assert trace.messages.height > 0
    assert trace.meta["sources"][0]["dropped"] == {}
    assert all(
        n.startswith(("MPI_Send", "MPI_Isend", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Sendrecv"))
        for n in sends["name"].to_list()
    )
    assert all(n.startswith(("MPI_Recv", "MPI_Wait", "MPI_Test", "MPI_Sendrecv")) for n in recvs["name"].to_list())
    assert all(loc_rank[a] != loc_rank[b] for a, b in zip(sends["loc"].to_list(), recvs["loc"].to_list()))
    # a message is received after it was sent started (one clock after offsets)
    assert (recvs["end_ns"].to_numpy() >= sends["start_ns"].to_numpy()).all()


def test_tags_are_kept_and_pair_sends_with_receives_of_the_same_tag() -> None:
    trace = di.load(otf2_archive("casita_10_scorep_mpi_tags"))
    tags = trace.messages["tag"].to_list()
    assert len(set(tags)) > 1


def test_nonblocking_receives_bind_to_the_completing_wait() -> None:
    trace = di.load(otf2_archive("casita_2_cloverleaf_oaccregions_cudafull"))
    recv_names = set(trace.events[trace.messages["recv"].to_list()]["name"].to_list())
    send_names = set(trace.events[trace.messages["send"].to_list()]["name"].to_list())
    assert send_names == {"MPI_Isend"}
    assert recv_names <= {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test", "MPI_Testall"}


def test_collective_instances_pair_all_members() -> None:
    trace = assert_valid(di.load(otf2_archive("casita_2_jacobi_blame_cpu_015")))
    coll = trace.collectives
    assert coll.height == 2004
    per = coll.group_by("instance").agg(
        pl.len(), pl.col("op").n_unique().alias("ops"), pl.col("rank").n_unique().alias("ranks")
    )
    assert (per["len"] == 2).all() and (per["ops"] == 1).all() and (per["ranks"] == 2).all()
    assert set(coll["op"].unique().to_list()) <= {
        "barrier",
        "allreduce",
        "broadcast",
        "reduce",
        "allgather",
        "gather",
        "scatter",
        "alltoall",
        "reduce_scatter",
        "other",
    }
    ev = trace.events[coll["event"].to_list()]
    assert (ev["cat"] == "mpi_coll").all()


def test_locations_ranks_hosts_and_gpu_streams() -> None:
    trace = di.load(otf2_archive("casita_2_jacobi_blame_cpu_015"))
    locs = trace.locations
    assert sorted(locs["rank"].unique().to_list()) == [0, 1]
    hosts = dict(zip(locs["rank"].to_list(), locs["host"].to_list()))
    assert hosts == {0: "nid03473", 1: "nid03474"}
    gpu = locs.filter(pl.col("kind") == "gpu_stream")
    assert gpu.height == 2 and gpu["device"].to_list() == [0, 0] and gpu["stream"].to_list() == [2, 2]
    kernels = trace.events.filter(pl.col("loc").is_in(gpu["loc"].to_list()) & (pl.col("src_cat") != "otf2/rma"))
    assert kernels.height > 0 and set(kernels["cat"].unique().to_list()) <= {
        "kernel",
        "sync",
        "other",
        "memcpy",
        "memset",
    }
    assert (kernels["cat"] == "kernel").any()


def test_rma_copies_become_memcpy_events_with_bytes() -> None:
    trace = di.load(otf2_archive("casita_2_cuda_simple"))
    mem = trace.events.filter(pl.col("src_cat") == "otf2/rma")
    assert mem.height == 86 and (mem["cat"] == "memcpy").all()
    assert mem["bytes"].null_count() == 0 and mem["bytes"].max() == 31899648
    assert (mem["end_ns"] >= mem["start_ns"]).all() and (mem["end_ns"] > mem["start_ns"]).any()
    assert json.loads(mem["args"][0])["remote"] == 0


def test_metrics_become_series_with_units() -> None:
    trace = assert_valid(di.load(otf2_archive("pipit_ping-pong-otf2-papi")))
    assert trace.series.height > 0
    counters = trace.locations.filter(pl.col("kind") == "counter")
    assert set(trace.series["loc"].to_list()) <= set(counters["loc"].to_list())
    assert trace.samples.height == 252
    assert (trace.samples["value"] >= 0).all()
    clover = di.load(otf2_archive("casita_2_cloverleaf_oaccregions_cudafull"))
    assert clover.series.height > 0 and clover.samples.height == 122


def test_attributes_are_kept_in_args() -> None:
    trace = di.load(otf2_archive("casita_1_ocl_deps"))
    args = [json.loads(a) for a in trace.events["args"].drop_nulls().to_list()]
    keys = {k for a in args for k in a}
    assert keys & {"OPENCL_QUEUE_REF", "OPENCL_EVENT_REF", "SOURCE_CODE_LOCATION", "window", "remote"}
    jacobi = di.load(otf2_archive("casita_2_jacobi_blame_cpu_015"))
    jargs = [json.loads(a) for a in jacobi.events["args"].drop_nulls().to_list()]
    assert sum("CUDA_STREAM_REF" in a or "CUDA_EVENT_REF" in a or "leave.CUDA_EVENT_REF" in a for a in jargs) > 0
    teams = jacobi.events.filter(pl.col("name") == "ThreadTeamBegin")
    assert teams.height == 16036 and teams["args"].null_count() == 0  # instant records keep their fields
    assert {json.loads(a)["team"] for a in teams["args"].to_list()} == {1, 3}  # one thread team communicator per rank


def test_categories_cover_the_paradigms() -> None:
    cats: set[str] = set()
    for name in (
        "casita_2_cloverleaf_oaccregions_cudafull",
        "casita_1_scorep-ompt-host-nested",
        "casita_4_mpi_ls_barr",
        "casita_1_ocl_deps",
    ):
        cats |= set(di.load(otf2_archive(name)).events["cat"].unique().to_list())
    assert {"mpi_p2p", "mpi_coll", "kernel", "cuda_api", "compute", "sync", "memcpy"} <= cats


def test_nesting_depth_and_parent() -> None:
    trace = di.load(otf2_archive("casita_1_scorep-ompt-host-nested"))
    ev = trace.events
    assert ev["depth"].max() >= 2
    child = ev.filter(pl.col("parent").is_not_null())
    parents = ev[child["parent"].to_list()]
    assert (parents["start_ns"].to_numpy() <= child["start_ns"].to_numpy()).all()
    assert (parents["end_ns"].to_numpy() >= child["end_ns"].to_numpy()).all()
    assert (parents["loc"].to_numpy() == child["loc"].to_numpy()).all()


def test_directory_and_anchor_load_the_same(tmp_path: Path) -> None:
    anchor = otf2_archive("casita_4_mpi_ls_barr")
    a, b = di.load(anchor), di.load(anchor.parent)
    assert a.events.equals(b.events) and a.messages.equals(b.messages)
    from di.convert.registry import connector_for, expand

    assert connector_for(anchor.parent).name == "otf2"
    assert expand(anchor.parent) == [anchor]


def test_timestamps_are_int64_ns_on_one_relative_clock() -> None:
    trace = di.load(otf2_archive("casita_2_jacobi_blame_cpu_015"))
    assert trace.events["start_ns"].dtype == pl.Int64
    assert trace.meta["clock"]["domain"] == "relative"
    assert int(trace.events["start_ns"].min()) >= 0
    assert np.all(trace.events["end_ns"].to_numpy() >= trace.events["start_ns"].to_numpy())


@pytest.mark.parametrize("name", ["casita_2_jacobi_blame_cpu_015", "casita_4_mpi_ls_barr", "pipit_ping-pong-otf2"])
def test_clock_offsets_are_applied_linearly_per_location(name: str) -> None:
    from di.convert.otf2 import archive
    from di.convert.otf2.definitions import read_definitions

    anchor = otf2_archive(name)
    times = {}
    for apply in (True, False):
        reader = archive.open_reader(anchor)
        refs = [loc["ref"] for loc in read_definitions(reader).locations]
        recs = archive.read_records(reader, refs, anchor, apply_clock_offsets=apply)
        reader.close()
        times[apply] = (recs.rows[:, 1].astype(np.float64), recs.loc)
    raw, loc = times[False]
    shift = times[True][0] - raw
    assert np.abs(shift).max() > 0  # the archive has offsets and they change the times
    for k in np.unique(loc):
        x, y = raw[loc == k], shift[loc == k]
        if np.ptp(x) == 0:
            continue
        slope, icpt = np.polyfit(x - x[0], y, 1)
        assert np.abs(y - (slope * (x - x[0]) + icpt)).max() <= 2.0  # one line per location (ticks, rounding)


def test_events_read_in_bounded_batches_are_the_same_and_a_loop_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each library call reads at most records.READ_BATCH records: batches of 7 give the same trace as one call per
    location, and a location that yields more records than its file has bytes ends as corrupt, with a warning,
    instead of reading on (the library counts records of every type, so such a loop cannot hide from the count)."""
    from di.convert.otf2 import archive, records

    path = otf2_archive("casita_2_cuda_simple")
    whole = di.load(path)
    monkeypatch.setattr(records, "READ_BATCH", 7)
    batched = di.load(path)
    assert batched.events.equals(whole.events) and batched.messages.equals(whole.messages)
    # a location that "yields more records than its file has bytes": the bound is its file size, here taken as 100
    real = records.read_location
    monkeypatch.setattr(records, "read_location", lambda evt, cb, buf, max_rows: real(evt, cb, buf, 100))
    cut = di.load(path)
    assert any("more records than the file has bytes" in w for w in cut.meta["warnings"])
    assert cut.events.height < whole.events.height
    assert archive.TRUNCATED_EVENT_FILE in " ".join(cut.meta["sources"][0]["dropped"])


def test_an_archive_of_more_locations_than_open_files_allowed_loads_whole(tmp_path: Path) -> None:
    """Each location's event reader is closed once read: with all left open until the archive closed, past the
    process's limit of open files (1,024 by default on many systems) the rest of the locations read as damaged
    event files and were dropped. Here 120 locations load under a limit of 64 files, in a process of their own."""
    import subprocess
    import sys

    from di.demo import write_kineto_job

    write_kineto_job(tmp_path / "job", ranks=40, steps=2)
    whole = di.load(tmp_path / "job")
    di.save(whole, tmp_path / "many.otf2")
    locations = whole.locations.height
    assert locations > 64
    code = (
        "import resource, sys, json, di\n"
        "di.load(sys.argv[2])  # imports done and kernels loaded before the limit\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "t = di.load(sys.argv[1])\n"
        "print(json.dumps([t.events.height, t.meta['warnings']]))\n"
    )
    small = tmp_path / "small.otf2"
    write_kineto_job(tmp_path / "one", ranks=2, steps=1)
    di.save(di.load(tmp_path / "one"), small)
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "many.otf2"), str(small)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    height, warnings = json.loads(out.strip().splitlines()[-1])
    assert warnings == [] and height == di.load(tmp_path / "many.otf2").events.height == whole.events.height
