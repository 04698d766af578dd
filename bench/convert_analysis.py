"""`di convert` with and without the analysis tracks: wall and CPU seconds, cold and warm numba cache.

Run on demand (not a test)::

    python bench/convert_analysis.py [--ranks 16] [--steps 40] [--ops 300]

Traces: the shared Kineto job ``hta_trace_filter`` (2 ranks) and the generated
job of bench/engine.py saved as a .di store (default 16 x 40 x (3 x 300 + 6) =
0.58 M events). Each `di convert` runs as a CLI subprocess to Perfetto and to
OTF2, with the analysis (the default) and with ``--no-analysis``; the first run
of each trace gets an empty ``NUMBA_CACHE_DIR`` (cold: JIT compiles), the
others reuse it; each mode runs once to compile what only it needs
(``first_*``), then again (``warm_*``). CPU seconds are the child's user + system time, which
a shared machine does not inflate as it does wall time. Numbers go to
``bench/out/convert_analysis.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
KINETO = REPO.parent / "shared" / "data" / "kineto"


def run_convert(src: Path, out: Path, cache: str, *flags: str) -> dict[str, float]:
    """Wall and CPU seconds of one `di convert` subprocess."""
    env = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_CACHE_DIR=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "di", "convert", str(src), "-o", str(out), *flags],
        env=env,
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ops", type=int, default=300)
    p.add_argument("--no-generated", action="store_true", help="only the shared Kineto job")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    import di

    OUT.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sources: dict[str, Path] = {}
        if (KINETO / "hta_trace_filter").is_dir():
            sources["hta_trace_filter"] = KINETO / "hta_trace_filter"
        if not args.no_generated:
            from engine import generate

            store = Path(tmp) / "job.di"
            di.save(generate(args.ranks, args.steps, args.ops), store)
            sources["generated"] = store
        for name, src in sources.items():
            cache = tempfile.mkdtemp(prefix="numba-", dir=tmp)
            row: dict[str, object] = {"events": di.load(src).events.height}
            row["cold_perfetto_analysis"] = run_convert(src, Path(tmp) / f"{name}.pftrace", cache)
            modes = {
                f"{fmt}_{label}": (Path(tmp) / f"{name}-{label}.{ext}", flags)
                for fmt, ext in (("perfetto", "pftrace"), ("otf2", "otf2"))
                for label, flags in (("analysis", ()), ("no_analysis", ("--no-analysis",)))
            }
            for key, (
                out,
                flags,
            ) in modes.items():  # first run of each: its own kernels compile (types differ per mode)
                row[f"first_{key}"] = run_convert(src, out, cache, *flags)
            for key, (out, flags) in modes.items():
                row[f"warm_{key}"] = run_convert(src, out, cache, *flags)
            results[name] = row
            print(name, json.dumps(row))
    (OUT / "convert_analysis.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
