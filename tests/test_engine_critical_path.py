"""Critical path: a hand-built 2-rank job with a known path, HTA's traces, and properties."""

from __future__ import annotations


import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import kineto_file
from di.engine import analyze
from di.engine import intervals as iv
from engine_jobs import MS, Job


def _cp(trace, **kw):
    return analyze(trace, analyses=("critical_path",), **kw).critical_path


def two_rank_job() -> tuple[Job, dict[str, int]]:
    """A 2-rank job (times in ms).

    Rank 0: op A (0-10) launches K0 (launch call 2-3; K0 runs 12-40 on its
    GPU), the host idles, sends at 45-46 and enters the allreduce at 50.
    Rank 1: op Pre (0-5), a receive posted at 6 that gets the message at 46
    (late sender), op B (47-61) launching K1 (60-61; K1 runs 61-80), a device
    sync (65-81) that waits for K1, idle, and the allreduce entered last at 82;
    everyone leaves at 90.

    Known path (weights as defined in di.engine.critical_path): A's 10 ms of
    host work (with its launch call inside), the message from 45 to 46, op B's
    self time 47-60, the launch delay 60-61, K1 61-80, the sync's return 80-81
    and the allreduce after the last arrival 82-90: 53 ms. K0 (a dead end: no
    one waits for it) and rank 0's allreduce wait are off the path.
    """
    job = Job()
    c0, g0, c1, g1 = job.thread(0), job.stream(0), job.thread(1), job.stream(1, device=1)
    h = {}
    h["A"] = job.ev(c0, 0, 10, "opA", "compute")
    h["launch0"] = job.ev(c0, 2, 3, "cudaLaunchKernel", "cuda_api")
    h["K0"] = job.ev(g0, 12, 40, "gemm0", "kernel")
    job.flow(h["launch0"], h["K0"], "launch")
    h["send"] = job.ev(c0, 45, 46, "MPI_Send", "mpi_p2p")
    h["ar0"] = job.ev(c0, 50, 90, "MPI_Allreduce", "mpi_coll")
    h["pre"] = job.ev(c1, 0, 5, "opPre", "compute")
    h["recv"] = job.ev(c1, 6, 46, "MPI_Recv", "mpi_p2p")
    job.message(h["send"], h["recv"])
    h["B"] = job.ev(c1, 47, 61, "opB", "compute")
    h["launch1"] = job.ev(c1, 60, 61, "cudaLaunchKernel", "cuda_api")
    h["K1"] = job.ev(g1, 61, 80, "gemm1", "kernel")
    job.flow(h["launch1"], h["K1"], "launch")
    h["sync"] = job.ev(c1, 65, 81, "cudaDeviceSynchronize", "sync")
    h["ar1"] = job.ev(c1, 82, 90, "MPI_Allreduce", "mpi_coll")
    job.collective([h["ar0"], h["ar1"]], "allreduce")
    return job, h


def test_two_rank_path_known_by_construction():
    job, h = two_rank_job()
    trace = job.build()
    cp = _cp(trace)
    seg = cp["segments"]
    got = [(r["kind"], r["name"], r["rank"], r["start_ns"] / MS, r["end_ns"] / MS) for r in seg.iter_rows(named=True)]
    assert got == [
        ("local", "opA", 0, 0, 2),
        ("local", "cudaLaunchKernel", 0, 2, 3),
        ("local", "opA", 0, 3, 10),
        ("message", "MPI_Recv", 1, 45, 46),
        ("local", "opB", 1, 47, 60),
        ("launch", "gemm1", 1, 60, 61),
        ("local", "gemm1", 1, 61, 80),
        ("sync_inferred", "cudaDeviceSynchronize", 1, 80, 81),  # no sync flow records it: the GPU end inside it
        ("local", "MPI_Allreduce", 1, 82, 90),
    ]
    assert cp["summary"]["length_ns"] == 53 * MS == seg.get_column("contrib_ns").sum()
    assert dict(cp["by_rank"].select("rank", "contrib_ns").iter_rows()) == {0: 10 * MS, 1: 43 * MS}
    cats = dict(cp["by_category"].select("category", "contrib_ns").iter_rows())
    assert cats == {
        "compute": 22 * MS,
        "cuda_api": 1 * MS,
        "message": 1 * MS,
        "launch": 1 * MS,
        "kernel": 19 * MS,
        "sync_inferred": 1 * MS,
        "mpi_coll": 8 * MS,
    }
    # waits on the path, charged to what caused them
    waits = {(r["kind"], r["rank"]): (r["wait_ns"], r["cause_event"]) for r in cp["waits"].iter_rows(named=True)}
    row = job.row
    assert waits == {("message", 1): (39 * MS, row[h["A"]]), ("sync_inferred", 1): (15 * MS, row[h["K1"]])}
    assert row[h["K0"]] not in set(cp["events"].get_column("event"))


