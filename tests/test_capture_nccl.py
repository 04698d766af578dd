"""The NCCL shim: it compiles against the nccl.h of the nvidia-nccl wheel (or the system's),
and its records become matched ``collectives`` rows. Without a GPU, the calls go to a
stand-in NCCL library built here from tests/programs/nccl_standin.c (NCCL's signatures
from the same nccl.h), driven by two processes of tests/programs/nccl_driver.c."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from di.capture import build
from di.capture.ingest import ingest
from di.errors import MissingDependencyError

PROGRAMS = Path(__file__).resolve().parent / "programs"


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
    for sym in ("ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAllGather", "ncclReduceScatter", "ncclAlltoAll",
                "ncclSend", "ncclRecv", "ncclCommInitRank", "ncclCommInitRankConfig", "ncclCommSplit"):
        assert f" T {sym}\n" in out, sym


def test_nccl_shim_compiles_with_the_cuda_stand_in_headers(tmp_path: Path) -> None:
    nccl, _cuda = _headers()
    proc = subprocess.run([build.find_cc(), *build.CFLAGS, f"-I{build.SHIM_DIR}", f"-I{nccl}",
                           f"-I{build.SHIM_DIR / 'cuda_standin'}", "-o", str(tmp_path / "s.so"),
                           str(build.SHIM_DIR / "nccl.c"), "-ldl", "-lpthread"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _job(tmp_path: Path, env: dict[str, str] | None = None) -> Path:
    nccl, cuda = _headers()
    cc = build.find_cc()
    inc = [f"-I{nccl}", f"-I{cuda}"]
    standin = tmp_path / "libnccl.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", f"-I{build.SHIM_DIR}", *inc, "-o", str(standin), str(PROGRAMS / "nccl_standin.c"),
                    "-ldl"], check=True)
    driver = tmp_path / "driver"
    subprocess.run([cc, "-O1", *inc, "-o", str(driver), str(PROGRAMS / "nccl_driver.c"), f"-L{tmp_path}", "-lnccl",
                    f"-Wl,-rpath,{tmp_path}"], check=True)
    run = tmp_path / "run.di"
    raw = run / "raw"
    raw.mkdir(parents=True)
    shim = build.nccl_shim()
    procs = [subprocess.Popen([str(driver)], env={**os.environ, **(env or {}), "RANK": str(r), "DI_CAPTURE_DIR": str(raw),
                                                  "LD_PRELOAD": str(shim)},
                              stdout=subprocess.PIPE, text=True) for r in (0, 1)]
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0 and "done" in out
    return run


def _instances(trace: Any) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Events with their row, collectives rows with their event's name/start/loc, and one row per instance."""
    ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
    coll = trace.collectives.join(ev.select(event="row", name="name", start_ns="start_ns", loc="loc"), on="event")
    per = coll.group_by("instance").agg(pl.col("rank").sort(), pl.col("op").first(), pl.col("bytes").first(),
                                        pl.col("comm").first(), pl.col("root").first(), pl.col("start_ns").min()).sort("start_ns")
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
    assert trace.meta["capture"]["nccl"] == {"path": "preload_shim", "processes": {"preload_shim": 2}, "profiler_api": None}


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
    assert trace.meta["capture"]["nccl"] == {"path": "mixed", "processes": {"preload_shim": 2, "profiler_plugin": 2},
                                             "profiler_api": [5]}
