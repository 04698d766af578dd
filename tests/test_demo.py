"""The built-in Kineto-shaped example job (di.demo): shape, ids, timing model."""

from __future__ import annotations

import gzip
import re
from typing import Any

import orjson
import pytest

from di import demo
from di.demo import plan

RANKS, STEPS, OPS, STRAGGLER = 4, 6, 40, 1


@pytest.fixture(scope="module")
def docs() -> list[bytes]:
    return demo.kineto_job(ranks=RANKS, steps=STEPS, ops_per_step=OPS, seed=7, straggler=STRAGGLER)


def _exact(doc: bytes) -> dict[str, Any]:
    """Parse with ``ts``/``dur`` turned into exact integer nanoseconds."""
    exact = re.sub(rb'"(ts|dur)": (\d+)\.(\d{3})', lambda m: b'"%s": %d' % (m[1], int(m[2] + m[3])), doc)
    return orjson.loads(exact)


@pytest.fixture(scope="module")
def parsed(docs: list[bytes]) -> list[dict[str, Any]]:
    return [_exact(d) for d in docs]


def _x(doc: dict[str, Any], cat: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") == cat and (name is None or e["name"] == name)
    ]


def test_deterministic_for_a_seed(docs: list[bytes]) -> None:
    again = demo.kineto_job(ranks=RANKS, steps=STEPS, ops_per_step=OPS, seed=7, straggler=STRAGGLER)
    assert again == docs
    assert demo.kineto_job(ranks=RANKS, steps=STEPS, ops_per_step=OPS, seed=8) != docs


def test_one_document_per_rank_with_its_distributed_info(parsed: list[dict[str, Any]]) -> None:
    assert len(parsed) == RANKS
    for rank, doc in enumerate(parsed):
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, RANKS, "nccl")
        assert info["pg_config"][0]["ranks"] == list(range(RANKS))
        assert doc["schemaVersion"] == 1 and len(doc["deviceProperties"]) == RANKS
        assert list(doc)[-1] == "baseTimeNanoseconds"  # Kineto writes it last
        steps = _x(doc, "user_annotation")
        assert [e["name"] for e in steps if e["name"].startswith("ProfilerStep#")] == [
            f"ProfilerStep#{s}" for s in range(STEPS)
        ]


def test_default_job_size() -> None:
    docs = demo.kineto_job()
    assert len(docs) == 4
    assert sum(d.count(b'"ph":') for d in docs) == 6516


def test_every_flow_start_has_an_end(parsed: list[dict[str, Any]]) -> None:
    for doc in parsed:
        flows = [e for e in doc["traceEvents"] if e.get("cat") == "ac2g"]
        starts = {e["id"] for e in flows if e["ph"] == "s"}
        ends = {e["id"] for e in flows if e["ph"] == "f"}
        assert starts and starts == ends
        assert all(e["bp"] == "e" for e in flows if e["ph"] == "f")


