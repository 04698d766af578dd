"""Slurm JSON reading speed: a generated ``sacct --json`` document through the parser and through ``di.load``.

Run on demand (not a test)::

    python bench/slurm_json.py [--jobs 12000] [--repeats 3]

The document has the shape of Slurm 24.11's ``sacct --json`` (data_parser v0.0.41: numbers as
``{"set", "infinite", "number"}``, state lists), each job with a batch step and one ``srun`` step, its TRES and
exit codes, pretty-printed as sacct prints it (about 5 KB a job), built with the pieces of the Slurm JSON tests. Figures: MB and jobs per CPU second of
:func:`di.convert.logs.slurm_json.parse_slurm_json` (the bytes in memory) and of ``di.load`` (the file), best of
``--repeats`` after a warm-up, and the parse's share spent in ``orjson.loads`` (building the Python objects).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
T0 = 1780298556


def job(k: int) -> dict[str, Any]:
    """Job ``k``: starts k minutes after T0, runs 50 minutes on two nodes with a batch and an ``srun`` step; every
    7th failed. Built with the Slurm JSON tests' pieces (``tests/test_logs_slurm_json.py``)."""
    from tests.test_logs_slurm_json import exit41, num, step41, tres

    start, end = T0 + 60 * k, T0 + 60 * k + 3000
    state = "FAILED" if k % 7 == 0 else "COMPLETED"
    nodes = f"gpu[{k % 90:02d}-{k % 90 + 1:02d}]"
    return {
        "account": "llm",
        "allocation_nodes": 2,
        "array": {"job_id": 0, "task_id": num(0, set_=False), "task": ""},
        "cluster": "hpc",
        "job_id": 100000 + k,
        "name": f"pretrain-{k % 13}",
        "nodes": nodes,
        "partition": "gpu",
        "qos": "normal",
        "state": {"current": [state], "reason": "None"},
        "exit_code": exit41(1 if state == "FAILED" else 0),
        "derived_exit_code": exit41(0),
        "time": {
            "elapsed": end - start,
            "eligible": start,
            "end": end,
            "limit": num(1440),
            "start": start,
            "submission": start,
        },
        "steps": [
            step41(f"{100000 + k}.batch", "batch", start, end, state, nodes, 2),
            step41(f"{100000 + k}.0", "python", start + 5, end - 1, state, nodes, 2),
        ],
        "tres": {"allocated": tres(("cpu", "", 128), ("mem", "", 524288), ("node", "", 2), ("gres", "gpu:h100", 16))},
        "user": "ada",
        "working_directory": "/home/ada/run",
    }


def main() -> None:
    from bench.timing import best_cpu as best

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=12000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import orjson

    import di
    from di.convert.logs.slurm_json import parse_slurm_json

    doc = {
        "meta": {"plugin": {"data_parser": "data_parser/v0.0.41"}, "slurm": {"release": "24.11.7"}},
        "jobs": [job(k) for k in range(args.jobs)],
        "errors": [],
        "warnings": [],
    }
    data = json.dumps(doc, indent=2).encode()
    mb = len(data) / 1e6
    with tempfile.TemporaryDirectory(prefix="di-bench-slurm-") as tmp:
        path = Path(tmp) / "sacct.json"
        path.write_bytes(data)
        parse = best(lambda: parse_slurm_json(path, data), args.repeats)
        loads = best(lambda: orjson.loads(data), args.repeats)
        load = best(lambda: di.load(path), args.repeats)
    print(f"{args.jobs:,} jobs, {mb:.1f} MB")
    print(
        f"parse_slurm_json  {mb / parse:7.1f} MB/CPU-s  {args.jobs / parse:9,.0f} jobs/CPU-s  (orjson.loads {loads / parse:.0%})"
    )
    print(f"di.load           {mb / load:7.1f} MB/CPU-s  {args.jobs / load:9,.0f} jobs/CPU-s")


if __name__ == "__main__":
    main()