# HTA 0.5.0 on the same windows (bench/hta_compare.py): critical path length (us)
# and its split: CPU-bound vs GPU (compute + kernel-kernel + launch overhead).
HTA_CP = {
    "simple_add": (
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
        (1694040009854190, 1694040010097541),
        241724,
        241190,
        508 + 9 + 17,
    ),
    "alexnet": (
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
        (1695835585827782, 1695835585864138),
        35834,
        32042,
        3712 + 50 + 30,
    ),
    "cuda_event_sync": ("ProfilerStep", (1707417525509335, 1707417525512489), 2401, 2335, 38 + 28),
}
HOST_CATS = ("compute", "cuda_api", "python", "sync", "sync_inferred", "user")
GPU_CATS = ("kernel", "memcpy", "memset", "nccl", "launch", "launch_inferred", "gpu_gap")


@pytest.mark.parametrize("name", sorted(HTA_CP))
def test_hta_critical_path_traces(name, load_valid):
    """Same window as HTA's annotation instance; length within 2 %, the
    CPU-bound and GPU shares within 2 percentage points. Intended differences:
    we charge a host sync call's return after the GPU finished (HTA: 0) and a
    launch delay whenever the stream was idle when the launch arrived (HTA:
    only when the launch queue was empty)."""
    trace = load_valid(kineto_file(f"hta_critical_path/{name}"))
    _, (w0, w1), length_us, cpu_us, gpu_us = HTA_CP[name]
    base = trace.meta["time_range"]["start_ns"]
    cp = _cp(trace, window=f"time={w0 * 1000 - base}:{w1 * 1000 - base}")
    length = cp["summary"]["length_ns"] / 1000
    assert abs(length - length_us) / length_us < 0.02
    cats = dict(cp["by_category"].select("category", "contrib_ns").iter_rows())
    host = sum(v for k, v in cats.items() if k in HOST_CATS) / 1000
    gpu = sum(v for k, v in cats.items() if k in GPU_CATS) / 1000
    assert abs(100 * host / length - 100 * cpu_us / length_us) < 2
    assert abs(100 * gpu / length - 100 * gpu_us / length_us) < 2
    assert cp["summary"]["length_ns"] <= cp["summary"]["window_span_ns"]


@st.composite
def random_jobs(draw):
    """Ranks with a CPU thread and a GPU stream: disjoint or nested host ops,
    launched kernels (launch before kernel), blocking messages and allreduces
    (only activity events, no annotations)."""
    job = Job()
    n_ranks = draw(st.integers(1, 3))
    cpu = [job.thread(r) for r in range(n_ranks)]
    gpu = [job.stream(r, device=r) for r in range(n_ranks)]
    t = [0.0] * n_ranks
    gt = [0.0] * n_ranks
    for _ in range(draw(st.integers(1, 8))):
        what = draw(st.sampled_from(["op", "op", "kernel", "message", "allreduce"]))
        r = draw(st.integers(0, n_ranks - 1))
        if what == "op":
            d = draw(st.integers(1, 9))
            s = t[r] + draw(st.integers(0, 3))
            job.ev(cpu[r], s, s + d, "op", "compute")
            if d > 2 and draw(st.booleans()):
                job.ev(cpu[r], s + 1, s + 2, "inner", "cuda_api")
            t[r] = s + d
        elif what == "kernel":
            s = t[r] + draw(st.integers(0, 2))
            launch = job.ev(cpu[r], s, s + 1, "cudaLaunchKernel", "cuda_api")
            ks = max(gt[r], s + 1) + draw(st.integers(0, 3))
            k = job.ev(gpu[r], ks, ks + draw(st.integers(1, 9)), "k", "kernel")
            job.flow(launch, k)
            t[r], gt[r] = s + 1, job.events[k]["end_ns"] / MS
        elif what == "message" and n_ranks > 1:
            a, b = draw(st.permutations(range(n_ranks)))[:2]
            es, er = t[a] + draw(st.integers(0, 5)), t[b] + draw(st.integers(0, 5))
            end = max(es, er) + draw(st.integers(1, 3))
            job.message(job.ev(cpu[a], es, end, "send", "mpi_p2p"), job.ev(cpu[b], er, end, "recv", "mpi_p2p"))
            t[a] = t[b] = end
        elif what == "allreduce":
            enters = [t[q] + draw(st.integers(0, 5)) for q in range(n_ranks)]
            end = max(enters) + draw(st.integers(1, 3))
            job.collective(
                [job.ev(cpu[q], enters[q], end, "allreduce", "mpi_coll") for q in range(n_ranks)], "allreduce"
            )
            t = [end] * n_ranks
    if not job.events:
        job.ev(cpu[0], 0, 1, "op", "compute")
    return job


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_jobs())
def test_properties(job):
    """The path is never longer than the span; never shorter than any
    timeline's busy time less the time it waited (Scalasca wait states: a
    wait is not work); breakdown shares sum to 1; overlap ratios in [0, 1]."""
    trace = job.build()
    res = analyze(trace)
    cp = res.critical_path
    ev = trace.events
    span = int(ev.get_column("end_ns").max() - ev.get_column("start_ns").min())
    assert 0 <= cp["summary"]["length_ns"] <= span
    loc = ev.get_column("loc").to_numpy().astype(np.int64)
    busy = iv.measure(
        iv.union(loc, ev.get_column("start_ns").to_numpy(), ev.get_column("end_ns").to_numpy()), int(loc.max()) + 1
    )
    waited = np.zeros_like(busy)
    w = res.wait_states
    if w.height:
        np.add.at(waited, loc[w.get_column("event").to_numpy()], w.get_column("wait_ns").to_numpy())
    assert cp["summary"]["length_ns"] >= (busy - waited).max()
    shares = res.breakdown.group_by("rank", "scope").agg(pl.col("share").sum())
    assert np.allclose(shares.get_column("share").to_numpy(), 1.0)
    ratios = res.overlap.get_column("ratio").drop_nulls()
    assert ((ratios >= 0) & (ratios <= 1)).all()
    assert res.overlap.filter(pl.col("ratio").is_null() & pl.col("reason").is_null()).height == 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_jobs())
