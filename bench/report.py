"""`di report` benchmark: wall time (cold and warm numba cache) and page size.

Run on demand (not a test)::

    python bench/report.py [--ranks 16] [--steps 40] [--ops 300]

Traces: the generated job of bench/engine.py (saved as a .di store; default
16 x 40 x (3 x 300 + 6) = 0.58 M events) and the largest shared Kineto file.
Each `di report` runs as a CLI subprocess, first with an empty
``NUMBA_CACHE_DIR`` (cold: JIT compiles), then with the cache it left (warm).
The page holds aggregates only, so its size should not follow the event count.
Numbers go to ``bench/out/report.json``; pages to ``bench/out/report-*.html``.
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
OUT = REPO / "bench" / "out"
KINETO = REPO.parent / "shared" / "data" / "kineto"


def run_report(src: Path, page: Path, cache: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_CACHE_DIR=cache)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "di", "report", str(src), "-o", str(page), "--no-plugins"],
        env=env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ops", type=int, default=300)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    import di
    from engine import generate

    OUT.mkdir(parents=True, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "job.di"
        trace = generate(args.ranks, args.steps, args.ops)
        di.save(trace, store)
        sources = {"generated": (store, trace.events.height)}
        files = (
            sorted((f for f in KINETO.rglob("*.json*") if "_et." not in f.name), key=lambda f: f.stat().st_size)
            if KINETO.is_dir()
            else []
        )
        if files:
            sources["largest_kineto"] = (files[-1], di.load(files[-1]).events.height)
        for name, (src, events) in sources.items():
            page = OUT / f"report-{name}.html"
            cache = tempfile.mkdtemp(prefix="numba-", dir=tmp)
            cold = run_report(src, page, cache)
            warm = run_report(src, page, cache)
            results[name] = {
                "source": src.name,
                "events": events,
                "cold_s": round(cold, 2),
                "warm_s": round(warm, 2),
                "page_bytes": page.stat().st_size,
            }
            print(name, results[name])
    (OUT / "report.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
