"""Traces the Perfetto tests run over, and what the trace processor must find in di's protobuf of them.

* every shared Kineto trace (../shared/data/kineto, skipped when absent);
* every shared OTF2 archive, once di reads OTF2;
* a generated 8-rank job: di's demo (GPU streams, launch and sync flows,
  NCCL collectives) plus, per rank, GPU counters (W, %, bytes, B/s) and
  ring messages between the ranks' NCCL kernels.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import di
from di.trace import Trace
from tests.conftest import DATA, is_execution_trace, kineto_files

COUNTERS = (("GPU power", "W"), ("GPU utilization", "%"), ("GPU memory used", "bytes"), ("NVLink TX", "B/s"))
SAMPLE_PERIOD_NS = 1_000_000


def otf2_archives() -> list[Path]:
    """traces.otf2 of every shared OTF2 archive when di has an OTF2 reader; [] otherwise."""
    from di.convert.registry import CONNECTORS

    folder = DATA / "otf2"
    if not folder.is_dir() or not any(c.name == "otf2" and c.read for c in CONNECTORS):
        return []
    return sorted(folder.rglob("traces.otf2"))


def shared_cases() -> list[object]:
    """pytest params: every shared trace file di reads (Kineto, OTF2)."""
    files = [p for p in kineto_files() if not is_execution_trace(p)] + otf2_archives()
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/data is absent"))]
    return [pytest.param(p, id=p.relative_to(DATA).as_posix()) for p in files]


def generated_job(directory: Path, ranks: int = 8, steps: int = 3) -> Trace:
    """The demo job of ``ranks`` ranks with GPU counters and ring messages added."""
    from di.demo import write_kineto_job

    write_kineto_job(directory, ranks=ranks, steps=steps)
    job = di.load(directory)
    start, end = job.meta["time_range"]["start_ns"], job.meta["time_range"]["end_ns"]
    first_loc = int(job.locations.get_column("loc").max()) + 1
    locs = pl.DataFrame(
        {
            "loc": np.arange(first_loc, first_loc + ranks),
            "rank": job.ranks,
            "kind": ["counter"] * ranks,
            "device": np.arange(ranks) % 8,
            "name": ["GPU counters"] * ranks,
            "source": [0] * ranks,
        }
    )
    ts = np.arange(start, end, SAMPLE_PERIOD_NS, dtype=np.int64)
    series, samples = [], []
    for r in range(ranks):
        for k, (name, unit) in enumerate(COUNTERS):
            sid = r * len(COUNTERS) + k
            series.append({"series": sid, "loc": first_loc + r, "name": name, "unit": unit})
            wave = np.sin(np.arange(len(ts)) / 7.0 + r + k)
            samples.append(pl.DataFrame({"series": sid, "ts_ns": ts, "value": 100.0 * (k + 1) * (1.5 + wave)}))
    ev = job.events.with_row_index("row")
    nccl = (
        ev.filter(pl.col("cat") == "nccl")
        .join(job.locations.select("loc", "rank", "kind"), on="loc")
        .filter(pl.col("kind") == "gpu_stream")
        .sort("rank", "start_ns")
    )
    per_rank = [nccl.filter(pl.col("rank") == r).get_column("row").to_numpy() for r in job.ranks]
    calls = min(len(rows) for rows in per_rank)
    send = np.concatenate([per_rank[r][:calls] for r in range(ranks)])
    recv = np.concatenate([per_rank[(r + 1) % ranks][:calls] for r in range(ranks)])
    messages = pl.DataFrame(
        {
            "send": send,
            "recv": recv,
            "bytes": np.full(len(send), 1 << 20),
            "tag": np.arange(len(send)),
            "comm": ["ring"] * len(send),
        }
    )
    return Trace.build(
        meta=job.meta,
        locations=pl.concat([job.locations, locs], how="diagonal_relaxed"),
        events=job.events,
        flows=job.flows,
        messages=messages,
        collectives=job.collectives,
        series=pl.DataFrame(series),
        samples=pl.concat(samples),
    )


@dataclass(frozen=True)
class Expected:
    """What the trace processor must count in di's protobuf of a trace."""

    slices: int
    samples: int
    flows: int
    data_tracks: int
    processes: int
    slice_times: np.ndarray  # (ts, dur) rows sorted
    flow_starts: np.ndarray  # (start of the earlier-starting end, start of the other) rows sorted


def expected(trace: Trace) -> Expected:
    """Counts and times from the canonical trace, by the rules of di.convert.perfetto (lanes, flow edges)."""
    from di.convert.lanes import assign_lanes
    from di.convert.perfetto.flows import collective_edges

    ev = trace.events.sort(["loc", "start_ns", "end_ns"], descending=[False, False, True], maintain_order=True)
    loc, start, end = (ev.get_column(c).to_numpy() for c in ("loc", "start_ns", "end_ns"))
    lanes = assign_lanes(loc.astype(np.int64), start, end)
    tracks = pl.DataFrame({"loc": loc, "lane": lanes}).unique()
    used_series = trace.samples.get_column("series").unique()
    ranks = set(trace.locations.join(tracks.select("loc").unique(), on="loc").get_column("rank").to_list())
    ranks |= set(
        trace.series.filter(pl.col("series").is_in(used_series.implode()))
        .join(trace.locations, on="loc")
        .get_column("rank")
        .to_list()
    )
    all_start = trace.events.get_column("start_ns").to_numpy()
    cs, cd = collective_edges(trace.collectives, all_start)
    src = np.concatenate(
        [trace.flows.get_column("src").to_numpy(), trace.messages.get_column("send").to_numpy(), cs]
    ).astype(np.int64)
    dst = np.concatenate(
        [trace.flows.get_column("dst").to_numpy(), trace.messages.get_column("recv").to_numpy(), cd]
    ).astype(np.int64)
    pairs = np.stack([np.minimum(all_start[src], all_start[dst]), np.maximum(all_start[src], all_start[dst])], axis=1)
    times = np.stack([start, end - start], axis=1)
    return Expected(
        slices=trace.events.height,
        samples=trace.samples.height,
        flows=len(src),
        data_tracks=tracks.height + used_series.len(),
        processes=len(ranks),
        slice_times=times[np.lexsort(times.T[::-1])],
        flow_starts=pairs[np.lexsort(pairs.T[::-1])],
    )