def test_longest_path_kernel_matches_reference(job):
    from dataclasses import replace

    from oracles import longest_reference

    from di.engine.critical_path import _longest, weights
    from di.engine.critical_path_graph import build_graph
    from di.engine.window import prepare

    frame = prepare(job.build())
    g, _ = build_graph(frame)
    order = np.argsort(g.time_ns, kind="stable").astype(np.int32)
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size, dtype=np.int32)
    honoured = pos[g.src] < pos[g.dst]
    g = replace(g, src=g.src[honoured], dst=g.dst[honoured], kind=g.kind[honoured])
    local_w, cross_w, arrival = weights(frame, g)
    by_dst = np.argsort(g.dst, kind="stable")
    m = order.size
    in_ptr = np.zeros(m + 1, np.int32)  # int32, as the engine passes it (one signature)
    np.cumsum(np.bincount(g.dst, minlength=m), out=in_ptr[1:])
    dist = np.zeros(m, np.int64)
    pred, via = np.full(m, -1, np.int32), np.full(m, -1, np.int32)
    want = longest_reference(order, g.first_of_loc, local_w, g.src, g.dst, cross_w)
    sink, length, n = _longest(order, g.first_of_loc, local_w, in_ptr, g.src[by_dst], cross_w[by_dst], dist, pred, via)
    if m:
        assert length == want.max() and sink == np.flatnonzero(want == want.max())[-1]
    path = order[:n]  # the kernel wrote the path over order, sink first, every node with a predecessor
    assert (path[:1] == sink).all() and (pred[path] >= 0).all()
    assert np.array_equal(dist, want)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(0, 8)), max_size=20),
    st.lists(st.integers(0, 11), max_size=12),
)
def test_arrival_kinds_at_the_asked_nodes(times, edges, asked):
    """Per asked node (any order, repeats), the kind of its in-edge with the latest source time, the last
    such edge on a tie, -1 without in-edges: as a loop over the edges says."""
    from di.engine.critical_path import _arrival_kinds
    from di.engine.critical_path_graph import Graph

    n = len(times)
    edges = [(u % n, v % n, k) for u, v, k in edges]
    t = np.array(times, np.int64)
    z = np.zeros(n, np.int64)
    src, dst, kind = (np.array([e[i] for e in edges], np.int64) for i in range(3))
    g = Graph(z, t, z.astype(bool), z.astype(bool), z, z, z, src, dst, kind)
    nodes = np.array([a % n for a in asked], np.int64)
    want = []
    for v in nodes.tolist():
        best = None
        for u, d, k in edges:
            if d == v and (best is None or t[u] >= best[0]):
                best = (t[u], k)
        want.append(-1 if best is None else best[1])
    assert _arrival_kinds(g, nodes).tolist() == want
