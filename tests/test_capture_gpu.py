"""GPU capture without a GPU: CUPTI records -> canonical trace, `di record --gpu` on a CPU
machine, torch.profiler traces merged on the job clock.

The CUPTI fixture is built from the documented members of CUPTI's activity records
(CUpti_ActivityKernel*, CUpti_ActivityMemcpy*, CUpti_ActivityMemset*,
CUpti_ActivityAPI, CUpti_ActivitySynchronization, CUpti_ActivityMarker2) with
cupti-python's snake_case names and CUPTI's ActivityKind values, and goes through
the same writer (GpuCapture's buffer callback path) and ingest as a real run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from capture_helpers import di_cmd, run
from cupti_fixture import (
    API,
    BASE,
    CONCURRENT_KERNEL,
    CONTEXT,
    DEVICE,
    KINDS,
    NOT_APPLICABLE,
    STEPS,
    TID,
    Make,
    activity,
    make_plain,
    make_real,
)

from di.capture import cupti
from di.capture import cupti_records as records
from di.capture.ingest import ingest

HAVE_CUPTI = importlib.util.find_spec("cupti") is not None  # NVIDIA's cupti-python (the gpu extra)


@pytest.fixture(autouse=True)
def _nvtx_injection_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """GpuCapture points NVTX_INJECTION64_PATH at the libcupti it loaded, in os.environ; undone after each test,
    so a later `di record` does not take it for another tool's injection (and record no NVTX ranges)."""
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "")
    monkeypatch.delenv("NVTX_INJECTION64_PATH")


@pytest.fixture(params=["documented members", "cupti-python classes"])
def make(request: pytest.FixtureRequest) -> Make:
    """Fixture records as plain objects, and as cupti-python's own record classes where it is installed."""
    if request.param == "documented members":
        return make_plain
    if not HAVE_CUPTI:
        pytest.skip("cupti-python not installed: the fixture is checked against its documented member names only")
    return make_real


def _write_fixture(raw: Path, make: Make = make_plain) -> cupti.GpuCapture:
    cap = cupti.GpuCapture(raw)
    cap.header["clock"] = {"realtime_ns": BASE + 5_000_000, "monotonic_ns": 5_000_000}  # skew = BASE
    cap.header["state"] = "stopped"
    raw.mkdir(parents=True, exist_ok=True)
    cap.write_header()
    recs = activity(make)
    for half in (recs[:10], recs[10:]):  # two completed buffers
        cap.append(records.to_records(half, lambda k: KINDS.get(k, 0), cap._intern, lambda _k, cbid: API[cbid]))
    return cap


def test_gpu_record_is_96_bytes() -> None:
    assert records.GPU_RECORD.itemsize == 96


