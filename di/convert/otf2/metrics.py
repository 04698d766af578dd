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

from di.convert.otf2 import records as R
from di.convert.otf2.recordrows import RecordRows
from di.convert.otf2.values import as_float


def series_samples(
    rec: RecordRows, metrics: dict[int, list[dict[str, Any]]], counter_loc: dict[int, int]
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(series, samples, values dropped because their metric is undefined).

    Args:
        rec: record rows with columns kind, ts_ns, a, b (METRIC_VALUE: a=type, b=raw value bytes), loc, row.
        metrics: metric ref -> its members (name, unit).
        counter_loc: OTF2 location index -> loc of its counter timeline.
    """
    mask = rec.of_kind(R.METRIC, R.METRIC_VALUE)
    if not mask.any():
        return pl.DataFrame(), pl.DataFrame(), 0
    sel = rec.frame(mask)
    is_head = (sel["kind"] == R.METRIC).to_numpy()
    head_id = np.cumsum(is_head) - 1
    metric = sel["a"].to_numpy()[is_head][head_id]
    member = np.arange(sel.height) - np.flatnonzero(is_head)[head_id] - 1
    vals = sel.with_columns(pl.Series("metric", metric), pl.Series("member", member)).filter(
        pl.col("kind") == R.METRIC_VALUE
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
        pl.Series("value", as_float(vals["a"].to_numpy(), vals["b"].to_numpy())),
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
