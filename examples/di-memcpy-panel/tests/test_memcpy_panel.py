"""The example panel on di's Kineto-shaped demo job: its numbers are the copies' own sums."""

from __future__ import annotations

import polars as pl
from di_memcpy_panel import bandwidth, panel

import di
from di.demo import write_kineto_job
from di.viewers.report import build_report


def test_bandwidth_per_direction(tmp_path):
    write_kineto_job(tmp_path, ranks=2, steps=3)
    trace = di.load(tmp_path)
    bw = bandwidth(trace.events)
    copies = trace.events.filter(pl.col("cat") == "memcpy")
    assert bw.get_column("bytes").sum() == copies.get_column("bytes").sum() > 0
    dtod = bw.filter(pl.col("direction") == "DtoD").row(0, named=True)
    assert dtod["gb_per_s"] == dtod["bytes"] / dtod["time_ns"]
    page, problems = build_report(
        trace, di.analyze(trace, per_step=True), plugins=False, extra_panels=[("memcpy_bandwidth", panel)]
    )
    assert not problems and 'data-table="memcpy_bandwidth"' in page
