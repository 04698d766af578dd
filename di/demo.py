"""Built-in example job: PyTorch-profiler (Kineto) Chrome JSON, one document per rank.

What it models
--------------
A data-parallel training job of ``ranks`` processes with one GPU each (``device`` =
local rank = ``rank % 8``), profiled for ``steps`` iterations. Each step of each rank
runs on the main CPU thread:

1. ``ProfilerStep#N`` (``user_annotation``) spanning the whole step;
2. a data-loader annotation (pure CPU work);
3. ``ops_per_step`` nested PyTorch ops (``cpu_op``: ``aten::linear > aten::addmm``, ...)
   whose innermost op calls the CUDA runtime (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
   ``cudaMemsetAsync``), each launching one ``kernel`` / ``gpu_memcpy`` / ``gpu_memset``
   on the compute stream (tid 7). A stream runs its work in launch order and never
   before the launch call returned plus a launch latency;
4. one gradient allreduce: ``record_param_comms > nccl:all_reduce > cudaLaunchKernelExC``
   launching ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` on the NCCL stream (tid 20).
   A rank's NCCL kernel starts when launched and its compute stream is drained (DDP
   waits for the gradients); every rank's kernel ends together, one ring transfer time
   after the last rank arrived (plus at most ``NCCL_END_JITTER_NS``);
5. ``Optimizer.step#SGD.step > aten::_foreach_add_``, whose kernel waits for the allreduce;
6. a blocking host sync: ``cudaStreamSynchronize`` (a ``cuda_sync`` "Stream Sync" on
   stream 7) or, every third step, ``cudaDeviceSynchronize`` ("Context Sync" on tid -1,
   stream 4294967295, as Kineto writes it). The next step starts after it returns.

The ``straggler`` rank does more CPU work per step (slower data loading and ops), so it
reaches the allreduce last and the other ranks' NCCL kernels wait for it. Wall-clock
step lengths stay equal across ranks (the job is synchronous); the straggler's CPU time
per step and its arrival time at the collective are what differ.

Units and shape
---------------
Times are int64 nanoseconds internally. The documents carry ``baseTimeNanoseconds``
(written last, as Kineto does) and ``ts``/``dur`` in microseconds relative to it,
printed from the integers with exactly three decimals. A runtime call and its device
activity share a ``correlation`` id and an ``ac2g`` flow (``s`` at the call, ``f`` with
``"bp": "e"`` at the activity, id = correlation). Correlation, External and flow ids
restart in every rank's document, as in real per-process traces, and the GPU
``pid`` is the device id, so they collide once ranks are merged. The text layout (line
breaks, key order, Kineto's irregular spacing in ``args``) copies real Kineto output
(HolisticTraceAnalysis ``tests/data/nccl_parser_config``, ``critical_path/alexnet``).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di import _demo_text as text
from di._demo_text import Plan, Timeline

__all__ = ["kineto_job", "write_kineto_job"]

BASE_TIME_NS = 1_717_200_000_000_000_000  # baseTimeNanoseconds (Kineto writes whole seconds)
TRACE_START_REL_NS = 4_458_676_388_068_751  # window start vs. the base, as in HTA's nccl trace
FIRST_STEP_LEAD_NS = 30_000_000  # profiler window opens 30 ms before the first step
STEP_LEAD_NS = 8_000  # ProfilerStep start -> first block
BLOCK_GAP_NS = (1_000, 6_000)  # CPU time between two top-level ops, uniform range
STEP_GAP_NS = (2_000, 9_000)  # previous step end -> next ProfilerStep start
POST_SYNC_NS = (5_000, 15_000)  # sync returned -> ProfilerStep end
LAUNCH_LATENCY_NS = (800, 3_000)  # runtime call end -> earliest device start
STREAM_WAIT_NS = 2_000  # event signalled -> waiting kernel starts
SYNC_RETURN_NS = 3_000  # device idle -> blocking sync call returns
SYNC_EVENT_LAG_NS = 1_500  # cuda_sync device event trails the runtime call by this much
NCCL_END_JITTER_NS = 2_000  # ranks leave the allreduce within this of each other
NCCL_BASE_NS = 20_000  # allreduce latency floor
NCCL_BUS_BYTES_PER_NS = 150.0  # ring bus bandwidth, 150 GB/s (NVLink-class)
ALLREDUCE_NELEMS = 6_637_568  # fp32 gradient bucket, a size seen in the HTA trace
STRAGGLER_CPU_FACTOR = 1.3  # straggler's op CPU time multiplier
STRAGGLER_LOADER_FACTOR = 4.0  # straggler's data-loading time multiplier
DURATION_SIGMA = 0.15  # log-normal spread of every duration
DEVICE_SYNC_EVERY = 3  # every third step ends with cudaDeviceSynchronize


def kineto_job(
    *,
    ranks: int = 4,
    steps: int = 6,
    ops_per_step: int = 40,
    seed: int = 0,
    straggler: int | None = 1,
    render_ranks: list[int] | None = None,
) -> list[bytes]:
    """Generate one Kineto-shaped Chrome JSON document per rank of a simulated job.

    Args:
        ranks: world size (one process and one GPU per rank, 8 GPUs per node).
        steps: profiled iterations (``ProfilerStep#0`` .. ``#steps-1``).
        ops_per_step: top-level PyTorch ops per step before the allreduce.
        seed: random seed; the same arguments give byte-identical documents.
        straggler: the rank doing more CPU work per step, or None for a balanced job.
        render_ranks: ranks whose documents are built (default all, in rank order);
            all ranks are still simulated, so collectives line up the same way.

    Returns:
        UTF-8 JSON documents, one per rendered rank.

    Raises:
        ValueError: a count is below 1 or ``straggler``/``render_ranks`` is out of range.
    """
    _check(ranks, steps, ops_per_step, straggler, render_ranks)
    plan = text.build_plan(ops_per_step, ranks, ALLREDUCE_NELEMS)
    tl = _simulate(plan, ranks, steps, seed, straggler)
    wanted = range(ranks) if render_ranks is None else render_ranks
    return [text.render_rank(plan, tl, r, seed) for r in wanted]


def write_kineto_job(
    directory: str | Path, *, compress: bool = False, **options: Any
) -> list[Path]:
    """Write :func:`kineto_job` documents as ``rank-N.json`` (``.json.gz`` if ``compress``).

    Args:
        directory: created if missing.
        compress: gzip each file.
        **options: the keyword arguments of :func:`kineto_job`.

    Returns:
        The written paths, one per rendered rank.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ranks = options.get("render_ranks") or range(options.get("ranks", 4))
    paths = []
    for rank, doc in zip(ranks, kineto_job(**options)):
        path = out / (f"rank-{rank}.json" + (".gz" if compress else ""))
        path.write_bytes(gzip.compress(doc, compresslevel=6, mtime=0) if compress else doc)
        paths.append(path)
    return paths


def _check(
    ranks: int, steps: int, ops: int, straggler: int | None, render: list[int] | None
) -> None:
    for name, value in (("ranks", ranks), ("steps", steps), ("ops_per_step", ops)):
        if value < 1:
            raise ValueError(f"kineto_job: {name} must be >= 1, got {value}")
    if straggler is not None and not 0 <= straggler < ranks:
        raise ValueError(f"kineto_job: straggler {straggler} is not a rank of 0..{ranks - 1}")
    bad = [r for r in render or [] if not 0 <= r < ranks]
    if bad:
        raise ValueError(f"kineto_job: render_ranks {bad} outside 0..{ranks - 1}")


def _draw(rng: np.random.Generator, median_ns: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Log-normal durations (int64 ns, >= 1) around ``median_ns``."""
    factor = rng.lognormal(0.0, DURATION_SIGMA, size=shape)
    return np.maximum(1, median_ns * factor).astype(np.int64)


def _fifo(ready: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of work items run in order on one stream (last axis).

    ``end[i] = max(ready[i], end[i-1]) + dur[i]``, vectorized: with ``C`` the inclusive
    cumulative duration, ``end - C`` is the running maximum of ``ready - (C - dur)``.
    """
    cum = np.cumsum(dur, axis=-1)
    end = np.maximum.accumulate(ready - (cum - dur), axis=-1) + cum
    return end - dur, end


def _simulate(
    plan: Plan, ranks: int, steps: int, seed: int, straggler: int | None
) -> Timeline:
    """Times of every block, call and device activity of every rank and step."""
    rng = np.random.default_rng(seed)
    shape = (ranks, steps)
    dur = _draw(rng, plan.block_ns, (*shape, plan.block_ns.size))
    if straggler is not None:
        factor = np.where(plan.block_role == text.ROLE_LOADER, STRAGGLER_LOADER_FACTOR,
                          np.where(plan.block_role == text.ROLE_OP, STRAGGLER_CPU_FACTOR, 1.0))
        dur[straggler] = (dur[straggler] * factor).astype(np.int64)
    span = dur + rng.integers(*BLOCK_GAP_NS, size=dur.shape)
    start = STEP_LEAD_NS + np.cumsum(span, axis=-1) - span
    rt_end = start[..., plan.rt_block] + (plan.rt_f1 * dur[..., plan.rt_block]).astype(np.int64)
    ready = rt_end + rng.integers(*LAUNCH_LATENCY_NS, size=rt_end.shape)
    gdur = _draw(rng, plan.gpu_ns, ready.shape)
    ops = plan.rt_role == text.ROLE_STREAM
    g_start, g_end = _fifo(ready[..., ops], gdur[..., ops])
    tl = Timeline(block_start=start, block_dur=dur, op_gpu_start=g_start, op_gpu_end=g_end,
                  **{k: np.zeros(shape, np.int64) for k in Timeline.per_step_fields()})
    _couple_steps(plan, tl, rng, ready, gdur)
    return tl


def _couple_steps(
    plan: Plan, tl: Timeline, rng: np.random.Generator, ready: np.ndarray, gdur: np.ndarray
) -> None:
    """Place steps on the job clock: each step waits for the previous sync, each
    allreduce for its last rank. Loops over steps, vectorized over ranks."""
    ranks, steps = tl.t0.shape
    role = plan.rt_role
    drained = tl.op_gpu_end[..., -1]  # compute stream idle (relative to step start)
    nccl_rel = np.maximum(ready[..., role == text.ROLE_NCCL][..., 0], drained)
    opt_ready = np.maximum(ready[..., role == text.ROLE_OPT][..., 0], drained)
    opt_dur = gdur[..., role == text.ROLE_OPT][..., 0]
    sync_block = plan.rt_block[role == text.ROLE_SYNC][0]
    call_rel, call_min = tl.block_start[..., sync_block], tl.block_dur[..., sync_block]
    step_gap = rng.integers(*STEP_GAP_NS, size=(ranks, steps))
    post = rng.integers(*POST_SYNC_NS, size=(ranks, steps))
    jitter = rng.integers(0, NCCL_END_JITTER_NS, size=(ranks, steps))
    bus_bytes = 4 * ALLREDUCE_NELEMS * 2 * (ranks - 1) / ranks
    ring = _draw(rng, NCCL_BASE_NS + bus_bytes / NCCL_BUS_BYTES_PER_NS, (steps,))
    prev = TRACE_START_REL_NS + FIRST_STEP_LEAD_NS + rng.integers(0, 50_000, size=ranks)
    for s in range(steps):
        t0 = prev + step_gap[:, s]
        arrive = t0 + nccl_rel[:, s]
        done = arrive.max() + ring[s] + jitter[:, s]
        opt_start = np.maximum(t0 + opt_ready[:, s], done + STREAM_WAIT_NS)
        opt_end = opt_start + opt_dur[:, s]
        call0 = t0 + call_rel[:, s]
        call1 = np.maximum(call0 + call_min[:, s], opt_end + SYNC_RETURN_NS)
        prev = call1 + post[:, s]
        for name, value in (("t0", t0), ("nccl_start", arrive), ("nccl_end", done),
                            ("opt_start", opt_start), ("opt_end", opt_end),
                            ("sync_start", call0), ("sync_end", call1), ("step_end", prev)):
            getattr(tl, name)[:, s] = value


@dataclass(frozen=True)
class _Totals:
    """Unused placeholder kept private; see :mod:`di._demo_text` for the model types."""


def _json(value: Any) -> str:
    return json.dumps(value)


_ = pl  # polars is used by di._demo_text; imported here so a missing install fails early
