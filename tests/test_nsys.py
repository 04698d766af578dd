"""Nsight Systems connector: SQLite exports (and .nsys-rep through nsys) into the canonical trace.

Real data: the shared CloverLeaf export (skips when absent) is compared row by
row with its own SQLite tables and with the two CSVs pipit's reader derived
from it. Hand-built exports (tests/nsys_cases.py) cover the tables CloverLeaf
lacks (NVTX, memset, driver API, NCCL domain, graph nodes), schema drift and ranks.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import DATA, assert_valid

import di
from di.convert.nsys.reader import read_nsys
from tests import nsys_cases as cases

CLOVER = DATA / "nsys" / "cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite"
SESSION = 1696392839587175550
"""TARGET_INFO_SESSION_START_TIME.utcEpochNs of the CloverLeaf export."""


@pytest.fixture(scope="module")
def clover() -> Path:
    if not CLOVER.exists():
        pytest.skip("shared test data absent: nsys/cloverleaf/ not found under ../shared/data")
    return CLOVER


@pytest.fixture(scope="module")
def clover_trace(clover: Path) -> di.Trace:
    return assert_valid(di.load(clover))


def _rows(path: Path, sql: str) -> np.ndarray:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return np.array(con.execute(sql).fetchall(), dtype=np.int64)


def _sorted(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


def _events(trace: di.Trace, src_cat: str | tuple[str, ...]) -> pl.DataFrame:
    cats = (src_cat,) if isinstance(src_cat, str) else src_cat
    return trace.events.filter(pl.col("src_cat").cast(pl.String).is_in(list(cats)))


# --- exactness on the real export -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, src_cat",
    [
        ("CUPTI_ACTIVITY_KIND_KERNEL", "kernel"),
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "gpu_memcpy"),
        ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "cuda_sync"),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", ("cuda_runtime", "cuda_driver")),
        ("OSRT_API", "osrt"),
    ],
)
def test_every_row_of_every_table_is_an_event_with_its_ns_times(
    clover: Path, clover_trace: di.Trace, table: str, src_cat
) -> None:
    want = _sorted(
        _rows(clover, f"SELECT start + {SESSION}, end + {SESSION}, coalesce(correlationId, -1) FROM {table}")
        if table != "OSRT_API"
        else _rows(clover, f"SELECT start + {SESSION}, end + {SESSION}, -1 FROM {table}")
    )
    ev = _events(clover_trace, src_cat)
    got = _sorted(ev.select("start_ns", "end_ns", pl.col("corr").fill_null(-1)).to_numpy().astype(np.int64))
    assert got.shape == want.shape and np.array_equal(got, want)


def test_memcpy_bytes_and_copy_kinds_equal_the_table(clover: Path, clover_trace: di.Trace) -> None:
    want = _rows(
        clover,
        "SELECT copyKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY copyKind ORDER BY copyKind",
    )
    ev = _events(clover_trace, "gpu_memcpy").with_columns(
        pl.col("args").str.json_path_match("$['copy kind']").alias("k")
    )
    got = ev.group_by("k").agg(pl.len(), pl.col("bytes").sum()).sort("k")
    assert got.rows() == [("DtoH", int(want[1, 1]), int(want[1, 2])), ("HtoD", int(want[0, 1]), int(want[0, 2]))]
    assert set(ev.get_column("name").cast(pl.String).unique()) == {
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy DtoH (Device -> Pageable)",
    }


def test_the_csvs_pipit_derived_agree(clover: Path, clover_trace: di.Trace) -> None:
    """Every kernel/memcpy and API call of pipit's CSVs (Enter/Leave rows, ns since the session start) is one event."""
    for csv, cats in (
        ("cloverleaf_gpu_trace.csv", ("kernel", "gpu_memcpy")),
        ("cloverleaf-cuda_api_trace.csv", ("cuda_runtime", "cuda_driver")),
    ):
        df = pl.read_csv(clover.parent / csv)
        enter = df.filter(pl.col("Event Type") == "Enter").select(
            pl.col("Timestamp (ns)").alias("s"), pl.col("_matching_timestamp").alias("e")
        )
        want = _sorted(enter.to_numpy().astype(np.int64))
        ev = _events(clover_trace, cats)
        got = _sorted(ev.select(pl.col("start_ns") - SESSION, pl.col("end_ns") - SESSION).to_numpy())
        assert got.shape[0] == df.height // 2 and np.array_equal(got, want), csv
    api = pl.read_csv(clover.parent / "cloverleaf-cuda_api_trace.csv").filter(pl.col("Event Type") == "Enter")
    ev = _events(clover_trace, ("cuda_runtime", "cuda_driver"))
    raw = ev.get_column("args").str.json_path_match("$.function")
    assert sorted(raw.to_list()) == sorted(api.get_column("Name").to_list())


