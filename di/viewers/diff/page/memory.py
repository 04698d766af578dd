"""Peak device memory on the page: per rank and device, A's and B's peak, the memory reserved then, the growth
per step and the operator at the peak (MiB shown, exact bytes in the cells)."""

from __future__ import annotations

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import ROWS, more
from di.viewers.report.page import Section, mib, pct, table


def memory_section(d: Diff) -> Section | None:
    m = d.memory
    if not m.height:
        return None
    rows = [
        (
            r["rank"],
            r["device"],
            mib(r["a_peak_bytes"]),
            mib(r["b_peak_bytes"]),
            mib(r["delta_peak_bytes"], "+"),
            pct(r["rel_peak"]),
            mib(r["a_reserved_at_peak_bytes"]),
            mib(r["b_reserved_at_peak_bytes"]),
            mib(r["a_growth_bytes_per_step"]),
            mib(r["b_growth_bytes_per_step"]),
            r["a_op"] or "—",
            r["b_op"] or "—",
        )
        for r in m.head(ROWS).iter_rows(named=True)
    ]
    cols = [
        "rank",
        "device",
        "a_peak MiB",
        "b_peak MiB",
        "delta MiB",
        "change %",
        "a_reserved MiB",
        "b_reserved MiB",
        "a_growth MiB/step",
        "b_growth MiB/step",
        "a_op",
        "b_op",
    ]
    note = (
        '<p class="note">The framework allocator\'s peak of allocated memory over the window per rank and device; '
        "reserved: what the allocator held from the driver at the peak (reserved - peak: its cache); growth: the "
        "least-squares slope of the memory at each step's end (null under 3 steps; a steady growth is memory kept "
        f"across steps); op: the operator that reached the peak. Cells hold the exact bytes.{more(m)}</p>"
    )
    return Section("memory", "Peak device memory", table("memory", cols, rows) + note)