def _reference(activities: list, kind_of, intern, api_name) -> np.ndarray:  # noqa: ANN001
    """The buffer conversion one record at a time (what records.to_records computes column by column)."""
    out = []
    dims = (0, 0, 0)
    for a in activities:
        k = kind_of(a.kind)
        if k == records.K_MARKER:
            out.append(
                (
                    k,
                    a.flags_ & 0xFF,
                    0,
                    0,
                    a.timestamp,
                    a.timestamp,
                    0,
                    0,
                    0,
                    intern(a.name) if a.name else 0,
                    0,
                    dims,
                    dims,
                    a.object_id.pt.thread_id,
                    a.id,
                )
            )
        elif k in (records.K_RUNTIME, records.K_DRIVER):
            out.append(
                (
                    k,
                    0,
                    0,
                    0,
                    a.start,
                    a.end,
                    a.correlation_id,
                    0,
                    0,
                    intern(api_name(k, a.cbid)),
                    0,
                    dims,
                    dims,
                    a.thread_id,
                    0,
                )
            )
        elif k == records.K_SYNC:  # no device member; a device-wide sync has no stream
            stream = -1 if a.stream_id == NOT_APPLICABLE else a.stream_id
            out.append(
                (
                    k,
                    a.type,
                    0,
                    -1,
                    a.start,
                    a.end,
                    a.correlation_id,
                    stream,
                    a.context_id,
                    0,
                    0,
                    dims,
                    dims,
                    0,
                    a.cuda_event_id,
                )
            )
        elif k == records.K_KERNEL:
            out.append(
                (
                    k,
                    0,
                    0,
                    a.device_id,
                    a.start,
                    a.end,
                    a.correlation_id,
                    a.stream_id,
                    a.context_id,
                    intern(a.name),
                    0,
                    (a.grid_x, a.grid_y, a.grid_z),
                    (a.block_x, a.block_y, a.block_z),
                    0,
                    0,
                )
            )
        elif k == records.K_MEMCPY:
            out.append(
                (
                    k,
                    a.copy_kind,
                    0,
                    a.device_id,
                    a.start,
                    a.end,
                    a.correlation_id,
                    a.stream_id,
                    a.context_id,
                    0,
                    a.bytes,
                    dims,
                    dims,
                    0,
                    0,
                )
            )
        elif k == records.K_MEMSET:
            out.append(
                (
                    k,
                    0,
                    0,
                    a.device_id,
                    a.start,
                    a.end,
                    a.correlation_id,
                    a.stream_id,
                    a.context_id,
                    0,
                    a.bytes,
                    dims,
                    dims,
                    0,
                    a.value,
                )
            )
    return np.array(out, records.GPU_RECORD)


def test_columnar_buffer_conversion_agrees_with_one_record_at_a_time(make: Make) -> None:
    rng = np.random.default_rng(7)
    pool = activity(make)
    for trial in range(20):  # shuffled buffers of mixed kinds, and buffers of one kind
        recs = [pool[i] for i in rng.integers(0, len(pool), int(rng.integers(1, 60)))]
        if trial % 4 == 0:
            recs = [r for r in recs if r.kind == CONCURRENT_KERNEL] or recs[:1]
        texts = []  # string ids are given in another order: compare the names they stand for
        for convert in (_reference, records.to_records):
            names: dict[str, int] = {}
            recs_out = convert(
                recs,
                lambda k: KINDS.get(k, 0),
                lambda n, d=names: d.setdefault(n, len(d) + 1),
                lambda _k, cbid: API[cbid],
            )
            recs_out = recs_out[np.argsort(recs_out["kind"], kind="stable")]  # grouped by kind, buffer order within
            lut = np.array([None, *names], dtype=object)
            texts.append((recs_out, lut[recs_out["name"]].tolist()))
        (want, want_names), (got, got_names) = texts
        assert got_names == want_names, trial
        want["name"], got["name"] = 0, 0
        assert got.tobytes() == want.tobytes(), trial


