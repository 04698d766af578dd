"""The critical path's composition on the page: A's and B's contribution by category and by name."""

from __future__ import annotations

from di.viewers.diff import Diff
from di.viewers.diff.page.cells import ROWS
from di.viewers.report.page import Section, ms, pct, table


def critical_path_section(d: Diff) -> Section | None:
    if d.critical_path["a_length_ns"] is None and d.critical_path["b_length_ns"] is None:
        return None
    body = ""
    for df, col in ((d.cp_by_category, "category"), (d.cp_by_name, "name")):
        rows = [
            (
                r[col],
                ms(r["a_contrib_ns"]),
                ms(r["b_contrib_ns"]),
                ms(r["delta_ns"]),
                pct(r["a_share"]),
                pct(r["b_share"]),
            )
            for r in df.head(ROWS if col == "category" else 40).iter_rows(named=True)
        ]
        body += f"<h3>By {col}</h3>" + table(
            f"cp_by_{col}", [col, "a_contrib_ns", "b_contrib_ns", "delta_ns", "a_share", "b_share"], rows
        )
    return Section("critical_path", "Critical path composition", body)
