"""The OTF2 writer's regions: one per distinct (name, cat, src_cat, instant) of the events.

Found on the columns' integer (categorical) codes by one numba pass
(:func:`rowids.combined_ids`). A region's paradigm, role and description
(:func:`categories.region_kind`, :func:`categories.describe`) depend only on its
(cat, src_cat, instant), of which a trace has a few dozen: they are made once
per such kind, in Python, and spread to the regions by a join. The names, which
may be as many as the events (a Triton or CUTLASS kernel name per shape), enter
the string table as one column (:meth:`Strings.add_many`), and the regions are
written by one numba loop (:func:`emit.write_definitions`) from the table
:func:`plan_regions` returns: no Python per region.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.convert.otf2.categories import describe, region_kind
from di.convert.otf2.rowids import combined_ids
from di.convert.otf2.stringtable import Strings
from di.trace import Trace

__all__ = ["REGION_FIELDS", "plan_regions"]

REGION_FIELDS = (
    "self",
    "name",
    "canonical_name",
    "description",
    "role",
    "paradigm",
    "flags",
    "source_file",
    "begin_line",
    "end_line",
)
"""Rows of the table :func:`plan_regions` returns: the arguments of ``OTF2_GlobalDefWriter_WriteRegion`` after the
writer (refs, OTF2 enum values; no flags, the source file ``""`` and no lines)."""


def plan_regions(trace: Trace, strings: Strings) -> tuple[np.ndarray, np.ndarray]:
    """(int64 table of the regions, one column each, rows :data:`REGION_FIELDS`; region ref of each event row).

    One region per distinct (name, cat, src_cat, instant), numbered in order of first use."""
    import _otf2

    ev = trace.events
    src = ev["src_cat"]
    if src.null_count() == 0:
        src_code = src.to_physical().to_numpy()
    elif src.null_count() == src.len():
        src_code = np.zeros(src.len(), np.uint32)
    else:
        src_code = (src.to_physical().cast(pl.Int64) + 1).fill_null(0).to_numpy()  # null apart from every category
    region, first = combined_ids(
        ev["name"].to_physical().to_numpy(), ev["cat"].to_physical().to_numpy(), src_code, ev["instant"].to_numpy()
    )
    keys = ev[first].select(
        pl.col("name").cast(pl.String).fill_null(""),
        pl.col("cat").cast(pl.String),
        pl.col("src_cat").cast(pl.String),
        "instant",
    )
    kind_cols = ["cat", "src_cat", "instant"]
    kinds = keys.select(kind_cols).unique(maintain_order=True)
    described = []
    for cat, src_cat, instant in kinds.iter_rows():  # a few dozen kinds, however many regions
        paradigm, role = region_kind(cat, src_cat)
        described.append(
            (
                strings.ref(describe(cat, src_cat, bool(instant))),
                getattr(_otf2, f"REGION_ROLE_{role}").value,
                getattr(_otf2, f"PARADIGM_{paradigm}").value,
            )
        )
    kind_values = pl.DataFrame(described, schema=["description", "role", "paradigm"], orient="row", strict=False)
    of_region = keys.select(kind_cols).join(
        pl.concat([kinds, kind_values], how="horizontal"),
        on=kind_cols,
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )
    table = np.zeros((len(REGION_FIELDS), keys.height), np.int64)
    table[0] = np.arange(keys.height)
    table[1] = table[2] = strings.add_many(keys.get_column("name"))
    for row, col in ((3, "description"), (4, "role"), (5, "paradigm")):
        table[row] = of_region.get_column(col).to_numpy()
    return table, region
