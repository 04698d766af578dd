"""Ingest speed of CUPTI activity: a synthetic recording of N kernels (each with its
launch API call) and N/4 memcpys on 4 streams, ingested with `di record --ingest`
cold (empty numba cache) and warm; plus the in-process cost of the buffer callback's
record conversion (:func:`di.capture.cupti.to_records`) per record.

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

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
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
    k = np.zeros(n, cupti.GPU_RECORD)
    k["kind"], k["t0"], k["t1"], k["corr"] = cupti.K_KERNEL, t + 5_000, t + 15_000, np.arange(1, n + 1)
    k["stream"], k["name"], k["grid"], k["block"] = np.arange(n) % 4, np.array(names)[np.arange(n) % 50], 64, 256
    a = np.zeros(n, cupti.GPU_RECORD)
    a["kind"], a["t0"], a["t1"], a["corr"], a["tid"], a["name"] = cupti.K_RUNTIME, t, t + 3_000, np.arange(1, n + 1), 7, api
    m = np.zeros(n // 4, cupti.GPU_RECORD)
    m["kind"], m["t0"], m["t1"], m["bytes"], m["sub"], m["stream"] = cupti.K_MEMCPY, t[::4][: n // 4] + 16_000, t[::4][: n // 4] + 19_000, 1 << 20, 1, 5
    cap.append(np.concatenate([a, k, m]))


def ingest_time(run: Path, cache: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": cache}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "di", "record", "--ingest", "-o", str(run)], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    out = {"records": int(N * 2 + N // 4)}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.di"
        synth(run / "raw", N)
        cache = str(Path(tmp) / "numba")
        out["ingest_cold_s"] = ingest_time(run, cache)
        out["ingest_warm_s"] = ingest_time(run, cache)
        out["store_bytes"] = sum(p.stat().st_size for p in run.glob("*.parquet"))
        objs = [SimpleNamespace(kind=10, start=i, end=i + 5, correlation_id=i, device_id=0, context_id=1, stream_id=7,
                                name="k", grid_x=1, grid_y=1, grid_z=1, block_x=1, block_y=1, block_z=1) for i in range(100_000)]
        t0 = time.perf_counter()
        cupti.to_records(objs, lambda k: cupti.K_KERNEL, lambda s: 1, lambda k, c: "")
        out["callback_us_per_record"] = (time.perf_counter() - t0) / len(objs) * 1e6
    Path(REPO / "bench" / "out").mkdir(exist_ok=True)
    (REPO / "bench" / "out" / "gpu_ingest.json").write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
