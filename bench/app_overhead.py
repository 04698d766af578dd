"""Application-layer capture overhead: NVTX ranges, di.region, di record --python, and the demo.

Run on demand (not a test)::

    python bench/app_overhead.py [--iterations 200000] [--rounds 21] [--repeats 3] [--steps 6]

(1) NVTX: ``bench/nvtx_overhead.c`` (built with cc against NVTX v3's headers: ``$NVTX_INCLUDE``,
    ``$CUDA_HOME/include`` or /usr/local/cuda*/include) times nvtxRangePushA + nvtxRangePop and
    nvtxDomainRangePushEx (registered string, colour, category) + nvtxDomainRangePop, ns per
    pair, median over rounds, with di's injection library (records written to a shard) and
    without one (NVTX's no-op). Target from the issue: <= 200 ns per push+pop.
(2) Python, in one process recorded by the library: ``with di.region(...)`` enter+exit,
    recording and not (outside di record); and ``di record --python``'s cost per call of a
    trivial function of the program: with the minimum duration above every call (the
    callback's cost alone) and at 0 (every call written), against no profiler.
(3) The demo job (4 ranks, annotated with di.region) under the PMPI and I/O shims alone
    (its regions then do nothing), with di's NVTX library (regions recorded), and with
    ``--python`` too, rotating the order, ``--repeats`` times each: median job wall seconds
    and steady-state step, and each one's slowdown against the shims alone.
A table goes to stdout and the numbers to ``bench/out/app_overhead.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
OUT = REPO / "bench" / "out" / "app_overhead.json"
TARGET_PUSH_POP_NS = 200.0  # from the issue


def nvtx_include() -> str | None:
    roots = [
        os.environ.get("NVTX_INCLUDE", ""),
        os.path.join(os.environ.get("CUDA_HOME", ""), "include"),
        "/usr/local/cuda/include",
        *sorted(glob.glob("/usr/local/cuda-*/include"), reverse=True),
        "/usr/include",
    ]
    return next((r for r in roots if r and os.path.isfile(os.path.join(r, "nvtx3", "nvToolsExt.h"))), None)


def nvtx(tmp: Path, iterations: int, rounds: int) -> dict[str, object]:
    from di.capture import build

    inc = nvtx_include()
    if inc is None:
        return {"skipped": "no NVTX v3 headers (set NVTX_INCLUDE)"}
    exe = tmp / "nvtx_overhead"
    subprocess.run(
        [build.find_cc(), "-O2", f"-I{inc}", "-o", str(exe), str(REPO / "bench" / "nvtx_overhead.c"), "-ldl"],
        check=True,
    )
    raw = tmp / "nvtx.di" / "raw"
    raw.mkdir(parents=True)
    out = {}
    for label, extra in (
        ("no_tool", {}),
        ("di", {"DI_CAPTURE_DIR": str(raw), "NVTX_INJECTION64_PATH": str(build.nvtx_lib())}),
    ):
        env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"} | extra
        res = subprocess.run(
            [str(exe), str(iterations), str(rounds)], env=env, check=True, capture_output=True, text=True
        )
        out[label] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


PY_CODE = r"""
import json, sys, time
import di
from di.capture import pycalls

N, ROUNDS, MODE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def work(): return 1

def per_call(fn):
    best = []
    for _ in range(ROUNDS):
        t = time.perf_counter_ns(); fn(); best.append((time.perf_counter_ns() - t) / N)
    return statistics.median(best)

import statistics
def calls():
    for _ in range(N): work()
def regions():
    r = di.region("r")
    for _ in range(N):
        with r: pass
out = {}
if MODE == "region":
    out["region_ns"] = per_call(regions)
else:
    out["plain_call_ns"] = per_call(calls)
    if MODE != "plain":
        pycalls.start(int(MODE))
        out["profiled_call_ns"] = per_call(calls)
