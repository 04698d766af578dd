"""Training phases on the page: per rank and phase, A's and B's host time, its share of the rank's steps and the
GPUs' idle time in it."""

from __future__ import annotations

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import ROWS, more
from di.viewers.report.page import Section, ms, num, pct, table


def phases_section(d: Diff) -> Section | None:
    p = d.phases
    if not p.height:
        return None
    rows = [
        (
            num(r["rank"]),
            r["phase"],
            ms(r["a_host_ns"]),
            ms(r["b_host_ns"]),
            ms(r["delta_host_ns"]),
            pct(r["a_host_share"]),
            pct(r["b_host_share"]),
            ms(r["a_gpu_idle_ns"]),
            ms(r["b_gpu_idle_ns"]),
            ms(r["delta_gpu_idle_ns"]),
        )
        for r in p.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "rank",
        "phase",
        "a_host_ns",
        "b_host_ns",
        "delta_host_ns",
        "a_host %",
        "b_host %",
        "a_gpu_idle_ns",
        "b_gpu_idle_ns",
        "delta_gpu_idle_ns",
    ]
    note = (
        "<p class=\"note\">host: the union over the rank's threads of the phase's regions and work (PyTorch's "
        "DataLoader, autograd and optimizer regions, users' forward/backward/optimizer ranges; unmarked work in a "
        "step before its last backward is the forward); host %: of the rank's steps; GPU idle: the part of the host "
        "time with the rank's GPUs running nothing (— for a rank without GPU work, or a run that names no phase of "
        f"the rank). Cells hold the exact ns and fractions.{more(p)}</p>"
    )
    return Section("phases", "Training phases", table("phases", cols, rows) + note)
