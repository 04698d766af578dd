"""Inferred launch and sync edges (di.engine.inferred_edges): hand-built jobs whose answer is known by
construction, the queue kernel against its reference, and Score-P CUDA traces without flows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from conftest import otf2_archive
from engine_jobs import MS, Job
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import queue_reference
from test_engine_critical_path import two_rank_job

import di
from di.engine import analyze
from di.engine.critical_path_graph import (
    EDGE_KINDS,
    LAUNCH_INFERRED,
    SYNC_INFERRED,
    build_graph,
)
from di.engine.inferred_edges import (
    CLOCK_SKEW_NS,
    LOST_KERNEL_NS,
    _queue,
    launch_edges,
    sync_calls,
)
from di.engine.window import prepare


def _cp(trace):
    return analyze(trace, analyses=("critical_path",)).critical_path


def _pairs(job: Job, trace) -> set[tuple[int, int]]:
    launches, kernels = launch_edges(prepare(trace))
    back = {int(r): h for h, r in enumerate(job.row)}
    return {(back[int(a)], back[int(b)]) for a, b in zip(launches, kernels)}


def test_job_without_launch_flows_gives_the_same_path():
    """Dropping the launch flows of the hand-built 2-rank job changes only the edge kinds' names."""
    job, _ = two_rank_job()
    with_flows = _cp(job.build())
    job.flows.clear()
    without = _cp(job.build())
    cols = ["start_ns", "end_ns", "contrib_ns", "rank", "name", "event"]
    assert without["segments"].select(cols).equals(with_flows["segments"].select(cols))
    assert without["summary"]["length_ns"] == with_flows["summary"]["length_ns"] == 53 * MS
    kinds = without["segments"].get_column("kind").to_list()
    assert kinds == [
        k.replace("launch", "launch_inferred") for k in with_flows["segments"].get_column("kind").to_list()
    ]
    assert dict(without["by_category"].select("category", "contrib_ns").iter_rows())["launch_inferred"] == 1 * MS


def _two_streams() -> tuple[Job, dict[str, int]]:
    """One rank, streams A (ref 100) and B (ref 200); launches alternate A, B, A, B at 0, 1, 2, 3 ms; B's
    kernels run first (queue order per stream, not launch order across streams decides)."""
    job = Job()
    cpu, a, b = job.thread(0), job.stream(0, stream=1, tid=100), job.stream(0, stream=2, tid=200)
    h = {}
    for k, (s, ref) in enumerate([("A", 100), ("B", 200), ("A", 100), ("B", 200)]):
        h[f"L{k}{s}"] = job.ev(cpu, k, k + 0.5, "cuLaunchKernel", "cuda_api", args=f'{{"CUDA_STREAM_REF":{ref}}}')
    h["KB0"], h["KB1"] = job.ev(b, 1.5, 3.5, "kb0", "kernel"), job.ev(b, 3.6, 7, "kb1", "kernel")
    h["KA0"], h["KA1"] = job.ev(a, 4, 6, "ka0", "kernel"), job.ev(a, 6, 9, "ka1", "kernel")
    h["sync"] = job.ev(cpu, 5, 9.5, "cuStreamSynchronize", "sync", args='{"CUDA_STREAM_REF":200}')
    h["dsync"] = job.ev(cpu, 9.6, 10, "cuCtxSynchronize", "sync")
    return job, h


def test_launches_match_per_stream_in_order():
    job, h = _two_streams()
    trace = job.build()
    assert _pairs(job, trace) == {
        (h["L0A"], h["KA0"]),
        (h["L2A"], h["KA1"]),
        (h["L1B"], h["KB0"]),
        (h["L3B"], h["KB1"]),
    }


def test_stream_sync_links_the_synced_stream_only():
    """cuStreamSynchronize (5-9.5 ms) names stream B: its edge comes from B's last kernel (ended 7 ms), not from
    A's (9 ms); cuCtxSynchronize (9.6-10 ms) waits for the whole rank, but no device work ends inside it."""
    job, h = _two_streams()
    trace = job.build()
    frame = prepare(trace)
    calls, stream, recorded = sync_calls(frame, np.ones(trace.events.height, bool))
    got = dict(zip(calls.tolist(), stream.tolist()))
    assert got == {int(job.row[h["sync"]]): 2, int(job.row[h["dsync"]]): -1} and not recorded.any()
    g, dropped = build_graph(frame)
    sync = g.kind == SYNC_INFERRED
    edges = {(int(g.event[s]), int(g.event[d])) for s, d in zip(g.src[sync], g.dst[sync])}
    assert edges == {(job.row[h["KB1"]], job.row[h["sync"]])} and dropped == 0
    launch = g.kind == LAUNCH_INFERRED
    assert launch.sum() == 4 and (g.time_ns[g.src] <= g.time_ns[g.dst]).all()


