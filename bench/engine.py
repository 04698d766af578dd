"""Engine benchmark: seconds and peak RSS of each analysis on a generated 64-rank job.

Run on demand (not a test)::

    python bench/engine.py [--ranks 64] [--steps 110] [--ops 500] [--repeat 1] [--skip-cli] [--hta-python PY]
    python bench/engine.py --skip-job --hta-python .venv-hta/bin/python   (only the HTA timings)

The job (generated with numpy, no per-event Python loop): per rank one CPU
thread and two GPU streams; per step a ProfilerStep, ``--ops`` CPU operators
(the first half ``aten::mm``, the second autograd's backward nodes, so that the training phases have a forward and a
backward to measure) each with a nested cudaLaunchKernel that launches a kernel on stream A, a
memcpy and an NCCL allreduce kernel on stream B (one collective instance per
step across all ranks), and a ring of MPI send/receive pairs with jitter (late
senders). Ranks run 0-10 % slow per step. 64 x 110 x (3 x 500 + 6) = 10.6 M events.

The trace is saved as a ``.di`` store; each analysis then runs in a fresh
child pinned to one core (``POLARS_MAX_THREADS=1``), which loads the store
and times only the analysis (the fastest of ``--repeat`` runs: on a shared
machine one run's CPU seconds vary by tens of percent); its peak RSS (``VmHWM``) includes the loaded
trace. ``all`` runs every analysis in one process as ``di analyze`` does.
Then ``di analyze STORE --json`` runs as a CLI subprocess with an empty
``NUMBA_CACHE_DIR`` (cold: JIT compiles) and again with the cache it left
(warm). Targets from the issue: all analyses < 30 s on one core, peak RSS
< 3 GB. With ``--hta-python`` (a Python with holistictraceanalysis, see
bench/hta_compare.py) HTA's times on the shared Kineto traces are compared
with ours (``bench/out/engine_hta.json``). Numbers go to ``bench/out/engine.json``.
Wall seconds depend on what else runs on the machine; ``cpu_s`` (process CPU
time) is the per-core cost.
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
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out" / "engine.json"
KINETO = REPO.parent / "shared" / "data" / "kineto"
TARGET_S, TARGET_RSS_GB = 30.0, 3.0  # from the issue
US = 1_000
OP_PERIOD, OP_DUR, KERNEL_DUR = 20 * US, 15 * US, 12 * US
sys.path.insert(0, str(REPO))
from di.engine import ANALYSES as ENGINE_ANALYSES  # noqa: E402

ANALYSES = ("prepare", *(a for a in ENGINE_ANALYSES if a != "counters"), "all")
"""Each analysis timed alone (the engine's, but counters: the job has no series), then all together."""

CHILD = r"""
import os, sys, time, json
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import di
from di.engine import analyze
from di.engine.window import prepare
which, store, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
trace = di.load(store)
sec = cpu = float("inf")
for _ in range(repeat):
    t0 = time.perf_counter(); c0 = time.process_time()
    if which == "prepare":
        prepare(trace)
    elif which == "all":
        analyze(trace)
    else:
        analyze(trace, analyses=(which,))
    sec = min(sec, time.perf_counter() - t0); cpu = min(cpu, time.process_time() - c0)
with open("/proc/self/status") as f:
    hwm = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
print(json.dumps({"seconds": sec, "cpu_s": cpu, "peak_rss_mb": hwm / 1024}))
"""


def generate(ranks: int, steps: int, ops: int, seed: int = 0) -> Any:
    """The benchmark job as a canonical Trace (see the module docstring)."""
    import polars as pl

    from di.nesting import nest
    from di.trace import Trace

    rng = np.random.default_rng(seed)
    slow = 1.0 + 0.1 * rng.random((ranks, steps))
    step_ns = int(ops * OP_PERIOD * 1.2 + 400 * US)
    t0 = (np.arange(steps, dtype=np.int64) * step_ns)[None, :]
    R = np.arange(ranks)[:, None]
    cpu, sa, sb = 3 * R, 3 * R + 1, 3 * R + 2
    i = np.arange(ops)[None, None, :]
    op_s = t0[..., None] + (i * OP_PERIOD * slow[..., None]).astype(np.int64)
    op_e = op_s + (OP_DUR * slow[..., None]).astype(np.int64)
    la_s, la_e = op_s + 2 * US, op_s + 5 * US
    k_s = la_e + 4 * US
    k_e = k_s + (KERNEL_DUR * slow[..., None]).astype(np.int64)
    enter = t0 + (ops * OP_PERIOD * slow).astype(np.int64) + 10 * US
    leave = np.broadcast_to(enter.max(axis=0, keepdims=True) + 200 * US, enter.shape)
    # MPI ring r -> r+1: even ranks send first, odd ranks receive first (late senders there)
    jitter = (20 * US * rng.random((ranks, steps))).astype(np.int64)
    even = (np.arange(ranks) % 2 == 0)[:, None]
    send_s = np.where(even, leave + 20 * US + jitter, 0)
    recv_s = np.where(even, leave + 50 * US, leave + 10 * US)
    recv_e = np.where(even, 0, np.maximum(recv_s, np.roll(send_s, 1, axis=0)) + 3 * US)
    send_s = np.where(even, send_s, recv_e + 1 * US)
    recv_e = np.where(even, np.maximum(recv_s, np.roll(send_s, 1, axis=0)) + 3 * US, recv_e)
    send_e = send_s + 5 * US
    shape3 = (ranks, steps, ops)
    b = lambda a: np.broadcast_to(a, (ranks, steps)).ravel()  # noqa: E731
    b3 = lambda a: np.broadcast_to(a, shape3).ravel()  # noqa: E731
    # kinds: 0 step, 1 op, 2 launch, 3 kernel, 4 memcpy, 5 nccl, 6 send, 7 recv, 8 nccl launch
    parts = [
        (b(cpu), b(t0), b(t0 + step_ns - 100 * US), 0),
        (b3(cpu[..., None]), op_s.ravel(), op_e.ravel(), 1),
        (b3(cpu[..., None]), la_s.ravel(), la_e.ravel(), 2),
        (b3(sa[..., None]), k_s.ravel(), k_e.ravel(), 3),
        (b(sb), b(t0 + 1 * US), b(t0 + 50 * US), 4),
        (b(sb), enter.ravel(), leave.ravel(), 5),
        (b(cpu), send_s.ravel(), send_e.ravel(), 6),
        (b(cpu), recv_s.ravel(), recv_e.ravel(), 7),
        (b(cpu), (enter - 8 * US).ravel(), (enter - 5 * US).ravel(), 8),
    ]
    loc = np.concatenate([p[0] for p in parts]).astype(np.int64)
    start = np.concatenate([p[1] for p in parts]).astype(np.int64)
    end = np.concatenate([p[2] for p in parts]).astype(np.int64)
    kind = np.concatenate([np.full(p[1].size, p[3], np.int8) for p in parts])
    ops_of = slice(parts[0][1].size, parts[0][1].size + parts[1][1].size)
    kind[ops_of][np.arange(parts[1][1].size) % ops >= ops // 2] = 9  # the step's second half: backward nodes
    order = np.lexsort((-end, start, loc))
    row_of = np.empty(order.size, np.int64)
    row_of[order] = np.arange(order.size)
    offsets = np.cumsum([0] + [p[1].size for p in parts])
    loc, start, end, kind = loc[order], start[order], end[order], kind[order]
    depth, parent = nest(loc, start, end)
    names = [
        "ProfilerStep",
        "aten::mm",
        "cudaLaunchKernel",
        "gemm_kernel",
        "Memcpy HtoD",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        "MPI_Send",
        "MPI_Recv",
        "cudaLaunchKernel",
        "autograd::engine::evaluate_function: MmBackward0",
    ]
    cats = ["step", "compute", "cuda_api", "kernel", "memcpy", "nccl", "mpi_p2p", "mpi_p2p", "cuda_api", "compute"]
    events = pl.DataFrame(
        {
            "loc": loc.astype(np.uint32),
            "start_ns": start,
            "end_ns": end,
            "name": pl.Series(names, dtype=pl.Categorical).gather(kind.astype(np.int64)),
            "cat": pl.Series(cats, dtype=pl.String).gather(kind.astype(np.int64)),
            "depth": depth,
            "parent": pl.Series(parent).replace(-1, None),
            "instant": np.zeros(loc.size, bool),
        }
    )
    flows = {
        "src": np.concatenate([row_of[offsets[2] : offsets[3]], row_of[offsets[8] : offsets[9]]]),
        "dst": np.concatenate([row_of[offsets[3] : offsets[4]], row_of[offsets[5] : offsets[6]]]),
        "kind": "launch",
    }
    n_rs = ranks * steps
    messages = {
        "send": row_of[offsets[6] : offsets[7]],
        "recv": row_of[offsets[7] : offsets[8]].reshape(ranks, steps)[np.r_[1:ranks, 0]].ravel(),
    }
    collectives = {
        "instance": np.tile(np.arange(steps, dtype=np.int64), ranks),
        "event": row_of[offsets[5] : offsets[6]],
        "rank": np.repeat(np.arange(ranks, dtype=np.int32), steps),
        "comm": ["world"] * n_rs,
        "seq": np.tile(np.arange(steps, dtype=np.int64), ranks),
        "op": ["allreduce"] * n_rs,
        "group_size": [ranks] * n_rs,
    }
    locations = {
        "loc": np.arange(3 * ranks, dtype=np.uint32),
        "rank": np.repeat(np.arange(ranks, dtype=np.int32), 3),
        "kind": ["cpu_thread", "gpu_stream", "gpu_stream"] * ranks,
        "device": np.where(np.arange(3 * ranks) % 3 == 0, -1, np.repeat(np.arange(ranks), 3)),
        "source": [0] * (3 * ranks),
    }
    locs = pl.DataFrame(locations).with_columns(
        pl.when(pl.col("device") < 0).then(None).otherwise(pl.col("device")).alias("device")
    )
    return Trace.build(
        meta={"command": "bench/engine.py generated job"},
        locations=locs,
        events=events,
        flows=flows,
        messages=messages,
        collectives=collectives,
    )


def _child(which: str, store: Path, env: dict[str, str], repeat: int = 1) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, which, str(store), str(repeat)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["child_wall_s"] = time.perf_counter() - t0
    return out


def _cli(store: Path, cache: str, env: dict[str, str], out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-c",
        "import os,sys,runpy; os.sched_setaffinity(0,{min(os.sched_getaffinity(0))}); sys.argv=['di']+sys.argv[1:]; "
        "import di.cli; rc=di.cli.main(); "
        "print('VmHWM', next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')), file=sys.stderr); sys.exit(rc)",
        "analyze",
        str(store),
        "--json",
        str(out),
    ]
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**env, "NUMBA_CACHE_DIR": cache}, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    hwm = [int(l.split()[1]) for l in proc.stderr.splitlines() if l.startswith("VmHWM")]
    return {"seconds": wall, "cpu_s": cpu, "rc": proc.returncode, "peak_rss_mb": hwm[0] / 1024 if hwm else None}


def _hta(python: str) -> dict[str, Any]:
    """HTA's seconds (bench/hta_compare.py) next to ours on the same shared traces."""
    import di
    from di.engine import analyze

    proc = subprocess.run(
        [python, str(REPO / "bench" / "hta_compare.py"), str(KINETO)], capture_output=True, text=True, check=False
    )
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1]}
    hta = json.loads(proc.stdout)
    rows = {}
    for name, h in hta.items():
        trace = di.load(KINETO / name)
        analyses = ("breakdown", "overlap") if "critical_path" not in h["seconds"] else ("critical_path",)
        res = analyze(trace, analyses=analyses)
        ours = sum(res.seconds.values())
        theirs = sum(v for k, v in h["seconds"].items() if k != "load")
        rows[name] = {
            "hta_s": theirs,
            "di_s": ours,
            "hta_over_di": theirs / ours if ours else None,
            "analyses": analyses,
        }
    return rows