def test_cupti_records_to_canonical_trace(tmp_path: Path, make: Make) -> None:
    run_dir = tmp_path / "run.di"
    _write_fixture(run_dir / "raw", make)
    trace, _files = ingest(run_dir)
    trace.validate()
    ev = trace.events.with_row_index("row")
    locs = trace.locations
    kernels = ev.filter(pl.col("cat") == "kernel")
    assert kernels.height == STEPS
    assert kernels.get_column("name").unique().to_list() == ["ampere_sgemm_128x64_nn"]
    assert json.loads(kernels.get_column("args")[0]) == {
        "device": DEVICE,
        "context": CONTEXT,
        "stream": 7,
        "grid": [64, 2, 1],
        "block": [256, 1, 1],
    }
    # CUPTI realtime ns -> monotonic ns (no MPI clock map): t - (realtime - monotonic)
    assert kernels.get_column("start_ns").to_list() == [8_000 + 100_000 * s for s in range(STEPS)]
    memcpy = ev.filter(pl.col("cat") == "memcpy")
    assert memcpy.get_column("bytes").to_list() == [1 << 20] * STEPS
    assert memcpy.get_column("name")[0] == "Memcpy HtoD"
    assert ev.filter(pl.col("cat") == "memset").get_column("bytes").to_list() == [4096] * STEPS
    sync = ev.filter(pl.col("cat") == "sync").join(locs.select("loc", "device", "stream"), on="loc")
    assert sorted(sync.get_column("name").unique().to_list()) == ["cudaDeviceSynchronize", "cudaStreamSynchronize"]
    # synchronization records carry no device: it comes from their context's kernels and copies
    assert sync.select("name", "device", "stream").unique().sort("name").rows() == [
        ("cudaDeviceSynchronize", DEVICE, None),
        ("cudaStreamSynchronize", DEVICE, 7),
    ]
    api = ev.filter(pl.col("cat") == "cuda_api")
    assert sorted(api.get_column("name").unique().to_list()) == sorted(API.values())
    # NVTX ranges paired by id, the mark an instant, all on the API thread's timeline
    user = ev.filter(pl.col("cat") == "user")
    assert user.filter(~pl.col("instant")).select("name", "start_ns", "end_ns").rows() == [
        (f"step {s}", 100_000 * s, 100_000 * s + 73_000) for s in range(STEPS)
    ]
    assert user.filter(pl.col("instant")).get_column("name").to_list() == ["done"]
    assert set(user.get_column("loc").to_list()) == set(api.get_column("loc").to_list())
    # API calls nest inside the NVTX range on their thread
    assert set(api.filter(pl.col("name") != "cudaDeviceSynchronize_v3020").get_column("depth").to_list()) == {1}
    # timelines: one per (device, stream), one for device-wide syncs, one per API thread
    gpu = locs.filter(pl.col("kind") == "gpu_stream").sort("stream", nulls_last=True)
    assert gpu.select("device", "stream").rows() == [(DEVICE, 7), (DEVICE, 8), (DEVICE, None)]
    assert locs.filter(pl.col("kind") == "cpu_thread").get_column("tid").to_list() == [TID]
    # every kernel/memcpy/memset has its launch flow from the API call with its correlation id; syncs have none
    flows = trace.flows.join(ev.select(pl.col("row").cast(pl.Int64).alias("src"), api_corr="corr"), on="src").join(
        ev.select(pl.col("row").cast(pl.Int64).alias("dst"), gpu_corr="corr", gpu_cat="cat"), on="dst"
    )
    assert flows.height == 3 * STEPS
    assert (flows.get_column("kind") == "launch").all()
    assert (flows.get_column("api_corr") == flows.get_column("gpu_corr")).all()
    assert sorted(flows.get_column("gpu_cat").cast(pl.String).unique().to_list()) == ["kernel", "memcpy", "memset"]
    assert trace.meta["sources"][-1]["format"] == "di-capture-cupti"


def test_a_driver_call_inside_the_runtime_call_does_not_launch_twice(tmp_path: Path) -> None:
    """Where cuLaunchKernel inside cudaLaunchKernel carries the kernel's correlation id too, the kernel
    keeps one launch flow, from the outer (runtime) call."""
    from cupti_fixture import DRIVER, RUNTIME

    recs = activity(make_plain)
    launches = [r for r in recs if r.kind == RUNTIME and r.cbid == 211]
    recs += [
        make_plain(
            DRIVER, start=r.start + 500, end=r.end - 500, correlation_id=r.correlation_id, cbid=307, thread_id=TID
        )
        for r in launches
    ]
    run_dir = tmp_path / "run.di"
    cap = cupti.GpuCapture(run_dir / "raw")
    cap.header["clock"] = {"realtime_ns": BASE, "monotonic_ns": 0}
    cap.raw.mkdir(parents=True)
    cap.write_header()
    cap.append(
        records.to_records(
            recs,
            lambda k: KINDS.get(k, 0),
            cap._intern,
            lambda k, cbid: "cuLaunchKernel" if k == records.K_DRIVER else API[cbid],
        )
    )
    trace, _ = ingest(run_dir)
    ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    kern = ev.filter(pl.col("cat") == "kernel").get_column("row")
    flows = trace.flows.filter(pl.col("dst").is_in(kern.implode())).join(
        ev.select(src="row", src_name="name"), on="src"
    )
    assert flows.height == STEPS and flows.get_column("src_name").to_list() == ["cudaLaunchKernel_v7000"] * STEPS
    assert ev.filter(pl.col("name") == "cuLaunchKernel").height == STEPS


