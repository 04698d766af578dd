"""Simulated times of every block, kernel and collective of the job (int64 ns; see :mod:`di.demo`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from di.demo.plan import (
    ALLREDUCE_NELEMS,
    BLOCK_GAP_NS,
    DURATION_SIGMA,
    FIRST_STEP_LEAD_NS,
    KERNEL_GAP_NS,
    LAUNCH_LATENCY_NS,
    NCCL_BASE_NS,
    NCCL_BUS_BYTES_PER_NS,
    NCCL_END_JITTER_NS,
    POST_SYNC_NS,
    ROLE_HOST_SYNC,
    ROLE_LOADER,
    ROLE_NCCL,
    ROLE_OP,
    ROLE_OPT,
    ROLE_STREAM,
    STEP_GAP_NS,
    STEP_LEAD_NS,
    STRAGGLER_CPU_FACTOR,
    STRAGGLER_LOADER_FACTOR,
    STREAM_WAIT_NS,
    SYNC_RETURN_NS,
    TRACE_START_REL_NS,
    Plan,
)


@dataclass
class Timeline:
    """Simulated times (int64 ns): per-block/-activity ones relative to the step start,
    per-step ones (shape (ranks, steps)) on the job clock (relative to the base)."""

    block_start: np.ndarray  # (R, S, B)
    block_dur: np.ndarray  # (R, S, B)
    op_gpu_start: np.ndarray  # (R, S, J) compute-stream work of the ops
    op_gpu_end: np.ndarray
    pid: np.ndarray  # (R,) host process id
    t0: np.ndarray  # ProfilerStep start
    step_end: np.ndarray  # ProfilerStep end
    nccl_start: np.ndarray  # this rank's allreduce kernel
    nccl_end: np.ndarray
    opt_start: np.ndarray  # optimizer kernel (waits for the allreduce)
    opt_end: np.ndarray
    sync_start: np.ndarray  # blocking sync runtime call
    sync_end: np.ndarray


_PER_STEP = [f.name for f in fields(Timeline)][5:]


def _draw(rng: np.random.Generator, median_ns: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Log-normal durations (int64 ns, >= 1) around ``median_ns``."""
    return np.maximum(1, median_ns * rng.lognormal(0.0, DURATION_SIGMA, size=shape)).astype(np.int64)


def _fifo(ready: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of work run in order on one stream (the last axis).

    ``start[i] = max(ready[i], end[i-1] + KERNEL_GAP_NS)``, vectorized: with ``C`` the
    inclusive cumulative sum of ``d = dur + gap``, ``start + d - C`` is the running
    maximum of ``ready - (C - d)``.
    """
    step = dur + KERNEL_GAP_NS
    cum = np.cumsum(step, axis=-1)
    start = np.maximum.accumulate(ready - (cum - step), axis=-1) + cum - step
    return start, start + dur


def share(start: np.ndarray, dur: np.ndarray, block: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Time (ns) at share ``f`` of each node's block span; floor keeps nesting."""
    return start[..., block] + (f * dur[..., block]).astype(np.int64)


def simulate(plan: Plan, ranks: int, steps: int, seed: int, straggler: int | None) -> Timeline:
    """Times of every block, call and device activity of every rank and step."""
    rng = np.random.default_rng(seed)
    dur = _draw(rng, plan.block_ns, (ranks, steps, plan.block_ns.size))
    if straggler is not None:
        role = plan.block_role
        factor = np.where(
            role == ROLE_LOADER, STRAGGLER_LOADER_FACTOR, np.where(role == ROLE_OP, STRAGGLER_CPU_FACTOR, 1.0)
        )
        dur[straggler] = (dur[straggler] * factor).astype(np.int64)
    span = dur + rng.integers(*BLOCK_GAP_NS, size=dur.shape)
    start = STEP_LEAD_NS + np.cumsum(span, axis=-1) - span
    rt_end = share(start, dur, plan.rt_block, plan.rt_f[:, 1])
    ready = rt_end + rng.integers(*LAUNCH_LATENCY_NS, size=rt_end.shape)
    gdur = _draw(rng, plan.gpu_ns, ready.shape)
    ops = plan.rt_role == ROLE_STREAM
    g_start, g_end = _fifo(ready[..., ops], gdur[..., ops])
    pid = rng.integers(100_000, 4_000_000, size=ranks)
    tl = Timeline(start, dur, g_start, g_end, pid, **{k: np.zeros((ranks, steps), np.int64) for k in _PER_STEP})
    _couple_steps(plan, tl, rng, ready, gdur)
    return tl


def _couple_steps(plan: Plan, tl: Timeline, rng: np.random.Generator, ready: np.ndarray, gdur: np.ndarray) -> None:
    """Place steps on the job clock: a step starts after the previous one's sync, an
    allreduce ends after its last rank arrived. Loops over steps, vectorized over ranks."""
    ranks, steps = tl.t0.shape
    role = plan.rt_role
    drained = tl.op_gpu_end[..., -1] + KERNEL_GAP_NS
    nccl_rel = np.maximum(ready[..., role == ROLE_NCCL][..., 0], drained)
    opt_ready = np.maximum(ready[..., role == ROLE_OPT][..., 0], drained)
    opt_dur = gdur[..., role == ROLE_OPT][..., 0]
    sync_block = plan.rt_block[role == ROLE_HOST_SYNC][0]
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
        opt_start = np.maximum(t0 + opt_ready[:, s], done + STREAM_WAIT_NS)  # after the ops
        opt_end = opt_start + opt_dur[:, s]
        call0 = t0 + call_rel[:, s]
        call1 = np.maximum(call0 + call_min[:, s], opt_end + SYNC_RETURN_NS)
        prev = call1 + post[:, s]
        values = (t0, prev, arrive, done, opt_start, opt_end, call0, call1)
        for name, value in zip(_PER_STEP, values):
            getattr(tl, name)[:, s] = value
