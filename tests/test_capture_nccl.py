"""NCCL capture without a GPU: the LD_PRELOAD shim and the profiler plugin compile against the
nccl.h of the nvidia-nccl wheel (or the system's), and their records become matched
``collectives`` rows.

The shim's calls go to a stand-in NCCL library built here from tests/programs/nccl_standin.c
(NCCL's signatures from the same nccl.h; like NCCL 2.26+ it also loads the profiler plugin),
driven by two processes of tests/programs/nccl_driver.c. The plugin is also driven exactly as
NCCL drives it by tests/programs/nccl_profiler_driver.c (init with the activation mask,
collective and p2p events around the enqueue, kernel-channel children reported later from
another thread, a proxy op, finalize) from two processes sharing one communicator hash:
ingest matches the collectives across ranks and takes each op's completion from its
kernel-channel events."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from di.capture import build, gpu_setup, shard
from di.capture.ingest import ingest
from di.errors import MissingDependencyError

PROGRAMS = Path(__file__).resolve().parent / "programs"
KERNEL_NS = 5_000_000  # nccl_profiler_driver's KERNEL_US: host time between a kernel channel's start and stop
GPU_NS = 4000  # nccl_profiler_driver's GPU_NS: GPU-timer duration of every kernel channel


def _headers() -> tuple[Path, Path]:
    try:
        return build.find_nccl_include(), build.find_cuda_include()
    except MissingDependencyError as exc:
        pytest.skip(f"no nccl.h to compile against: {exc}")


def test_nccl_shim_compiles_against_nccl_h() -> None:
    _headers()
    lib = build.nccl_shim()
    assert lib.is_file()
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    for sym in (
        "ncclAllReduce",
        "ncclBroadcast",
        "ncclReduce",
        "ncclAllGather",
        "ncclReduceScatter",
        "ncclAlltoAll",
        "ncclSend",
        "ncclRecv",
        "ncclCommInitRank",
        "ncclCommInitRankConfig",
        "ncclCommSplit",
    ):
        assert f" T {sym}\n" in out, sym


def test_nccl_shim_compiles_with_the_cuda_stand_in_headers(tmp_path: Path) -> None:
    nccl, _cuda = _headers()
    proc = subprocess.run(
        [
            build.find_cc(),
            *build.CFLAGS,
            f"-I{build.SHIM_DIR}",
            f"-I{nccl}",
            f"-I{build.SHIM_DIR / 'cuda_standin'}",
            "-o",
            str(tmp_path / "s.so"),
            str(build.SHIM_DIR / "nccl.c"),
            "-ldl",
            "-lpthread",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def _job(tmp_path: Path, env: dict[str, str] | None = None) -> Path:
    nccl, cuda = _headers()
    cc = build.find_cc()
    inc = [f"-I{nccl}", f"-I{cuda}"]
    standin = tmp_path / "libnccl.so"
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            f"-I{build.SHIM_DIR}",
            *inc,
            "-o",
            str(standin),
            str(PROGRAMS / "nccl_standin.c"),
            "-ldl",
        ],
        check=True,
    )
    driver = tmp_path / "driver"
    subprocess.run(
        [
            cc,
            "-O1",
            *inc,
            "-o",
            str(driver),
            str(PROGRAMS / "nccl_driver.c"),
            f"-L{tmp_path}",
            "-lnccl",
            f"-Wl,-rpath,{tmp_path}",
        ],
        check=True,
    )
    run = tmp_path / "run.di"
    raw = run / "raw"
    raw.mkdir(parents=True)
    shim = build.nccl_shim()
    procs = [
        subprocess.Popen(
            [str(driver)],
            env={**os.environ, **(env or {}), "RANK": str(r), "DI_CAPTURE_DIR": str(raw), "LD_PRELOAD": str(shim)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and "done" in out
    return run


def _instances(trace: Any) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Events with their row, collectives rows with their event's name/start/loc, and one row per instance."""
    ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    coll = trace.collectives.join(ev.select(event="row", name="name", start_ns="start_ns", loc="loc"), on="event")
    per = (
        coll.group_by("instance")
        .agg(
            pl.col("rank").sort(),
            pl.col("op").first(),
            pl.col("bytes").first(),
            pl.col("comm").first(),
            pl.col("root").first(),
            pl.col("start_ns").min(),
        )
        .sort("start_ns")
    )
    return ev, coll, per


