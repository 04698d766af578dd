"""Built-in example job: PyTorch-profiler (Kineto) Chrome JSON, one document per rank.

What it models
--------------
A data-parallel training job of ``ranks`` processes with one GPU each (``device`` =
local rank = ``rank % 8``), profiled for ``steps`` iterations. Each step of each rank
runs on the main CPU thread (``tid`` = ``pid``):

1. ``ProfilerStep#N`` (``user_annotation``) spanning the whole step, mirrored on the GPU
   by a ``gpu_user_annotation`` of the same name on stream 7;
2. a data-loader annotation (pure CPU work);
3. ``ops_per_step`` nested PyTorch ops (``cpu_op``: ``aten::linear > aten::addmm``, ...)
   whose innermost op calls the CUDA runtime (``cudaLaunchKernel``, ``cudaMemcpyAsync``,
   ``cudaMemsetAsync``), each launching one ``kernel`` / ``gpu_memcpy`` / ``gpu_memset``
   on the compute stream (tid 7). A stream runs its work in launch order, never before
   the launch call returned plus a launch latency;
4. one gradient allreduce: ``record_param_comms > nccl:all_reduce > cudaLaunchKernelExC``
   launching ``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` on the NCCL stream (tid 20).
   A rank's NCCL kernel starts when launched and its compute stream is drained (DDP
   waits for the gradients); all ranks' kernels end together, one ring transfer time
   after the last rank arrived (within ``NCCL_END_JITTER_NS``);
5. ``Optimizer.step#SGD.step > aten::_foreach_add_``, whose kernel waits for the allreduce;
6. a blocking host sync: ``cudaStreamSynchronize`` (``cuda_sync`` "Stream Sync" on
   stream 7) or, every third step, ``cudaDeviceSynchronize`` ("Context Sync" on tid -1,
   stream 4294967295, as Kineto writes it). The next step starts after it returns.

The ``straggler`` rank does more CPU work per step (slower data loading and ops), so it
reaches the allreduce last and the other ranks' NCCL kernels wait for it. Wall-clock
step lengths stay equal across ranks (the job is synchronous); the straggler's CPU time
per step and its arrival at the collective are what differ.

Units and shape
---------------
Times are int64 nanoseconds internally. A document carries ``baseTimeNanoseconds``
(written last, as Kineto does) and ``ts``/``dur`` in microseconds relative to it,
printed from the integers with exactly three decimals. A runtime call and its device
activity share a ``correlation`` id and an ``ac2g`` flow (``s`` at the call, ``f`` with
``"bp": "e"`` at the activity, id = correlation). Correlation, External and flow ids
restart in every rank's document, as in real per-process traces, and GPU ``pid`` is
the device id, so both collide once ranks are merged. Events are written as Kineto
does: CPU ops first, then per correlation the device activity, its ``f``, the runtime
call and its ``s``, then metadata (``M``) and the profiler span. The text layout (line
breaks, key order, Kineto's irregular spacing in ``args``) copies real Kineto output
(HolisticTraceAnalysis ``tests/data/nccl_parser_config`` and ``critical_path/alexnet``).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, fields
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import numpy as np
import polars as pl

__all__ = ["kineto_job", "write_kineto_job"]

BASE_TIME_NS = 1_717_200_000_000_000_000  # baseTimeNanoseconds (Kineto writes whole seconds)
TRACE_START_REL_NS = 4_458_676_388_068_751  # window start vs. the base, as in HTA's nccl trace
FIRST_STEP_LEAD_NS = 30_000_000  # the profiler window opens 30 ms before the first step
STEP_LEAD_NS = 8_000  # ProfilerStep start -> first top-level block
BLOCK_GAP_NS = (1_000, 6_000)  # CPU time between top-level blocks, uniform range
STEP_GAP_NS = (2_000, 9_000)  # previous ProfilerStep end -> next one's start
POST_SYNC_NS = (5_000, 15_000)  # blocking sync returned -> ProfilerStep end
LAUNCH_LATENCY_NS = (800, 3_000)  # runtime call end -> earliest device start
KERNEL_GAP_NS = 1_200  # idle time between back-to-back work on one stream (~1 us on H100)
STREAM_WAIT_NS = 2_000  # allreduce done -> the optimizer kernel waiting on it starts
SYNC_RETURN_NS = 3_000  # device idle -> blocking sync call returns
SYNC_EVENT_LAG_NS = 1_500  # the device-side cuda_sync event trails its runtime call
NCCL_END_JITTER_NS = 2_000  # ranks leave one allreduce within this of each other
NCCL_BASE_NS = 20_000  # allreduce latency floor
NCCL_BUS_BYTES_PER_NS = 150.0  # ring bus bandwidth: 150 GB/s, NVLink class
ALLREDUCE_NELEMS = 6_637_568  # fp32 gradient bucket; a size seen in HTA's nccl trace
STRAGGLER_CPU_FACTOR = 1.3  # straggler's op CPU time multiplier
STRAGGLER_LOADER_FACTOR = 4.0  # straggler's data-loading time multiplier
DURATION_SIGMA = 0.15  # log-normal spread of every duration
DEVICE_SYNC_EVERY = 3  # steps 2, 5, 8, ... end with cudaDeviceSynchronize
CORRELATION_BASE = 4_000  # first correlation id of a document (CUPTI counts from ~1)
COMPUTE_STREAM, NCCL_STREAM = 7, 20  # CUPTI stream ids of a typical DDP process
GPUS_PER_NODE = 8
NUM_SMS = 132  # H100 SXM, used for "blocks per SM"
CBID = {"cudaLaunchKernel": 211, "cudaLaunchKernelExC": 430, "cudaMemcpyAsync": 41,
        "cudaMemsetAsync": 51, "cudaStreamSynchronize": 131, "cudaDeviceSynchronize": 165}

ROLE_LOADER, ROLE_OP, ROLE_ALLREDUCE, ROLE_OPTIMIZER, ROLE_SYNC = range(5)  # blocks
ROLE_STREAM, ROLE_NCCL, ROLE_OPT, ROLE_HOST_SYNC = range(4)  # runtime calls


def _kernel_args(grid: tuple[int, int, int], block: tuple[int, int, int], regs: int,
                 smem: int, occupancy: int) -> str:
    per_sm = grid[0] * grid[1] * grid[2] / NUM_SMS
    warps = per_sm * block[0] * block[1] * block[2] / 32
    g, b = ", ".join(map(str, grid)), ", ".join(map(str, block))
    return (f'"registers per thread": {regs},      "shared memory": {smem},      '
            f'"blocks per SM": {per_sm:.6f},      "warps per SM": {warps:.6f},      '
            f'"grid": [{g}],      "block": [{b}],      "est. achieved occupancy %": {occupancy}')


_EW = "void at::native::vectorized_elementwise_kernel<4, "
_CLAMP = ("at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
          "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
          "() const::{lambda()#7}::operator()() const::{lambda(float)#1}")
_THRESH = ("at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIterator"
           "Base&, float, float)::{lambda(float, float)#1}")
_GEMM = ("sm90_xmma_gemm_f32f32_tf32f32_f32_{}_n_tilesize128x128x32_warpgroupsize1x1x1_"
         "execute_segment_k_off_kernel__5x_cublas")
_SGD = ("at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
        "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float")

_KERNEL_SMALL = _kernel_args((1056, 1, 1), (128, 1, 1), 24, 0, 100)
_KERNEL_GEMM = _kernel_args((8, 16, 1), (384, 1, 1), 168, 213_008, 18)

# device activity templates: key -> (cat, name, median ns, static args or bytes)
_GPU: dict[str, tuple[str, str, int, str | int]] = {
    "gemm_tn": ("kernel", _GEMM.format("tn"), 42_000, _KERNEL_GEMM),
    "gemm_nn": ("kernel", _GEMM.format("nn"), 45_000, _KERNEL_GEMM),
    "clamp": ("kernel", f"{_EW}{_CLAMP}, at::detail::Array<char*, 2> >"
              f"(int, {_CLAMP}, at::detail::Array<char*, 2>)", 9_000, _KERNEL_SMALL),
    "add": ("kernel", f"{_EW}at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
            "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            7_000, _KERNEL_SMALL),
    "threshold": ("kernel", f"{_EW}{_THRESH}, at::detail::Array<char*, 3> >"
                  f"(int, {_THRESH}, at::detail::Array<char*, 3>)", 8_000, _KERNEL_SMALL),
    "sgd": ("kernel", "void at::native::(anonymous namespace)::multi_tensor_apply_kernel"
            f"<{_SGD}>({_SGD})", 30_000, _kernel_args((320, 1, 1), (512, 1, 1), 40, 0, 50)),
    "nccl": ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             0, _kernel_args((16, 1, 1), (640, 1, 1), 96, 87_568, 0)),
    "copy": ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 6_000, 4_194_304),
    "zero": ("gpu_memset", "Memset (Device)", 3_000, 2_097_152),
    "sync": ("cuda_sync", "Stream Sync", 0, 0),
}
_GPU_KEYS = list(_GPU)

# block templates: key -> (median CPU ns, nodes); node = (depth, cat, name, f0, f1, gpu key)
# where [f0, f1] is the node's share of its block's span (children nest by construction)
_Node = tuple[int, str, str, float, float, str | None]
_OP, _UA, _RT, _LAUNCH = "cpu_op", "user_annotation", "cuda_runtime", "cudaLaunchKernel"
_BLOCKS: dict[str, tuple[int, tuple[_Node, ...]]] = {
    "loader": (120_000, (
        (0, _UA, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 1, None),)),
    "linear": (45_000, (
        (0, _OP, "aten::linear", 0, 1, None),
        (1, _OP, "aten::t", .04, .22, None),
        (2, _OP, "aten::transpose", .07, .19, None),
        (3, _OP, "aten::as_strided", .1, .16, None),
        (1, _OP, "aten::addmm", .28, .96, None),
        (2, _RT, _LAUNCH, .62, .9, "gemm_tn"))),
    "relu": (18_000, (
        (0, _OP, "aten::relu", 0, 1, None),
        (1, _OP, "aten::clamp_min", .15, .92, None),
        (2, _RT, _LAUNCH, .45, .85, "clamp"))),
    "add": (14_000, (
        (0, _OP, "aten::add_", 0, 1, None),
        (1, _RT, _LAUNCH, .4, .85, "add"))),
    "view": (6_000, ((0, _OP, "aten::view", 0, 1, None),)),
    "copy": (20_000, (
        (0, _OP, "aten::copy_", 0, 1, None),
        (1, _RT, "cudaMemcpyAsync", .35, .9, "copy"))),
    "zero": (16_000, (
        (0, _OP, "aten::zero_", 0, 1, None),
        (1, _OP, "aten::fill_", .2, .95, None),
        (2, _RT, "cudaMemsetAsync", .45, .88, "zero"))),
    "addmm_bwd": (60_000, (
        (0, _OP, "autograd::engine::evaluate_function: AddmmBackward0", 0, 1, None),
        (1, _OP, "AddmmBackward0", .06, .9, None),
        (2, _OP, "aten::mm", .3, .85, None),
        (3, _RT, _LAUNCH, .55, .8, "gemm_nn"))),
    "relu_bwd": (22_000, (
        (0, _OP, "autograd::engine::evaluate_function: ReluBackward0", 0, 1, None),
        (1, _OP, "ReluBackward0", .08, .9, None),
        (2, _OP, "aten::threshold_backward", .2, .85, None),
        (3, _RT, _LAUNCH, .5, .8, "threshold"))),
    "allreduce": (180_000, (
        (0, _OP, "record_param_comms", 0, 1, None),
        (1, _UA, "nccl:all_reduce", .1, .6, None),
        (2, _RT, "cudaLaunchKernelExC", .3, .5, "nccl"))),
    "optimizer": (60_000, (
        (0, _UA, "Optimizer.step#SGD.step", 0, 1, None),
        (1, _OP, "aten::_foreach_add_", .1, .95, None),
        (2, _RT, _LAUNCH, .5, .8, "sgd"))),
    "sync": (6_000, ((0, _RT, "cudaStreamSynchronize", 0, 1, "sync"),)),
}
_OP_CYCLE = ("linear", "relu", "linear", "add", "view", "copy", "addmm_bwd", "relu_bwd",
             "addmm_bwd", "zero")
_BLOCK_ROLE = {"loader": ROLE_LOADER, "allreduce": ROLE_ALLREDUCE,
               "optimizer": ROLE_OPTIMIZER, "sync": ROLE_SYNC}
_CALL_ROLE = {"nccl": ROLE_NCCL, "sgd": ROLE_OPT, "sync": ROLE_HOST_SYNC}


@dataclass(frozen=True)
class _Plan:
    """One step's static structure: top-level blocks, CPU nodes, runtime calls.

    CPU nodes exclude the ``ProfilerStep`` root, which is node 0 of the step's
    External-id numbering (node ``i`` of ``cpu_*`` is number ``i + 1``).
    """

    ranks: int
    block_ns: np.ndarray  # (B,) median CPU time of each block
    block_role: np.ndarray  # (B,) ROLE_LOADER .. ROLE_SYNC
    cpu_block: np.ndarray  # (C,) block of each CPU node
    cpu_f: np.ndarray  # (C, 2) share of the block span
    cpu_kind: np.ndarray  # (C,) index into cpu_kinds
    cpu_kinds: list[tuple[str, str]]  # (cat, name)
    rt_block: np.ndarray  # (N,) block of each runtime call
    rt_f: np.ndarray  # (N, 2)
    rt_parent: np.ndarray  # (N,) number of the enclosing CPU node (0 = ProfilerStep)
    rt_role: np.ndarray  # (N,) ROLE_STREAM .. ROLE_HOST_SYNC
    rt_gpu: np.ndarray  # (N,) index into _GPU_KEYS
    gpu_ns: np.ndarray  # (N,) median device time


def _build_plan(ops_per_step: int, ranks: int) -> _Plan:
    names = ["loader", *(_OP_CYCLE[k % len(_OP_CYCLE)] for k in range(ops_per_step)),
             "allreduce", "optimizer", "sync"]
    kinds: dict[tuple[str, str], int] = {}
    cpu: list[tuple[int, float, float, int]] = []
    rt: list[tuple[int, float, float, int, int, int]] = []
    for b, name in enumerate(names):
        enclosing = {0: 0}  # depth -> number of the innermost open CPU node
        for depth, cat, op, f0, f1, gpu in _BLOCKS[name][1]:
            if cat == _RT:
                role = _CALL_ROLE.get(gpu or "", ROLE_STREAM)
                rt.append((b, f0, f1, enclosing[depth], role, _GPU_KEYS.index(gpu or "")))
                continue
            cpu.append((b, f0, f1, kinds.setdefault((cat, op), len(kinds))))
            enclosing[depth + 1] = len(cpu)
    c, r = np.array(cpu, dtype=np.float64), np.array(rt, dtype=np.float64)
    return _Plan(
        ranks=ranks,
        block_ns=np.array([_BLOCKS[n][0] for n in names], dtype=np.float64),
        block_role=np.array([_BLOCK_ROLE.get(n, ROLE_OP) for n in names]),
        cpu_block=c[:, 0].astype(np.int64), cpu_f=c[:, 1:3], cpu_kind=c[:, 3].astype(np.int64),
        cpu_kinds=list(kinds), rt_block=r[:, 0].astype(np.int64), rt_f=r[:, 1:3],
        rt_parent=r[:, 3].astype(np.int64), rt_role=r[:, 4].astype(np.int64),
        rt_gpu=r[:, 5].astype(np.int64),
        gpu_ns=np.array([_GPU[_GPU_KEYS[int(g)]][2] for g in r[:, 5]], dtype=np.float64))


@dataclass
class _Timeline:
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


_PER_STEP = [f.name for f in fields(_Timeline)][5:]


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
        steps: profiled iterations, ``ProfilerStep#0`` .. ``#steps-1``.
        ops_per_step: top-level PyTorch ops per step before the allreduce.
        seed: random seed; the same arguments give byte-identical documents.
        straggler: the rank doing more CPU work per step, or None for a balanced job.
        render_ranks: ranks whose documents are built (default all, in rank order);
            every rank is still simulated, so the collectives come out the same.

    Returns:
        UTF-8 JSON documents, one per rendered rank. With the defaults each holds
        1,629 events (6,516 for the job); an event costs about 260 bytes.

    Raises:
        ValueError: a count is below 1, or ``straggler``/``render_ranks`` is no rank.
    """
    return [bytes(doc) for _, doc in _documents(ranks, steps, ops_per_step, seed, straggler,
                                                render_ranks)]


