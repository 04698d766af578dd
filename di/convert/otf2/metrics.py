"""OTF2 Metric records -> ``series`` and ``samples``.

A Metric record (metric class or instance ref, n values) is followed in the
record rows by its n METRIC_VALUE rows; value i belongs to member i of the
metric class. One series per (counter timeline, member); the counter timeline
is the OTF2 location itself when it is a METRIC location, else a ``counter``
location added beside the thread that recorded the metric (its ``loc`` is
given by ``counter_loc``). Values keep the member's unit and the recorded
number (accumulated metrics stay accumulated; the OTF2 mode is in the series
name's source, not applied).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from di.convert.otf2.records import METRIC, METRIC_VALUE
from di.convert.otf2.recordrows import RecordRows
from di.convert.otf2.values import as_float


def series_samples(
    rec: RecordRows, metrics: dict[int, list[dict[str, Any]]], counter_loc: dict[int, int]
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(series, samples, values dropped because their metric is undefined).

    Args:
        rec: the record rows (METRIC rows and the METRIC_VALUE rows that follow each).
        metrics: metric ref -> its members (name, unit).
        counter_loc: OTF2 location index -> loc of its counter timeline.
    """
    mask = rec.of_kind(METRIC, METRIC_VALUE)
    if not mask.any():
        return pl.DataFrame(), pl.DataFrame(), 0
    sel = rec.take(mask)
    is_head = sel.kind == METRIC
    head_id = np.cumsum(is_head) - 1
    metric = sel.metric[is_head][head_id]
    member = np.arange(len(sel)) - np.flatnonzero(is_head)[head_id] - 1
    is_value = ~is_head
    vals = pl.DataFrame(
        {
            "loc": sel.loc[is_value],
            "ts_ns": sel.ts_ns[is_value],
            "metric": metric[is_value],
            "member": member[is_value],
            "value": as_float(sel.value_type[is_value], sel.value_bits[is_value]),
        }
    )
    table = [(ref, i, m["name"], m["unit"]) for ref, ms in metrics.items() for i, m in enumerate(ms)]
    members = pl.DataFrame(
        table, schema={"metric": pl.Int64, "member": pl.Int64, "name": pl.String, "unit": pl.String}, orient="row"
    )
    vals = vals.join(members, on=["metric", "member"], how="left")
    unknown = int(vals["name"].null_count())
    vals = vals.filter(pl.col("name").is_not_null())
    vals = vals.with_columns(
        pl.col("loc").replace_strict(counter_loc, return_dtype=pl.UInt32).alias("series_loc"),
    )
    series = (
        vals.group_by("series_loc", "name", "unit", maintain_order=True)
        .agg(pl.len())
        .sort("series_loc", "name")
        .with_row_index("series")
        .select("series", pl.col("series_loc").alias("loc"), "name", "unit")
    )
    samples = (
        vals.join(series, left_on=["series_loc", "name"], right_on=["loc", "name"], how="left")
        .select("series", "ts_ns", "value")
        .sort("series", "ts_ns")
    )
    return series, samples, unknown