def test_locations_categories_flows_and_meta(clover_trace: di.Trace) -> None:
    t = clover_trace
    loc = t.locations
    gpu = loc.filter(pl.col("kind") == "gpu_stream")
    assert sorted(gpu.get_column("stream").to_list()) == [-1, 7]  # stream 7 and the device-wide sync records
    assert set(gpu.get_column("gpu_model").to_list()) == {"NVIDIA A100-SXM4-80GB"}
    cpu = loc.filter(pl.col("kind") == "cpu_thread")
    assert set(cpu.get_column("pid").to_list()) == {1701896} and set(cpu.get_column("process").to_list()) == {
        "cuda-cloverleaf"
    }
    assert 1701896 in cpu.get_column("tid").to_list()  # the main thread: globalTid & 0xFFFFFF
    cats = dict(t.events.group_by("cat").len().iter_rows())
    assert cats["kernel"] == 1312 and cats["memcpy"] == 279
    assert cats["sync"] == 1312 + 1312  # the sync records and the cudaDeviceSynchronize calls
    names = t.events.filter(pl.col("cat") == "cuda_api").get_column("name").cast(pl.String).unique().to_list()
    assert "cudaLaunchKernel" in names and not any(n.endswith("_v7000") for n in names)  # as nsys stats names them
    flows = dict(t.flows.group_by("kind").len().iter_rows())
    assert flows == {"launch": 1312 + 279, "sync": 1312}
    ev = t.events
    src, dst = t.flows.get_column("src").to_numpy(), t.flows.get_column("dst").to_numpy()
    assert np.array_equal(ev.get_column("corr").to_numpy()[src], ev.get_column("corr").to_numpy()[dst])
    assert (ev.get_column("start_ns").to_numpy()[src] <= ev.get_column("start_ns").to_numpy()[dst]).all()
    src_meta = t.meta["sources"][0]
    assert t.meta["clock"]["domain"] == "unix_epoch" and t.meta["hosts"] == ["nid008553"]
    assert (
        src_meta["format"] == "nsys"
        and src_meta["rank_source"] == "metadata"
        and src_meta["info"]["export_schema"] == "3.13.2"
    )
    assert t.meta["time_range"]["start_ns"] > SESSION
    missing = [w for w in t.meta["warnings"] if "NVTX_EVENTS" in w]
    assert len(missing) == 1 and "CUPTI_ACTIVITY_KIND_MEMSET" in missing[0]


def test_native_and_fetchall_reads_agree(clover: Path, clover_trace: di.Trace) -> None:
    slow = read_nsys(clover, native=False)
    assert slow.events.equals(clover_trace.events) and slow.flows.equals(clover_trace.flows)


# --- hand-built exports: the tables CloverLeaf lacks --------------------------------------------------------------------


def test_hand_built_export_maps_every_table(tmp_path: Path) -> None:
    t = assert_valid(di.load(cases.build(tmp_path / "job.sqlite")))
    ev = t.events.with_columns(pl.col("name").cast(pl.String), (pl.col("start_ns") - cases.SESSION_START_NS).alias("s"))
    by = {r["name"]: r for r in ev.iter_rows(named=True)}
    assert by["void gemm_kernel<float>(float*)"]["cat"] == "kernel"
    assert json.loads(by["void gemm_kernel<float>(float*)"]["args"])["grid"] == [2, 1, 1]
    assert by["ncclDevKernel_AllReduce_Sum_f32"]["cat"] == "nccl"
    assert json.loads(by["ncclDevKernel_AllReduce_Sum_f32"]["args"])["graph node"] == 99
    assert by["Memset (Device)"]["cat"] == "memset" and by["Memset (Device)"]["bytes"] == 4096
    assert by["cudaStreamSynchronize"]["cat"] == "sync" and by["Stream Sync"]["cat"] == "sync"
    assert by["cuLaunchKernel"]["src_cat"] == "cuda_driver"
    assert by["ProfilerStep#7"]["cat"] == "step" and by["forward"]["cat"] == "user" and by["epoch"]["cat"] == "user"
    assert by["checkpoint"]["instant"] and by["checkpoint"]["s"] == 600
    assert by["ncclAllReduce"]["cat"] == "nccl" and json.loads(by["ncclAllReduce"]["args"])["domain"] == "NCCL"
    assert by["read"]["cat"] == "io" and (by["read"]["s"], by["read"]["end_ns"] - cases.SESSION_START_NS) == (
        9100,
        9200,
    )
    assert "never ended" not in by
    assert t.meta["sources"][0]["dropped"] == {"NVTX ranges without an end": 1}
    kinds = dict(t.flows.group_by("kind").len().iter_rows())
    assert kinds == {"launch": 3, "sync": 1}
    locs = t.locations
    assert locs.filter(pl.col("kind") == "cpu_thread").get_column("name").to_list() == ["main thread"]
    assert locs.filter(pl.col("kind") == "async").get_column("name").to_list() == ["NVTX start/end ranges"]
    gpu = locs.filter(pl.col("kind") == "gpu_stream").sort("stream")
    assert gpu.select("stream", "name").rows() == [
        (7, "GPU 0 stream 7 (null stream)"),
        (13, "GPU 0 stream 13 (non-blocking, priority -5)"),
    ]
    assert t.meta["hosts"] == ["node7"] and read_nsys(tmp_path / "job.sqlite").meta["command"] == "train"
    nested = ev.filter(pl.col("name") == "cudaLaunchKernel").get_column("depth").to_list()
    assert all(d >= 1 for d in nested)  # inside ProfilerStep#7 (and forward) on the thread


