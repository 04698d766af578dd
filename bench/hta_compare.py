"""HolisticTraceAnalysis's figures and timings on the shared Kineto traces (bench only).

Runs in its own environment, never di's (HTA pins pandas < 3):

    python3 -m venv .venv-hta && .venv-hta/bin/pip install holistictraceanalysis 'pandas<3'
    .venv-hta/bin/python bench/hta_compare.py ../shared/data/kineto > bench/out/hta.json

Prints one JSON object: per trace, HTA's temporal breakdown, comm/comp
overlap and (for the hta_critical_path traces) critical path length and its
breakdown by HTA's boundedness and edge type, with the seconds each took.
"""

from __future__ import annotations

import json
import logging
import sys
import time
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


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1, default=str))