def test_device_activity_correlates_with_a_runtime_call(parsed: list[dict[str, Any]]) -> None:
    for doc in parsed:
        calls = {e["args"]["correlation"]: e for e in _x(doc, "cuda_runtime")}
        device = [e for cat in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync") for e in _x(doc, cat)]
        assert len(device) == len(calls)
        for e in device:
            call = calls[e["args"]["correlation"]]
            assert e["args"]["External id"] == call["args"]["External id"]
            if e["cat"] != "cuda_sync":
                assert e["ts"] > call["ts"] + call["dur"]  # after the launch


def test_timestamps_are_printed_with_three_decimals(docs: list[bytes]) -> None:
    for doc in docs:
        values = re.findall(rb'"(?:ts|dur)": ([^,\n]+)', doc)
        assert values and all(re.fullmatch(rb"\d+\.\d{3}", v) for v in values)


def test_cpu_slices_nest_on_the_main_thread(parsed: list[dict[str, Any]]) -> None:
    for doc in parsed:
        cpu = [
            e for e in doc["traceEvents"] if e.get("ph") == "X" and isinstance(e["pid"], int) and e["pid"] == e["tid"]
        ]
        spans = sorted((e["ts"], -e["dur"]) for e in cpu)
        stack: list[int] = []
        for start, neg in spans:
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or start - neg <= stack[-1], "partial overlap"
            stack.append(start - neg)


def test_compute_stream_runs_in_order(parsed: list[dict[str, Any]]) -> None:
    for doc in parsed:
        work = sorted(
            (e["ts"], e["ts"] + e["dur"])
            for cat in ("kernel", "gpu_memcpy", "gpu_memset")
            for e in _x(doc, cat)
            if e["tid"] == plan.COMPUTE_STREAM
        )
        assert all(a[1] <= b[0] for a, b in zip(work, work[1:]))


def _nccl(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in _x(doc, "kernel") if e["name"].startswith("ncclDevKernel_AllReduce")]


def test_allreduce_ends_together_and_carries_collective_args(parsed: list[dict[str, Any]]) -> None:
    kernels = [_nccl(doc) for doc in parsed]
    assert all(len(k) == STEPS for k in kernels)
    for step in range(STEPS):
        ends = [k[step]["ts"] + k[step]["dur"] for k in kernels]
        assert max(ends) - min(ends) < plan.NCCL_END_JITTER_NS
    for doc, ks in zip(parsed, kernels):
        comms = _x(doc, "cpu_op", "record_param_comms")
        for e in (ks[0], comms[0]):
            args = e["args"]
            assert args["Collective name"] == "allreduce" and args["Group size"] == RANKS
            assert args["Process Group Ranks"] == str(list(range(RANKS)))
            assert args["In msg nelems"] == args["Out msg nelems"] == plan.ALLREDUCE_NELEMS
        assert {e["tid"] for e in ks} == {plan.NCCL_STREAM}


def _arrival(doc: dict[str, Any]) -> list[int]:
    """Per step: ProfilerStep start -> record_param_comms start (ns of CPU work)."""
    steps = [e for e in _x(doc, "user_annotation") if e["name"].startswith("ProfilerStep#")]
    comms = _x(doc, "cpu_op", "record_param_comms")
    return [c["ts"] - s["ts"] for s, c in zip(steps, comms)]


def test_straggler_works_longer_and_the_others_wait(parsed: list[dict[str, Any]]) -> None:
    arrival = [_arrival(doc) for doc in parsed]
    for step in range(STEPS):
        assert max(range(RANKS), key=lambda r: arrival[r][step]) == STRAGGLER
    waits = [[e["dur"] for e in _nccl(doc)] for doc in parsed]
    for rank in set(range(RANKS)) - {STRAGGLER}:
        assert all(w > ws for w, ws in zip(waits[rank], waits[STRAGGLER]))


def test_balanced_job_without_straggler() -> None:
    parsed = [_exact(d) for d in demo.kineto_job(ranks=3, steps=4, straggler=None)]
    mean = [sum(_arrival(doc)) / 4 for doc in parsed]
    assert max(mean) / min(mean) < 1.1


def test_kineto_metadata_and_sync_events(parsed: list[dict[str, Any]]) -> None:
    doc = parsed[0]
    meta = {(e["name"], e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "M"}
    assert ("thread_name", 0, plan.COMPUTE_STREAM) in meta
    assert ("process_labels", 0, 0) in meta
    names = [e["name"] for e in doc["traceEvents"] if e["ph"] in "iX" and e.get("cat") in (None, "Trace")]
    assert "Iteration Start: PyTorch Profiler" in names and "PyTorch Profiler (0)" in names
    syncs = _x(doc, "cuda_runtime", "cudaDeviceSynchronize")
    assert len(syncs) == STEPS // plan.DEVICE_SYNC_EVERY
    assert {e["tid"] for e in _x(doc, "cuda_sync", "Context Sync")} == {-1}
    assert all(e["args"]["bytes"] > 0 for e in _x(doc, "gpu_memcpy"))


def test_render_ranks_and_files_match_the_job(docs: list[bytes], tmp_path: Any) -> None:
    options = dict(ranks=RANKS, steps=STEPS, ops_per_step=OPS, seed=7, straggler=STRAGGLER)
    assert demo.kineto_job(**options, render_ranks=[2]) == [docs[2]]
    paths = demo.write_kineto_job(tmp_path, compress=True, **options)
    assert [p.name for p in paths] == [f"rank-{r}.json.gz" for r in range(RANKS)]
    assert [gzip.decompress(p.read_bytes()) for p in paths] == docs
    plain = demo.write_kineto_job(tmp_path / "plain", render_ranks=[3], **options)
    assert plain[0].read_bytes() == docs[3]


@pytest.mark.parametrize(
    "bad", [dict(ranks=0), dict(steps=0), dict(ops_per_step=0), dict(ranks=2, straggler=2), dict(render_ranks=[4])]
)
def test_bad_arguments(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        demo.kineto_job(**bad)


def test_ids_restart_per_rank_like_real_traces(parsed: list[dict[str, Any]]) -> None:
    first = {_x(doc, "cuda_runtime")[0]["args"]["correlation"] for doc in parsed}
    assert first == {plan.CORRELATION_BASE}
    assert {_x(doc, "kernel")[0]["pid"] for doc in parsed} == set(range(RANKS))  # device id