def test_nccl_calls_become_matched_collectives(tmp_path: Path) -> None:
    trace, _ = ingest(_job(tmp_path))
    trace.validate()
    ev, coll, per = _instances(trace)
    nccl = ev.filter(pl.col("cat") == "nccl")
    assert nccl.height == 2 * (3 + 1 + 1 + 1 + 2 + 2)
    assert (nccl.get_column("src_cat").cast(pl.String) == "nccl").all()
    assert coll.height == 2 * 9  # the send/recv pair is not a collective
    solo = per.filter(pl.col("rank").list.len() == 1)  # each rank's own 1-rank communicator: 2 allreduces each
    assert sorted(solo.get_column("rank").to_list()) == [[0], [0], [1], [1]] and set(solo.get_column("bytes")) == {128}
    per = per.filter(pl.col("rank").list.len() == 2)
    coll = coll.filter(pl.col("group_size") == 2)
    assert per.get_column("rank").to_list() == [[0, 1]] * 7  # each instance matched across both ranks
    assert per.get_column("op").to_list() == ["allreduce"] * 3 + ["broadcast", "allgather"] + ["allreduce"] * 2
    assert per.get_column("bytes").to_list() == [4000] * 3 + [2048, 10, 128, 128]
    comms = per.get_column("comm").to_list()
    assert len(set(comms[:5])) == 1 and len(set(comms[5:])) == 1 and comms[0] != comms[5]
    assert all(c.startswith("nccl:") for c in comms)
    headers = [json.loads(p.read_text()) for p in (tmp_path / "run.di" / "raw").glob("nccl-*.json")]
    assert sorted(h["env_rank"] for h in headers) == [0, 1] and all(h["state"] == "exited" for h in headers)
    assert {h["nccl_path"] for h in headers} == {"preload_shim"}
    # communicator members come from every member's record: roots are world ranks, p2p pairs are messages
    assert per.get_column("root").to_list() == [None] * 3 + [1, None, None, None]
    assert coll.height == 2 * 7
    msg = trace.messages.join(ev.select(pl.col("row").cast(pl.Int64).alias("send"), send_name="name"), on="send")
    assert msg.select("src_rank", "dst_rank", "bytes", "tag").rows() == [(0, 1, 400, None)]
    assert msg.get_column("send_name").cast(pl.String).to_list() == ["ncclSend"]
    args = json.loads(ev.filter(pl.col("name") == "ncclBroadcast").get_column("args")[0])
    assert args == {"peer": 1, "comm": comms[0], "count": 256, "datatype": "ncclFloat64"}
    assert trace.meta["capture"]["nccl"] == {
        "path": "preload_shim",
        "processes": {"preload_shim": 2},
        "profiler_api": None,
    }


def test_shim_stands_by_for_the_plugin_but_keeps_one_rank_communicators(tmp_path: Path) -> None:
    """With the stand-in NCCL loading the profiler plugin (as NCCL 2.26+ does), the plugin
    records the 2-rank communicators and the preloaded shim only the 1-rank one that NCCL
    runs without its profiler: every call is recorded exactly once."""
    trace, _ = ingest(_job(tmp_path, {"NCCL_PROFILER_PLUGIN": str(build.nccl_plugin())}))
    trace.validate()
    ev, coll, per = _instances(trace)
    enqueues = ev.filter(pl.col("src_cat") == "nccl")
    assert enqueues.filter(pl.col("name") == "ncclAllReduce").height == 2 * (3 + 2 + 2)  # no call twice
    assert sorted(per.get_column("rank").to_list()) == [[0]] * 2 + [[0, 1]] * 7 + [[1]] * 2
    kernels = set(trace.locations.filter(pl.col("name") == "NCCL kernels").get_column("loc"))
    two = coll.filter(pl.col("group_size") == 2)
    assert two.height == 14 and set(two.get_column("loc")) <= kernels  # plugin: completion from its kernel channel
    one = coll.filter(pl.col("group_size") == 1)
    assert one.height == 4 and not set(one.get_column("loc")) & kernels  # shim: the enqueue call
    headers = [json.loads(p.read_text()) for p in (tmp_path / "run.di" / "raw").glob("nccl-*.json")]
    assert {h["nccl_path"] for h in headers} == {"standby"}
    assert trace.meta["capture"]["nccl"] == {
        "path": "mixed",
        "processes": {"preload_shim": 2, "profiler_plugin": 2},
        "profiler_api": [5],
    }


def test_plugin_compiles_against_nccl_h_and_exports_the_profiler_structs() -> None:
    _headers()
    lib = build.nccl_plugin()
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
    for sym in ("ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"):
        assert f" D {sym}\n" in out, sym


def _plugin_driver(tmp_path: Path) -> Path:
    nccl, cuda = _headers()
    driver = tmp_path / "driver"
    subprocess.run(
        [
            build.find_cc(),
            "-O1",
            f"-I{build.SHIM_DIR}",
            f"-I{nccl}",
            f"-I{cuda}",
            "-o",
            str(driver),
            str(PROGRAMS / "nccl_profiler_driver.c"),
            "-ldl",
            "-lpthread",
        ],
        check=True,
    )
    return driver


