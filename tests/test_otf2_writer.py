"""OTF2 writer: round trips and checks by independent readers.

* OTF2 -> di -> OTF2 -> di on every shared Score-P archive: every table equal.
* Kineto -> di -> OTF2 -> di on every shared Kineto trace: every event,
  collective and counter sample kept (compared by content; lanes add timelines).
* The official ``otf2`` Python reader and, when installed, Debian's
  ``otf2-print`` read what we wrote, with the record counts we expect.
"""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import (
    assert_valid,
    is_execution_trace,
    kineto_file,
    kineto_files,
    kineto_id,
    otf2_archive,
    otf2_archives,
    trace_doc,
    write_json,
)

import di
from di.convert.otf2.writer import anchor_for, write_otf2
from di.errors import OutputError

otf2 = pytest.importorskip("otf2")

ARCHIVES = otf2_archives()
KINETO = [p for p in kineto_files() if not is_execution_trace(p)]
OTF2_PRINT = shutil.which("otf2-print")
EVENT_COLUMNS = ["rank", "start_ns", "end_ns", "name", "cat", "src_cat", "bytes", "corr", "instant", "args"]


def events_by_content(trace: di.Trace) -> pl.DataFrame:
    """Events with their rank instead of their timeline, sorted: equal for equal content whatever the timelines."""
    ev = trace.events.join(trace.locations.select("loc", "rank"), on="loc", how="left")
    ev = ev.with_columns(
        pl.col("name").cast(pl.String), pl.col("cat").cast(pl.String), pl.col("src_cat").cast(pl.String)
    )
    return ev.select(EVENT_COLUMNS).sort(EVENT_COLUMNS, nulls_last=True)


def collectives_by_content(trace: di.Trace) -> pl.DataFrame:
    ev = trace.events
    coll = trace.collectives
    where = ev[coll["event"].to_list()].select("start_ns", "end_ns", pl.col("name").cast(pl.String))
    cols = ["rank", "comm", "seq", "op", "root", "bytes", "dtype", "group_size", "group_ranks"]
    return pl.concat([coll.select(cols), where], how="horizontal").sort(cols + ["start_ns"], nulls_last=True)


def flows_by_content(trace: di.Trace) -> pl.DataFrame:
    """Flows with each end named by its event's content (rank, times, name) instead of its row, sorted."""
    ev = trace.events.join(trace.locations.select("loc", "rank"), on="loc", how="left").select(
        "rank", "start_ns", "end_ns", pl.col("name").cast(pl.String)
    )
    fl = trace.flows
    ends = [ev[fl[c].to_list()].rename(lambda x, c=c: f"{c}_{x}") for c in ("src", "dst")]
    out = pl.concat([*ends, fl.select(pl.col("kind").cast(pl.String), "id", "src_cat")], how="horizontal")
    return out.sort(out.columns, nulls_last=True)


def samples_by_content(trace: di.Trace) -> pl.DataFrame:
    s = trace.samples.join(trace.series.select("series", "name", "unit"), on="series", how="left")
    return s.select("name", "unit", "ts_ns", "value").sort("name", "ts_ns", "value")


def round_trip(trace: di.Trace, tmp_path: Path) -> di.Trace:
    out = tmp_path / "rt.otf2"
    di.save(trace, out)
    return assert_valid(di.load(out))


@pytest.mark.skipif(not ARCHIVES, reason="shared test data absent: ../shared/data/otf2 not found")
@pytest.mark.parametrize("anchor", ARCHIVES, ids=[p.parent.name for p in ARCHIVES])
def test_otf2_round_trip_keeps_every_table(anchor: Path, tmp_path: Path) -> None:
    first = di.load(anchor)
    second = round_trip(first, tmp_path)
    assert second.events.equals(first.events)
    assert second.messages.equals(first.messages)
    assert second.collectives.equals(first.collectives)
    assert second.series.equals(first.series)
    assert second.samples.equals(first.samples)
    cols = ["loc", "rank", "host", "kind", "device", "stream", "name"]
    assert second.locations.select(cols).equals(first.locations.select(cols))
    assert second.meta["clock"]["domain"] == first.meta["clock"]["domain"]
    assert second.meta["sources"][0]["dropped"] == {}