def test_cupti_process_of_a_rank_no_shim_recorded_is_on_the_job_clock(tmp_path: Path) -> None:
    from di.capture import clock
    from di.capture.gpu_ingest import add_gpu
    from di.trace import Trace

    _write_fixture(tmp_path / "raw")  # skew = BASE: CUPTI's BASE + x is monotonic x
    epoch = 1_700_000_000_000_000_000  # the job clock's Unix-epoch offset (rank 0's, from its shim header)
    empty = Trace.build(
        meta={"format": "di-trace", "clock": {"unit": "ns", "domain": "unix_epoch"}}, locations=None, events=None
    )
    trace = add_gpu(empty, tmp_path / "raw", {}, {0: clock.ClockMap(0, 0, 0.0, epoch, 0, 0)})
    kern = trace.events.filter(pl.col("cat") == "kernel").sort("start_ns")
    assert kern.get_column("start_ns").to_list()[0] == epoch + 8_000  # monotonic 8 us, on the job's epoch


def test_analyze_sees_the_cupti_trace(tmp_path: Path) -> None:
    from di.engine import analyze

    run_dir = tmp_path / "run.di"
    _write_fixture(run_dir / "raw")
    trace, _ = ingest(run_dir)
    result = analyze(trace)
    gpu = {
        r["state"]: r["time_ns"]
        for r in result.breakdown.filter(pl.col("scope") == f"gpu{DEVICE}").iter_rows(named=True)
    }
    assert gpu["compute"] == STEPS * 50_000  # the kernels
    path = dict(result.critical_path["by_category"].select("category", "contrib_ns").rows())
    assert path["kernel"] == STEPS * 50_000 and path["memcpy"] == STEPS * 10_000
    assert "launch" in path  # the launch flows put the API calls on the path


def test_cupti_unavailable_is_said_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupti", None)  # as where cupti-python is not installed: ImportError
    cap = cupti.GpuCapture(tmp_path / "raw")
    assert cap.start() is False
    header = json.loads(next((tmp_path / "raw").glob("cupti-*.json")).read_text())
    assert header["state"] == "unavailable"
    assert header["notes"] and "cupti-python is not installed" in header["notes"][0]
    cap.stop()  # nothing to flush: no error


def test_real_cupti_without_a_driver_is_said_once(tmp_path: Path) -> None:
    """NVIDIA's cupti-python on a machine without a driver: it imports, and every CUPTI call raises
    cupti._internal.utils.NotSupportedError ("CUDA driver is not found (libcuda.so.1: ...)")."""
    from di.capture.gpu_setup import driver_present

    if not HAVE_CUPTI:
        pytest.skip("cupti-python not installed (pip install 'deepintrospect[gpu]')")
    if driver_present()[0]:
        pytest.skip("a CUDA driver is present: this test is for machines without one")
    from cupti import cupti as real

    with pytest.raises(RuntimeError, match="CUDA driver is not found") as raised:
        real.activity_enable(real.ActivityKind.CONCURRENT_KERNEL)
    assert type(raised.value).__name__ == "NotSupportedError"
    run_dir = tmp_path / "run.di"
    cap = cupti.GpuCapture(run_dir / "raw")
    assert cap.start() is False
    cap.stop()  # nothing to flush: no error
    header = json.loads(next((run_dir / "raw").glob("cupti-*.json")).read_text())
    assert header["state"] == "unavailable"
    assert header["notes"] == [f"CUPTI capture skipped: no GPU/driver found ({raised.value})"]
    trace, _ = ingest(run_dir)
    assert sum("no GPU/driver found" in w for w in trace.meta["warnings"]) == 1


