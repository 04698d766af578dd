"""The OTF2 writer's regions: one per distinct (name, cat, src_cat, instant) of the events.

Found on the columns' integer (categorical) codes by one numba pass
(:func:`rowids.combined_ids`); only the distinct regions, which are few, are
described in Python: paradigm and role (:func:`categories.region_kind`) and the
description that carries ``cat`` and ``src_cat`` back (:func:`categories.describe`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert.otf2.categories import describe, region_kind
from di.convert.otf2.rowids import combined_ids
from di.convert.otf2.stringtable import Strings
from di.trace import Trace

__all__ = ["plan_regions"]


def plan_regions(trace: Trace, strings: Strings) -> tuple[list[dict[str, Any]], np.ndarray]:
    """One region per distinct (name, cat, src_cat, instant), found on the columns' integer codes; region ref per event row."""
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
        pl.col("name").cast(pl.String), pl.col("cat").cast(pl.String), pl.col("src_cat").cast(pl.String), "instant"
    )
    regions = []
    for name, cat, src_cat, instant in keys.iter_rows():
        paradigm, role = region_kind(cat, src_cat)
        d = describe(cat, src_cat, bool(instant))
        strings.ref(name or "")
        strings.ref(d)
        regions.append({"name": name or "", "description": d, "paradigm": paradigm, "role": role})
    return regions, region
