"""HolisticTraceAnalysis's figures and timings on the shared Kineto traces (bench only).

Runs in its own environment, never di's (HTA pins pandas < 3):

    python3 -m venv .venv-hta && .venv-hta/bin/pip install holistictraceanalysis 'pandas<3'
    .venv-hta/bin/python bench/hta_compare.py ../shared/data/kineto > bench/out/hta.json

Prints one JSON object: per trace, HTA's temporal breakdown, comm/comp
overlap and (for the hta_critical_path traces) critical path length and its
breakdown by HTA's boundedness and edge type, with the seconds each took.

Side by side, whole process against whole process (issue 16), on one trace:

    .venv-hta/bin/python bench/hta_compare.py --speed TRACE.json.gz [--di .venv/bin/di]

runs ``di analyze TRACE`` and a fresh HTA process that loads the trace and
computes its temporal breakdown and comm/comp overlap (the analyses both
tools have), one after the other with ``POLARS_MAX_THREADS=1``, and prints
each one's wall seconds, CPU seconds (user + system, all threads) and peak
RSS, and the ratios. On a loaded machine compare CPU seconds: wall time
then measures the neighbours.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import os
import subprocess
import tempfile
from pathlib import Path

BREAKDOWN = ("hta_trace_filter", "hta_nccl_parser_config")
CRITICAL = {
    "hta_critical_path/simple_add": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "hta_critical_path/alexnet": ("[param|pytorch.model.alex_net|0|0|0|measure|forward]", 1),
    "hta_critical_path/cuda_event_sync": ("ProfilerStep", 0),
}


def main(root: Path) -> dict:
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    out: dict = {}
    for name in BREAKDOWN:
        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_dir=str(root / name))
        load = time.perf_counter() - t0
        t0 = time.perf_counter()
        tb = ta.get_temporal_breakdown(visualize=False)
        t_tb = time.perf_counter() - t0
        t0 = time.perf_counter()
        ov = ta.get_comm_comp_overlap(visualize=False)
        t_ov = time.perf_counter() - t0
        out[name] = {
            "seconds": {"load": load, "temporal_breakdown": t_tb, "comm_comp_overlap": t_ov},
            "temporal_breakdown": tb.to_dict(orient="records"),
            "comm_comp_overlap": ov.to_dict(orient="records"),
        }
    for name, (annotation, instance) in CRITICAL.items():
        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_dir=str(root / name))
        load = time.perf_counter() - t0
        t0 = time.perf_counter()
        cp, ok = ta.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
        t_cp = time.perf_counter() - t0
        edf = cp.get_critical_path_breakdown()
        df = ta.t.get_trace(0)
        sym = ta.t.symbol_table.get_sym_id_map()
        ann = (
            df[df["name"] == sym[annotation]]
            if annotation in sym
            else df[df["name"].isin([v for k, v in sym.items() if annotation in k])]
        )
        row = ann.sort_values("ts").iloc[instance]
        out[name] = {
            "seconds": {"load": load, "critical_path": t_cp},
            "ok": bool(ok),
            "annotation": annotation,
            "instance": instance,
            "window_us": [int(row["ts"] + ta.t.min_ts), int(row["ts"] + row["dur"] + ta.t.min_ts)],
            "length_us": int(edf.duration.sum()),
            "by_bound": {k: int(v) for k, v in edf.groupby("bound_by").duration.sum().items()},
            "by_edge_type": {str(k): int(v) for k, v in edf.groupby("type").duration.sum().items()},
        }
    return out


HTA_SPEED = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
ta.get_temporal_breakdown(visualize=False)
ta.get_comm_comp_overlap(visualize=False)
"""


def _measured(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall seconds, CPU seconds (user + system of the process and its threads) and peak RSS (MB) of one run."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {err[-500:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def speed(trace: Path, di_cli: str) -> dict:
    """di analyze against HTA's breakdown and overlap on ``trace``, each a fresh process."""
    env = {**os.environ, "POLARS_MAX_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:  # HTA reads every trace of a folder: give it this one alone
        os.symlink(trace.resolve(), Path(tmp) / trace.name)
        subprocess.run([di_cli, "info", str(trace)], env=env, check=True, capture_output=True)  # numba's cache
        di_run = _measured([di_cli, "analyze", str(trace)], env)
        hta_run = _measured([sys.executable, "-c", HTA_SPEED, tmp], env)
    return {
        "trace": str(trace),
        "input_mb": trace.stat().st_size / 2**20,
        "di_analyze": di_run,
        "hta_breakdown_overlap": hta_run,
        "hta_over_di": {k: hta_run[k] / di_run[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")},
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--speed"]:
        di_cli = sys.argv[sys.argv.index("--di") + 1] if "--di" in sys.argv else ".venv/bin/di"
        print(json.dumps(speed(Path(sys.argv[2]), di_cli), indent=1))
    else:
        print(json.dumps(main(Path(sys.argv[1])), indent=1, default=str))
