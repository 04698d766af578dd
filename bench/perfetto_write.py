"""Perfetto protobuf writer benchmark: slices/s and bytes/slice.

Run on demand (not a test)::

    python bench/perfetto_write.py [--slices 1000000 10000000] [--repeat 5] [--skip-cli]

For each size it builds a canonical trace in memory (8 ranks x 4 CPU threads
+ 4 GPU streams; on each timeline blocks of one slice holding three nested
ones; names from a pool of 256, every other slice with a correlation id, one
launch flow per 16 slices, no args), then times :func:`write_perfetto` in a
child process: the first call with the numba cache of this checkout (warm
kernels; "first"), then ``--repeat`` more times ("warm", what a long-running
process sees: the run of least CPU time, and the median). Reported: wall and
CPU seconds (``process_time``, all threads), slices/s by wall and per CPU
second (the two differ on a shared machine), bytes/slice, file size. Then,
for the smallest size, ``di convert STORE.di -o OUT.pftrace`` and then ``di
info OUT.pftrace`` (the reader) as CLI subprocesses, each with a fresh empty
``NUMBA_CACHE_DIR`` (cold: JIT compiles) and again with the cache it left
(warm). Targets from the issue: >= 3 M slices/s, <= 50 bytes per slice. A table goes to stdout and the numbers to ``bench/out/perfetto_write.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "perfetto_write.json"
TARGET_SLICES_PER_S = 3_000_000  # from the issue
TARGET_BYTES_PER_SLICE = 50  # from the issue

BUILD = r"""
import numpy as np, polars as pl
from di.trace import Trace, CATS