print(json.dumps(out))
"""


def python(tmp: Path, iterations: int, rounds: int) -> dict[str, object]:
    from di.capture import build

    raw = tmp / "py.di" / "raw"
    raw.mkdir(parents=True)
    script = tmp / "py_bench.py"  # a file of the program's own (not di's), as --python records
    script.write_text(PY_CODE)
    rec = {"DI_CAPTURE_DIR": str(raw), "DI_NVTX_LIB": str(build.nvtx_lib()), "PYTHONPATH": str(REPO)}
    plain = {k: v for k, v in os.environ.items() if k not in ("DI_CAPTURE_DIR", "DI_NVTX_LIB")} | {
        "PYTHONPATH": str(REPO)
    }

    def go(mode: str, env: dict[str, str]) -> dict[str, float]:
        res = subprocess.run(
            [sys.executable, str(script), str(iterations), str(rounds), mode],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return json.loads(res.stdout.strip().splitlines()[-1])

    out = {
        "region_recorded_ns": go("region", os.environ | rec)["region_ns"],
        "region_not_recording_ns": go("region", plain)["region_ns"],
    }
    skipped = go(str(10**12), os.environ | rec)  # every call shorter than the minimum: the callback alone
    written = go("0", os.environ | rec)  # every call written
    out["python_call_plain_ns"] = skipped["plain_call_ns"]
    out["python_call_callback_only_ns"] = skipped["profiled_call_ns"] - skipped["plain_call_ns"]
    out["python_call_recorded_ns"] = written["profiled_call_ns"] - written["plain_call_ns"]
    out["python"] = platform.python_version()
    out["mechanism"] = "sys.monitoring" if sys.version_info >= (3, 12) else "sys.setprofile"
    return out


CONFIGS = ("shims", "shims+regions", "shims+regions+python")
"""Demo configurations: the PMPI and I/O shims alone (its di.region calls do nothing), with di's
NVTX library (its regions recorded), and with ``--python`` too."""


def demo(tmp: Path, steps: int, repeats: int) -> dict[str, object]:
    """The demo under each configuration, rotating the order, ``repeats`` times each (after one warm-up round)."""
    import capture_overhead as co  # bench/capture_overhead.py: one demo run

    from di.capture import build

    lib = str(build.nvtx_lib())
    extra = {
        "shims": {},
        "shims+regions": {"NVTX_INJECTION64_PATH": lib, "DI_NVTX_LIB": lib},
        "shims+regions+python": {
            "NVTX_INJECTION64_PATH": lib,
            "DI_NVTX_LIB": lib,
            "DI_CAPTURE_PYTHON": "50000",
            "PYTHONPATH": os.pathsep.join([str(REPO / "di" / "capture" / "gpu_hook"), str(REPO)]),
        },
    }
    runs: dict[str, list[dict[str, float]]] = {c: [] for c in CONFIGS}
    saved = dict(os.environ)
    try:
        for i in range(repeats + 1):
            for label in CONFIGS[i % 3 :] + CONFIGS[: i % 3]:
                os.environ.clear()
                os.environ.update(
                    {k: v for k, v in saved.items() if k not in ("NVTX_INJECTION64_PATH", "DI_NVTX_LIB")} | extra[label]
                )
                one = co._demo_once(tmp, steps, True)
                if i:  # the first round warms up
                    runs[label].append(one)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    med = {k: {key: statistics.median(r[key] for r in v) for key in ("wall_s", "step_s")} for k, v in runs.items()}
    base = med["shims"]
    return {
        "steps": steps,
        "repeats": repeats,
        "median": med,
        "runs": runs,
        "slowdown": {
            k: {"total": med[k]["wall_s"] / base["wall_s"] - 1, "steady_step": med[k]["step_s"] / base["step_s"] - 1}
            for k in CONFIGS[1:]
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--no-demo", action="store_true")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        res = {
            "nvtx": nvtx(tmp, args.iterations, args.rounds),
            "python": python(tmp, args.iterations // 4, args.rounds),
        }
        if not args.no_demo:
            res["demo"] = demo(tmp, args.steps, args.repeats)
    n, py = res["nvtx"], res["python"]
    if "di" in n:
        print(
            f"NVTX push+pop (median of {args.rounds} rounds): pushA/pop {n['di']['push_pop_ascii_ns']:.0f} ns, "
            f"domain pushEx (registered)/pop {n['di']['push_pop_domain_registered_ns']:.0f} ns with di "
            f"(no tool: {n['no_tool']['push_pop_ascii_ns']:.1f} ns); target {TARGET_PUSH_POP_NS:.0f} ns"
        )
    print(
        f"di.region enter+exit: {py['region_recorded_ns']:.0f} ns recording, {py['region_not_recording_ns']:.0f} ns outside di record"
    )
    print(
        f"--python ({py['mechanism']}, Python {py['python']}), per call of a trivial function ({py['python_call_plain_ns']:.0f} ns plain): "
        f"+{py['python_call_callback_only_ns']:.0f} ns below the minimum, +{py['python_call_recorded_ns']:.0f} ns written"
    )
    if "demo" in res:
        dm = res["demo"]
        print(
            f"demo ({dm['steps']} steps, 4 ranks, {dm['repeats']} runs each, medians; vs the shims alone, "
            f"wall {dm['median']['shims']['wall_s']:.2f} s, step {1000 * dm['median']['shims']['step_s']:.0f} ms):"
        )
        for k, v in dm["slowdown"].items():
            print(
                f"  {k:22} wall {dm['median'][k]['wall_s']:.2f} s ({100 * v['total']:+.1f} %), "
                f"steady step {1000 * dm['median'][k]['step_s']:.0f} ms ({100 * v['steady_step']:+.1f} %)"
            )
    res.update(
        machine=platform.platform(),
        cpus=os.cpu_count(),
        load_average=os.getloadavg(),
        target_push_pop_ns=TARGET_PUSH_POP_NS,
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=1))
    print(f"numbers in {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