# --- schema drift ---------------------------------------------------------------------------------------------------------


def test_old_metadata_table_missing_tables_and_columns(tmp_path: Path) -> None:
    path = cases.build(
        tmp_path / "old.sqlite",
        meta_table="EXPORT_META_DATA",
        schema_version="2.7.1",
        drop=("NVTX_EVENTS", "OSRT_API", "CUPTI_ACTIVITY_KIND_MEMSET"),
        kernel_cols=("demangledName", "gridX", "graphNodeId"),
    )
    t = assert_valid(di.load(path))
    assert t.meta["sources"][0]["info"]["export_schema"] == "2.7.1"
    said = [w for w in t.meta["warnings"] if "NVTX_EVENTS" in w]
    assert len(said) == 1 and "OSRT_API" in said[0] and "MEMSET" in said[0]
    assert not any("never seen" in w for w in t.meta["warnings"])
    names = t.events.filter(pl.col("cat") == "kernel").get_column("name").cast(pl.String).to_list()
    assert names == ["gemm_kernel"]  # shortName where the demangled name is absent


def test_unseen_schema_version_loads_and_warns(tmp_path: Path) -> None:
    t = assert_valid(di.load(cases.build(tmp_path / "new.sqlite", schema_version="9.0.0")))
    assert t.events.height > 0 and any("9.0.0 was never seen" in w for w in t.meta["warnings"])


def test_table_lacking_a_needed_column_is_skipped_with_a_warning(tmp_path: Path) -> None:
    t = assert_valid(di.load(cases.build(tmp_path / "x.sqlite", kernel_cols=("streamId",))))
    assert t.events.filter(pl.col("cat").is_in(["kernel", "nccl"]) & (pl.col("src_cat") == "kernel")).height == 0
    assert any("CUPTI_ACTIVITY_KIND_KERNEL lacks streamId" in w for w in t.meta["warnings"])