@pytest.mark.skipif(not KINETO, reason="shared test data absent: ../shared/data/kineto not found")
@pytest.mark.parametrize("path", KINETO, ids=[kineto_id(p) for p in KINETO])
def test_kineto_round_trip_keeps_every_event_and_collective(path: Path, tmp_path: Path) -> None:
    first = di.load(path)
    second = round_trip(first, tmp_path)
    assert events_by_content(second).equals(events_by_content(first))
    assert collectives_by_content(second).equals(collectives_by_content(first))
    assert samples_by_content(second).equals(samples_by_content(first))
    assert flows_by_content(second).equals(flows_by_content(first))
    assert second.meta["clock"]["domain"] == first.meta["clock"]["domain"]
    gpu_first = first.locations.filter(pl.col("kind") == "gpu_stream")["loc"].to_list()
    gpu_second = second.locations.filter(pl.col("kind") == "gpu_stream")["loc"].to_list()
    assert (
        first.events.filter(pl.col("loc").is_in(gpu_first)).height
        == second.events.filter(pl.col("loc").is_in(gpu_second)).height
    )


def test_counters_round_trip_with_units(tmp_path: Path) -> None:
    doc = trace_doc(
        {"ph": "X", "pid": 1, "tid": 1, "ts": 1.0, "dur": 5.0, "name": "step", "cat": "cpu_op"},
        {"ph": "C", "pid": 1, "ts": 1.5, "name": "power [W]", "args": {"power": 310.5}},
        {"ph": "C", "pid": 1, "ts": 2.5, "name": "power [W]", "args": {"power": 300.25}},
        {"ph": "C", "pid": 1, "ts": 3.5, "name": "util", "args": {"util": 87}},
    )
    first = di.load(write_json(tmp_path, "counters.json", doc))
    assert first.samples.height == 3
    second = round_trip(first, tmp_path)
    assert samples_by_content(second).equals(samples_by_content(first))
    assert events_by_content(second).equals(events_by_content(first))


def _official_counts(anchor: Path) -> collections.Counter[str]:
    with otf2.reader.open(str(anchor)) as tr:
        return collections.Counter(type(ev).__name__ for _, ev in tr.events)


def test_official_reader_reads_what_we_wrote(tmp_path: Path) -> None:
    trace = di.load(otf2_archive("casita_2_cloverleaf_oaccregions_cudafull"))
    write_otf2(trace, tmp_path / "c.otf2")
    counts = _official_counts(tmp_path / "c.otf2")
    assert counts["Enter"] == counts["Leave"] == trace.events.height
    assert counts["MpiSend"] + counts["MpiIsend"] == counts["MpiRecv"] + counts["MpiIrecv"] == trace.messages.height
    assert counts["MpiCollectiveBegin"] == counts["MpiCollectiveEnd"] == trace.collectives.height
    assert counts["Metric"] == trace.samples.height
    with otf2.reader.open(str(tmp_path / "c.otf2")) as tr:
        kinds = {str(loc.type) for loc in tr.definitions.locations}
        assert {"LocationType.CPU_THREAD", "LocationType.METRIC"} <= kinds and (
            "LocationType.GPU" in kinds or "LocationType.ACCELERATOR_STREAM" in kinds
        )
        assert tr.definitions.clock_properties.timer_resolution == 10**9
        names = {c.name for c in tr.definitions.comms}
        assert "MPI_COMM_WORLD" in names


def test_nonblocking_messages_are_written_back_as_isend_and_irecv(tmp_path: Path) -> None:
    first = di.load(otf2_archive("casita_2_cloverleaf_oaccregions_cudafull"))
    msg = first.messages
    nonblocking = msg.filter(pl.col("send_done").is_not_null() & pl.col("recv_post").is_not_null())
    assert nonblocking.height == msg.height > 0  # CloverLeaf's halo exchange: Isend/Irecv + Waitall only
    names = first.events["name"].cast(pl.String)
    assert set(names.gather(msg["send"]).to_list()) == {"MPI_Isend"} and set(
        names.gather(msg["recv_post"]).to_list()
    ) == {"MPI_Irecv"}
    assert set(names.gather(msg["send_done"]).to_list()) | set(names.gather(msg["recv"]).to_list()) <= {
        "MPI_Wait",
        "MPI_Waitall",
        "MPI_Test",
    }
    write_otf2(first, tmp_path / "nb.otf2")
    counts = _official_counts(tmp_path / "nb.otf2")
    assert counts["MpiSend"] == counts["MpiRecv"] == 0
    assert (
        counts["MpiIsend"]
        == counts["MpiIsendComplete"]
        == counts["MpiIrecvRequest"]
        == counts["MpiIrecv"]
        == msg.height
    )
    second = assert_valid(di.load(tmp_path / "nb.otf2"))
    assert second.messages.equals(first.messages)