def test_event_sync_waits_for_the_stream_the_event_was_recorded_on():
    job = Job()
    cpu, a, b = job.thread(0), job.stream(0, stream=1, tid=100), job.stream(0, stream=2, tid=200)
    job.ev(cpu, 0, 0.5, "cudaEventRecord", "cuda_api", args='{"CUDA_STREAM_REF":100,"CUDA_EVENT_REF":5}')
    job.ev(cpu, 0.6, 0.8, "cudaEventRecord", "cuda_api", args='{"CUDA_STREAM_REF":200,"CUDA_EVENT_REF":6}')
    job.ev(a, 1, 3, "ka", "kernel")
    kb = job.ev(b, 1, 5, "kb", "kernel")
    sync = job.ev(cpu, 2, 6, "cudaEventSynchronize", "sync", args='{"CUDA_EVENT_REF":6}')
    trace = job.build()
    calls, stream, _ = sync_calls(prepare(trace), np.ones(trace.events.height, bool))
    assert dict(zip(calls.tolist(), stream.tolist())) == {int(job.row[sync]): 2}
    cp = _cp(trace)
    seg = cp["segments"].filter(pl.col("kind") == "sync_inferred")
    assert seg.get_column("event").to_list() == [job.row[sync]] and seg.get_column("contrib_ns").to_list() == [1 * MS]
    assert job.row[kb] in set(cp["events"].get_column("event"))


def _one_stream(launch_ms: list[float], kernel_ms: list[tuple[float, float]]) -> tuple[Job, list[int], list[int]]:
    job = Job()
    cpu, gpu = job.thread(0), job.stream(0)
    calls = [job.ev(cpu, t, t + 0.01, "hipLaunchKernel", "cuda_api") for t in launch_ms]
    kernels = [job.ev(gpu, s, e, f"k{i}", "kernel") for i, (s, e) in enumerate(kernel_ms)]
    return job, calls, kernels


def test_unknown_stream_matches_in_time_order_never_before_the_launch():
    """No stream reference: per rank in time order. Kernel k1 starts 2 ms before any pending launch (its launch
    is missing): it gets none, and the next kernel takes the pending launch."""
    job, calls, kernels = _one_stream([0, 5, 10], [(1, 2), (3, 4), (6, 7), (11, 12)])
    assert _pairs(job, job.build()) == {(calls[0], kernels[0]), (calls[1], kernels[2]), (calls[2], kernels[3])}


def test_a_lost_kernel_does_not_shift_later_matches():
    """The kernel of the launch at 1 ms was not recorded; the stream was idle then, and the next kernel starts
    right at the next launch (1 ms later): the lost launch is passed over."""
    job, calls, kernels = _one_stream([0, 1, 2, 3], [(0.01, 0.5), (2.01, 2.5), (3.01, 3.5)])
    assert _pairs(job, job.build()) == {(calls[0], kernels[0]), (calls[2], kernels[1]), (calls[3], kernels[2])}


def test_a_kernel_leading_its_launch_hangs_on_the_host_before_it():
    """Device clock skew: the kernel appears 10 us before its launch call; the edge comes from the launching
    thread's last node at or before the kernel's start (op's start), not dropped as pointing back."""
    job = Job()
    cpu, gpu = job.thread(0), job.stream(0)
    op = job.ev(cpu, 0, 10, "op", "compute")
    job.ev(cpu, 5, 6, "cuLaunchKernel", "cuda_api")
    k = job.ev(gpu, 4.99, 8, "k", "kernel")
    trace = job.build()
    g, dropped = build_graph(prepare(trace))
    launch = g.kind == LAUNCH_INFERRED
    assert dropped == 0 and launch.sum() == 1
    assert (int(g.event[g.src[launch][0]]), int(g.event[g.dst[launch][0]])) == (job.row[op], job.row[k])
    assert not g.is_end[g.src[launch][0]] and g.time_ns[g.src[launch][0]] == 0