# --- round trip through the viewers' formats --------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", [".pftrace", ".otf2", ".di"])
def test_convert_and_load_back_with_equal_counts(
    clover: Path, clover_trace: di.Trace, tmp_path: Path, ext: str
) -> None:
    out = tmp_path / f"x{ext}"
    done = subprocess.run(
        [sys.executable, "-m", "di", "convert", str(clover), "-o", str(out), "--no-analysis"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    back = assert_valid(di.load(out))
    assert back.events.height == clover_trace.events.height and back.flows.height == clover_trace.flows.height
    for col in ("start_ns", "end_ns"):
        assert back.events.get_column(col).sort().equals(clover_trace.events.get_column(col).sort())
    assert dict(back.events.group_by("cat").len().iter_rows()) == dict(
        clover_trace.events.group_by("cat").len().iter_rows()
    )


def test_perfetto_trace_processor_imports_the_export_exactly(
    clover: Path, clover_trace: di.Trace, tmp_path: Path
) -> None:
    from tests.trace_processor import WasmTraceProcessor, engine_problem

    if engine_problem() is not None:
        pytest.skip(engine_problem() or "")
    from tests.test_perfetto_processor import check_imported

    out = tmp_path / "x.pftrace"
    di.save(clover_trace, out)
    with WasmTraceProcessor() as tp:
        check_imported(tp, clover_trace, out)


@pytest.mark.skipif(shutil.which("otf2-print") is None, reason="otf2-print not installed (Debian package otf2-tools)")
def test_otf2_print_reads_the_archive(clover_trace: di.Trace, tmp_path: Path) -> None:
    di.save(clover_trace, tmp_path / "x.otf2")
    done = subprocess.run(["otf2-print", str(tmp_path / "x.otf2")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    enters = sum(1 for line in done.stdout.splitlines() if line.startswith("ENTER "))
    assert enters == clover_trace.events.filter(~pl.col("instant")).height


def test_streams_named_with_nvtx_and_unnamed_threads(tmp_path: Path) -> None:
    t = assert_valid(di.load(cases.build(tmp_path / "named.sqlite", nvtx_stream_names=True)))
    gpu = t.locations.filter(pl.col("kind") == "gpu_stream").sort("stream")
    assert gpu.get_column("name").to_list() == ["GPU 0 stream 7 (null stream)", "GPU 0 comm stream"]
    path = cases.build(tmp_path / "unnamed.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM ThreadNames")
    cpu = di.load(path).locations.filter(pl.col("kind") == "cpu_thread")
    assert cpu.get_column("name").to_list() == [f"thread {cases.TID}"]


def test_gpu_records_without_global_pid_still_get_their_launch_flows(tmp_path: Path) -> None:
    path = cases.build(tmp_path / "nopid.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET globalPid = NULL")
    t = assert_valid(di.load(path))
    assert dict(t.flows.group_by("kind").len().iter_rows()) == {"launch": 3, "sync": 1}


def test_nvtx_without_event_type_column_reads_ranges_and_marks_by_their_end(tmp_path: Path) -> None:
    path = cases.build(tmp_path / "bare.sqlite")
    with sqlite3.connect(path) as con:
        con.execute("DELETE FROM NVTX_EVENTS WHERE eventType = 75 OR end IS NULL AND eventType = 59")
        con.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN eventType")
    t = assert_valid(di.load(path))
    nvtx = t.events.filter(pl.col("src_cat") == "nvtx").with_columns(pl.col("name").cast(pl.String))
    assert sorted(nvtx.get_column("name").to_list()) == [
        "ProfilerStep#7",
        "checkpoint",
        "epoch",
        "forward",
        "ncclAllReduce",
    ]
    assert nvtx.filter(pl.col("instant")).get_column("name").to_list() == ["checkpoint"]


def test_cuda_graphs_definitions_launches_and_their_kernels(tmp_path: Path) -> None:
    t = assert_valid(di.load(cases.add_graphs(cases.build(tmp_path / "graphs.sqlite"))))
    ev = t.events.with_row_index("row").with_columns(pl.col("name").cast(pl.String), pl.col("src_cat").cast(pl.String))
    graph_kernels = ev.filter(pl.col("args").str.contains('"graph":5') & (pl.col("src_cat") == "kernel"))
    assert graph_kernels.height == 2 and graph_kernels.get_column("start_ns").to_list() == [
        cases.SESSION_START_NS + 10000,
        cases.SESSION_START_NS + 10100,
    ]
    assert [json.loads(a)["graph node"] for a in graph_kernels.get_column("args")] == [99, 100]
    whole = ev.filter(pl.col("src_cat") == "cuda_graph", pl.col("cat") == "kernel")
    assert whole.select("name", "end_ns").rows() == [("CUDA graph 5", cases.SESSION_START_NS + 11500)]
    assert json.loads(whole.get_column("args").item()) == {"graph": 5, "graph exec": 6}
    launches = ev.filter(pl.col("name") == "cudaGraphLaunch").get_column("row").to_list()
    flows = t.flows.filter(pl.col("src").is_in(launches)).sort("dst")
    assert flows.get_column("dst").to_list() == [*graph_kernels.get_column("row"), *whole.get_column("row")]
    assert set(flows.get_column("kind")) == {"launch"}
    made = ev.filter(pl.col("src_cat").is_in(["cuda_graph", "cuda_graph_node"]) & (pl.col("cat") == "cuda_api"))
    assert made.select("name", "src_cat").sort("name").rows() == [
        ("cudaGraphAddKernelNode", "cuda_graph_node"),
        ("cudaGraphInstantiate", "cuda_graph"),
    ]
    inst = json.loads(made.filter(pl.col("name") == "cudaGraphInstantiate").get_column("args").item())
    assert inst == {"graph": 5, "original graph": None, "graph exec": 6}
    info = t.meta["sources"][0]["info"]
    assert "CUDA_GRAPH_EVENTS" in info["tables_read"] and "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in info["tables_read"]


@pytest.mark.parametrize("odd", ["a\x1fb", ""])
def test_nvtx_text_with_the_separator_or_empty_is_kept_exactly(tmp_path: Path, odd: str) -> None:
    path = cases.build(tmp_path / "odd.sqlite")
    with sqlite3.connect(path) as con:
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (9700, 9800, 59, ?, ?, 0)",
            (odd, cases.GTID),
        )
    t = di.load(path)
    nvtx = t.events.filter(pl.col("src_cat") == "nvtx").with_columns(pl.col("name").cast(pl.String))
    assert odd in nvtx.get_column("name").to_list()
    assert sorted(n for n in nvtx.get_column("name").to_list() if n != odd) == [
        "ProfilerStep#7",
        "checkpoint",
        "epoch",
        "forward",
        "ncclAllReduce",
    ]