def write_kineto_job(directory: str | Path, *, compress: bool = False, ranks: int = 4,
                     steps: int = 6, ops_per_step: int = 40, seed: int = 0,
                     straggler: int | None = 1,
                     render_ranks: list[int] | None = None) -> list[Path]:
    """Write the documents of :func:`kineto_job` (same arguments) as ``rank-N.json``.

    Args:
        directory: created if missing.
        compress: write ``rank-N.json.gz`` instead (gzip level 6, no timestamp, so the
            bytes are reproducible).

    Returns:
        The written paths, one per rendered rank.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank, doc in _documents(ranks, steps, ops_per_step, seed, straggler, render_ranks):
        path = out / (f"rank-{rank}.json" + (".gz" if compress else ""))
        with open(path, "wb") as raw:
            if compress:
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                    gz.write(doc)
            else:
                raw.write(doc)
        paths.append(path)
    return paths


def _documents(ranks: int, steps: int, ops: int, seed: int, straggler: int | None,
               render: list[int] | None) -> Iterator[tuple[int, memoryview]]:
    _check(ranks, steps, ops, straggler, render)
    plan = _build_plan(ops, ranks)
    tl = _simulate(plan, ranks, steps, seed, straggler)
    for r in range(ranks) if render is None else render:
        yield r, _render(plan, tl, r)


def _check(ranks: int, steps: int, ops: int, straggler: int | None,
           render: list[int] | None) -> None:
    for name, value in (("ranks", ranks), ("steps", steps), ("ops_per_step", ops)):
        if value < 1:
            raise ValueError(f"kineto_job: {name} must be >= 1, got {value}")
    if straggler is not None and not 0 <= straggler < ranks:
        raise ValueError(f"kineto_job: straggler {straggler} is not a rank in 0..{ranks - 1}")
    bad = [r for r in render or [] if not 0 <= r < ranks]
    if bad:
        raise ValueError(f"kineto_job: render_ranks {bad} are not ranks in 0..{ranks - 1}")


# ---------------------------------------------------------------- simulation


def _draw(rng: np.random.Generator, median_ns: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Log-normal durations (int64 ns, >= 1) around ``median_ns``."""
    return np.maximum(1, median_ns * rng.lognormal(0.0, DURATION_SIGMA, size=shape)).astype(
        np.int64)


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


