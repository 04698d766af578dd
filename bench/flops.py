"""Matrix-work analysis speed: di.engine.flops over a Kineto trace whose operators carry their input shapes.

Run on demand (not a test)::

    python bench/flops.py [--steps 5000] [--repeats 3]

The trace is the flops tests' training step (``tests/test_flops.py``: per step a GEMM in ``aten::linear`` with an
``aten::mm`` nested in it, a batched GEMM, flash attention forward and backward, two convolutions and a convolution
backward, an operator without shapes, each launching one kernel on its own ``ac2g`` flow), ``--steps`` steps on
one rank. Figures, CPU seconds, best of ``--repeats`` after a warm-up: ``flop_ops`` (finding the counted operators,
one JSON parse of their args, the work per call and the kernels each launched), ``flop_rates`` and
``operator_flops`` (the tables), and ``di.analyze`` with and without ``flops``.
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
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import di
    from di.engine import ANALYSES
    from di.engine.flops import device_names, flop_ops, flop_rates, operator_flops
    from di.engine.launches import launch_calls
    from di.engine.window import prepare
    from tests.test_flops import flops_job

    with tempfile.TemporaryDirectory(prefix="di-bench-flops-") as tmp:
        path = Path(tmp) / "trace.json"
        job = flops_job(0, steps=args.steps)
        job["distributedInfo"]["world_size"] = 1
        path.write_text(json.dumps(job))
        trace = di.load(path)
    frame = prepare(trace)
    launches = launch_calls(frame)
    ops = flop_ops(frame, launches)
    names = device_names(frame)
    n = ops.height
    print(f"{trace.events.height:,} events, {n:,} counted operators, {args.steps:,} steps")
    figures = {
        "launch_calls": best(lambda: launch_calls(frame), args.repeats),
        "flop_ops": best(lambda: flop_ops(frame, launches), args.repeats),
        "flop_rates (per step)": best(lambda: flop_rates(frame, ops, names, per_step=True), args.repeats),
        "operator_flops": best(lambda: operator_flops(ops, names), args.repeats),
    }
    for name, s in figures.items():
        print(f"{name:22s} {s:6.3f} CPU-s  {n / s / 1e6:6.2f} M operators/CPU-s")
    others = tuple(a for a in ANALYSES if a != "flops")
    with_flops = best(lambda: di.analyze(trace, per_step=True), args.repeats)
    without = best(lambda: di.analyze(trace, per_step=True, analyses=others), args.repeats)
    print(
        f"di.analyze             {with_flops:6.3f} CPU-s with flops, {without:6.3f} without (+{with_flops - without:.3f})"
    )


if __name__ == "__main__":
    main()
