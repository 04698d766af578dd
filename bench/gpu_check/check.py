"""Checks of bench/gpu_check.sh on a recorded GPU trace; prints counts and PASS/FAIL lines.
Each check runs on its own: one that raises is reported as failed with the error, and the
others still run.

usage: check.py RUN.di BASELINE_PREFIX RECORDED_PREFIX OUT.json
"""

import glob
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import polars as pl

import di

run, base_prefix, rec_prefix, out = sys.argv[1:5]
results: dict = {"checks": {}}
T0 = time.perf_counter()


def check(name: str, fn: Callable[[], tuple[bool | None, str]]) -> None:
    """Run one check: ok True (PASS), False (FAIL) or None (SKIP: this machine cannot show it, and says why)."""
    t = time.perf_counter()
    try:
        ok, detail = fn()
    except Exception as exc:  # a check that breaks is a failed check, not a failed script
        where = traceback.extract_tb(exc.__traceback__)[-1]
        ok, detail = False, f"raised {type(exc).__name__}: {exc} (check.py line {where.lineno})"
    results["checks"][name] = {
        "ok": None if ok is None else bool(ok),
        "detail": detail,
        "seconds": round(time.perf_counter() - t, 3),
    }
    print(f"{'SKIP' if ok is None else 'PASS' if ok else 'FAIL'}  {name}: {detail}")
    Path(out).write_text(json.dumps(results, indent=1))  # partial results survive a timeout


trace = di.load(run)
print(f"loaded {run} in {time.perf_counter() - T0:.1f} s: {trace}")
ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
ev = ev.join(trace.locations.select("loc", "pid", loc_kind="kind", loc_name="name"), on="loc", how="left")
counts = dict(ev.group_by(pl.col("cat").cast(pl.String)).len().sort("cat").rows())
print("events by category:", counts)
results["events_by_cat"] = counts
meta = [json.load(open(p)) for p in sorted(glob.glob(f"{rec_prefix}.rank*.json"))]
base = [json.load(open(p)) for p in sorted(glob.glob(f"{base_prefix}.rank*.json"))]
kern = ev.filter(pl.col("cat") == "kernel")
launch = trace.flows.filter(pl.col("kind") == "launch")


def kernels_once() -> tuple[bool, str]:
    dup = kern.group_by("pid", "corr").len().filter(pl.col("len") > 1)
    return kern.height > 0 and dup.height == 0 and kern.get_column("corr").null_count() == 0, (
        f"{kern.height} kernels, {dup.height} (pid, correlation) pairs seen more than once, "
        f"{kern.get_column('corr').null_count()} without a correlation id"
    )


def kernel_flows() -> tuple[bool, str]:
    per = launch.join(kern.select(pl.col("row").alias("dst")), on="dst").group_by("dst").len()
    return kern.height > 0 and per.height == kern.height and bool((per.get_column("len") == 1).all()), (
        f"{per.height} of {kern.height} kernels have exactly one launch flow from their API call"
    )


def launches() -> tuple[bool, str]:
    api = ev.filter((pl.col("cat") == "cuda_api") & pl.col("name").cast(pl.String).str.contains("(?i)launch"))
    return kern.height > 0 and api.height >= kern.height * 0.9, (
        f"{api.height} *Launch* API calls for {kern.height} kernels "
        "(kernels launched inside CUDA graphs have no API call of their own)"
    )


def memcpy() -> tuple[bool, str]:
    htod = ev.filter((pl.col("cat") == "memcpy") & pl.col("name").cast(pl.String).str.contains("HtoD"))
    want = sum(m["steps"] for m in meta) * (meta[0]["batch_bytes"] if meta else 0)
    got = int(htod.get_column("bytes").sum() or 0)
    return got >= want > 0, f"{got:,} bytes in {htod.height} HtoD copies; the loop copied at least {want:,}"


def nvtx() -> tuple[bool, str]:
    """train.py wraps each step in an NVTX range: CUPTI reports them only with NVTX_INJECTION64_PATH set."""
    steps = ev.filter(
        (pl.col("cat") == "user")
        & pl.col("name").cast(pl.String).str.starts_with("step ")
        & (pl.col("loc_kind") == "cpu_thread")
    )
    want = sum(m["steps"] for m in meta)
    return (
        steps.height >= want > 0,
        f"{steps.height} NVTX 'step N' ranges on CUDA API thread timelines; the loop ran {want} steps",
    )


def nvml() -> tuple[bool, str]:
    names = trace.series.get_column("name").to_list()
    nv = [n for n in names if n.startswith("gpu") and (n.endswith(" power") or n.endswith(" util"))]
    ids = trace.series.filter(pl.col("name").is_in(nv)).get_column("series")
    n = trace.samples.filter(pl.col("series").is_in(ids)).height
    has_power = any(x.endswith(" power") for x in nv)
    has_util = any(x.endswith(" util") for x in nv)
    return has_power and has_util and n > 0, f"{len(nv)} series ({', '.join(nv[:6])}), {n} samples"