def _share(start: np.ndarray, dur: np.ndarray, block: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Time (ns) at share ``f`` of each node's block span; floor keeps nesting."""
    return start[..., block] + (f * dur[..., block]).astype(np.int64)


def _simulate(plan: _Plan, ranks: int, steps: int, seed: int, straggler: int | None) -> _Timeline:
    """Times of every block, call and device activity of every rank and step."""
    rng = np.random.default_rng(seed)
    dur = _draw(rng, plan.block_ns, (ranks, steps, plan.block_ns.size))
    if straggler is not None:
        role = plan.block_role
        factor = np.where(role == ROLE_LOADER, STRAGGLER_LOADER_FACTOR,
                          np.where(role == ROLE_OP, STRAGGLER_CPU_FACTOR, 1.0))
        dur[straggler] = (dur[straggler] * factor).astype(np.int64)
    span = dur + rng.integers(*BLOCK_GAP_NS, size=dur.shape)
    start = STEP_LEAD_NS + np.cumsum(span, axis=-1) - span
    rt_end = _share(start, dur, plan.rt_block, plan.rt_f[:, 1])
    ready = rt_end + rng.integers(*LAUNCH_LATENCY_NS, size=rt_end.shape)
    gdur = _draw(rng, plan.gpu_ns, ready.shape)
    ops = plan.rt_role == ROLE_STREAM
    g_start, g_end = _fifo(ready[..., ops], gdur[..., ops])
    pid = rng.integers(100_000, 4_000_000, size=ranks)
    tl = _Timeline(start, dur, g_start, g_end, pid,
                  **{k: np.zeros((ranks, steps), np.int64) for k in _PER_STEP})
    _couple_steps(plan, tl, rng, ready, gdur)
    return tl


def _couple_steps(plan: _Plan, tl: _Timeline, rng: np.random.Generator, ready: np.ndarray,
                  gdur: np.ndarray) -> None:
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


# ---------------------------------------------------------------- text


def _us(col: str | pl.Expr) -> pl.Expr:
    """Integer ns -> Kineto's microsecond text with exactly three decimals."""
    ns = pl.col(col) if isinstance(col, str) else col
    return pl.concat_str([(ns // 1000).cast(pl.String), pl.lit("."),
                          (ns % 1000 + 1000).cast(pl.String).str.slice(1)])


def _text(df: pl.DataFrame, *pieces: str | pl.Expr) -> pl.DataFrame:
    """(key, text) rows: literal strings and expressions concatenated per row, each
    followed by the ``,\\n`` that separates events."""
    parts = [pl.lit(p) if isinstance(p, str) else p for p in (*pieces, ",\n")]
    return df.select("key", pl.concat_str(parts).alias("text"))


def _ints(col: str | pl.Expr) -> pl.Expr:
    return (pl.col(col) if isinstance(col, str) else col).cast(pl.String)


def _x_head(cat: str, name: str, pid: int, tid: int) -> str:
    return (f'  {{\n    "ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, '
            f'"tid": {tid},\n    "ts": ')


_X_MID = ', "dur": '
_ARGS = ',\n    "args": {\n      "External id": '
_END = "\n    }\n  }"
SECTION_GPU, SECTION_GPU_ANNOTATION = 1 << 41, 1 << 43  # sort keys after the CPU ops


def _grid(per_step: np.ndarray, steps: int) -> dict[str, np.ndarray]:
    """Flattened (step, node) coordinates in time order."""
    n = per_step.size
    return {"step": np.repeat(np.arange(steps), n), "node": np.tile(np.arange(n), steps)}


def _cpu_frames(plan: _Plan, tl: _Timeline, r: int, pid: int) -> list[pl.DataFrame]:
    """ProfilerStep roots plus every nested CPU op/annotation."""
    t0 = tl.t0[r][:, None]
    start = t0 + _share(tl.block_start[r], tl.block_dur[r], plan.cpu_block, plan.cpu_f[:, 0])
    end = t0 + _share(tl.block_start[r], tl.block_dur[r], plan.cpu_block, plan.cpu_f[:, 1])
    per = plan.cpu_block.size + 1
    g = _grid(plan.cpu_block, tl.t0.shape[1])
    ev = g["step"] * per + g["node"] + 1
    df = pl.DataFrame({"key": ev, "kind": np.tile(plan.cpu_kind, tl.t0.shape[1]),
                       "ts": start.ravel(), "dur": (end - start).ravel()})
    frames = []
    for (kind,), part in df.partition_by("kind", as_dict=True).items():
        cat, name = plan.cpu_kinds[kind]
        mid, tail = _comms_args(plan.ranks) if name == "record_param_comms" else ("", "")
        frames.append(_text(part, _x_head(cat, name, pid, pid), _us("ts"), _X_MID, _us("dur"),
                            *_record_ids(), f', {mid}"Ev Idx": ', _ints("key"), tail, _END))
    steps = np.arange(tl.t0.shape[1])
    roots = pl.DataFrame({"key": steps * per, "step": steps, "ts": tl.t0[r],
                          "dur": tl.step_end[r] - tl.t0[r]})
    frames.append(_text(roots, '  {\n    "ph": "X", "cat": "user_annotation", "name": '
                        '"ProfilerStep#', _ints("step"), f'", "pid": {pid}, "tid": {pid},\n'
                        '    "ts": ', _us("ts"), _X_MID, _us("dur"), *_record_ids(),
                        ', "Ev Idx": ', _ints("key"), _END))
    return frames


def _record_ids() -> tuple[str | pl.Expr, ...]:
    """A CPU op's ids: Ev Idx = row key, External id = key + 1, Record function id = key."""
    return _ARGS, _ints(pl.col("key") + 1), ',"Record function id": ', _ints("key")


def _comms_args(ranks: int) -> tuple[str, str]:
    """record_param_comms args around its "Ev Idx", in Kineto's order."""
    n, rank_list = ALLREDUCE_NELEMS, json.dumps(list(range(ranks)))
    mid = (f'"Process Group Name": "0", "Global rank stride": 1, "Out msg nelems": {n}, '
           f'"Process Group Ranks": "{rank_list}", "Group size": {ranks}, '
           '"Global rank start": 0, ')
    tail = (f', "In msg nelems": {n}, "In split size": "[]", "Out split size": "[]", '
            '"dtype": "Float", "Process Group Description": "default_pg", '
            '"Collective name": "allreduce"')
    return mid, tail


def _collective_kernel_args(ranks: int) -> str:
    n = ALLREDUCE_NELEMS
    return (f', "Collective name": "allreduce", "In msg nelems": {n}, "Out msg nelems": {n}, '
            f'"Group size": {ranks}, "dtype": "Float", "In split size": "[]", '
            '"Out split size": "[]", "Process Group Name": "0", "Process Group Description": '
            f'"default_pg", "Process Group Ranks": "{json.dumps(list(range(ranks)))}"')


def _device_times(plan: _Plan, tl: _Timeline, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, calls) start and end of every call's device activity, job clock."""
    t0 = tl.t0[r][:, None]
    start = np.zeros((tl.t0.shape[1], plan.rt_role.size), np.int64)
    end = np.zeros_like(start)
    ops = plan.rt_role == ROLE_STREAM
    start[:, ops], end[:, ops] = t0 + tl.op_gpu_start[r], t0 + tl.op_gpu_end[r]
    for role, a, b in ((ROLE_NCCL, tl.nccl_start, tl.nccl_end),
                       (ROLE_OPT, tl.opt_start, tl.opt_end)):
        cols = plan.rt_role == role
        start[:, cols], end[:, cols] = a[r, :, None], b[r, :, None]
    sync = plan.rt_role == ROLE_HOST_SYNC
    s0 = tl.sync_start[r] + SYNC_EVENT_LAG_NS
    start[:, sync] = s0[:, None]
    end[:, sync] = np.maximum(s0, tl.sync_end[r] - SYNC_EVENT_LAG_NS)[:, None]
    return start, end


def _runtime_frame(plan: _Plan, tl: _Timeline, r: int) -> pl.DataFrame:
    """One row per runtime call: its times, ids and device activity's times."""
    steps = tl.t0.shape[1]
    t0 = tl.t0[r][:, None]
    start = t0 + _share(tl.block_start[r], tl.block_dur[r], plan.rt_block, plan.rt_f[:, 0])
    end = t0 + _share(tl.block_start[r], tl.block_dur[r], plan.rt_block, plan.rt_f[:, 1])
    sync = plan.rt_role == ROLE_HOST_SYNC
    end[:, sync] = tl.sync_end[r][:, None]
    g_start, g_end = _device_times(plan, tl, r)
    g = _grid(plan.rt_block, steps)
    n = plan.rt_block.size
    device_sync = (g["step"] % DEVICE_SYNC_EVERY == DEVICE_SYNC_EVERY - 1) & sync[g["node"]]
    return pl.DataFrame({
        "corr": CORRELATION_BASE + g["step"] * n + g["node"],
        "ext": g["step"] * (plan.cpu_block.size + 1) + plan.rt_parent[g["node"]] + 1,
        "gpu": plan.rt_gpu[g["node"]], "device_sync": device_sync,
        "ts": start.ravel(), "dur": (end - start).ravel(),
        "gts": g_start.ravel(), "gdur": (g_end - g_start).ravel()})


def _runtime_texts(rt: pl.DataFrame, pid: int) -> list[pl.DataFrame]:
    """cuda_runtime calls and their ``s`` flow starts."""
    rt = rt.with_columns(key=SECTION_GPU + pl.col("corr") * 4 + 2)
    frames = []
    for (gpu, dsync), part in rt.partition_by("gpu", "device_sync", as_dict=True).items():
        name = _call_name(_GPU_KEYS[gpu], dsync)
        frames.append(_text(part, _x_head("cuda_runtime", name, pid, pid), _us("ts"), _X_MID,
                            _us("dur"), _ARGS, _ints("ext"), f',      "cbid": {CBID[name]}, '
                            '"correlation": ', _ints("corr"), _END))
    flows = rt.with_columns(key=pl.col("key") + 1)
    frames.append(_text(flows, '  {\n    "ph": "s", "id": ', _ints("corr"), f', "pid": {pid}, '
                        f'"tid": {pid}, "ts": ', _us("ts"), ',\n    "cat": "ac2g", "name": '
                        '"ac2g"\n  }'))
    return frames


_CALL_NAMES = {"copy": "cudaMemcpyAsync", "zero": "cudaMemsetAsync",
               "nccl": "cudaLaunchKernelExC", "sync": "cudaStreamSynchronize"}


def _call_name(gpu_key: str, device_sync: bool) -> str:
    if device_sync:
        return "cudaDeviceSynchronize"
    return _CALL_NAMES.get(gpu_key, _LAUNCH)


def _device_texts(rt: pl.DataFrame, dev: int, ranks: int) -> list[pl.DataFrame]:
    """Device activities (kernels, copies, sets, syncs) and their ``f`` flow ends."""
    rt = rt.with_columns(key=SECTION_GPU + pl.col("corr") * 4)
    frames = []
    for (gpu, dsync), part in rt.partition_by("gpu", "device_sync", as_dict=True).items():
        key = _GPU_KEYS[gpu]
        cat, name, _, static = _GPU[key]
        tid = -1 if dsync else NCCL_STREAM if key == "nccl" else COMPUTE_STREAM
        if cat == "cuda_sync":
            name = "Context Sync" if dsync else "Stream Sync"
        head = (_x_head(cat, name, dev, tid), _us("gts"), _X_MID, _us("gdur"), _ARGS,
                _ints("ext"))
        frames.append(_text(part, *head, *_device_args(cat, name, key, dev, tid, static, ranks)))
        frames.append(_text(part.with_columns(key=pl.col("key") + 1),
                            '  {\n    "ph": "f", "id": ', _ints("corr"), f', "pid": {dev}, '
                            f'"tid": {tid}, "ts": ', _us("gts"), ',\n    "cat": "ac2g", '
                            '"name": "ac2g", "bp": "e"\n  }'))
    return frames


def _device_args(cat: str, name: str, key: str, dev: int, tid: int, static: str | int,
                 ranks: int) -> list[str | pl.Expr]:
    """The args text after ``"External id": N`` of one kind of device activity."""
    if cat == "cuda_sync":
        stream = 4294967295 if tid == -1 else tid
        return [f',\n      "cuda_sync_kind": "{name}",\n      "stream": {stream}, '
                '"correlation": ', _ints("corr"), f',\n      "device": {dev}, "context": 1',
                _END]
    ids = [',      "queued": 0, ' if cat == "kernel" else ",      ",
           f'"device": {dev}, "context": 1,      "stream": {tid}, "correlation": ',
           _ints("corr"), ",      "]
    if cat == "kernel":
        extra = _collective_kernel_args(ranks) if key == "nccl" else ""
        return [*ids, f"{static}{extra}", _END]
    bandwidth = (pl.lit(float(static)) / pl.col("gdur")).cast(pl.String)  # bytes/ns = GB/s
    return [*ids, f'"bytes": {static}, "memory bandwidth (GB/s)": ', bandwidth, _END]


def _gpu_step_frame(plan: _Plan, tl: _Timeline, r: int, dev: int) -> pl.DataFrame:
    """ProfilerStep#N mirrored on the compute stream as gpu_user_annotation."""
    steps = np.arange(tl.t0.shape[1])
    first = tl.t0[r] + (tl.op_gpu_start[r][:, 0] if tl.op_gpu_start.shape[-1] else 0)
    first = np.minimum(first, tl.opt_start[r])
    df = pl.DataFrame({"key": SECTION_GPU_ANNOTATION + steps, "step": steps, "ts": first,
                       "dur": tl.opt_end[r] - first,
                       "ext": steps * (plan.cpu_block.size + 1) + 1})
    return _text(df, '  {\n    "ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#',
                 _ints("step"), f'", "pid": {dev}, "tid": {COMPUTE_STREAM},\n    "ts": ',
                 _us("ts"), _X_MID, _us("dur"), _ARGS, _ints("ext"), "\n    }\n  }")


def _render(plan: _Plan, tl: _Timeline, r: int) -> memoryview:
    """The complete document of rank ``r``, as a view of one Arrow string buffer.

    Every event row is rendered with its separator and rows are sorted by key; the
    buffer of a contiguous ``large_string`` array is then the document, so it is
    materialized once (a join or CSV writer would copy it again, slowly).
    """
    pid, dev, steps = int(tl.pid[r]), r % GPUS_PER_NODE, tl.t0.shape[1]
    rt = _runtime_frame(plan, tl, r)
    end = int(tl.step_end[r].max()) + 1_000_000
    tail = _metadata(pid, dev, plan.ranks, TRACE_START_REL_NS, steps)
    tail += _span(TRACE_START_REL_NS, end)
    frames = [pl.DataFrame({"key": [-1], "text": [_header(r, plan.ranks)]}),
              *_cpu_frames(plan, tl, r, pid), *_runtime_texts(rt, pid),
              *_device_texts(rt, dev, plan.ranks), _gpu_step_frame(plan, tl, r, dev),
              pl.DataFrame({"key": [1 << 62], "text": [",\n".join(tail) + _footer(r)]})]
    text = pl.concat(frames).sort("key")["text"]
    arrow = text.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string
    offsets = np.frombuffer(arrow.buffers()[1], np.int64)
    first, last = offsets[arrow.offset], offsets[arrow.offset + len(arrow)]
    return memoryview(arrow.buffers()[2])[first:last]


def _fmt(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _header(r: int, ranks: int) -> str:
    devices = ",\n".join(
        f'    {{\n      "id": {d}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": '
        '85018279936,\n      "computeMajor": 9, "computeMinor": 0,\n      "maxThreadsPerBlock": '
        '1024, "maxThreadsPerMultiprocessor": 2048,\n      "regsPerBlock": 65536, "warpSize": '
        f'32,\n      "sharedMemPerBlock": 49152, "numSms": {NUM_SMS}\n    , '
        '"regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, '
        '"sharedMemPerMultiprocessor": 233472\n    }' for d in range(min(ranks, GPUS_PER_NODE)))
    members = list(range(ranks))
    info = {"backend": "nccl", "rank": r, "world_size": ranks, "pg_count": 1,
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                           "pg_size": ranks, "ranks": members}], "nccl_version": "2.21.5"}
    return (f'\n{{\n  "schemaVersion": 1,\n  "deviceProperties": [\n{devices}\n  ],\n'
            f'  "distributedInfo": {json.dumps(info)},\n  "traceEvents": [\n')


def _meta(name: str, ts: str, pid: int | str, tid: int, key: str, value: Any) -> str:
    return (f'  {{\n    "name": "{name}", "ph": "M", "ts": {ts}, "pid": {json.dumps(pid)}, '
            f'"tid": {tid},\n    "args": {{\n      "{key}": {json.dumps(value)}\n    }}\n  }}')


def _metadata(pid: int, dev: int, ranks: int, start: int, steps: int) -> list[str]:
    """process/thread names, labels and sort indices, as Kineto lists them."""
    ts = _fmt(start + 28_362_646)
    out = [_meta("process_name", ts, pid, 0, "name", "python3.10"),
           _meta("process_labels", ts, pid, 0, "labels", "CPU"),
           _meta("process_sort_index", ts, pid, 0, "sort_index", pid)]
    for d in range(min(ranks, GPUS_PER_NODE)):
        out += [_meta("process_name", ts, d, 0, "name", "python3.10"),
                _meta("process_labels", ts, d, 0, "labels", f"GPU {d}"),
                _meta("process_sort_index", ts, d, 0, "sort_index", 16_777_216 + d)]
    threads = [(tid, f"stream {tid} ") for tid in (COMPUTE_STREAM, NCCL_STREAM)]
    if steps >= DEVICE_SYNC_EVERY:
        threads.insert(0, (-1, f"Device {dev}"))
    for tid, name in threads:
        out += [_meta("thread_name", ts, dev, tid, "name", name),
                _meta("thread_sort_index", ts, dev, tid, "sort_index", tid)]
    out += [_meta("thread_name", ts, pid, pid, "name", f"thread {pid} (pt_main_thread)"),
            _meta("thread_sort_index", ts, pid, pid, "sort_index", pid)]
    return out


def _span(start: int, end: int) -> list[str]:
    """The profiler's own span and instants, with Kineto's string pids."""
    ts = _fmt(start)
    return [
        f'  {{\n    "ph": "X", "cat": "Trace", "ts": {ts}, "dur": {_fmt(end - start)},\n'
        '    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
        '    "args": {\n      "Op count": 0\n    }\n  }',
        _meta("process_sort_index", ts, "Spans", 0, "sort_index", 536_870_912).replace(
            f'"ts": {ts}, "pid"', f'"ts": {ts},\n    "pid"'),
        '  {\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
        f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {ts}\n  }}',
        '  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
        f'    "pid": "", "tid": "", "ts": {_fmt(end + 3_141)}\n  }}']


def _footer(r: int) -> str:
    return (f'\n  ],\n  "traceName": "rank-{r}.pt.trace.json",\n  "displayTimeUnit": "ms",\n'
            f'  "baseTimeNanoseconds": {BASE_TIME_NS}\n}}')
