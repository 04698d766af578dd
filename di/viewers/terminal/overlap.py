"""The overlap section: the share of one activity hidden behind another (communication behind compute ...)."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.viewers.terminal.tables import pct_text, print_table


def render_overlap(result: Analysis, console: Any) -> None:
    from rich.table import Table

    if result.overlap is None:
        return
    t = Table(title="Overlap (% of the first activity hidden behind the second; — = undefined)")
    pairs = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")
    for c in ("rank", "step", *pairs):
        t.add_column(c, justify="right")
    wide = result.overlap.pivot(on="pair", index=["rank", "step"], values="ratio").sort(
        "rank", "step", nulls_last=False
    )
    for r in wide.iter_rows(named=True):
        t.add_row(str(r["rank"]), "" if r["step"] is None else str(r["step"]), *(pct_text(r.get(p)) for p in pairs))
    print_table(console, t)
