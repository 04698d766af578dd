"""Device-memory analysis speed: a generated Kineto trace with PyTorch's allocator events through di.engine.memory.

Run on demand (not a test)::

    python bench/memory.py [--steps 20000] [--repeats 3]

The trace is the memory tests' training loop (``tests/test_memory.py``: per step five operators in three
``nn.Module`` regions and a backward call, seven ``[memory]`` events: activations, a leaked loss, a gradient and
three frees), ``--steps`` steps on one rank. Figures, CPU seconds, best of ``--repeats`` after a warm-up:
``allocator_events`` (finding and parsing the events' args), ``memory`` (per device and step), ``memory_holders``
(the allocations alive at the peak and their operators), and ``di.analyze`` with and without ``memory``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    from bench.timing import best_cpu as best

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import polars as pl

    import di
    from di.engine import ANALYSES
    from di.engine.memory import allocator_events, memory, memory_holders
    from di.engine.window import prepare
    from tests.test_memory import kineto_job

    with tempfile.TemporaryDirectory(prefix="di-bench-memory-") as tmp:
        path = Path(tmp) / "trace.json"
        job = kineto_job(0, steps=args.steps)
        job["distributedInfo"]["world_size"] = 1
        path.write_text(json.dumps(job))
        trace = di.load(path)
    frame = prepare(trace)
    ev = allocator_events(trace, frame)
    n = ev.height
    table = memory(frame, per_step=True, events=ev)
    print(f"{trace.events.height:,} events, {n:,} allocator events, {args.steps:,} steps")
    figures = {
        "allocator_events": best(lambda: allocator_events(trace, frame), args.repeats),
        "memory (per step)": best(lambda: memory(frame, per_step=True, events=ev), args.repeats),
        "memory_holders": best(lambda: memory_holders(frame, table, events=ev), args.repeats),
    }
    for name, s in figures.items():
        print(f"{name:20s} {s:6.3f} CPU-s  {n / s / 1e6:6.2f} M allocator events/CPU-s")
    others = tuple(a for a in ANALYSES if a != "memory")
    with_mem = best(lambda: di.analyze(trace, per_step=True), args.repeats)
    without = best(lambda: di.analyze(trace, per_step=True, analyses=others), args.repeats)
    print(f"di.analyze           {with_mem:6.3f} CPU-s with memory, {without:6.3f} without (+{with_mem - without:.3f})")
    peak = table.filter(pl.col("step").is_null() & (pl.col("device") == "cuda:0")).row(0, named=True)
    print(f"peak {peak['peak_bytes'] / 2**20:,.1f} MiB, growth {peak['growth_bytes_per_step'] / 2**20:.1f} MiB/step")


if __name__ == "__main__":
    main()
