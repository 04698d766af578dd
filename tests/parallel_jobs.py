"""A generated many-rank job with a known answer, for the parallel analysis tests."""

from __future__ import annotations

import polars as pl
from engine_jobs import Job, late_allreduce

from di import schema
from di.trace import Trace

RANKS = 16
STEPS = 3
LATE_RANK = 5
LATE_MS = 30.0
RING_WAIT_MS = 4.0
"""Each rank's receive from r-1 starts at once and its sender sends only this much later (a late sender)."""


def ring_job() -> Job:
    """``RANKS`` ranks, ``STEPS`` steps (ProfilerStep markers): 100 ms compute (``LATE_RANK`` 100 + ``LATE_MS``), an
    allreduce until 10 ms after the last arrival; then ``STEPS`` ring exchanges: each rank receives from r-1 in
    [t, t + RING_WAIT_MS] and sends to r+1 in [t + RING_WAIT_MS, t + RING_WAIT_MS + 1 ms]."""
    job = late_allreduce(late_rank=LATE_RANK, late_ms=LATE_MS, ranks=RANKS, steps=STEPS)
    t0 = STEPS * (100 + LATE_MS + 10)
    for k in range(STEPS):
        base = t0 + k * 10
        sends, recvs = [], []
        for r in range(RANKS):  # late_allreduce made thread r for rank r
            recvs.append(job.ev(r, base, base + RING_WAIT_MS, "MPI_Recv", "mpi_p2p"))
            sends.append(job.ev(r, base + RING_WAIT_MS, base + RING_WAIT_MS + 1, "MPI_Send", "mpi_p2p"))
        for r in range(RANKS):
            job.message(sends[r], recvs[(r + 1) % RANKS])
    return job


KERNEL_NAMES = 40
"""Distinct kernel names per rank: more than the report's top 25, so that its cut decides which names show."""
SHARDS = 4
"""Input files the ranks read (rank r reads shard r % SHARDS): files shared by ranks of several processes."""
SAMPLE_MS = 5.0


def report_job() -> Trace:
    """:func:`ring_job` with what the report's panels read beyond the analyses: per rank a GPU stream running
    ``KERNEL_NAMES`` kernels per step (durations varying with the rank, so each rank's longest names differ
    from the job's), reads of a shared shard file and writes of its own checkpoint (``bytes`` set), two
    counter series (GPU utilisation in %, a cumulative InfiniBand byte counter), an ``io_files`` table and the
    hosts and transports of each collective (ranks 0-7 on one node over NVLink, the others over InfiniBand)."""
    job = ring_job()
    for r in range(RANKS):
        stream, thread = job.stream(r), r  # ring_job's thread r is rank r's
        for k in range(STEPS):
            t0 = k * (100 + LATE_MS + 10)
            t = t0 + 1.0
            for j in range(KERNEL_NAMES):
                d = 0.5 + ((j * 7 + r * 3) % 11) * 0.05
                job.ev(stream, t, t + d, f"kernel_{j:02d}", "kernel")
                t += d + 0.1
            job.ev(
                thread, t0 + 2, t0 + 3, "read", "io", f'{{"file": "/data/shard-{r % SHARDS}", "b": {4096 * (r + 1)}}}'
            )
            job.ev(thread, t0 + 4, t0 + 4.5 + 0.01 * r, "pwrite64", "io", f'{{"file": "/ckpt/rank-{r}", "b": 1000}}')
            job.ev(thread, t0 + 5, t0 + 5.2, "fstat", "io", f'{{"file": "/data/shard-{r % SHARDS}"}}')
    trace = job.build()
    ev = trace.events
    size = pl.when(pl.col("cat") == "io").then(pl.col("args").str.json_path_match("$.b").cast(pl.Int64))
    ev = ev.with_columns(size.otherwise(pl.col("bytes")).alias("bytes"))
    locs = trace.locations
    threads = locs.filter(pl.col("kind") == "cpu_thread").sort("rank").get_column("loc").to_list()
    streams = locs.filter(pl.col("kind") == "gpu_stream").sort("rank").get_column("loc").to_list()
    series = pl.DataFrame(
        {
            "series": list(range(2 * RANKS)),
            "loc": [x for r in range(RANKS) for x in (streams[r], threads[r])],
            "name": [n for r in range(RANKS) for n in (f"GPU {r} utilization", f"ib port {r} rcv bytes")],
            "unit": ["%", "bytes"] * RANKS,
        },
        schema={"series": pl.UInt32, "loc": pl.UInt32, "name": pl.String, "unit": pl.String},
    )
    end_ms = int(ev.get_column("end_ns").max() // 1_000_000)
    ts = [int(t * SAMPLE_MS * 1_000_000) for t in range(int(end_ms / SAMPLE_MS))]
    samples = pl.DataFrame(
        {
            "series": [s for s in range(2 * RANKS) for _ in ts],
            "ts_ns": ts * (2 * RANKS),
            "value": [
                float((s * 13 + i * 7) % 100) if s % 2 == 0 else float(1000 * i * (s + 1))
                for s in range(2 * RANKS)
                for i in range(len(ts))
            ],
        },
        schema={"series": pl.UInt32, "ts_ns": pl.Int64, "value": pl.Float64},
    )
    io_files = pl.DataFrame(
        {
            "module": ["POSIX"] * SHARDS,
            "rank": [-1] * SHARDS,
            "file": [f"/data/shard-{s}" for s in range(SHARDS)],
            **{c: [10 * (s + 1) for s in range(SHARDS)] for c in ("opens", "reads", "bytes_read", "read_time_ns")},
            **{c: [0] * SHARDS for c in ("writes", "seeks", "syncs", "mmaps", "bytes_written", "write_time_ns")},
            "meta_time_ns": [5] * SHARDS,
        }
    )
    bins = schema.polars_schema("io_files")["read_sizes"]
    sizes = pl.struct(pl.lit(0, pl.Int64).alias(f.name) for f in bins.fields)  # type: ignore[attr-defined]
    io_files = io_files.with_columns(sizes.alias("read_sizes"), sizes.alias("write_sizes"))
    coll = trace.collectives.with_columns(  # as an NCCL log of the job names them (di.convert.logs.combine)
        pl.format('["node{}"]', pl.col("rank") // 8).alias("comm_hosts"),
        pl.when(pl.col("rank") < 8).then(pl.lit("P2P/NVLink")).otherwise(pl.lit("NET/IB")).alias("transports"),
    )
    tables = {**trace.tables(), "events": ev, "series": series, "samples": samples, "collectives": coll}
    out = Trace.build(meta=trace.meta, **{**tables, "io_files": io_files})
    out.validate()
    return out
