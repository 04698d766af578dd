"""Checks of bench/gpu_check.sh on a recorded GPU trace; prints counts and PASS/FAIL lines.

usage: check.py RUN.di BASELINE_PREFIX RECORDED_PREFIX OUT.json
"""

import glob
import json
import sys

import polars as pl

import di
from di.engine import analyze

run, base_prefix, rec_prefix, out = sys.argv[1:5]
trace = di.load(run)
ev = trace.events.with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))
results: dict = {"checks": {}}


def check(name: str, ok: bool, detail: str) -> None:
    results["checks"][name] = {"ok": bool(ok), "detail": detail}
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")


counts = ev.group_by(pl.col("cat").cast(pl.String)).len().sort("cat")
print("events by category:", dict(counts.rows()))
results["events_by_cat"] = dict(counts.rows())
kern = ev.filter(pl.col("cat") == "kernel")
launch = trace.flows.filter(pl.col("kind") == "launch")
kflows = launch.join(kern.select(pl.col("row").alias("dst")), on="dst")
per_kernel = kflows.group_by("dst").len()
check("kernels seen", kern.height > 0, f"{kern.height} kernels")
check("every kernel has exactly one launch flow", kern.height > 0 and per_kernel.height == kern.height and (per_kernel.get_column("len") == 1).all(),
      f"{per_kernel.height} of {kern.height} kernels have a launch flow")
corr = kern.get_column("corr")
check("kernels carry a correlation id", corr.null_count() == 0, f"{corr.null_count()} kernels without corr")
api_launch = ev.filter((pl.col("cat") == "cuda_api") & pl.col("name").cast(pl.String).str.contains("(?i)launchkernel"))
check("kernels vs launch API calls", api_launch.height >= kern.height * 0.9,
      f"{api_launch.height} *LaunchKernel* calls for {kern.height} kernels (library kernels may launch through cuLaunchKernelEx or graphs)")
meta = [json.load(open(p)) for p in sorted(glob.glob(f"{rec_prefix}.rank*.json"))]
base = [json.load(open(p)) for p in sorted(glob.glob(f"{base_prefix}.rank*.json"))]
steps = sum(m["steps"] for m in meta)
htod = ev.filter((pl.col("cat") == "memcpy") & pl.col("name").cast(pl.String).str.contains("HtoD"))
want = steps * (meta[0]["batch_bytes"] if meta else 0)
check("memcpy HtoD bytes", htod.get_column("bytes").sum() >= want > 0, f"{htod.get_column('bytes').sum():,} bytes in {htod.height} copies; the loop copied at least {want:,}")
names = trace.series.get_column("name").to_list()
nv = [n for n in names if n.startswith("gpu") and (n.endswith(" power") or n.endswith(" util"))]
nv_ids = trace.series.filter(pl.col("name").is_in(nv)).get_column("series")
nsamp = trace.samples.filter(pl.col("series").is_in(nv_ids)).height
check("NVML power/utilization series", bool(nv) and nsamp > 0, f"{len(nv)} series, {nsamp} samples")
if any(m["nccl"] for m in meta):
    nccl = trace.collectives.filter(pl.col("comm").str.starts_with("nccl:"))
    inst = nccl.group_by("instance").agg(pl.col("rank").n_unique().alias("ranks"), pl.col("op").first())
    world = max(m["world"] for m in meta)
    full = inst.filter(pl.col("ranks") == world)
    check("NCCL allreduce matched as collectives", full.filter(pl.col("op") == "allreduce").height > 0,
          f"{inst.height} NCCL instances, {full.height} with all {world} ranks; the loop made {sum(m['allreduces'] for m in meta) // max(world, 1)} allreduces per rank")
if meta and base:
    b, r = max(m["seconds"] for m in base), max(m["seconds"] for m in meta)
    results["slowdown_pct"] = 100 * (r / b - 1)
    print(f"INFO  loop time: {b:.3f} s plain, {r:.3f} s under di record --gpu: slowdown {results['slowdown_pct']:.1f} %")
a = analyze(trace)
cp = a.critical_path["by_category"]
check("di analyze: breakdown, overlap, critical path", a.breakdown.height > 0 and a.overlap.height > 0 and cp.height > 0,
      "critical path by category: " + ", ".join(f"{c}={v / 1e6:.2f} ms" for c, v in cp.select("category", "contrib_ns").rows()))
print("warnings:", *trace.meta.get("warnings", []), sep="\n  ")
json.dump(results, open(out, "w"), indent=1)
sys.exit(0 if all(c["ok"] for c in results["checks"].values()) else 1)
