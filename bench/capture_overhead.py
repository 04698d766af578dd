"""Capture overhead benchmark: what di's shims cost per call, and the demo job's slowdown.

Run on demand (not a test)::

    python bench/capture_overhead.py [--iterations 4000] [--rounds 25] [--repeats 3] [--steps 6]

(1) Per call: ``bench/capture_overhead_calls.c`` is built with mpicc and run as one
    MPI process with both shims in LD_PRELOAD. Each operation is timed through its
    public name (the shim's wrapper) and directly (``PMPI_X``; libc's own symbol) in
    the same process, alternating within each round and which goes first; overhead =
    wrapped - direct, ns per call, the median over rounds with its min..max. A shard
    record is 64 bytes; every round writes more records than a thread's staging area
    holds, so appending them to the shard file is in every round.
(2) The demo job (:mod:`di.demo.train`, 4 ranks under mpiexec) run plain and
    with all capture on (PMPI + POSIX-I/O shims, host and network samplers at 10 Hz),
    alternating (plain first, then captured first...), ``--repeats`` times each: job
    wall seconds (launch to exit, ingest not included), the steady-state step (rank
    0's step boundaries, median over steps after the first) and the time outside the
    step loop (startup, MPI_Init/Finalize with their clock sync, exit); medians with
    min..max, the total and steady-state slowdowns and the fixed cost.
(3) Ingest of the last captured demo run in a fresh process: cold (empty
    NUMBA_CACHE_DIR) and warm.
Targets from the issue: <= 100 ns per MPI or I/O call, <= 2 % on the demo.
A table goes to stdout and the numbers to ``bench/out/capture_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out" / "capture_overhead.json"
TARGET_CALL_NS = 100.0  # from the issue
TARGET_SLOWDOWN = 0.02  # from the issue


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else (shutil.which(name) or name)


def per_call(tmp: Path, iterations: int, rounds: int) -> list[dict[str, float]]:
    from di.capture import build

    exe = tmp / "calls"
    subprocess.run(
        [_tool("mpicc"), "-O2", "-o", str(exe), str(REPO / "bench" / "capture_overhead_calls.c"), "-ldl"], check=True
    )
    raw = tmp / "calls.di" / "raw"
    raw.mkdir(parents=True)
    env = dict(os.environ, DI_CAPTURE_DIR=str(raw), LD_PRELOAD=f"{build.pmpi_shim()} {build.io_shim()}")
    out = subprocess.run(
        [str(exe), str(iterations), str(rounds), str(tmp / "scratch")],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _demo_once(tmp: Path, steps: int, captured: bool) -> dict[str, float]:
    """One demo run: job wall seconds (launch to exit), its median steady-state step
    (rank 0's step boundaries, first step left out) and the time outside the step loop."""
    from di.capture import build
    from di.capture.samplers import SamplerOptions, SamplerThread

    work = Path(tempfile.mkdtemp(dir=tmp))
    timings = work / "timings.json"
    cmd = [
        _tool("mpiexec"),
        "-n",
        "4",
        sys.executable,
        "-m",
        "di.demo.train",
        str(work),
        "--steps",
        str(steps),
        "--timings",
        str(timings),
    ]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    sampler = None
    if captured:
        raw = tmp / "demo-run.di" / "raw"
        shutil.rmtree(raw.parent, ignore_errors=True)
        raw.mkdir(parents=True)
        env.update(DI_CAPTURE_DIR=str(raw), LD_PRELOAD=f"{build.pmpi_shim()} {build.io_shim()}")
        sampler = SamplerThread(raw, SamplerOptions(host=True, net=True, rate_hz=10.0))
        sampler.start()
    start = time.perf_counter()  # CLOCK_MONOTONIC, as the job's perf_counter
    subprocess.run(cmd, env=env, check=True, timeout=600)
    wall = time.perf_counter() - start
    if sampler:
        sampler.stop()
    t = json.loads(timings.read_text())
    bounds = [*t["steps_s"], t["end_s"]]
    step = [b - a for a, b in zip(bounds, bounds[1:])]
    shutil.rmtree(work, ignore_errors=True)
    return {
        "wall_s": wall,
        "step_s": statistics.median(step[1:] or step),
        "outside_loop_s": wall - (t["end_s"] - t["steps_s"][0]),
    }


def demo_slowdown(tmp: Path, steps: int, repeats: int) -> dict[str, object]:
    """Plain and captured runs alternating (ABBA...), medians and spreads of each figure."""
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    _demo_once(tmp, 1, False)  # warm the page cache and the shim builds
    _demo_once(tmp, 1, True)
    for i in range(repeats):
        for captured in (False, True) if i % 2 == 0 else (True, False):
            runs[captured].append(_demo_once(tmp, steps, captured))

    def stats(captured: bool, key: str) -> dict[str, float]:
        v = [r[key] for r in runs[captured]]
        return {"median": statistics.median(v), "min": min(v), "max": max(v)}

    out: dict[str, object] = {
        "steps": steps,
        "repeats": repeats,
        "runs": {"plain": runs[False], "captured": runs[True]},
    }
    for key in ("wall_s", "step_s", "outside_loop_s"):
        out[key] = {"plain": stats(False, key), "captured": stats(True, key)}
    med = {k: (out[k]["plain"]["median"], out[k]["captured"]["median"]) for k in ("wall_s", "step_s", "outside_loop_s")}
    out["slowdown_total"] = med["wall_s"][1] / med["wall_s"][0] - 1
    out["slowdown_steady_step"] = med["step_s"][1] / med["step_s"][0] - 1
    out["fixed_cost_s"] = med["outside_loop_s"][1] - med["outside_loop_s"][0]
    return out


def ingest_times(run: Path) -> dict[str, float]:
    code = (
        f"import time; t = time.perf_counter(); from di.capture.ingest import ingest; tr, _ = ingest({str(run)!r}); "
        "print(time.perf_counter() - t, tr.events.height)"
    )
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(REPO))
        for label in ("cold", "warm"):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            seconds, events = res.stdout.strip().splitlines()[-1].split()
            out[f"{label}_s"], out["events"] = float(seconds), int(events)
    out["raw_bin_bytes"] = sum(p.stat().st_size for p in (run / "raw").glob("*.bin"))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=4000)
    p.add_argument("--rounds", type=int, default=41)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=6)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        calls = per_call(tmp, args.iterations, args.rounds)
        demo = demo_slowdown(tmp, args.steps, args.repeats)
        ingest = ingest_times(tmp / "demo-run.di")
        ingest_calls = ingest_times(tmp / "calls.di")
    print(
        f"{'operation (medians of ' + str(args.rounds) + ' rounds)':40} {'wrapped ns':>11} {'direct ns':>10} {'overhead ns':>12}  spread"
    )
    for c in calls:
        print(
            f"{c['op']:40} {c['wrapped_ns']:11.1f} {c['direct_ns']:10.1f} {c['overhead_ns']:12.1f}  "
            f"{c['overhead_min_ns']:.0f}..{c['overhead_max_ns']:.0f}"
        )

    def spread(key: str, which: str) -> str:
        d = demo[key][which]
        return f"{d['median']:.3f} s ({d['min']:.3f}..{d['max']:.3f})"

    print(f"demo ({args.steps} steps, 4 ranks, {args.repeats} runs each, alternating): median (min..max)")
    for key, label in (("wall_s", "job wall"), ("step_s", "steady step"), ("outside_loop_s", "outside the step loop")):
        print(f"  {label:22} plain {spread(key, 'plain')}   captured {spread(key, 'captured')}")
    print(
        f"  slowdown: total {100 * demo['slowdown_total']:.1f} %, steady-state step {100 * demo['slowdown_steady_step']:.1f} %, "
        f"fixed cost {1000 * demo['fixed_cost_s']:.0f} ms (target {100 * TARGET_SLOWDOWN:.0f} %)"
    )
    print(
        f"ingest of the captured demo: cold {ingest['cold_s']:.2f} s, warm {ingest['warm_s']:.2f} s, "
        f"{ingest['events']:,} events"
    )
    print(
        f"ingest of the per-call run ({ingest_calls['events']:,} events, 1 rank): cold {ingest_calls['cold_s']:.2f} s, "
        f"warm {ingest_calls['warm_s']:.2f} s = {ingest_calls['events'] / ingest_calls['warm_s']:,.0f} events/s warm"
    )
    load = os.getloadavg()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "per_call": calls,
                "demo": demo,
                "ingest": ingest,
                "ingest_per_call_run": ingest_calls,
                "target_call_ns": TARGET_CALL_NS,
                "target_slowdown": TARGET_SLOWDOWN,
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "load_average": load,
            },
            indent=1,
        )
    )
    print(f"load average during the run: {load}; numbers in {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