def test_nested_launch_calls_are_one_launch():
    job = Job()
    cpu, gpu = job.thread(0), job.stream(0)
    outer = job.ev(cpu, 0, 1, "cudaLaunchKernel", "cuda_api")
    inner = job.ev(cpu, 0.2, 0.8, "cuLaunchKernel", "cuda_api")
    k = job.ev(gpu, 1, 2, "k", "kernel")
    assert _pairs(job, job.build()) == {(inner, k)}
    assert outer != inner


def test_launch_flows_win():
    """A rank whose GPU activity has launch flows gets no inferred launch."""
    job, calls, kernels = _one_stream([0, 5], [(1, 2), (6, 7)])
    job.flow(calls[0], kernels[0])
    assert _pairs(job, job.build()) == set()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 2_000), min_size=0, max_size=12),
    st.lists(st.tuples(st.integers(0, 2_000), st.integers(1, 300)), max_size=12),
)
def test_queue_kernel_matches_reference(calls, kernels):
    call_t = np.sort(np.asarray(calls, np.int64)) * 1_000
    ks = sorted(kernels)
    kern_t = np.asarray([s for s, _ in ks], np.int64) * 1_000
    kern_end = kern_t + np.asarray([d for _, d in ks], np.int64) * 1_000
    got = _queue(
        np.array([0, call_t.size], np.int64),
        call_t,
        np.array([0, kern_t.size], np.int64),
        kern_t,
        kern_end,
        np.int64(CLOCK_SKEW_NS),
        np.int64(LOST_KERNEL_NS),
        np.full(kern_t.size, -1, np.int64),
    )
    want = queue_reference(call_t.tolist(), kern_t.tolist(), kern_end.tolist(), CLOCK_SKEW_NS, LOST_KERNEL_NS)
    assert got.tolist() == want
    taken = got[got >= 0]
    assert (np.diff(taken) > 0).all(), "each launch is taken once, in order"
    assert (call_t[taken] <= kern_t[got >= 0] + CLOCK_SKEW_NS).all()


CUDA_TRACES = ("casita_2_cuda_simple", "casita_2_cloverleaf_oaccregions_cudafull", "casita_2_jacobi_blame_cpu_015")


@pytest.fixture(scope="module", params=CUDA_TRACES)
def cuda_trace(request):
    return request.param, di.load(otf2_archive(request.param))


def test_casita_cuda_launches_match_in_order(cuda_trace):
    """Every kernel of these traces gets its launch (cuLaunchKernel with CUDA_STREAM_REF), k-th to k-th per
    stream: launch order is kernel order; a kernel leads its launch by clock skew at most; the graph keeps
    only edges forward in time."""
    _, trace = cuda_trace
    frame = prepare(trace)
    launches, kernels = launch_edges(frame)
    ev = trace.events
    start = ev.get_column("start_ns").to_numpy()
    assert kernels.size == int((ev.get_column("cat") == "kernel").sum()) and np.unique(launches).size == launches.size
    assert (start[kernels] >= start[launches] - CLOCK_SKEW_NS).all()
    loc = ev.get_column("loc").to_numpy()
    for s in np.unique(loc[kernels]):
        on = loc[kernels] == s
        o = np.argsort(start[launches[on]], kind="stable")
        assert (np.diff(start[kernels[on]][o]) > 0).all(), "k-th launch -> k-th kernel"
    lag = start[kernels] - start[launches]
    assert np.median(lag) < 1 * MS, "a launch's kernel follows it closely on these traces"
    g, _ = build_graph(frame)
    inferred = np.isin(g.kind, [LAUNCH_INFERRED, SYNC_INFERRED])
    assert inferred.any() and (g.time_ns[g.src[inferred]] <= g.time_ns[g.dst[inferred]]).all()
    assert not np.isin(g.kind, [EDGE_KINDS.index("launch"), EDGE_KINDS.index("sync")]).any(), (
        "no flows: nothing recorded"
    )


