"""The NCCL profiler plugin: it compiles against the nvidia-nccl wheel's nccl.h, and when
driven exactly as NCCL drives it (tests/programs/nccl_profiler_driver.c: init with the
activation mask, collective and p2p events around the enqueue, kernel-channel children
reported later from another thread, a proxy op, finalize) by two processes sharing one
communicator hash, ingest matches the collectives across ranks and takes each op's
completion from its kernel-channel events."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from di.capture import build, gpu_setup, shard
from di.capture.ingest import ingest
from di.errors import MissingDependencyError

PROGRAMS = Path(__file__).resolve().parent / "programs"
KERNEL_NS = 5_000_000  # the driver's KERNEL_US: host time between a kernel channel's start and stop
GPU_NS = 4000  # the driver's GPU_NS: GPU-timer duration of every kernel channel


def _headers() -> tuple[Path, Path]:
    try:
        return build.find_nccl_include(), build.find_cuda_include()
    except MissingDependencyError as exc:
        pytest.skip(f"no nccl.h to compile against: {exc}")


def test_plugin_compiles_against_nccl_h_and_exports_the_profiler_structs() -> None:
    _headers()
    lib = build.nccl_plugin()
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    for sym in ("ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"):
        assert f" D {sym}\n" in out, sym


def _driver(tmp_path: Path) -> Path:
    nccl, cuda = _headers()
    driver = tmp_path / "driver"
    subprocess.run([build.find_cc(), "-O1", f"-I{build.SHIM_DIR}", f"-I{nccl}", f"-I{cuda}", "-o", str(driver),
                    str(PROGRAMS / "nccl_profiler_driver.c"), "-ldl", "-lpthread"], check=True)
    return driver


def _job(tmp_path: Path, api: int, preload: str = "", rounds: int = 1) -> Path:
    driver, plugin = _driver(tmp_path), build.nccl_plugin()
    run = tmp_path / "run.di"
    (run / "raw").mkdir(parents=True)
    env = {**os.environ, "DI_CAPTURE_DIR": str(run / "raw")}
    if preload:
        env["LD_PRELOAD"] = preload
    procs = [subprocess.Popen([str(driver), str(plugin), str(api), str(rounds)], env={**env, "RANK": str(r)}, stdout=subprocess.PIPE,
                              text=True) for r in (0, 1)]
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and "done" in out, out
        assert "mask 78\n" in out  # Coll | P2p | ProxyOp | KernelCh
    return run


@pytest.mark.parametrize("api", [4, 5, 6])
def test_plugin_ops_become_matched_collectives_completed_by_kernel_channels(tmp_path: Path, api: int) -> None:
    run = _job(tmp_path, api)
    trace, _ = ingest(run)
    trace.validate()
    ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    locs = trace.locations.select("loc", "kind", loc_name="name")
    coll = (trace.collectives.join(ev.select(event="row", loc="loc", start_ns="start_ns", end_ns="end_ns", name="name",
                                             src_cat="src_cat", args="args"), on="event").join(locs, on="loc"))
    per = coll.group_by("instance").agg(pl.col("rank").sort(), pl.col("op").first(), pl.col("bytes").first(),
                                        pl.col("dtype").first(), pl.col("start_ns").min()).sort("start_ns")
    assert per.get_column("rank").to_list() == [[0, 1]] * 5  # matched across both ranks
    assert per.get_column("op").to_list() == ["allreduce"] * 3 + ["broadcast", "allgather"]
    assert per.get_column("bytes").to_list() == [4000] * 3 + [2048, 10]
    assert per.get_column("dtype").to_list() == ["ncclFloat32"] * 3 + ["ncclFloat64", "ncclInt8"]
    # every collective row is the op's kernel execution, on the rank's NCCL kernels timeline
    assert set(coll.get_column("loc_name")) == {"NCCL kernels"} and set(coll.get_column("kind")) == {"gpu_stream"}
    assert (coll.get_column("src_cat").cast(pl.String) == "nccl_kernel").all()
    # completion comes from the kernel channels: the enqueue (flow source) ended at least a
    # kernel's run before, and the GPU timer's duration is kept
    flows = trace.flows.filter(pl.col("kind") == "launch").join(ev.select(src="row", enq_start="start_ns", enq_end="end_ns",
                                                                          enq_name="name", enq_args="args"), on="src")
    gpu = ev.join(flows, left_on="row", right_on="dst").filter(pl.col("src_cat") == "nccl_kernel")
    assert gpu.height == 2 * 6  # 5 collectives and the p2p, per rank
    assert (gpu.get_column("name") == gpu.get_column("enq_name")).all()
    assert (gpu.get_column("end_ns") - gpu.get_column("enq_end") >= KERNEL_NS).all()
    assert (gpu.get_column("end_ns") - gpu.get_column("start_ns") >= KERNEL_NS).all()
    args = [json.loads(a) for a in gpu.get_column("args")]
    assert {a["gpu_ns"] for a in args} == {GPU_NS}
    assert [a["enqueue_to_completion_ns"] for a in args] == (gpu.get_column("end_ns") - gpu.get_column("enq_start")).to_list()
    enq = [json.loads(a) for a in gpu.filter(pl.col("name") == "ncclAllReduce").get_column("enq_args")]
    assert all(a["algo"] == "Ring" and a["proto"] == "Simple" and a["channels"] == 2 for a in enq)
    p2p = sorted(gpu.filter(pl.col("name").cast(pl.String).is_in(["ncclSend", "ncclRecv"])).get_column("name").cast(pl.String))
    assert p2p == ["ncclRecv", "ncclSend"]
    assert trace.meta["capture"]["nccl"] == {"path": "profiler_plugin", "processes": {"profiler_plugin": 2}, "profiler_api": [api]}
    # the send/recv pair is a message between the two kernel executions
    msg = trace.messages.join(ev.select(send="row", send_loc="loc"), on="send").join(ev.select(recv="row", recv_loc="loc"), on="recv")
    assert msg.select("src_rank", "dst_rank", "bytes").rows() == [(0, 1, 400)]
    kernel_locs = set(trace.locations.filter(pl.col("name") == "NCCL kernels").get_column("loc"))
    assert {msg.get_column("send_loc")[0], msg.get_column("recv_loc")[0]} <= kernel_locs
    # the proxy op of another process (PXN) was not followed to its parent
    procs, _ = shard.read_raw(run / "raw")
    for p in procs:
        work = np.concatenate(list(p.threads.values()))
        work = work[work["kind"] == shard.KIND_NCCL_WORK]
        assert int((work["tag"] == 1).sum()) == 1 and work.size == 2 * 3 + 3 + 1
        assert p.header["nccl_path"] == "profiler_plugin" and p.header["profiler_api"] == api


def test_plugin_puts_the_preload_shim_on_standby(tmp_path: Path) -> None:
    run = _job(tmp_path, 5, preload=str(build.nccl_shim()))
    headers = [json.loads(p.read_text()) for p in (run / "raw").glob("nccl-*.json")]
    assert len(headers) == 2 and {h["nccl_path"] for h in headers} == {"standby"}
    assert not list((run / "raw").glob("nccl-*.bin"))  # the shim recorded nothing
    trace, _ = ingest(run)
    assert trace.collectives.height == 10 and trace.meta["capture"]["nccl"]["path"] == "profiler_plugin"


def test_record_chooses_the_path_by_nccl_version(monkeypatch: pytest.MonkeyPatch) -> None:
    _headers()
    monkeypatch.delenv("NCCL_PROFILER_PLUGIN", raising=False)
    found = build.nccl_version()
    env, libs, note = gpu_setup.nccl_capture()
    assert libs == [str(build.nccl_shim())]  # the fallback is always there
    if found is None or found[0] >= build.PROFILER_PLUGIN_MIN_VERSION:
        assert env == {"NCCL_PROFILER_PLUGIN": str(build.nccl_plugin())} and note == ""
    else:
        assert env == {} and "predates" in note
    monkeypatch.setenv("NCCL_PROFILER_PLUGIN", "/elsewhere/libnccl-profiler.so")
    env, libs, note = gpu_setup.nccl_capture()
    assert env == {} and "already set" in note


def test_ops_without_kernel_channel_events_are_counted_and_keep_their_enqueue(tmp_path: Path) -> None:
    run = _job(tmp_path, 6)
    for path in (run / "raw").glob("nccl_plugin-*-*-*.bin"):  # drop the "proxy" threads' work records
        recs = np.fromfile(path, shard.RECORD)
        if (recs["kind"] == shard.KIND_NCCL_WORK).any():
            path.unlink()
    trace, _ = ingest(run)
    trace.validate()
    assert trace.collectives.height == 10
    assert any(w.startswith("nccl: 12 of 12 NCCL ops have no kernel-channel") for w in trace.meta["warnings"]), trace.meta["warnings"]
    rows = trace.events[trace.collectives.get_column("event").to_list()]
    assert (rows.get_column("src_cat").cast(pl.String) == "nccl").all()  # the enqueue events, on the calling threads
    assert not trace.locations.filter(pl.col("name") == "NCCL kernels").height


def test_plugin_loaded_again_keeps_what_it_recorded(tmp_path: Path) -> None:
    run = _job(tmp_path, 5, rounds=2)  # NCCL closes the plugin with its last communicator, then loads it again
    trace, _ = ingest(run)
    per = trace.collectives.group_by("instance").agg(pl.col("rank").sort(), pl.col("comm").first())
    assert per.height == 10 and per.get_column("rank").to_list() == [[0, 1]] * 10
    assert per.get_column("comm").n_unique() == 2  # one communicator per round
