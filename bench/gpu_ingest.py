"""Ingest speed of CUPTI activity: a synthetic recording of N kernels (each with its
launch API call) and N/4 memcpys on 4 streams, ingested with `di record --ingest`
cold (empty numba cache) and warm; plus the in-process CPU cost of the buffer callback's
record conversion (:func:`di.capture.cupti_records.to_records`) per record (``python bench/gpu_ingest.py
callback`` measures only that).

usage: python bench/gpu_ingest.py [N]   -> bench/out/gpu_ingest.json
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from di.capture import cupti
from di.capture import cupti_records as records

N = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1_000_000
REPO = Path(__file__).resolve().parents[1]


def synth(raw: Path, n: int) -> None:
    cap = cupti.GpuCapture(raw)
    raw.mkdir(parents=True, exist_ok=True)
    cap.header["clock"] = {"realtime_ns": 1_790_000_000_000_000_000, "monotonic_ns": 0}
    cap.header["state"] = "stopped"
    cap.write_header()
    names = [cap._intern(f"kernel_{i}") for i in range(50)]
    api = cap._intern("cudaLaunchKernel_v7000")
    t = 1_790_000_000_000_000_000 + np.arange(n, dtype=np.int64) * 20_000
    k = np.zeros(n, records.GPU_RECORD)
    k["kind"], k["t0"], k["t1"], k["corr"] = records.K_KERNEL, t + 5_000, t + 15_000, np.arange(1, n + 1)
    k["stream"], k["name"], k["grid"], k["block"] = np.arange(n) % 4, np.array(names)[np.arange(n) % 50], 64, 256
    a = np.zeros(n, records.GPU_RECORD)
    a["kind"], a["t0"], a["t1"], a["corr"], a["tid"], a["name"] = (
        records.K_RUNTIME,
        t,
        t + 3_000,
        np.arange(1, n + 1),
        7,
        api,
    )
    m = np.zeros(n // 4, records.GPU_RECORD)
    m["kind"], m["t0"], m["t1"], m["bytes"], m["sub"], m["stream"] = (
        records.K_MEMCPY,
        t[::4][: n // 4] + 16_000,
        t[::4][: n // 4] + 19_000,
        1 << 20,
        1,
        5,
    )
    cap.append(np.concatenate([a, k, m]))


def ingest_time(run: Path, cache: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": cache}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "di", "record", "--ingest", "-o", str(run)], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - t0


def callback_cost(n: int = 100_000) -> dict[str, float]:
    """CPU microseconds per record of the buffer callback's conversion (best of 3), for a buffer of
    kernels only and for a mixed buffer (per kernel its launch API record, a memcpy per 4 kernels)."""
    kinds = {10: records.K_KERNEL, 5: records.K_RUNTIME, 1: records.K_MEMCPY}
    kernels = [
        SimpleNamespace(
            kind=10,
            start=i,
            end=i + 5,
            correlation_id=i,
            device_id=0,
            context_id=1,
            stream_id=7,
            name=f"kernel_{i % 50}",
            grid_x=64,
            grid_y=1,
            grid_z=1,
            block_x=256,
            block_y=1,
            block_z=1,
        )
        for i in range(n)
    ]
    mixed = []
    for i, k in enumerate(kernels):
        mixed += [SimpleNamespace(kind=5, start=i, end=i + 2, correlation_id=i, cbid=211, thread_id=7), k]
        if i % 4 == 0:
            mixed.append(
                SimpleNamespace(
                    kind=1,
                    start=i,
                    end=i + 9,
                    correlation_id=i,
                    device_id=0,
                    context_id=1,
                    stream_id=5,
                    bytes=1 << 20,
                    copy_kind=1,
                )
            )
    out = {}
    for label, buffer in (("kernels", kernels), ("mixed", mixed)):
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            records.to_records(buffer, lambda k: kinds.get(k, 0), lambda s: 1, lambda k, c: "cudaLaunchKernel")
            best = min(best, time.process_time() - t0)
        out[f"callback_cpu_us_per_record_{label}"] = best / len(buffer) * 1e6
    return out


def main() -> None:
    out = {"records": int(N * 2 + N // 4)}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.di"
        synth(run / "raw", N)
        cache = str(Path(tmp) / "numba")
        out["ingest_cold_s"] = ingest_time(run, cache)
        out["ingest_warm_s"] = ingest_time(run, cache)
        out["store_bytes"] = sum(p.stat().st_size for p in run.glob("*.parquet"))
        out.update(callback_cost())
    Path(REPO / "bench" / "out").mkdir(exist_ok=True)
    (REPO / "bench" / "out" / "gpu_ingest.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    if sys.argv[1:] == ["callback"]:
        print(json.dumps(callback_cost(), indent=1))
    else:
        main()
