"""Built-in example jobs.

``di demo`` records a real one, :mod:`di.demo.train` (numpy compute, halo exchange,
gradient Allreduce, checkpoints on 4 MPI ranks; rank 1 the straggler), under
``di record`` and prints its analysis (:mod:`di.demo.recorded`). ``di demo --kineto``
writes the one below: PyTorch-profiler (Kineto) Chrome JSON, one document per rank.

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

from typing import Any

__all__ = ["kineto_job", "write_kineto_job"]


def __getattr__(name: str) -> Any:
    # lazy: the recorded job's ranks import di.demo.train and need none of the Kineto writer's polars
    if name in __all__:
        from di.demo import job

        return getattr(job, name)
    raise AttributeError(f"module 'di.demo' has no attribute {name!r}")
