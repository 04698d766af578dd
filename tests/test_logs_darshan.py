"""Darshan text output (darshan-dxt-parser, darshan-parser, --total) from ../shared/data/logs/darshan."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import DATA

import di

LOGS = DATA / "logs"


def need(rel: str) -> Path:
    path = LOGS / rel
    if not path.is_file():
        pytest.skip(f"shared test data absent: logs/{rel} not found under ../shared/data")
    return path


def test_dxt_segments_are_io_events_per_rank_in_epoch_time() -> None:
    trace = di.load(need("darshan/release_mpi-io-test-x86_64-3.1.4.dxt-parser.txt"))
    trace.validate()
    assert trace.ranks == [0, 1, 2, 3] and trace.meta["sources"][0]["dropped"] == {}
    ev = trace.events
    assert ev.height == 16 and set(ev.get_column("cat").cast(pl.String)) == {"io"}
    assert set(ev.get_column("bytes")) == {16777216}
    assert trace.meta["clock"]["domain"] == "unix_epoch"
    names = set(trace.locations.get_column("name").to_list())
    assert names == {"darshan X_POSIX", "darshan X_MPIIO"}


def test_parser_counters_and_totals() -> None:
    info = di.load(need("darshan/pydarshan_ior_hdf5_example.darshan-parser.txt")).meta["sources"][0]["info"]["darshan"]
    shared = [
        f for f in info["files"] if f["module"] == "POSIX" and f["rank"] == -1 and f["file"].endswith("test123.h5")
    ]
    assert shared and shared[0]["bytes_written"] == 4195800 and shared[0]["opens"] == 22
    total = di.load(need("darshan/release_mpi-io-test-x86_64-3.4.0.darshan-parser-total.txt")).meta["sources"][0]
    assert total["info"]["darshan"]["totals"]["POSIX_BYTES_WRITTEN"] == 67108864