def _hta_only(args: argparse.Namespace, result: dict[str, Any]) -> int:
    if not (args.hta_python and KINETO.is_dir()):
        print("--skip-job needs --hta-python and ../shared/data/kineto")
        return 2
    result["hta"] = _hta(args.hta_python)
    print(json.dumps(result["hta"], indent=1))
    path = OUT.with_name("engine_hta.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--steps", type=int, default=110)
    p.add_argument("--ops", type=int, default=500)
    p.add_argument("--skip-cli", action="store_true")
    p.add_argument(
        "--repeat", type=int, default=1, help="run each analysis this many times in its child; the fastest counts"
    )
    p.add_argument("--skip-job", action="store_true", help="only the HTA comparison (needs --hta-python)")
    p.add_argument("--hta-python", help="a Python with holistictraceanalysis installed")
    args = p.parse_args(argv)
    import di

    env = {**os.environ, "PYTHONPATH": str(REPO), "POLARS_MAX_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    result: dict[str, Any] = {"shape": vars(args)}
    with tempfile.TemporaryDirectory() as tmp:
        if args.skip_job:
            return _hta_only(args, result)
        t0 = time.perf_counter()
        trace = generate(args.ranks, args.steps, args.ops)
        result["generate_s"] = time.perf_counter() - t0
        result["events"] = trace.events.height
        store = Path(tmp) / "job.di"
        di.save(trace, store)
        del trace
        print(f"generated {result['events']:,} events in {result['generate_s']:.1f} s")
        _child("prepare", store, env)  # warm the numba cache
        for which in ANALYSES:
            result[which] = _child(which, store, env, args.repeat)
            print(f"{which:>14}: {result[which]}")
        if not args.skip_cli:
            cache = str(Path(tmp) / "numba-cache")
            result["cli_cold"] = _cli(store, cache, env, Path(tmp) / "a.json")
            result["cli_warm"] = _cli(store, cache, env, Path(tmp) / "b.json")
            print(f"di analyze cold: {result['cli_cold']}\ndi analyze warm: {result['cli_warm']}")
    if args.hta_python and KINETO.is_dir():
        result["hta"] = _hta(args.hta_python)
        print(json.dumps(result["hta"], indent=1))
    all_ = result.get("all", {})
    result["targets"] = {
        "all_s": all_.get("seconds"),
        "all_cpu_s": all_.get("cpu_s"),
        "target_s": TARGET_S,
        "peak_rss_gb": (all_.get("peak_rss_mb") or 0) / 1024,
        "target_rss_gb": TARGET_RSS_GB,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1))
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