def _plugin_job(tmp_path: Path, api: int, preload: str = "", rounds: int = 1) -> Path:
    driver, plugin = _plugin_driver(tmp_path), build.nccl_plugin()
    run = tmp_path / "run.di"
    (run / "raw").mkdir(parents=True)
    env = {**os.environ, "DI_CAPTURE_DIR": str(run / "raw")}
    if preload:
        env["LD_PRELOAD"] = preload
    procs = [
        subprocess.Popen(
            [str(driver), str(plugin), str(api), str(rounds)],
            env={**env, "RANK": str(r)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and "done" in out, out
        assert "mask 78\n" in out  # Coll | P2p | ProxyOp | KernelCh
    return run


@pytest.mark.parametrize("api", [4, 5, 6])
def test_plugin_ops_become_matched_collectives_completed_by_kernel_channels(tmp_path: Path, api: int) -> None:
    run = _plugin_job(tmp_path, api)
    trace, _ = ingest(run)
    trace.validate()
    ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    locs = trace.locations.select("loc", "kind", loc_name="name")
    coll = trace.collectives.join(
        ev.select(
            event="row", loc="loc", start_ns="start_ns", end_ns="end_ns", name="name", src_cat="src_cat", args="args"
        ),
        on="event",
    ).join(locs, on="loc")
    per = (
        coll.group_by("instance")
        .agg(
            pl.col("rank").sort(),
            pl.col("op").first(),
            pl.col("bytes").first(),
            pl.col("dtype").first(),
            pl.col("start_ns").min(),
        )
        .sort("start_ns")
    )
    assert per.get_column("rank").to_list() == [[0, 1]] * 5  # matched across both ranks
    assert per.get_column("op").to_list() == ["allreduce"] * 3 + ["broadcast", "allgather"]
    assert per.get_column("bytes").to_list() == [4000] * 3 + [2048, 10]
    assert per.get_column("dtype").to_list() == ["ncclFloat32"] * 3 + ["ncclFloat64", "ncclInt8"]
    # every collective row is the op's kernel execution, on the rank's NCCL kernels timeline
    assert set(coll.get_column("loc_name")) == {"NCCL kernels"} and set(coll.get_column("kind")) == {"gpu_stream"}
    assert (coll.get_column("src_cat").cast(pl.String) == "nccl_kernel").all()
    # completion comes from the kernel channels: the enqueue (flow source) ended at least a
    # kernel's run before, and the GPU timer's duration is kept
    flows = trace.flows.filter(pl.col("kind") == "launch").join(
        ev.select(src="row", enq_start="start_ns", enq_end="end_ns", enq_name="name", enq_args="args"), on="src"
    )
    gpu = ev.join(flows, left_on="row", right_on="dst").filter(pl.col("src_cat") == "nccl_kernel")
    assert gpu.height == 2 * 6  # 5 collectives and the p2p, per rank
    assert (gpu.get_column("name") == gpu.get_column("enq_name")).all()
    assert (gpu.get_column("end_ns") - gpu.get_column("enq_end") >= KERNEL_NS).all()
    assert (gpu.get_column("end_ns") - gpu.get_column("start_ns") >= KERNEL_NS).all()
    args = [json.loads(a) for a in gpu.get_column("args")]
    assert {a["gpu_ns"] for a in args} == {GPU_NS}
    assert [a["enqueue_to_completion_ns"] for a in args] == (
        gpu.get_column("end_ns") - gpu.get_column("enq_start")
    ).to_list()
    enq = [json.loads(a) for a in gpu.filter(pl.col("name") == "ncclAllReduce").get_column("enq_args")]
    assert all(a["algo"] == "Ring" and a["proto"] == "Simple" and a["channels"] == 2 for a in enq)
    p2p = sorted(
        gpu.filter(pl.col("name").cast(pl.String).is_in(["ncclSend", "ncclRecv"])).get_column("name").cast(pl.String)
    )
    assert p2p == ["ncclRecv", "ncclSend"]
    assert trace.meta["capture"]["nccl"] == {
        "path": "profiler_plugin",
        "processes": {"profiler_plugin": 2},
        "profiler_api": [api],
    }
    # the send/recv pair is a message between the two kernel executions
    msg = trace.messages.join(ev.select(send="row", send_loc="loc"), on="send").join(
        ev.select(recv="row", recv_loc="loc"), on="recv"
    )
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
    run = _plugin_job(tmp_path, 5, preload=str(build.nccl_shim()))
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
    run = _plugin_job(tmp_path, 6)
    for path in (run / "raw").glob("nccl_plugin-*-*-*.bin"):  # drop the "proxy" threads' work records
        recs = np.fromfile(path, shard.RECORD)
        if (recs["kind"] == shard.KIND_NCCL_WORK).any():
            path.unlink()
    trace, _ = ingest(run)
    trace.validate()
    assert trace.collectives.height == 10
    assert any(w.startswith("nccl: 12 of 12 NCCL ops have no kernel-channel") for w in trace.meta["warnings"]), (
        trace.meta["warnings"]
    )
    rows = trace.events[trace.collectives.get_column("event").to_list()]
    assert (rows.get_column("src_cat").cast(pl.String) == "nccl").all()  # the enqueue events, on the calling threads
    assert not trace.locations.filter(pl.col("name") == "NCCL kernels").height


def test_plugin_loaded_again_keeps_what_it_recorded(tmp_path: Path) -> None:
    run = _plugin_job(tmp_path, 5, rounds=2)  # NCCL closes the plugin with its last communicator, then loads it again
    trace, _ = ingest(run)
    per = trace.collectives.group_by("instance").agg(pl.col("rank").sort(), pl.col("comm").first())
    assert per.height == 10 and per.get_column("rank").to_list() == [[0, 1]] * 10
    assert per.get_column("comm").n_unique() == 2  # one communicator per round
