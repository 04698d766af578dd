"""The simulated job's static plan: timing constants, kernel and op names, and each
step's blocks, CPU ops and runtime calls (see :mod:`di.demo`). Times are int64 ns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
CBID = {
    "cudaLaunchKernel": 211,
    "cudaLaunchKernelExC": 430,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaStreamSynchronize": 131,
    "cudaDeviceSynchronize": 165,
}

ROLE_LOADER, ROLE_OP, ROLE_ALLREDUCE, ROLE_OPTIMIZER, ROLE_SYNC = range(5)  # blocks
ROLE_STREAM, ROLE_NCCL, ROLE_OPT, ROLE_HOST_SYNC = range(4)  # runtime calls


def _kernel_args(grid: tuple[int, int, int], block: tuple[int, int, int], regs: int, smem: int, occupancy: int) -> str:
    per_sm = grid[0] * grid[1] * grid[2] / NUM_SMS
    warps = per_sm * block[0] * block[1] * block[2] / 32
    g, b = ", ".join(map(str, grid)), ", ".join(map(str, block))
    return (
        f'"registers per thread": {regs},      "shared memory": {smem},      '
        f'"blocks per SM": {per_sm:.6f},      "warps per SM": {warps:.6f},      '
        f'"grid": [{g}],      "block": [{b}],      "est. achieved occupancy %": {occupancy}'
    )


_EW = "void at::native::vectorized_elementwise_kernel<4, "
_CLAMP = (
    "at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, "
    "c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()"
    "() const::{lambda()#7}::operator()() const::{lambda(float)#1}"
)
_THRESH = (
    "at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIterator"
    "Base&, float, float)::{lambda(float, float)#1}"
)
_GEMM = (
    "sm90_xmma_gemm_f32f32_tf32f32_f32_{}_n_tilesize128x128x32_warpgroupsize1x1x1_"
    "execute_segment_k_off_kernel__5x_cublas"
)
_SGD = (
    "at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous "
    "namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float"
)

_KERNEL_SMALL = _kernel_args((1056, 1, 1), (128, 1, 1), 24, 0, 100)
_KERNEL_GEMM = _kernel_args((8, 16, 1), (384, 1, 1), 168, 213_008, 18)

# device activity templates: key -> (cat, name, median ns, static args or bytes)
GPU: dict[str, tuple[str, str, int, str | int]] = {
    "gemm_tn": ("kernel", _GEMM.format("tn"), 42_000, _KERNEL_GEMM),
    "gemm_nn": ("kernel", _GEMM.format("nn"), 45_000, _KERNEL_GEMM),
    "clamp": (
        "kernel",
        f"{_EW}{_CLAMP}, at::detail::Array<char*, 2> >(int, {_CLAMP}, at::detail::Array<char*, 2>)",
        9_000,
        _KERNEL_SMALL,
    ),
    "add": (
        "kernel",
        f"{_EW}at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >"
        "(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        7_000,
        _KERNEL_SMALL,
    ),
    "threshold": (
        "kernel",
        f"{_EW}{_THRESH}, at::detail::Array<char*, 3> >(int, {_THRESH}, at::detail::Array<char*, 3>)",
        8_000,
        _KERNEL_SMALL,
    ),
    "sgd": (
        "kernel",
        f"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<{_SGD}>({_SGD})",
        30_000,
        _kernel_args((320, 1, 1), (512, 1, 1), 40, 0, 50),
    ),
    "nccl": (
        "kernel",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        0,
        _kernel_args((16, 1, 1), (640, 1, 1), 96, 87_568, 0),
    ),
    "copy": ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 6_000, 4_194_304),
    "zero": ("gpu_memset", "Memset (Device)", 3_000, 2_097_152),
    "sync": ("cuda_sync", "Stream Sync", 0, 0),
}
GPU_KEYS = list(GPU)

# block templates: key -> (median CPU ns, nodes); node = (depth, cat, name, f0, f1, gpu key)
# where [f0, f1] is the node's share of its block's span (children nest by construction)
_Node = tuple[int, str, str, float, float, str | None]
_OP, _UA, _RT, LAUNCH = "cpu_op", "user_annotation", "cuda_runtime", "cudaLaunchKernel"
_BLOCKS: dict[str, tuple[int, tuple[_Node, ...]]] = {
    "loader": (120_000, ((0, _UA, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 1, None),)),
    "linear": (
        45_000,
        (
            (0, _OP, "aten::linear", 0, 1, None),
            (1, _OP, "aten::t", 0.04, 0.22, None),
            (2, _OP, "aten::transpose", 0.07, 0.19, None),
            (3, _OP, "aten::as_strided", 0.1, 0.16, None),
            (1, _OP, "aten::addmm", 0.28, 0.96, None),
            (2, _RT, LAUNCH, 0.62, 0.9, "gemm_tn"),
        ),
    ),
    "relu": (
        18_000,
        (
            (0, _OP, "aten::relu", 0, 1, None),
            (1, _OP, "aten::clamp_min", 0.15, 0.92, None),
            (2, _RT, LAUNCH, 0.45, 0.85, "clamp"),
        ),
    ),
    "add": (14_000, ((0, _OP, "aten::add_", 0, 1, None), (1, _RT, LAUNCH, 0.4, 0.85, "add"))),
    "view": (6_000, ((0, _OP, "aten::view", 0, 1, None),)),
    "copy": (20_000, ((0, _OP, "aten::copy_", 0, 1, None), (1, _RT, "cudaMemcpyAsync", 0.35, 0.9, "copy"))),
    "zero": (
        16_000,
        (
            (0, _OP, "aten::zero_", 0, 1, None),
            (1, _OP, "aten::fill_", 0.2, 0.95, None),
            (2, _RT, "cudaMemsetAsync", 0.45, 0.88, "zero"),
        ),
    ),
    "addmm_bwd": (
        60_000,
        (
            (0, _OP, "autograd::engine::evaluate_function: AddmmBackward0", 0, 1, None),
            (1, _OP, "AddmmBackward0", 0.06, 0.9, None),
            (2, _OP, "aten::mm", 0.3, 0.85, None),
            (3, _RT, LAUNCH, 0.55, 0.8, "gemm_nn"),
        ),
    ),
    "relu_bwd": (
        22_000,
        (
            (0, _OP, "autograd::engine::evaluate_function: ReluBackward0", 0, 1, None),
            (1, _OP, "ReluBackward0", 0.08, 0.9, None),
            (2, _OP, "aten::threshold_backward", 0.2, 0.85, None),
            (3, _RT, LAUNCH, 0.5, 0.8, "threshold"),
        ),
    ),
    "allreduce": (
        180_000,
        (
            (0, _OP, "record_param_comms", 0, 1, None),
            (1, _UA, "nccl:all_reduce", 0.1, 0.6, None),
            (2, _RT, "cudaLaunchKernelExC", 0.3, 0.5, "nccl"),
        ),
    ),
    "optimizer": (
        60_000,
        (
            (0, _UA, "Optimizer.step#SGD.step", 0, 1, None),
            (1, _OP, "aten::_foreach_add_", 0.1, 0.95, None),
            (2, _RT, LAUNCH, 0.5, 0.8, "sgd"),
        ),
    ),
    "sync": (6_000, ((0, _RT, "cudaStreamSynchronize", 0, 1, "sync"),)),
}
_OP_CYCLE = ("linear", "relu", "linear", "add", "view", "copy", "addmm_bwd", "relu_bwd", "addmm_bwd", "zero")
_BLOCK_ROLE = {"loader": ROLE_LOADER, "allreduce": ROLE_ALLREDUCE, "optimizer": ROLE_OPTIMIZER, "sync": ROLE_SYNC}
_CALL_ROLE = {"nccl": ROLE_NCCL, "sgd": ROLE_OPT, "sync": ROLE_HOST_SYNC}


@dataclass(frozen=True)
class Plan:
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
    rt_gpu: np.ndarray  # (N,) index into GPU_KEYS
    gpu_ns: np.ndarray  # (N,) median device time


def build_plan(ops_per_step: int, ranks: int) -> Plan:
    names = ["loader", *(_OP_CYCLE[k % len(_OP_CYCLE)] for k in range(ops_per_step)), "allreduce", "optimizer", "sync"]
    kinds: dict[tuple[str, str], int] = {}
    cpu: list[tuple[int, float, float, int]] = []
    rt: list[tuple[int, float, float, int, int, int]] = []
    for b, name in enumerate(names):
        enclosing = {0: 0}  # depth -> number of the innermost open CPU node
        for depth, cat, op, f0, f1, gpu in _BLOCKS[name][1]:
            if cat == _RT:
                role = _CALL_ROLE.get(gpu or "", ROLE_STREAM)
                rt.append((b, f0, f1, enclosing[depth], role, GPU_KEYS.index(gpu or "")))
                continue
            cpu.append((b, f0, f1, kinds.setdefault((cat, op), len(kinds))))
            enclosing[depth + 1] = len(cpu)
    c, r = np.array(cpu, dtype=np.float64), np.array(rt, dtype=np.float64)
    return Plan(
        ranks=ranks,
        block_ns=np.array([_BLOCKS[n][0] for n in names], dtype=np.float64),
        block_role=np.array([_BLOCK_ROLE.get(n, ROLE_OP) for n in names]),
        cpu_block=c[:, 0].astype(np.int64),
        cpu_f=c[:, 1:3],
        cpu_kind=c[:, 3].astype(np.int64),
        cpu_kinds=list(kinds),
        rt_block=r[:, 0].astype(np.int64),
        rt_f=r[:, 1:3],
        rt_parent=r[:, 3].astype(np.int64),
        rt_role=r[:, 4].astype(np.int64),
        rt_gpu=r[:, 5].astype(np.int64),
        gpu_ns=np.array([GPU[GPU_KEYS[int(g)]][2] for g in r[:, 5]], dtype=np.float64),
    )