def nccl_matched() -> tuple[bool, str]:
    nccl = trace.collectives.filter(pl.col("comm").str.starts_with("nccl:"))
    inst = nccl.group_by("instance").agg(pl.col("rank").n_unique().alias("ranks"), pl.col("op").first())
    world = max((m["world"] for m in meta), default=1)
    full = inst.filter((pl.col("ranks") == world) & (pl.col("op") == "allreduce"))
    want = sum(m["allreduces"] for m in meta) // max(world, 1)
    results["nccl_path"] = trace.meta.get("capture", {}).get("nccl")
    return full.height > 0, (
        f"{full.height} allreduce instances with all {world} ranks of {inst.height} NCCL instances; "
        f"the loop made {want} allreduces per rank; path {results['nccl_path']}"
    )


def nccl_completion() -> tuple[bool | None, str]:
    path = (trace.meta.get("capture", {}).get("nccl") or {}).get("path")
    if max((m["world"] for m in meta), default=1) == 1:
        return None, (
            "a 1-rank NCCL communicator bypasses NCCL's profiler (a plain copy, no kernel channels): "
            f"needs 2 GPUs; NCCL recorded by {path}"
        )
    rows = trace.collectives.filter(pl.col("comm").str.starts_with("nccl:")).join(
        ev.select(event="row", loc_name="loc_name", args="args", start_ns="start_ns", end_ns="end_ns"), on="event"
    )
    on_kernels = rows.filter(pl.col("loc_name") == "NCCL kernels")
    if path != "profiler_plugin":
        return (
            False,
            f"NCCL recorded by {path}: enqueue times only (the profiler plugin path was expected with NCCL >= 2.26)",
        )
    args = [json.loads(a) for a in on_kernels.get_column("args").to_list()[:2000]]
    gpu = [a.get("gpu_ns") for a in args if a.get("gpu_ns") is not None]
    span = on_kernels.get_column("end_ns") - on_kernels.get_column("start_ns")
    return on_kernels.height == rows.height > 0, (
        f"{on_kernels.height} of {rows.height} NCCL collective rows point at kernel-channel spans; median span "
        f"{(span.median() or 0) / 1e3:.1f} us, GPU-timer durations on {len(gpu)} (median {sorted(gpu)[len(gpu) // 2] / 1e3 if gpu else 0:.1f} us)"
    )


def callback_cost() -> tuple[bool, str]:
    heads = [json.loads(p.read_text()) for p in Path(run, "raw").glob("cupti-*.json")]
    recs = sum(h.get("records", 0) for h in heads)
    cpu = sum(h.get("callback_cpu_ns", 0) for h in heads)
    per = cpu / recs / 1e3 if recs else float("nan")
    results["cupti_callback_cpu_us_per_record"] = per
    states = sorted({h.get("state") for h in heads})
    verdict = "under" if per < 1.0 else "NOT under"
    return (
        recs > 0,
        f"{per:.3f} us CPU per record ({verdict} the 1 us target) over {recs} records in {len(heads)} processes (states {states})",
    )


def slowdown() -> tuple[bool, str]:
    b, r = max(m["seconds"] for m in base), max(m["seconds"] for m in meta)
    results["slowdown_pct"] = 100 * (r / b - 1)
    return True, f"loop {b:.3f} s plain, {r:.3f} s under di record --gpu: slowdown {results['slowdown_pct']:.1f} %"


def analysis() -> tuple[bool, str]:
    from di.engine import analyze

    a = analyze(trace)
    cp = a.critical_path["by_category"]
    ok = a.breakdown.height > 0 and a.overlap.height > 0 and cp.height > 0
    return ok, "critical path by category: " + ", ".join(
        f"{c}={v / 1e6:.2f} ms" for c, v in cp.select("category", "contrib_ns").rows()
    )


for name, fn in [
    ("every kernel appears once with a correlation id", kernels_once),
    ("every kernel has its launch flow", kernel_flows),
    ("kernels vs launch API calls", launches),
    ("memcpy HtoD bytes", memcpy),
    ("NVTX step ranges", nvtx),
    ("NVML power and utilization series", nvml),
    ("NCCL allreduce matched as a collective", nccl_matched),
    ("NCCL completion from kernel channels (profiler plugin)", nccl_completion),
    ("CUPTI buffer callback CPU cost per record (target: under 1 us)", callback_cost),
    ("slowdown under capture reported", slowdown),
    ("di analyze: breakdown, overlap, critical path", analysis),
]:
    check(name, fn)
print("warnings:", *trace.meta.get("warnings", []), sep="\n  ")
print(f"checks took {time.perf_counter() - T0:.1f} s")
Path(out).write_text(json.dumps(results, indent=1))
sys.exit(0 if all(c["ok"] is not False for c in results["checks"].values()) else 1)
