"""Kineto Chrome JSON text of one rank, rendered from the plan and the simulated times
(the layout copies real Kineto output; see :mod:`di.demo`)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from di.demo.plan import (
    ALLREDUCE_NELEMS,
    CBID,
    COMPUTE_STREAM,
    CORRELATION_BASE,
    DEVICE_SYNC_EVERY,
    GPU,
    GPU_KEYS,
    GPUS_PER_NODE,
    LAUNCH,
    NCCL_STREAM,
    ROLE_HOST_SYNC,
    ROLE_NCCL,
    ROLE_OPT,
    ROLE_STREAM,
    SYNC_EVENT_LAG_NS,
    TRACE_START_REL_NS,
    Plan,
)
from di.demo.envelope import footer, header, metadata, span
from di.demo.simulate import Timeline, share


def _us(col: str | pl.Expr) -> pl.Expr:
    """Integer ns -> Kineto's microsecond text with exactly three decimals."""
    ns = pl.col(col) if isinstance(col, str) else col
    return pl.concat_str([(ns // 1000).cast(pl.String), pl.lit("."), (ns % 1000 + 1000).cast(pl.String).str.slice(1)])


def _text(df: pl.DataFrame, *pieces: str | pl.Expr) -> pl.DataFrame:
    """(key, text) rows: literal strings and expressions concatenated per row, each
    followed by the ``,\\n`` that separates events."""
    parts = [pl.lit(p) if isinstance(p, str) else p for p in (*pieces, ",\n")]
    return df.select("key", pl.concat_str(parts).alias("text"))


def _ints(col: str | pl.Expr) -> pl.Expr:
    return (pl.col(col) if isinstance(col, str) else col).cast(pl.String)


def _x_head(cat: str, name: str, pid: int, tid: int) -> str:
    return f'  {{\n    "ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid},\n    "ts": '


_X_MID = ', "dur": '
_ARGS = ',\n    "args": {\n      "External id": '
_END = "\n    }\n  }"
SECTION_GPU, SECTION_GPU_ANNOTATION = 1 << 41, 1 << 43  # sort keys after the CPU ops


def _grid(per_step: np.ndarray, steps: int) -> dict[str, np.ndarray]:
    """Flattened (step, node) coordinates in time order."""
    n = per_step.size
    return {"step": np.repeat(np.arange(steps), n), "node": np.tile(np.arange(n), steps)}


def _cpu_frames(plan: Plan, tl: Timeline, r: int, pid: int) -> list[pl.DataFrame]:
    """ProfilerStep roots plus every nested CPU op/annotation."""
    t0 = tl.t0[r][:, None]
    start = t0 + share(tl.block_start[r], tl.block_dur[r], plan.cpu_block, plan.cpu_f[:, 0])
    end = t0 + share(tl.block_start[r], tl.block_dur[r], plan.cpu_block, plan.cpu_f[:, 1])
    per = plan.cpu_block.size + 1
    g = _grid(plan.cpu_block, tl.t0.shape[1])
    ev = g["step"] * per + g["node"] + 1
    df = pl.DataFrame(
        {"key": ev, "kind": np.tile(plan.cpu_kind, tl.t0.shape[1]), "ts": start.ravel(), "dur": (end - start).ravel()}
    )
    frames = []
    for (kind,), part in df.partition_by("kind", as_dict=True).items():
        cat, name = plan.cpu_kinds[kind]
        mid, tail = _comms_args(plan.ranks) if name == "record_param_comms" else (SHAPES.get(name, ""), "")
        frames.append(
            _text(
                part,
                _x_head(cat, name, pid, pid),
                _us("ts"),
                _X_MID,
                _us("dur"),
                *_record_ids(),
                f', {mid}"Ev Idx": ',
                _ints("key"),
                tail,
                _END,
            )
        )
    frames.append(_step_roots(tl, r, pid, per))
    return frames


def _step_roots(tl: Timeline, r: int, pid: int, per: int) -> pl.DataFrame:
    """The ProfilerStep#N annotations, one per step (``per``: CPU events per step, the root included)."""
    steps = np.arange(tl.t0.shape[1])
    roots = pl.DataFrame({"key": steps * per, "step": steps, "ts": tl.t0[r], "dur": tl.step_end[r] - tl.t0[r]})
    return _text(
        roots,
        '  {\n    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#',
        _ints("step"),
        f'", "pid": {pid}, "tid": {pid},\n    "ts": ',
        _us("ts"),
        _X_MID,
        _us("dur"),
        *_record_ids(),
        ', "Ev Idx": ',
        _ints("key"),
        _END,
    )


_BF16 = '"c10::BFloat16"'
SHAPES = {
    "aten::linear": f'"Input Dims": [[2048, 1024], [1024, 1024], [1024]], "Input type": [{_BF16}, {_BF16}, {_BF16}], ',
    "aten::addmm": '"Input Dims": [[1024], [2048, 1024], [1024, 1024], [], []], '
    f'"Input type": [{_BF16}, {_BF16}, {_BF16}, "Scalar", "Scalar"], ',
    "aten::mm": f'"Input Dims": [[2048, 1024], [1024, 1024]], "Input type": [{_BF16}, {_BF16}], ',
}
"""The input shapes a profiler with ``record_shapes=True`` writes for the demo's matrix operators (args text before
``"Ev Idx"``): a 2048x1024 by 1024x1024 bf16 GEMM, 4.3 GFLOP, whose ~42 us kernel runs near 100 TFLOP/s."""


def _record_ids() -> tuple[str | pl.Expr, ...]:
    """A CPU op's ids: Ev Idx = row key, External id = key + 1, Record function id = key."""
    return _ARGS, _ints(pl.col("key") + 1), ',"Record function id": ', _ints("key")


def _comms_args(ranks: int) -> tuple[str, str]:
    """record_param_comms args around its "Ev Idx", in Kineto's order."""
    n, rank_list = ALLREDUCE_NELEMS, json.dumps(list(range(ranks)))
    mid = (
        f'"Process Group Name": "0", "Global rank stride": 1, "Out msg nelems": {n}, '
        f'"Process Group Ranks": "{rank_list}", "Group size": {ranks}, '
        '"Global rank start": 0, '
    )
    tail = (
        f', "In msg nelems": {n}, "In split size": "[]", "Out split size": "[]", '
        '"dtype": "Float", "Process Group Description": "default_pg", '
        '"Collective name": "allreduce"'
    )
    return mid, tail


def _collective_kernel_args(ranks: int) -> str:
    n = ALLREDUCE_NELEMS
    return (
        f', "Collective name": "allreduce", "In msg nelems": {n}, "Out msg nelems": {n}, '
        f'"Group size": {ranks}, "dtype": "Float", "In split size": "[]", '
        '"Out split size": "[]", "Process Group Name": "0", "Process Group Description": '
        f'"default_pg", "Process Group Ranks": "{json.dumps(list(range(ranks)))}"'
    )


def _device_times(plan: Plan, tl: Timeline, r: int) -> tuple[np.ndarray, np.ndarray]:
    """(steps, calls) start and end of every call's device activity, job clock."""
    t0 = tl.t0[r][:, None]
    start = np.zeros((tl.t0.shape[1], plan.rt_role.size), np.int64)
    end = np.zeros_like(start)
    ops = plan.rt_role == ROLE_STREAM
    start[:, ops], end[:, ops] = t0 + tl.op_gpu_start[r], t0 + tl.op_gpu_end[r]
    for role, a, b in ((ROLE_NCCL, tl.nccl_start, tl.nccl_end), (ROLE_OPT, tl.opt_start, tl.opt_end)):
        cols = plan.rt_role == role
        start[:, cols], end[:, cols] = a[r, :, None], b[r, :, None]
    sync = plan.rt_role == ROLE_HOST_SYNC
    s0 = tl.sync_start[r] + SYNC_EVENT_LAG_NS
    start[:, sync] = s0[:, None]
    end[:, sync] = np.maximum(s0, tl.sync_end[r] - SYNC_EVENT_LAG_NS)[:, None]
    return start, end


def _runtime_frame(plan: Plan, tl: Timeline, r: int) -> pl.DataFrame:
    """One row per runtime call: its times, ids and device activity's times."""
    steps = tl.t0.shape[1]
    t0 = tl.t0[r][:, None]
    start = t0 + share(tl.block_start[r], tl.block_dur[r], plan.rt_block, plan.rt_f[:, 0])
    end = t0 + share(tl.block_start[r], tl.block_dur[r], plan.rt_block, plan.rt_f[:, 1])
    sync = plan.rt_role == ROLE_HOST_SYNC
    end[:, sync] = tl.sync_end[r][:, None]
    g_start, g_end = _device_times(plan, tl, r)
    g = _grid(plan.rt_block, steps)
    n = plan.rt_block.size
    device_sync = (g["step"] % DEVICE_SYNC_EVERY == DEVICE_SYNC_EVERY - 1) & sync[g["node"]]
    return pl.DataFrame(
        {
            "corr": CORRELATION_BASE + g["step"] * n + g["node"],
            "ext": g["step"] * (plan.cpu_block.size + 1) + plan.rt_parent[g["node"]] + 1,
            "gpu": plan.rt_gpu[g["node"]],
            "device_sync": device_sync,
            "ts": start.ravel(),
            "dur": (end - start).ravel(),
            "gts": g_start.ravel(),
            "gdur": (g_end - g_start).ravel(),
        }
    )


def _runtime_texts(rt: pl.DataFrame, pid: int) -> list[pl.DataFrame]:
    """cuda_runtime calls and their ``s`` flow starts."""
    rt = rt.with_columns(key=SECTION_GPU + pl.col("corr") * 4 + 2)
    frames = []
    for (gpu, dsync), part in rt.partition_by("gpu", "device_sync", as_dict=True).items():
        name = _call_name(GPU_KEYS[gpu], dsync)
        frames.append(
            _text(
                part,
                _x_head("cuda_runtime", name, pid, pid),
                _us("ts"),
                _X_MID,
                _us("dur"),
                _ARGS,
                _ints("ext"),
                f',      "cbid": {CBID[name]}, "correlation": ',
                _ints("corr"),
                _END,
            )
        )
    flows = rt.with_columns(key=pl.col("key") + 1)
    frames.append(
        _text(
            flows,
            '  {\n    "ph": "s", "id": ',
            _ints("corr"),
            f', "pid": {pid}, "tid": {pid}, "ts": ',
            _us("ts"),
            ',\n    "cat": "ac2g", "name": "ac2g"\n  }',
        )
    )
    return frames


_CALL_NAMES = {
    "copy": "cudaMemcpyAsync",
    "zero": "cudaMemsetAsync",
    "nccl": "cudaLaunchKernelExC",
    "sync": "cudaStreamSynchronize",
}


def _call_name(gpu_key: str, device_sync: bool) -> str:
    if device_sync:
        return "cudaDeviceSynchronize"
    return _CALL_NAMES.get(gpu_key, LAUNCH)


def _device_texts(rt: pl.DataFrame, dev: int, ranks: int) -> list[pl.DataFrame]:
    """Device activities (kernels, copies, sets, syncs) and their ``f`` flow ends."""
    rt = rt.with_columns(key=SECTION_GPU + pl.col("corr") * 4)
    frames = []
    for (gpu, dsync), part in rt.partition_by("gpu", "device_sync", as_dict=True).items():
        key = GPU_KEYS[gpu]
        cat, name, _, static = GPU[key]
        tid = -1 if dsync else NCCL_STREAM if key == "nccl" else COMPUTE_STREAM
        if cat == "cuda_sync":
            name = "Context Sync" if dsync else "Stream Sync"
        head = (_x_head(cat, name, dev, tid), _us("gts"), _X_MID, _us("gdur"), _ARGS, _ints("ext"))
        frames.append(_text(part, *head, *_device_args(cat, name, key, dev, tid, static, ranks)))
        frames.append(
            _text(
                part.with_columns(key=pl.col("key") + 1),
                '  {\n    "ph": "f", "id": ',
                _ints("corr"),
                f', "pid": {dev}, "tid": {tid}, "ts": ',
                _us("gts"),
                ',\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }',
            )
        )
    return frames


def _device_args(
    cat: str, name: str, key: str, dev: int, tid: int, static: str | int, ranks: int
) -> list[str | pl.Expr]:
    """The args text after ``"External id": N`` of one kind of device activity."""
    if cat == "cuda_sync":
        stream = 4294967295 if tid == -1 else tid
        return [
            f',\n      "cuda_sync_kind": "{name}",\n      "stream": {stream}, "correlation": ',
            _ints("corr"),
            f',\n      "device": {dev}, "context": 1',
            _END,
        ]
    ids = [
        ',      "queued": 0, ' if cat == "kernel" else ",      ",
        f'"device": {dev}, "context": 1,      "stream": {tid}, "correlation": ',
        _ints("corr"),
        ",      ",
    ]
    if cat == "kernel":
        extra = _collective_kernel_args(ranks) if key == "nccl" else ""
        return [*ids, f"{static}{extra}", _END]
    bandwidth = (pl.lit(float(static)) / pl.col("gdur")).cast(pl.String)  # bytes/ns = GB/s
    return [*ids, f'"bytes": {static}, "memory bandwidth (GB/s)": ', bandwidth, _END]


def _gpu_step_frame(plan: Plan, tl: Timeline, r: int, dev: int) -> pl.DataFrame:
    """ProfilerStep#N mirrored on the compute stream as gpu_user_annotation."""
    steps = np.arange(tl.t0.shape[1])
    first = tl.t0[r] + (tl.op_gpu_start[r][:, 0] if tl.op_gpu_start.shape[-1] else 0)
    first = np.minimum(first, tl.opt_start[r])
    df = pl.DataFrame(
        {
            "key": SECTION_GPU_ANNOTATION + steps,
            "step": steps,
            "ts": first,
            "dur": tl.opt_end[r] - first,
            "ext": steps * (plan.cpu_block.size + 1) + 1,
        }
    )
    return _text(
        df,
        '  {\n    "ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#',
        _ints("step"),
        f'", "pid": {dev}, "tid": {COMPUTE_STREAM},\n    "ts": ',
        _us("ts"),
        _X_MID,
        _us("dur"),
        _ARGS,
        _ints("ext"),
        "\n    }\n  }",
    )


def render_rank(plan: Plan, tl: Timeline, r: int) -> memoryview:
    """The complete document of rank ``r``, as a view of one Arrow string buffer.

    Every event row is rendered with its separator and rows are sorted by key; the
    buffer of a contiguous ``large_string`` array is then the document, so it is
    materialized once (a join or CSV writer would copy it again, slowly).
    """
    pid, dev, steps = int(tl.pid[r]), r % GPUS_PER_NODE, tl.t0.shape[1]
    rt = _runtime_frame(plan, tl, r)
    end = int(tl.step_end[r].max()) + 1_000_000
    tail = metadata(pid, dev, plan.ranks, TRACE_START_REL_NS, steps)
    tail += span(TRACE_START_REL_NS, end)
    frames = [
        pl.DataFrame({"key": [-1], "text": [header(r, plan.ranks)]}),
        *_cpu_frames(plan, tl, r, pid),
        *_runtime_texts(rt, pid),
        *_device_texts(rt, dev, plan.ranks),
        _gpu_step_frame(plan, tl, r, dev),
        pl.DataFrame({"key": [1 << 62], "text": [",\n".join(tail) + footer(r)]}),
    ]
    text = pl.concat(frames).sort("key")["text"]
    arrow = text.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string
    offsets = np.frombuffer(arrow.buffers()[1], np.int64)
    first, last = offsets[arrow.offset], offsets[arrow.offset + len(arrow)]
    return memoryview(arrow.buffers()[2])[first:last]