def test_record_gpu_on_a_cpu_machine_says_so_once(tmp_path: Path) -> None:
    from di.capture.gpu_setup import driver_present

    if driver_present()[0]:
        pytest.skip("a CUDA driver is present: this test is for machines without one")
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import sys\nimport di.capture\n"  # in-code capture too: it must not say it again
        "with di.capture.gpu():\n    for i in range(20):\n        open('out.txt', 'w').write('x' * 100 * i)\n"
        "print('ok', file=sys.stderr)\n"
    )
    out = tmp_path / "run.di"
    proc = run(di_cmd("record", "--gpu", "-o", str(out), "--", _python(), str(prog)), tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    text = " ".join((proc.stdout + proc.stderr).split())
    assert text.count("no GPU/driver found") == 1, text
    import di

    trace = di.load(out)
    assert trace.events.filter(pl.col("cat") == "io").height >= 20  # the rest is recorded
    assert trace.samples.height > 0
    assert sum("no GPU/driver found" in w for w in trace.meta["warnings"]) == 1
    assert trace.meta["capture"]["options"]["gpu"] is True
    header = json.loads(next((out / "raw").glob("cupti-*.json")).read_text())
    assert header["state"] == "unavailable" and header["notes"] == []


def _python() -> str:
    import sys

    return sys.executable


TORCH_PROGRAM = """
import torch
from torch.profiler import profile, ProfilerActivity, record_function
with profile(activities=[ProfilerActivity.CPU]) as p:
    for step in range(3):
        with record_function(f"ProfilerStep#{step}"):
            x = torch.randn(64, 64)
            for _ in range(4):
                x = torch.tanh(x @ x)
        with open("log.txt", "a") as f:
            f.write(f"step {step}\\n")
p.export_chrome_trace("trace.json")
"""


def test_record_merges_torch_profiler_trace(tmp_path: Path) -> None:
    pytest.importorskip(
        "torch", reason="torch not installed (CI has none): the Kineto merge needs a real torch.profiler run"
    )
    prog = tmp_path / "train.py"
    prog.write_text(TORCH_PROGRAM)
    out = tmp_path / "run.di"
    proc = run(di_cmd("record", "--gpu", "--io", "-o", str(out), "--", _python(), str(prog)), tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    import di

    trace = di.load(out)
    ev = trace.events.join(trace.locations.select("loc", "process", "rank"), on="loc")
    steps = ev.filter(pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"))
    assert steps.height == 3
    assert (steps.get_column("process") == "rank 0 torch.profiler").all()
    ops = ev.filter(pl.col("src_cat").cast(pl.String) == "cpu_op")
    assert ops.filter(pl.col("name").cast(pl.String).str.contains("mm")).height >= 12
    # same clock: the log writes of each step come after that step's start and inside the program's I/O span
    writes = ev.filter((pl.col("cat") == "io") & (pl.col("name").cast(pl.String) == "write"))
    io_span = ev.filter(pl.col("cat") == "io").select(pl.col("start_ns").min(), pl.col("end_ns").max()).row(0)
    assert io_span[0] <= steps.get_column("start_ns").min() and steps.get_column("end_ns").max() <= io_span[1]
    assert writes.height >= 3
    first_step_end = steps.sort("start_ns").get_column("end_ns")[0]
    assert writes.filter(pl.col("start_ns") > first_step_end).height >= 3
    assert any(s.get("path", "").endswith("trace.json") for s in trace.meta["sources"])
    assert np.all(ev.get_column("rank").to_numpy() == 0)


STANDIN_CUPTI = '''
"""Stand-in for cupti-python's `cupti.cupti` bindings (the names di calls), for machines without a GPU.
MODE "conflict": registering callbacks fails as CUPTI does when another subscriber holds it.
MODE "ok": activity_flush_all hands FIXTURE (set by the test) to the registered completion callback.
MODE "binding 12": as cupti-python 12.x, which raises NotImplementedError for the RUNTIME kind."""
import enum
MODE = "ok"
FIXTURE = []
LIBCUPTI = None  # a library named libcupti.so.*, loaded at registration as the real binding loads libcupti
enabled = []


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    MARKER = 12
    SYNCHRONIZATION = 38


class CallbackDomain(enum.IntEnum):
    DRIVER_API = 1
    RUNTIME_API = 2


class ActivityThreadIdType(enum.IntEnum):
    DEFAULT = 0
    SYSTEM = 1


class Result(enum.IntEnum):
    ERROR_NOT_INITIALIZED = 15
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39


class cuptiError(Exception):
    """As cupti-python's: cuptiError(status), str "NAME (value)", .status."""

    def __init__(self, status):
        self.status = status
        super().__init__(f"{Result(status).name} ({status})")


thread_id_type = []


def set_thread_id_type(kind):
    thread_id_type.append(int(kind))


_callbacks = None


def activity_register_callbacks(requested, completed):
    global _callbacks
    if MODE == "conflict":
        raise cuptiError(Result.ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    if LIBCUPTI:
        import ctypes
        ctypes.CDLL(LIBCUPTI)
    _callbacks = (requested, completed)


def activity_enable(kind):
    if MODE == "binding 12" and kind == ActivityKind.RUNTIME:
        raise NotImplementedError("Activity Kind RUNTIME not supported")
    enabled.append(int(kind))


def activity_disable(kind):
    enabled.remove(int(kind))


def get_callback_name(domain, cbid):
    return {211: "cudaLaunchKernel_v7000", 31: "cudaMemcpyAsync_v3020", 46: "cudaMemsetAsync_v3020",
            165: "cudaDeviceSynchronize_v3020"}[cbid]


CLOCK_BASE = None  # when set, get_timestamp is CLOCK_MONOTONIC + CLOCK_BASE (else the real clock)


def get_timestamp():
    import time
    if CLOCK_BASE is None:
        return time.clock_gettime_ns(time.CLOCK_REALTIME)
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) + CLOCK_BASE


def activity_flush_all(flag):
    size, _ = _callbacks[0]()
    assert size > 0
    _callbacks[1](list(FIXTURE))
'''


@pytest.fixture
def standin_cupti(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    pkg = tmp_path / "standin" / "cupti"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cupti.py").write_text(STANDIN_CUPTI)
    monkeypatch.syspath_prepend(str(tmp_path / "standin"))
    for name in [m for m in sys.modules if m == "cupti" or m.startswith("cupti.")]:
        monkeypatch.delitem(sys.modules, name)  # the real package, where installed: back after the test
    from cupti import cupti as mod

    yield mod
    for name in ("cupti", "cupti.cupti"):
        sys.modules.pop(name, None)


def test_cupti_subscriber_conflict_is_reported_not_raised(tmp_path: Path, standin_cupti) -> None:  # noqa: ANN001
    standin_cupti.MODE = "conflict"
    run_dir = tmp_path / "run.di"
    cap = cupti.GpuCapture(run_dir / "raw")
    assert cap.start() is False
    cap.stop()
    header = json.loads(next((run_dir / "raw").glob("cupti-*.json")).read_text())
    assert header["state"] == "unavailable"
    assert header["notes"] == [
        f"CUPTI capture skipped: {cupti.CONFLICT_HINT} (ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39))"
    ]
    trace, _ = ingest(run_dir)
    assert sum("another CUPTI subscriber" in w for w in trace.meta["warnings"]) == 1


def test_cupti_capture_start_flush_stop(tmp_path: Path, standin_cupti, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the stand-in libcupti")
    lib = tmp_path / "lib" / "libcupti.so.13"
    lib.parent.mkdir()
    (tmp_path / "lib" / "empty.c").write_text("int di_standin_cupti;\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "lib" / "empty.c")], check=True, timeout=60)
    standin_cupti.LIBCUPTI = str(lib)
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "")
    monkeypatch.delenv("NVTX_INJECTION64_PATH")  # start() sets it; undone after the test
    standin_cupti.FIXTURE = activity(make_plain)
    run_dir = tmp_path / "run.di"
    with cupti.GpuCapture(run_dir / "raw") as cap:
        assert cap.header["state"] == "recording"
        assert sorted(standin_cupti.enabled) == sorted(
            int(getattr(standin_cupti.ActivityKind, n)) for n in records.CUPTI_KINDS
        )
    assert standin_cupti.enabled == []  # disabled at stop
    header = json.loads(next((run_dir / "raw").glob("cupti-*.json")).read_text())
    assert (
        header["state"] == "stopped" and header["records"] == len(standin_cupti.FIXTURE) - 1
    )  # the deprecated KERNEL kind skipped
    assert header["callback_cpu_ns"] > 0  # the buffer callback's cost is kept (bench/gpu_check reports it per record)
    trace, _ = ingest(run_dir)
    assert trace.events.filter(pl.col("cat") == "kernel").height == STEPS
    assert trace.flows.height == 3 * STEPS
    assert standin_cupti.thread_id_type == [1]  # OS thread ids, as the shims record
    assert json.loads(next((run_dir / "raw").glob("cupti-*.json")).read_text())["notes"] == []
    assert os.environ["NVTX_INJECTION64_PATH"] == str(lib)  # NVTX ranges go to the libcupti CUPTI loaded


def test_cupti_binding_without_runtime_kind_records_the_rest(tmp_path: Path, standin_cupti) -> None:  # noqa: ANN001
    standin_cupti.MODE = "binding 12"
    standin_cupti.FIXTURE = [r for r in activity(make_plain) if r.kind != 5]  # no RUNTIME records then
    run_dir = tmp_path / "run.di"
    with cupti.GpuCapture(run_dir / "raw") as cap:
        assert cap.header["state"] == "recording"
    header = json.loads(next((run_dir / "raw").glob("cupti-*.json")).read_text())
    assert len(header["notes"]) == 1 and header["notes"][0].startswith("CUPTI capture without RUNTIME activity")
    trace, _ = ingest(run_dir)
    assert trace.events.filter(pl.col("cat") == "kernel").height == STEPS
    assert sum("without RUNTIME" in w for w in trace.meta["warnings"]) == 1


def test_loaded_libcupti_is_read_from_the_process_maps(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f20-7f30 r-xp 00000000 08:01 13 /opt/site packages/nvidia/cu13/lib/libcupti.so.13\n"
        "7f40-7f50 rw-p 00000000 00:00 0 [heap]\n"
    )
    assert cupti.loaded_libcupti(str(maps)) == "/opt/site packages/nvidia/cu13/lib/libcupti.so.13"
    maps.write_text("7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    assert cupti.loaded_libcupti(str(maps)) is None


def test_cupti_times_map_through_cuptis_own_clock(tmp_path: Path, standin_cupti) -> None:  # noqa: ANN001
    """Records are placed with CUPTI's timestamp read beside CLOCK_MONOTONIC at start, not by assuming
    CUPTI counts from CLOCK_REALTIME's base: here CUPTI's clock is CLOCK_MONOTONIC + BASE."""
    standin_cupti.CLOCK_BASE = BASE
    standin_cupti.FIXTURE = activity(make_plain)
    run_dir = tmp_path / "run.di"
    with cupti.GpuCapture(run_dir / "raw") as cap:
        clock = cap.header["clock"]
        assert abs(clock["cupti_ns"] - clock["cupti_monotonic_ns"] - BASE) < 50_000_000
    trace, _ = ingest(run_dir)
    starts = trace.events.filter(pl.col("cat") == "kernel").sort("start_ns").get_column("start_ns").to_list()
    want = [8_000 + 100_000 * s for s in range(STEPS)]  # CUPTI's BASE + x is monotonic x (within the reads' gap)
    assert all(abs(a - b) < 50_000_000 for a, b in zip(starts, want, strict=True)), (starts, want)
    assert starts[1] - starts[0] == 100_000