def test_casita_cuda_path_runs_through_the_device(cuda_trace):
    """The waits of the host calls that wait for the device weigh only what their device work does not explain:
    on the path, such a call's own time is at most its time after the last device activity of its rank that
    ended inside it (the edge's own weight, the return after the device finished, is the edge's segment)."""
    name, trace = cuda_trace
    cp = _cp(trace)
    cats = dict(cp["by_category"].select("category", "share").iter_rows())
    print(name, {k: round(100 * v, 2) for k, v in cats.items()})
    assert cats.get("sync", 0) < 0.01
    assert cats.get("kernel", 0) + cats.get("memcpy", 0) > 0.03, "the path runs through the device work waited for"
    assert cats.get("launch_inferred", 0) > 0 and cats.get("sync_inferred", 0) > 0
    assert cp["summary"]["dropped_edges"] <= 20  # cloverleaf: 20 recorded message/collective edges point back
    frame = prepare(trace)
    calls, _, _ = sync_calls(frame, np.ones(trace.events.height, bool))
    local = cp["segments"].filter((pl.col("kind") == "local") & pl.col("event").is_in(calls.tolist()))
    on_path = local.group_by("event").agg(pl.col("contrib_ns").sum())
    ev = trace.events
    work = frame.on_gpu & (
        ev.get_column("cat").cast(pl.String).is_in(["kernel", "memcpy", "memset", "nccl"]).to_numpy()
    )
    ends = {r: np.sort(ev.get_column("end_ns").to_numpy()[work & (frame.rank == r)]) for r in np.unique(frame.rank)}
    for row in on_path.iter_rows(named=True):
        e = ev.row(row["event"], named=True)
        g_end = ends[int(frame.rank[row["event"]])]
        i = np.searchsorted(g_end, e["end_ns"], side="right") - 1
        explained = g_end[i] if i >= 0 and g_end[i] > e["start_ns"] else e["start_ns"]
        assert row["contrib_ns"] <= e["end_ns"] - explained, row


def test_hip_event_sync_weighs_nothing_the_kernel_explains():
    """The MI300 shape: the host launches a long kernel and waits in hipEventSynchronize; no flows. The wait
    is not on the path: the launch (from the call's start to the kernel's, 0-0.15 ms), the kernel (0.15-9.9 ms)
    and the sync's return (9.9-10 ms); the 9.7 ms the host waited are charged to the kernel."""
    job = Job()
    cpu, gpu = job.thread(0), job.stream(0, tid=9)
    job.ev(cpu, 0, 0.1, "hipLaunchKernel", "cuda_api", args='{"HIP_STREAM_REF":9}')
    job.ev(cpu, 0.12, 0.14, "hipEventRecord", "cuda_api", args='{"HIP_STREAM_REF":9,"HIP_EVENT_REF":1}')
    sync = job.ev(cpu, 0.2, 10, "hipEventSynchronize", "sync", args='{"HIP_EVENT_REF":1}')
    k = job.ev(gpu, 0.15, 9.9, "gemm", "kernel")
    cp = _cp(job.build())
    cats = dict(cp["by_category"].select("category", "contrib_ns").iter_rows())
    assert cats == {"launch_inferred": round(0.15 * MS), "kernel": round(9.75 * MS), "sync_inferred": round(0.1 * MS)}
    assert "sync" not in cats and cp["summary"]["length_ns"] == 10 * MS
    waits = cp["waits"].select("kind", "event", "cause_event", "wait_ns").rows()
    assert waits == [("sync_inferred", job.row[sync], job.row[k], round(9.7 * MS))]


def test_launches_are_found_once_per_frame():
    """The analyses that ask a frame for its launches get the one read-only array; a frame made from it with
    another selection finds its own, and the kernels-only answer differs from the full one only by the copies."""
    from dataclasses import replace

    from di.engine.launches import launch_calls

    job, _ = _two_streams()
    frame = prepare(job.build())
    first = launch_calls(frame)
    assert launch_calls(frame) is first and not first.flags.writeable
    assert (first >= 0).sum() == 4  # the four kernels, each with its launch
    kernels_only = launch_calls(frame, copies=False)
    assert kernels_only is not first and np.array_equal(kernels_only, first)  # the job has no copies
    narrowed = replace(frame, selected=np.zeros_like(frame.selected))
    assert narrowed.memo == {} and launch_calls(narrowed) is not first