def build(n_slices):
    ranks, threads, streams = 8, 4, 4
    per_loc = ranks * (threads + streams)
    blocks = -(-n_slices // (4 * per_loc))
    locs = pl.DataFrame({
        "loc": np.arange(per_loc), "rank": np.repeat(np.arange(ranks), threads + streams),
        "kind": (["cpu_thread"] * threads + ["gpu_stream"] * streams) * ranks,
        "device": np.repeat(np.arange(ranks), threads + streams), "stream": np.tile(np.arange(threads + streams), ranks),
        "tid": np.tile(np.arange(threads + streams), ranks), "source": 0,
    })
    block_start = np.arange(blocks, dtype=np.int64) * 1000
    offs = np.array([[0, 1000], [10, 300], [310, 600], [610, 990]], dtype=np.int64)
    start = (block_start[:, None] + offs[None, :, 0]).ravel()
    end = (block_start[:, None] + offs[None, :, 1]).ravel()
    loc = np.repeat(np.arange(per_loc), len(start))
    start, end = np.tile(start, per_loc), np.tile(end, per_loc)
    n = len(start)
    rng = np.random.default_rng(0)
    pool = pl.Series([f"op_{k:03d}::forward" for k in range(256)])
    ev = pl.DataFrame({
        "loc": loc, "start_ns": 1_700_000_000_000_000_000 + start, "end_ns": 1_700_000_000_000_000_000 + end,
        "name": pool.gather(rng.integers(0, 256, n)).cast(pl.Categorical),
        "cat": pl.Series(np.array(CATS)[np.arange(n) % 4]).cast(pl.Enum(list(CATS))),
        "depth": np.tile([0, 1, 1, 1], n // 4).astype(np.int32), "instant": np.zeros(n, bool),
    }).with_columns(corr=pl.when(pl.int_range(pl.len()) % 2 == 0).then(pl.int_range(pl.len())))
    src = np.arange(1, n, 16)
    src = src[(loc[src] % (threads + streams)) < threads]
    dst = src + 4 * blocks * threads
    flows = pl.DataFrame({"src": src, "dst": dst, "kind": "launch", "id": src})
    return Trace.build(meta={}, locations=locs, events=ev, flows=flows)
"""

WRITE = (
    BUILD
    + r"""
import json, os, sys, time
from di.convert.perfetto.writer import write_perfetto
trace = build(int(sys.argv[1]))
times, cpus = [], []
for _ in range(1 + int(sys.argv[3])):
    if os.path.exists(sys.argv[2]):
        os.remove(sys.argv[2])  # not timed: freeing the last file's pages is not the writer's cost
    t, c = time.perf_counter(), time.process_time()
    write_perfetto(trace, sys.argv[2])
    times.append(time.perf_counter() - t)
    cpus.append(time.process_time() - c)
warm = sorted(range(1, len(cpus)), key=lambda k: cpus[k])
best, median = warm[0], warm[len(warm) // 2]
print(json.dumps({"slices": trace.events.height, "flows": trace.flows.height, "first_s": times[0], "warm_s": times[best],
                  "first_cpu_s": cpus[0], "warm_cpu_s": cpus[best], "median_warm_cpu_s": cpus[median],
                  "bytes": os.path.getsize(sys.argv[2])}))
"""
)

STORE = (
    BUILD
    + r"""
import sys, di
di.save(build(int(sys.argv[1])), sys.argv[2])
"""
)


def _run(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    if proc.returncode:
        raise SystemExit(proc.stderr)
    return proc.stdout


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slices", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--skip-cli", action="store_true", help="skip the cold/warm di convert runs")
    ap.add_argument("--repeat", type=int, default=5, help="warm writes per size (the least CPU time is reported)")
    args = ap.parse_args()
    results: dict[str, object] = {
        "targets": {"slices_per_s": TARGET_SLICES_PER_S, "bytes_per_slice": TARGET_BYTES_PER_SLICE},
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
    }
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.slices:
            r = json.loads(_run(WRITE, str(n), os.path.join(tmp, "t.pftrace"), str(max(args.repeat, 1)), env=_env()))
            r.update(
                first_slices_per_s=r["slices"] / r["first_s"],
                warm_slices_per_s=r["slices"] / r["warm_s"],
                warm_slices_per_cpu_s=r["slices"] / r["warm_cpu_s"],
                bytes_per_slice=r["bytes"] / r["slices"],
            )
            rows.append(r)
            os.remove(os.path.join(tmp, "t.pftrace"))
        results["write"] = rows
        if not args.skip_cli:
            store = os.path.join(tmp, "bench.di")
            _run(STORE, str(min(args.slices)), store, env=_env())
            out_file = os.path.join(tmp, "c.pftrace")
            commands = {"cli_convert": ["convert", store, "-o", out_file], "cli_info": ["info", out_file]}
            for key, command in commands.items():
                cli = {}
                cache = os.path.join(tmp, f"numba_cache_{key}")
                for label in ("cold", "warm"):
                    t = time.perf_counter()
                    proc = subprocess.run(
                        [sys.executable, "-m", "di", *command],
                        capture_output=True,
                        text=True,
                        env=_env(NUMBA_CACHE_DIR=cache),
                        cwd=REPO,
                        check=False,
                    )
                    if proc.returncode:
                        raise SystemExit(proc.stderr)
                    cli[f"{label}_s"] = time.perf_counter() - t
                results[key] = {"slices": min(args.slices), **cli}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1))
    print(f"load average {results['load_avg'][0]:.1f} on {results['cpus']} CPUs (wall times include waiting for a CPU)")
    print(
        f"{'slices':>12} {'first s':>8} {'warm s':>8} {'warm cpu s':>10} {'median':>7} {'M slices/s':>10} {'M/cpu-s':>8}"
        f" {'bytes/slice':>12}"
    )
    for r in rows:
        print(
            f"{r['slices']:>12,} {r['first_s']:>8.2f} {r['warm_s']:>8.2f} {r['warm_cpu_s']:>10.3f} {r['median_warm_cpu_s']:>7.3f} "
            f"{r['warm_slices_per_s'] / 1e6:>10.2f} {r['warm_slices_per_cpu_s'] / 1e6:>8.2f} {r['bytes_per_slice']:>12.1f}"
        )
    for key, what in (("cli_convert", "di convert STORE.di -o OUT.pftrace"), ("cli_info", "di info OUT.pftrace")):
        if key in results:
            c = results[key]
            print(f"{what} ({c['slices']:,} slices): cold {c['cold_s']:.1f} s, warm {c['warm_s']:.1f} s")
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
