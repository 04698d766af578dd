"""The analyses: breakdown, training phases, GPU idle causes, overlap, imbalance, wait states, critical path, steps and step times, GPU
clocks, device memory, matrix work, collective bandwidth, counters, communicators.

Every analysis reads only the canonical :class:`di.trace.Trace` (never
modifies it) and returns polars DataFrames with times in int64 ns.
:func:`analyze` runs the ones asked for over one window and returns them
together; the modules hold the definitions:

- :mod:`di.engine.intervals`: interval-set algebra (numba).
- :mod:`di.engine.classify`: the activity of each event.
- :mod:`di.engine.steps`, :mod:`di.engine.window`: steps and ``--window``.
- :mod:`di.engine.breakdown`, :mod:`di.engine.phases` (data loading, forward, backward and optimizer time on the
  host and the GPUs), :mod:`di.engine.gpu_idle` (why each GPU is idle: the breakdown's idle time
  given to the host, a device wait, launch latency, gaps between queued kernels, queued work), :mod:`di.engine.overlap`,
  :mod:`di.engine.imbalance`, :mod:`di.engine.waitstates`,
  :mod:`di.engine.critical_path` (its graph in :mod:`di.engine.critical_path_graph`,
  launch and sync edges a trace does not record in :mod:`di.engine.inferred_edges`),
  :mod:`di.engine.gpu_clocks` (GPU clocks, power and temperature during each kernel, from counter series),
  :mod:`di.engine.gpu_step_clocks` (the same during each step),
  :mod:`di.engine.step_times` (each rank's step durations: median, p90, slowest, slow steps),
  :mod:`di.engine.slow_steps` (what happened in the slow ones: grown breakdown states, rare marks, grown timed
  phases),
  :mod:`di.engine.memory` (the framework allocator's peak memory per device, what held it, its growth per step),
  :mod:`di.engine.flops` (the matrix operators' floating-point work from their recorded shapes, its rate against
  the GPU's peak and each operator's roofline; the launches it reads in :mod:`di.engine.launches`),
  :mod:`di.engine.comm_bandwidth` (the collectives' bus bandwidth over the calls and once all members arrived),
  :mod:`di.engine.counters` (each counter series' samples, min, mean, max and last value in the window),
  :mod:`di.engine.communicators` (each communicator's ranks, hosts, channels and transports; the whole trace).

Compile cost: every numba kernel here is compiled on a command's first run
(0.1 to 0.5 CPU-s each, once per signature) before the cache serves it, so
the engine keeps few: only passes that are sequential by nature (interval
merges, the breakdown sweep, the graph layout, the longest path, the launch
queue). Scatters and gathers are numpy (``ufunc.at``, fancy indexing). Each
kernel takes its output arrays from the caller and is ``_nrt=False`` (numba
compiles ``np.empty``/``np.zeros``/``np.full`` once per signature and
process, which a kernel that allocates adds to the cold start), and takes
int64 arrays and typed scalars, so it has one signature
(``tests/test_compile_hygiene.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from di.engine.window import Window
    from di.trace import Trace

ANALYSES = (
    "breakdown",
    "gpu_idle",
    "overlap",
    "imbalance",
    "wait_states",
    "critical_path",
    "gpu_clocks",
    "memory",
    "flops",
    "comm_bandwidth",
    "phases",
    "counters",
)
"""The analyses in the order :func:`analyze` runs them. ``phases`` runs late: the memory it leaves to the allocators
after it is done is then not under the critical path's and GPU idle's peaks (the 10.6 M-event job of bench/engine.py:
a peak of 2.86-2.99 GB against 2.92-3.07 GB with it second)."""


@dataclass(frozen=True)
class Analysis:
    """Results of :func:`analyze`; a field is None when that analysis was not run.

    Attributes:
        steps: the steps inside the window (rank, step, label, start_ns, end_ns, source).
        breakdown, overlap, imbalance, wait_states: long frames, see each module.
        phases: per rank (and step with ``per_step``) and training phase (data, forward, backward, optimizer,
            other), its host time, the GPU time of the work it launched and the time the GPUs sat idle in it; see
            :mod:`di.engine.phases`.
        gpu_idle: per rank, GPU (and step with ``per_step``) and cause, the GPU's idle time given to its causes;
            gpu_idle_gaps: the longest idle gaps with the work that ended each and the operator that launched it;
            see :mod:`di.engine.gpu_idle`.
        critical_path: dict of frames (``segments``, ``events``, ``by_category``,
            ``by_rank``, ``by_name``, ``waits``) and ``summary``.
        gpu_clocks: per rank, GPU and kernel name, the SM clock, power and temperature over the kernels' time
            (empty without such series), see :mod:`di.engine.gpu_clocks`.
        gpu_step_clocks: per rank, step and GPU, the same over the step's time, with the step's slowdown
            (run with ``gpu_clocks``), see :mod:`di.engine.gpu_step_clocks`.
        memory: per rank and device (and step with ``per_step``), the framework allocator's peak, when and in what
            operator, reserved memory and growth per step; memory_holders: what held each device's memory at its
            peak, by the operator and module that allocated it; memory_timeline: each device's allocated and reserved
            bytes over the window (at most 1,000 points a device); see :mod:`di.engine.memory`.
        flops: per rank and GPU (and step with ``per_step``), the floating-point work of the matrix operators
            (matrix products, convolutions, attention) and its rate against the GPU's peak (utilization);
            flops_ops: the same per operator, dtype and input shape; see :mod:`di.engine.flops`.
        comm_bandwidth: per collective operation, size, ranks and scope (inside a node or across), the bandwidth of
            the calls as nccl-tests reports it and of the transfers once every member had arrived, with the skew
            of the arrivals; see :mod:`di.engine.comm_bandwidth`.
        counters: per counter series with samples in the window, its count, min, mean, max and last value
            (cumulative counters as rates), see :mod:`di.engine.counters`.
        communicators: per communicator, its members, hosts, NCCL version, channels and the transports inside
            and across nodes (always computed, over the whole trace), see :mod:`di.engine.communicators`.
        step_times: per rank, its steps' count, median, p90, longest and slow ones (always computed: the steps
            are), see :mod:`di.engine.step_times`.
        slow_steps: each slow step with the breakdown states that grew, the rare marks and the grown timed phases
            in it (always computed), see
            :mod:`di.engine.slow_steps`.
        per_step: whether breakdown/overlap/imbalance/wait states carry one row per step.
        window: the window text; seconds: wall time of each analysis.
    """

    steps: pl.DataFrame
    breakdown: pl.DataFrame | None = None
    phases: pl.DataFrame | None = None
    gpu_idle: pl.DataFrame | None = None
    gpu_idle_gaps: pl.DataFrame | None = None
    overlap: pl.DataFrame | None = None
    imbalance: pl.DataFrame | None = None
    wait_states: pl.DataFrame | None = None
    critical_path: dict[str, Any] | None = None
    gpu_clocks: pl.DataFrame | None = None
    gpu_step_clocks: pl.DataFrame | None = None
    memory: pl.DataFrame | None = None
    memory_holders: pl.DataFrame | None = None
    memory_timeline: pl.DataFrame | None = None
    flops: pl.DataFrame | None = None
    flops_ops: pl.DataFrame | None = None
    comm_bandwidth: pl.DataFrame | None = None
    counters: pl.DataFrame | None = None
    step_times: pl.DataFrame | None = None
    slow_steps: pl.DataFrame | None = None
    communicators: pl.DataFrame | None = None
    per_step: bool = False
    window: str = "all"
    seconds: dict[str, float] = field(default_factory=dict)


def analyze(
    trace: Trace, *, window: Window | str | None = None, per_step: bool = False, analyses: tuple[str, ...] = ANALYSES
) -> Analysis:
    """Run analyses over one window of a trace.

    Args:
        trace: the canonical trace. Analysis tracks di added to it
            (:mod:`di.analysis_parts`) are left out: they are not the program's
            activity. The program's event rows keep their positions, so row
            references in the result are valid in ``trace`` too.
        window: a :class:`di.engine.window.Window` or its text (``steps=:-1``, ``time=0:2s``).
        per_step: add one row per step (besides the window's, step null) to breakdown
            and overlap; imbalance and wait states always carry steps.
        analyses: which of :data:`ANALYSES` to run.

    Raises:
        ValueError: an unknown analysis or a malformed window.
    """
    import time

    from di.analysis_parts import without_analysis
    from di.engine.window import prepare

    win = requested_window(window, analyses)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    frame = prepare(without_analysis(trace), win)
    seconds["prepare"] = time.perf_counter() - t0
    out: dict[str, Any] = {}
    cache: dict[str, Any] = {}
    for name in analyses:
        t0 = time.perf_counter()
        out[name] = _run(name, frame, per_step, cache)
        if name == "gpu_idle":
            out["gpu_idle"], out["gpu_idle_gaps"] = out["gpu_idle"]
        if name == "memory":
            out["memory"], out["memory_holders"], out["memory_timeline"] = out["memory"]
        if name == "flops":
            out["flops"], out["flops_ops"] = out["flops"]
        if name == "gpu_clocks":
            from di.engine.gpu_step_clocks import gpu_step_clocks

            out["gpu_step_clocks"] = gpu_step_clocks(frame)
        seconds[name] = time.perf_counter() - t0
    from di.engine.step_times import step_times

    out["step_times"] = step_times(frame.steps)
    from di.engine.slow_steps import slow_steps

    out["slow_steps"] = slow_steps(frame, cache.get("by_step"))
    from di.engine.communicators import communicators

    out["communicators"] = communicators(frame.trace)
    return Analysis(steps=frame.steps, per_step=per_step, window=win.text, seconds=seconds, **out)


def requested_window(window: Window | str | None, analyses: tuple[str, ...]) -> Window:
    """The :class:`di.engine.window.Window` of a run of ``analyses`` (each one of :data:`ANALYSES`).

    Raises:
        ValueError: an unknown analysis or a malformed window.
    """
    from di.engine.window import Window, parse_window

    unknown = set(analyses) - set(ANALYSES)
    if unknown:
        raise ValueError(f"unknown analyses {sorted(unknown)}; known: {', '.join(ANALYSES)}")
    return window if isinstance(window, Window) else parse_window(window)


def _run(name: str, frame: Any, per_step: bool, cache: dict[str, Any]) -> Any:
    import polars as pl

    from di.engine.breakdown import breakdown

    def table(step: bool) -> Any:
        key = "by_step" if step else "whole"
        if key not in cache:
            cache[key] = breakdown(frame, per_step=step)
        return cache[key]

    if name == "breakdown":
        return pl.concat([table(False), table(True)]) if per_step else table(False)
    if name == "phases":
        from di.engine.phases import phases

        return phases(frame, per_step)
    if name == "gpu_idle":
        from di.engine.gpu_idle import gpu_idle_tables

        return gpu_idle_tables(frame, per_step)
    if name == "overlap":
        from di.engine.overlap import overlap

        whole = overlap(frame)
        return pl.concat([whole, overlap(frame, per_step=True)]) if per_step else whole
    if name == "imbalance":
        from di.engine.imbalance import imbalance

        return imbalance(frame, whole=table(False), by_step=table(True) if frame.steps.height else None)
    if name == "wait_states":
        from di.engine.waitstates import wait_states

        return wait_states(frame)
    if name == "gpu_clocks":
        from di.engine.gpu_clocks import gpu_clocks

        return gpu_clocks(frame)
    if name == "memory":
        from di.engine.memory import memory_tables

        return memory_tables(frame, per_step)
    if name == "flops":
        from di.engine.flops import flops_tables

        return flops_tables(frame, per_step)
    if name == "comm_bandwidth":
        from di.engine.comm_bandwidth import collective_rows, comm_bandwidth

        return comm_bandwidth(collective_rows(frame))
    if name == "counters":
        from di.engine.counters import counters

        return counters(frame)
    from di.engine.critical_path import critical_path

    return critical_path(frame)
