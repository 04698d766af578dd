"""Overlap: how much of one activity is hidden behind another, per rank (and step).

Definitions (intervals unioned per rank; ratios in [0, 1]):

- ``comm_compute``: |comm ∩ compute| / |comm| (HolisticTraceAnalysis's
  comm/comp overlap). On a rank with GPU activity comm = communication on its
  GPU streams and compute = its compute kernels; on a host-only rank comm =
  communication calls on its CPU threads and compute = host compute (see below).
- ``memcpy_compute``: |memory ∩ compute| / |memory| (GPU copies and sets
  hidden behind compute kernels).
- ``io_compute``: |io ∩ compute| / |io|, compute as for comm_compute.
- ``cpu_gpu``: |host ∩ gpu| / |host|: the share of host compute time
  (CPU operators, CUDA API, Python, minus sync/comm/io waits on the same
  thread) that runs while the rank's GPUs are busy.

Host compute of a thread = its cpu-activity intervals minus its sync, comm
and io intervals (an operator blocked in a call is not computing). A ratio
whose denominator is empty is null and ``reason`` says why; never NaN.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from di.engine import intervals as iv
from di.engine.classify import COMM, COMPUTE, CPU, IO, MEMORY, NONE, SYNC
from di.engine.groups import make_groups
from di.engine.window import EventFrame

PAIRS = ("comm_compute", "memcpy_compute", "io_compute", "cpu_gpu")


def overlap(frame: EventFrame, *, per_step: bool = False) -> pl.DataFrame:
    """Overlap ratios per rank (and step).

    Returns:
        Long frame: rank, step, pair, numerator_ns, denominator_ns, ratio
        (Float64, null when undefined), reason (String, null when defined).
    """
    act, gpu = frame.activity, frame.on_gpu
    groups = make_groups(frame, by_scope=False, by_step=per_step, include=act != NONE)
    n = groups.n

    # each set is dropped as soon as its last pair is measured: at most three are held at once
    measures: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    gpu_busy = groups.sets(frame, gpu & (act != NONE))
    has_gpu = iv.measure(gpu_busy, n) > 0
    host_compute = _host_compute(frame, groups)
    measures["cpu_gpu"] = _measured(host_compute, gpu_busy, n)
    del gpu_busy
    gpu_compute = groups.sets(frame, gpu & (act == COMPUTE))
    compute = _pick(has_gpu, gpu_compute, host_compute)
    del host_compute
    measures["memcpy_compute"] = _measured(groups.sets(frame, gpu & (act == MEMORY)), gpu_compute, n)
    del gpu_compute
    measures["io_compute"] = _measured(groups.sets(frame, act == IO), compute, n)
    comm = _pick(has_gpu, groups.sets(frame, gpu & (act == COMM)), groups.sets(frame, ~gpu & (act == COMM)))
    measures["comm_compute"] = _measured(comm, compute, n)
    del comm, compute
    why = {
        "comm_compute": "no communication",
        "memcpy_compute": "no GPU memcpy/memset",
        "io_compute": "no I/O",
        "cpu_gpu": "no host compute",
    }
    parts = []
    for pair in why:
        num, den = measures[pair]
        if pair == "cpu_gpu":
            num = np.where(has_gpu, num, 0)
            missing = np.where(den == 0, f"{why[pair]} in the window", "no GPU activity")
            undefined = (den == 0) | ~has_gpu
        else:
            missing = np.full(den.size, f"{why[pair]} in the window")
            undefined = den == 0
        parts.append(
            groups.keys.with_columns(
                pl.lit(pair).alias("pair"),
                pl.Series("numerator_ns", num, dtype=pl.Int64),
                pl.Series("denominator_ns", den, dtype=pl.Int64),
                pl.Series("reason", missing.tolist(), dtype=pl.String).zip_with(
                    pl.Series(undefined), pl.Series([None] * den.size, dtype=pl.String)
                ),
            )
        )
    out = pl.concat(parts).with_columns(
        pl.when(pl.col("reason").is_null())
        .then(pl.col("numerator_ns") / pl.col("denominator_ns"))
        .otherwise(None)
        .alias("ratio")
    )
    return out.select("rank", "step", "pair", "numerator_ns", "denominator_ns", "ratio", "reason").sort(
        "rank", "step", "pair", nulls_last=False
    )


def _host_compute(frame: EventFrame, groups) -> iv.IntervalSet:
    """Host compute per group: per thread, cpu intervals minus sync/comm/io intervals."""
    loc = frame.trace.events.get_column("loc").to_numpy()
    act = frame.activity
    ok = frame.selected & ~frame.on_gpu & (groups.of_event >= 0)
    # group by (group, loc) so a wait on one thread does not hide work on another
    width = int(loc.max()) + 1 if loc.size else 1
    key = groups.of_event * width
    key += loc
    work = np.flatnonzero(ok & (act == CPU))
    wait = np.flatnonzero(ok & np.isin(act, (SYNC, COMM, IO)))
    del ok
    n_keys = max(groups.n, 1) * width
    self_time = iv.subtract(
        iv.union_rows(work, key, frame.start_ns, frame.end_ns, n_keys),
        iv.union_rows(wait, key, frame.start_ns, frame.end_ns, n_keys),
    )
    del key, work, wait
    return iv.union(self_time.group // width, self_time.start_ns, self_time.end_ns)


def _measured(a: iv.IntervalSet, b: iv.IntervalSet, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(|a ∩ b|, |a|) per group 0..n-1, int64 ns."""
    return iv.measure(iv.intersect(a, b), n), iv.measure(a, n)


def _pick(use_first: np.ndarray, a: iv.IntervalSet, b: iv.IntervalSet) -> iv.IntervalSet:
    ka = use_first[a.group]
    kb = ~use_first[b.group]
    return iv.union(
        np.concatenate([a.group[ka], b.group[kb]]),
        np.concatenate([a.start_ns[ka], b.start_ns[kb]]),
        np.concatenate([a.end_ns[ka], b.end_ns[kb]]),
    )