def test_kineto_kernels_land_on_gpu_locations_and_nccl_as_collectives(tmp_path: Path) -> None:
    trace = di.load(kineto_file("hta_nccl_parser_config/nccl_data.json.gz"))
    write_otf2(trace, tmp_path / "k.otf2")
    with otf2.reader.open(str(tmp_path / "k.otf2")) as tr:
        gpu = {
            loc._ref
            for loc in tr.definitions.locations
            if str(loc.type) in ("LocationType.GPU", "LocationType.ACCELERATOR_STREAM")
        }
        kernel_regions = {r for r in tr.definitions.regions if str(r.region_role) == "RegionRole.KERNEL"}
        assert gpu and kernel_regions
        on_gpu = collections.Counter()
        for loc, ev in tr.events:
            if type(ev).__name__ == "Enter" and ev.region in kernel_regions:
                on_gpu[loc._ref in gpu] += 1
            if type(ev).__name__ == "MpiCollectiveEnd":
                on_gpu["collective"] += 1
        assert on_gpu[True] > 0 and on_gpu[False] == 0
        assert on_gpu["collective"] == trace.collectives.height > 0


@pytest.mark.skipif(
    OTF2_PRINT is None,
    reason="otf2-print not installed (Debian package otf2-tools); the official Python reader checks instead",
)
@pytest.mark.parametrize(
    "source",
    [
        "otf2:casita_2_jacobi_blame_cpu_015",
        "otf2:pipit_ping-pong-otf2-papi",
        "kineto:hta_nccl_parser_config/nccl_data.json.gz",
    ],
)
def test_otf2_print_reads_what_we_wrote(source: str, tmp_path: Path) -> None:
    kind, name = source.split(":")
    trace = di.load(otf2_archive(name) if kind == "otf2" else kineto_file(name))
    anchor = tmp_path / "p.otf2"
    write_otf2(trace, anchor)
    proc = subprocess.run([OTF2_PRINT, str(anchor)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = collections.Counter(line.split(None, 1)[0] for line in proc.stdout.splitlines() if line[:1].isupper())
    assert counts["ENTER"] == counts["LEAVE"] == trace.events.height
    assert counts["MPI_SEND"] + counts["MPI_ISEND"] == counts["MPI_RECV"] + counts["MPI_IRECV"] == trace.messages.height
    assert counts["MPI_ISEND"] == counts["MPI_ISEND_COMPLETE"] and counts["MPI_IRECV"] == counts["MPI_IRECV_REQUEST"]
    assert counts["MPI_COLLECTIVE_END"] == trace.collectives.height
    assert counts["METRIC"] == trace.samples.height
    defs = subprocess.run([OTF2_PRINT, "-G", str(anchor)], capture_output=True, text=True)
    assert defs.returncode == 0 and "CLOCK_PROPERTIES" in defs.stdout


@pytest.fixture(params=["json", "kernel"])
def flow_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each reading of ``di.flows_in`` texts: by polars' JSON reader (few texts), or by the numba kernel (many)."""
    from di.convert.otf2 import events

    if request.param == "kernel":
        monkeypatch.setattr(events, "FLOW_TEXTS_COMPILED", 0)
    return request.param


def test_flows_ride_on_the_enter_of_their_destination(tmp_path: Path, flow_reader: str) -> None:
    trace = di.load(kineto_file("hta_critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"))
    assert trace.flows.height > 0 and trace.flows["kind"].n_unique() > 1
    write_otf2(trace, tmp_path / "f.otf2")
    with otf2.reader.open(str(tmp_path / "f.otf2")) as tr:
        carried = [
            ev
            for _, ev in tr.events
            if type(ev).__name__ == "Enter" and any(a.name == "di.flows_in" for a in (ev.attributes or {}))
        ]
    assert len(carried) == trace.flows["dst"].n_unique()
    back = assert_valid(di.load(tmp_path / "f.otf2"))
    assert back.flows.height == trace.flows.height
    assert flows_by_content(back).equals(flows_by_content(trace))
    assert back.meta["sources"] == trace.meta["sources"]  # the sources di wrote; reading back dropped nothing


def test_flows_with_shared_destinations_null_ids_and_odd_categories_round_trip(
    tmp_path: Path, flow_reader: str
) -> None:
    """The writer's ``di.flows_in`` texts (written in numba) on flows the Kineto trace lacks: several flows into one
    event, of different kinds, null and negative ids, null and non-ASCII / quoted source categories."""
    trace = di.load(kineto_file("hta_critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"))
    fl = trace.flows
    n = fl.height
    extra = fl.head(7).with_columns(
        pl.col("dst").head(1).first().alias("dst"),  # seven more flows into the first flow's destination
        pl.Series("kind", ["user", "sync", "launch", "stream_wait", "user", "sync", "launch"]).cast(fl["kind"].dtype),
        pl.Series("id", [None, -5, 0, None, 2**62, -(2**63), 7], dtype=pl.Int64),
        pl.Series("src_cat", [None, 'cu"da\\ é', "", None, "x", "\t", "ac2g"], dtype=pl.String),
    )
    changed = fl.with_columns(
        pl.when(pl.int_range(n) % 3 == 0).then(None).otherwise(pl.col("id")).alias("id"),
        pl.when(pl.int_range(n) % 5 == 0).then(None).otherwise(pl.col("src_cat")).alias("src_cat"),
    )
    odd = di.Trace.build(meta=trace.meta, **{**trace.tables(), "flows": pl.concat([changed, extra])})
    back = round_trip(odd, tmp_path)
    assert back.flows.height == n + 7
    assert flows_by_content(back).equals(flows_by_content(odd))


def _otf2_description(reader: object) -> str:
    import _otf2

    return _otf2.Reader_GetDescription(reader.handle)


def test_save_and_cli_write_anchor_or_directory(tmp_path: Path) -> None:
    trace = di.load(otf2_archive("casita_4_mpi_ls_barr"))
    di.save(trace, tmp_path / "job.otf2")
    assert (tmp_path / "job.otf2").is_file() and (tmp_path / "job.def").is_file() and (tmp_path / "job").is_dir()
    di.save(trace, tmp_path / "job.otf2")  # overwrites its own archive
    di.save(trace, tmp_path / "outdir", to="otf2")
    assert anchor_for(tmp_path / "outdir") == tmp_path / "outdir" / "traces.otf2"
    assert di.load(tmp_path / "outdir").events.equals(trace.events)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "di",
            "convert",
            str(otf2_archive("casita_4_mpi_ls_barr")),
            "-o",
            str(tmp_path / "cli.otf2"),
            "--no-analysis",
        ],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    assert di.load(tmp_path / "cli.otf2").events.equals(trace.events)
    # by default di convert adds the analysis tracks; dropping them gives the program's events back exactly
    from di.analysis_parts import without_analysis
    from di.cli import main

    assert main(["convert", str(otf2_archive("casita_4_mpi_ls_barr")), "-o", str(tmp_path / "tracked.otf2")]) == 0
    tracked = di.load(tmp_path / "tracked.otf2")
    assert tracked.events.height > trace.events.height
    assert without_analysis(tracked).events.equals(trace.events)


def test_writer_refuses_to_overwrite_other_files(tmp_path: Path) -> None:
    trace = di.load(otf2_archive("casita_4_mpi_ls_barr"))
    (tmp_path / "x.otf2").write_text("my notes")
    for force in (False, True):
        with pytest.raises(OutputError, match="not an OTF2 archive that di wrote; di replaces only its own archives"):
            di.save(trace, tmp_path / "x.otf2", force=force)
    assert (tmp_path / "x.otf2").read_text() == "my notes"


def test_regions_of_many_distinct_names_round_trip(tmp_path: Path) -> None:
    """6,000 kernel names (past the string table's dict, so the names enter it as one column), some also the name of
    a CPU op or of an instant (one region per (name, cat, src_cat, instant)): the official reader sees each region
    once with its name and role, and di reads every event back."""
    events = []
    for k in range(6_000):
        t = 10 * k
        events.append({"ph": "X", "cat": "kernel", "name": f"triton_poi_{k}", "pid": 0, "tid": 7, "ts": t, "dur": 5})
        if k % 1000 == 0:  # the same name as a CPU op and as an instant: regions of their own
            events.append(
                {"ph": "X", "cat": "cpu_op", "name": f"triton_poi_{k}", "pid": 1, "tid": 1, "ts": t, "dur": 2}
            )
            events.append({"ph": "i", "cat": "cpu_op", "name": f"triton_poi_{k}", "pid": 1, "tid": 1, "ts": t + 3})
    first = di.load(write_json(tmp_path, "many.json", trace_doc(*events)))
    write_otf2(first, tmp_path / "many.otf2")
    with otf2.reader.open(str(tmp_path / "many.otf2")) as tr:
        regions = [(r.name, str(r.region_role)) for r in tr.definitions.regions]
    per_name = collections.Counter(name for name, _ in regions)
    assert len(regions) == 6_012 and per_name == {f"triton_poi_{k}": 3 if k % 1000 == 0 else 1 for k in range(6_000)}
    assert collections.Counter(role for _, role in regions) == {"RegionRole.KERNEL": 6_000, "RegionRole.FUNCTION": 12}
    second = assert_valid(di.load(tmp_path / "many.otf2"))
    assert events_by_content(second).equals(events_by_content(first))
