"""Critical path of the Score-P CUDA traces without flows, this checkout against a base commit.

Run on demand (not a test)::

    python bench/hybrid_critical_path.py [--base REF] [NAME ...]

For each archive (default: the casita CUDA traces under ../shared/data/otf2,
which record no launch or sync edges, so their launch and sync edges are
inferred, :mod:`di.engine.inferred_edges`), this checkout and ``REF``
(extracted with ``git archive`` into a temporary folder) each run in a
fresh process: load, one warm-up ``di.analyze`` (numba), then ``di.analyze``
timed, and the critical path's length, dropped edges and share per category
(%) printed side by side. ``di analyze`` itself is timed as a CLI
subprocess (load included, best of three). Numbers go to
``bench/out/hybrid_critical_path.json``. Wall seconds depend on what else
runs on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OTF2 = REPO.parent / "shared" / "data" / "otf2"
TRACES = ("casita_2_cuda_simple", "casita_2_cloverleaf_oaccregions_cudafull", "casita_2_jacobi_blame_cpu_015")
CHILD = """
import json, sys, time
import di
from di.engine import analyze
trace = di.load(sys.argv[1])
analyze(trace)
t0 = time.perf_counter()
a = analyze(trace)
dt = time.perf_counter() - t0
cp = a.critical_path
print(json.dumps({"analyze_s": dt, "critical_path_s": a.seconds["critical_path"], "length_ns": cp["summary"]["length_ns"],
                  "dropped_edges": cp["summary"]["dropped_edges"],
                  "pct": {k: round(100 * v, 2) for k, v in cp["by_category"].select("category", "share").iter_rows()}}))
"""


def _run(root: Path, archive: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    # cwd=root too: ``python -c`` and ``-m`` put the working directory before PYTHONPATH
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(archive)], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "di", "analyze", str(archive)], env=env, cwd=root, capture_output=True, check=True
        )
        best = min(best, time.perf_counter() - t0)
    return {**got, "cli_s": best}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="git ref to compare with (default HEAD)")
    ap.add_argument("names", nargs="*", default=list(TRACES))
    args = ap.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        blob = subprocess.run(["git", "-C", str(REPO), "archive", args.base], capture_output=True, check=True).stdout
        with tarfile.open(fileobj=__import__("io").BytesIO(blob)) as tar:
            tar.extractall(base, filter="data")
        for name in args.names:
            archive = OTF2 / name / "traces.otf2"
            if not archive.exists():
                print(f"{name}: not found under {OTF2}")
                continue
            before, after = _run(base, archive), _run(REPO, archive)
            results[name] = {"base": before, "this": after}
            print(
                f"== {name}: length {before['length_ns'] / 1e6:.1f} -> {after['length_ns'] / 1e6:.1f} ms, dropped edges "
                f"{before['dropped_edges']} -> {after['dropped_edges']}, analyze {before['analyze_s']:.2f} -> "
                f"{after['analyze_s']:.2f} s (critical path {before['critical_path_s']:.3f} -> {after['critical_path_s']:.3f} s), di analyze (CLI, best of 3) {before['cli_s']:.2f} -> {after['cli_s']:.2f} s"
            )
            for cat in sorted(set(before["pct"]) | set(after["pct"]), key=lambda c: -after["pct"].get(c, 0)):
                print(f"   {cat:16s} {before['pct'].get(cat, 0):6.2f} % -> {after['pct'].get(cat, 0):6.2f} %")
    out = REPO / "bench" / "out" / "hybrid_critical_path.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"base": args.base, "traces": results}, indent=1))


if __name__ == "__main__":
    main()
