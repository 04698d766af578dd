"""Ingest speed of NCCL profiler-plugin shards: a synthetic 2-rank recording of N allreduces per
rank (each with its enqueue CALL record and 2 kernel-channel NCCL_WORK records, written by a
second thread as the plugin's are), ingested with `di record --ingest` cold (empty numba cache)
and warm, in wall and CPU (children) seconds.

usage: python bench/nccl_ingest.py [N]   -> bench/out/nccl_ingest.json
"""

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from di.capture import shard

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
REPO = Path(__file__).resolve().parents[1]
COMM = (1 << 62) | 0x5EED  # an NCCL communicator id
OP = shard.op_names().index("ncclAllReduce")


def shards(raw: Path, n: int) -> None:
    host = socket.gethostname().replace("-", "_")
    for rank in (0, 1):
        pid, proxy = 1000 + rank, 2000 + rank
        header = {
            "format": "di-shard",
            "version": 1,
            "lib": "nccl_plugin",
            "host": host,
            "pid": pid,
            "rank": -1,
            "env_rank": rank,
            "world_size": 0,
            "state": "exited",
            "record_bytes": 64,
            "nccl_path": "profiler_plugin",
            "profiler_api": 5,
            "clock": {
                "id": "CLOCK_MONOTONIC",
                "ticks": "ns",
                "now_ns": 0,
                "now_ticks": 0,
                "realtime_ns": 1_790_000_000_000_000_000,
            },
        }
        (raw / f"nccl_plugin-{host}-{pid}.json").write_text(json.dumps(header))
        (raw / f"nccl_plugin-{host}-{pid}.str").write_bytes(
            b"".join(np.array([i, len(s)], "<u4").tobytes() + s for i, s in ((1, b"Ring"), (2, b"Simple")))
        )
        t = np.arange(n, dtype=np.int64) * 50_000 + 1_000_000 + rank * 3_000
        calls = np.zeros(n + 1, shard.RECORD)
        calls["kind"][0], calls["comm"][0], calls["peer"][0], calls["tag"][0] = shard.KIND_COMM, COMM, rank, 2
        c = calls[1:]
        c["kind"], c["op"], c["peer"], c["t0"], c["t1"], c["bytes"], c["comm"] = (
            shard.KIND_CALL,
            OP,
            -1,
            t,
            t + 4_000,
            4096,
            COMM,
        )
        c["tag"], c["aux"], c["req"] = 1024, 7, np.arange(1, n + 1)
        c["aux2"] = 4 | (1 << 16) | (2 << 32) | (2 << 48)
        calls.tofile(raw / f"nccl_plugin-{host}-{pid}-{pid}.bin")
        work = np.zeros(2 * n, shard.RECORD)
        work["kind"], work["op"], work["comm"], work["req"] = (
            shard.KIND_NCCL_WORK,
            OP,
            COMM,
            np.repeat(np.arange(1, n + 1), 2),
        )
        work["peer"] = np.tile([0, 1], n)
        work["t0"], work["t1"] = np.repeat(t + 10_000, 2), np.repeat(t + 40_000, 2)
        work["bytes"], work["aux2"] = 25_000, np.repeat(t, 2)
        work.tofile(raw / f"nccl_plugin-{host}-{pid}-{proxy}.bin")


def ingest_time(run: Path, cache: str) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": cache}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "di", "record", "--ingest", "-o", str(run)], env=env, check=True, capture_output=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    out: dict = {"ops_per_rank": N, "records": 2 * (3 * N + 1)}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.di"
        (run / "raw").mkdir(parents=True)
        shards(run / "raw", N)
        cache = str(Path(tmp) / "numba")
        out["ingest_cold_wall_s"], out["ingest_cold_cpu_s"] = ingest_time(run, cache)
        out["ingest_warm_wall_s"], out["ingest_warm_cpu_s"] = ingest_time(run, cache)
        import di

        trace = di.load(run)
        out["collectives"] = trace.collectives.height
        out["kernel_events"] = trace.events.filter(trace.events["src_cat"].cast(str) == "nccl_kernel").height
    Path(REPO / "bench" / "out").mkdir(exist_ok=True)
    (REPO / "bench" / "out" / "nccl_ingest.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
