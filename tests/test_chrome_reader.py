"""Chrome/Kineto JSON reader: on real traces, counts checked against an independent
reading of the same files with Python's ``json``, exact nanoseconds, ranks,
collectives, nesting and launch flows; then small hand-built documents whose
tables are known by construction."""

from __future__ import annotations

import gzip
import json
import shutil
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from decimal import Decimal
from itertools import accumulate
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import di
from di.convert.provenance import FLOW_END_WITHOUT_START, FLOW_START_WITHOUT_END
from conftest import KINETO, NO_DATA, assert_valid, is_execution_trace, kineto_files, kineto_id, trace_doc, write_json
from oracles import nest_reference

FLOW_DROPS = (FLOW_START_WITHOUT_END, FLOW_END_WITHOUT_START, "flow step on no slice")


def _params(traces_only: bool = False) -> list[Any]:
    """One param per Kineto file (a skipped one when the data is absent)."""
    files = [p for p in kineto_files() if not (traces_only and is_execution_trace(p))]
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_DATA))]
    return [pytest.param(p, id=kineto_id(p)) for p in files]


def one_file(folder: str) -> Path:
    """The single trace file of a data folder (skips when absent)."""
    found = sorted((KINETO / folder).glob("*.json*")) if (KINETO / folder).is_dir() else []
    if not found:
        pytest.skip(f"{NO_DATA} (needs {folder})")
    return found[0]


def doc_events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(top-level object, events) read with json, floats as exact Decimals."""
    raw = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    doc = json.loads(raw, parse_float=Decimal)
    return (doc, doc["traceEvents"]) if isinstance(doc, dict) else ({}, doc)


def ns(us: Any) -> int:
    """Microseconds (int or Decimal from the JSON text) -> int ns, exactly."""
    return int(Decimal(us) * 1000)


def lifo_pairs(records: list[tuple[int, dict[str, Any]]], key: Any, begin: str) -> int:
    """Begin/end pairs matched last-in-first-out per key, in (ts, file order)."""
    open_: dict[Any, int] = defaultdict(int)
    pairs = 0
    for _, e in sorted(records, key=lambda r: (r[1]["ts"], r[0])):
        k = key(e)
        if e["ph"] == begin:
            open_[k] += 1
        elif open_[k]:
            open_[k] -= 1
            pairs += 1
    return pairs


class Binder:
    """Which flow points land on an X slice of their thread (Trace Event Format rules)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        spans: dict[Any, list[tuple[int, int]]] = defaultdict(list)
        for e in events:
            if e.get("ph") == "X" and "ts" in e and e.get("dur", -1) >= 0:
                spans[(e.get("pid"), e.get("tid"))].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
        self.starts = {k: [s for s, _ in sorted(v)] for k, v in spans.items()}
        self.max_end = {k: list(accumulate((e for _, e in sorted(v)), max)) for k, v in spans.items()}

    def bound(self, e: dict[str, Any]) -> bool:
        key, ts = (e.get("pid"), e.get("tid")), ns(e["ts"])
        starts = self.starts.get(key, [])
        if e["ph"] == "f" and e.get("bp") != "e":  # binds to the next slice
            return bisect_left(starts, ts) < len(starts)
        i = bisect_right(starts, ts)  # some slice with start <= ts < end, or starting at ts
        return (i > 0 and self.max_end[key][i - 1] > ts) or bisect_left(starts, ts) < i


def flow_pairs(events: list[dict[str, Any]]) -> tuple[int, int]:
    """(s->f pairs, s/f records): steps chained by (cat, id) in time order; a step
    that binds to no slice breaks the chain."""
    binder = Binder(events)
    chains: dict[Any, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") in ("s", "f"):
            chains[(e.get("cat"), e.get("id"))].append((ns(e["ts"]), i, e))
    pairs = 0
    for steps in chains.values():
        open_ = False
        for _, _, e in sorted(steps, key=lambda s: s[:2]):
            if not binder.bound(e):
                open_ = open_ and e["ph"] != "s"
            elif e["ph"] == "s":
                open_ = True
            elif open_:
                pairs, open_ = pairs + 1, False
    return pairs, sum(map(len, chains.values()))


@pytest.mark.parametrize("path", _params())
def test_counts_match_an_independent_reading(path: Path, load_valid) -> None:
    if is_execution_trace(path):
        with pytest.raises(di.FormatError, match="not a Chrome trace"):
            di.load(path)
        return
    trace = load_valid(path)
    _, events = doc_events(path)
    assert not [e for e in events if e.get("ph") == "t"], "the flow count below handles s/f only"
    ph = Counter(e.get("ph") for e in events)
    x = sum(1 for e in events if e.get("ph") == "X" and "ts" in e and e.get("dur", -1) >= 0)
    be = [(i, e) for i, e in enumerate(events) if e.get("ph") in ("B", "E")]
    ab = [(i, e) for i, e in enumerate(events) if e.get("ph") in ("b", "e")]
    slices = x + lifo_pairs(be, lambda e: (e.get("pid"), e.get("tid")), "B")
    slices += lifo_pairs(ab, lambda e: (e.get("pid"), e.get("cat"), e.get("id"), e.get("name")), "b")
    ev = trace.events
    assert ev.filter(~pl.col("instant")).height == slices
    assert ev.filter(pl.col("instant")).height - ph["n"] == ph["i"] + ph["I"]
    c_values = sum(
        sum(isinstance(v, (int, float, Decimal)) and not isinstance(v, bool) for v in e.get("args", {}).values())
        for e in events
        if e.get("ph") == "C"
    )
    assert trace.samples.height == c_values
    pairs, records = flow_pairs(events)
    assert trace.flows.filter(pl.col("src_cat").is_not_null()).height == pairs
    dropped = trace.meta["sources"][0]["dropped"]
    assert 2 * pairs + sum(dropped.get(k, 0) for k in FLOW_DROPS) == records, dropped
    assert trace.meta["sources"][0]["events"] == ev.height


def _named_rows(trace: di.Trace) -> Counter:
    ev = trace.events.filter(~pl.col("instant"))
    return Counter(zip(ev.get_column("name").cast(pl.String), ev.get_column("start_ns"), ev.get_column("end_ns")))


def test_ns_resolution_is_exact(load_valid) -> None:
    path = one_file("hta_ns_resolution_trace")
    _, events = doc_events(path)
    xs = [e for e in events if e.get("ph") == "X"]
    assert any(int(float(e["ts"]) * 1000) != ns(e["ts"]) for e in xs), "float64 us would have been exact anyway"
    assert _named_rows(load_valid(path)) == Counter((e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in xs)


def test_base_time_nanoseconds_plus_relative_ts_is_exact(load_valid) -> None:
    path = one_file("hta_nccl_parser_config")
    top, events = doc_events(path)
    base = top["baseTimeNanoseconds"]
    assert isinstance(base, int) and base > 10**18
    want = Counter(
        (e["name"], base + ns(e["ts"]), base + ns(e["ts"]) + ns(e["dur"])) for e in events if e.get("ph") == "X"
    )
    trace = load_valid(path)
    assert _named_rows(trace) == want
    assert trace.meta["clock"]["domain"] == "unix_epoch"


def test_base_time_nanoseconds_beyond_int64_is_ignored_with_a_warning(tmp_path: Path) -> None:
    """A baseTimeNanoseconds of 2**63 (bench/fuzz.py found it) raised OverflowError in np.int64(base)."""
    path = one_file("hta_nccl_parser_config")
    top, events = doc_events(path)
    text = gzip.decompress(path.read_bytes()).decode()
    damaged = text.replace(
        f'"baseTimeNanoseconds": {top["baseTimeNanoseconds"]}', '"baseTimeNanoseconds": 9223372036854775808'
    )
    assert damaged != text
    trace = di.load(write_json(tmp_path, "rank-0.json", damaged))
    assert any("baseTimeNanoseconds" in w for w in trace.meta["warnings"]), trace.meta["warnings"]
    want = Counter((e["name"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e.get("ph") == "X")
    assert _named_rows(trace) == want  # relative timestamps, as a trace without one


@pytest.mark.parametrize("form", ["directory", "glob", "list"])
def test_two_ranks_loaded_together(form: str, kineto: Path, load_valid) -> None:
    folder = kineto / "hta_trace_filter"
    files = sorted(folder.glob("*.json.gz"))
    arg = {"directory": folder, "glob": str(folder / "sampled_rank-*.json.gz"), "list": files}[form]
    trace = load_valid(arg)
    assert trace.ranks == [0, 1]
    assert [s["rank_source"] for s in trace.meta["sources"]] == ["distributedInfo"] * 2
    loc = trace.locations
    src_rank = [s["rank"] for s in trace.meta["sources"]]
    assert loc.get_column("rank").to_list() == [src_rank[s] for s in loc.get_column("source").to_list()]
    gpu = loc.filter(pl.col("kind") == "gpu_stream")
    assert gpu.height and gpu.select("device", "stream").n_unique() == gpu.height
    assert (
        gpu.group_by("device").agg(pl.col("rank").n_unique()).get_column("rank").to_list()
        == [1] * gpu.select("device").n_unique()
    )
    ev = trace.events.with_row_index("row").join(loc.select("loc", "rank"), on="loc", maintain_order="left")
    locs = {r: set(ev.filter(pl.col("rank") == r).get_column("loc").to_list()) for r in (0, 1)}
    assert locs[0] and locs[1] and not locs[0] & locs[1]
    for r, f in zip((0, 1), files):
        assert ev.filter(pl.col("rank") == r).height == di.load(f).events.height
    par = ev.filter(pl.col("parent").is_not_null())
    assert (trace.events.get_column("loc").gather(par.get_column("parent")) == par.get_column("loc")).all()


@pytest.mark.parametrize("folder", ["hta_distributed_info_unavailable", "hta_rank_unavailable"])
def test_rank_sources(folder: str, tmp_path: Path, load_valid) -> None:
    path = one_file(folder)

    def source(trace: di.Trace) -> list[tuple[int, str]]:
        return [(s["rank"], s["rank_source"]) for s in trace.meta["sources"]]

    assert source(load_valid(path)) == [(0, "single")]
    t5 = load_valid(path, rank=5)
    assert source(t5) == [(5, "option")] and t5.ranks == [5]
    named = shutil.copy(path, tmp_path / "rank-7.json.gz")
    assert source(load_valid(named)) == [(7, "file_name")]
    a, b = shutil.copy(path, tmp_path / "first.json.gz"), shutil.copy(path, tmp_path / "second.json.gz")
    both = load_valid([a, b])
    assert source(both) == [(0, "position"), (1, "position")] and both.ranks == [0, 1]


def test_ranks_option_resolves_a_rank_clash(kineto: Path, load_valid) -> None:
    files = [kineto / "hta_trace_compare/base/base.json.gz", kineto / "hta_trace_compare/test/test.json.gz"]
    with pytest.raises(di.FormatError, match="--ranks"):
        di.load(files)
    both = load_valid(files, ranks=[0, 1])
    assert [(s["rank"], s["rank_source"]) for s in both.meta["sources"]] == [(0, "option"), (1, "option")]


def test_nccl_collectives(load_valid) -> None:
    path = one_file("hta_nccl_parser_config")
    top, events = doc_events(path)
    base = top["baseTimeNanoseconds"]
    kernels = {
        base + ns(e["ts"]): e["args"]
        for e in events
        if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})
    }
    trace = load_valid(path)
    coll = trace.collectives
    assert coll.height == len(kernels) > 0
    assert set(coll.get_column("op")) == {"allreduce", "broadcast"}
    assert set(coll.get_column("comm")) == {"0"} and set(coll.get_column("group_ranks")) == {"[0, 1]"}
    assert set(coll.get_column("group_size")) == {2} and set(coll.get_column("rank")) == {0}
    assert coll.get_column("seq").to_list() == list(range(coll.height))
    size = {"Float": 4, "Long": 8}
    starts = trace.events.get_column("start_ns").gather(coll.get_column("event")).to_list()
    for start, nbytes, dtype in zip(starts, coll.get_column("bytes"), coll.get_column("dtype")):
        args = kernels[start]
        assert dtype == args["dtype"] and nbytes == args["In msg nelems"] * size[args["dtype"]]
    assert "Float" in coll.get_column("dtype").to_list()


def test_nesting_is_consistent(load_valid) -> None:
    trace = load_valid(one_file("hta_critical_path/alexnet"))
    ev = trace.events
    loc, start, end = (ev.get_column(c).to_numpy() for c in ("loc", "start_ns", "end_ns"))
    depth, parent = nest_reference(loc, start, end)
    assert ev.get_column("depth").to_list() == depth.tolist()
    assert ev.get_column("parent").fill_null(-1).to_list() == parent.tolist()
    child = ev.with_row_index("row").filter(pl.col("parent").is_not_null())
    assert child.height > 0
    p = ev[child.get_column("parent")]
    assert (p.get_column("loc") == child.get_column("loc")).all()
    assert (p.get_column("depth") + 1 == child.get_column("depth")).all()
    assert (p.get_column("start_ns") <= child.get_column("start_ns")).all()
    inside = child.get_column("start_ns") < p.get_column("end_ns")
    at_start = (child.get_column("start_ns") == p.get_column("start_ns")) & (
        child.get_column("instant") | (p.get_column("start_ns") == p.get_column("end_ns"))
    )
    assert (inside | at_start).all()
    assert (ev.filter(pl.col("parent").is_null()).get_column("depth") == 0).all()


def _flow_ends(trace: di.Trace, kind: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    ev = trace.events.with_row_index("row").join(trace.locations.select("loc", "kind"), on="loc", maintain_order="left")
    flows = trace.flows.filter(pl.col("kind") == kind)
    return ev[flows.get_column("src")], ev[flows.get_column("dst")]


@pytest.mark.parametrize("path", _params(traces_only=True))
def test_launch_and_sync_flows_go_from_api_call_to_gpu(path: Path, load_valid) -> None:
    trace = load_valid(path)
    for kind, api_cats, gpu_cats in (("launch", ["cuda_api", "sync"], None), ("sync", ["sync"], ["sync"])):
        src, dst = _flow_ends(trace, kind)
        assert src.get_column("cat").cast(pl.String).is_in(api_cats).all(), kind
        assert gpu_cats is None or dst.get_column("cat").cast(pl.String).is_in(gpu_cats).all(), kind
        assert (src.get_column("kind") == "cpu_thread").all(), kind
        assert (dst.get_column("kind") == "gpu_stream").all(), kind
        assert src.get_column("corr").is_not_null().all(), kind
        assert (src.get_column("corr") == dst.get_column("corr")).all(), kind


def test_cuda_sync_records_are_gpu_side_and_reached_by_sync_flows(load_valid) -> None:
    trace = load_valid(one_file("hta_critical_path/alexnet"))
    ev = trace.events.join(trace.locations.select("loc", "kind"), on="loc", maintain_order="left")
    kinds = ev.filter(pl.col("src_cat") == "cuda_sync").get_column("kind").cast(pl.String)
    assert kinds.len() > 0 and set(kinds) == {"gpu_stream"}  # Context Sync too (tid -1, 'Device 0')
    dst_cat = trace.events.get_column("cat").gather(trace.flows.get_column("dst")).cast(pl.String)
    flow_kinds = trace.flows.get_column("kind").cast(pl.String).filter(dst_cat == "sync")
    assert flow_kinds.len() > 0 and set(flow_kinds) == {"sync"}  # ac2g ones as well as corr-derived


# ---- hand-built documents: the answer is known by construction ----


def X(name: str, tid: int, ts: float, dur: float, **kw: Any) -> dict[str, Any]:
    return {"ph": "X", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, **kw}


def rows(trace: di.Trace) -> list[tuple[Any, ...]]:
    """(loc, start_ns, end_ns, name, depth, parent, instant) per event."""
    cols = ["loc", "start_ns", "end_ns", pl.col("name").cast(pl.String), "depth", "parent", "instant"]
    return trace.events.select(cols).rows()


def test_begin_end_nesting_and_metadata_names(tmp_path: Path, load_valid) -> None:
    t = load_valid(
        write_json(
            tmp_path,
            "be.json",
            trace_doc(
                {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "trainer"}},
                {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
                {"ph": "B", "name": "outer", "cat": "user_annotation", "pid": 1, "tid": 2, "ts": 1},
                {"ph": "B", "name": "inner", "pid": 1, "tid": 2, "ts": 2, "args": {"a": 1}},
                {"ph": "E", "pid": 1, "tid": 2, "ts": 3},
                {"ph": "E", "pid": 1, "tid": 2, "ts": 10},
            ),
        )
    )
    assert rows(t) == [(0, 1000, 10000, "outer", 0, None, False), (0, 2000, 3000, "inner", 1, 0, False)]
    assert t.events.get_column("cat").cast(pl.String).to_list() == ["user", "other"]
    assert t.events.get_column("args").to_list() == [None, '{"a":1}']
    assert t.locations.select("pid", "tid", "kind", "name", "process").rows() == [
        (1, 2, "cpu_thread", "main", "trainer")
    ]


def test_begin_end_args_are_merged(tmp_path: Path, load_valid) -> None:
    t = load_valid(
        write_json(
            tmp_path,
            "args.json",
            trace_doc(
                {"ph": "B", "name": "a", "pid": 1, "tid": 1, "ts": 0, "args": {"x": 1}},
                {"ph": "E", "pid": 1, "tid": 1, "ts": 5, "args": {"y": 2}},
            ),
        )
    )
    assert json.loads(t.events.get_column("args")[0]) == {"x": 1, "y": 2}


def test_instant_scopes(tmp_path: Path, load_valid) -> None:
    t = load_valid(
        write_json(
            tmp_path,
            "i.json",
            trace_doc(
                X("span", 2, 0, 100),
                {"ph": "i", "name": "g", "pid": 1, "tid": 2, "ts": 4, "s": "g"},
                {"ph": "i", "name": "p", "pid": 1, "tid": 2, "ts": 5, "s": "p"},
                {"ph": "i", "name": "t", "pid": 1, "tid": 2, "ts": 6, "s": "t"},
                {"ph": "I", "name": "old", "pid": 1, "tid": 2, "ts": 7},
            ),
        )
    )
    assert t.locations.select("pid", "tid", "kind", "name").rows() == [
        (1, 2, "cpu_thread", None),
        (None, None, "marker", "global markers"),
        (1, None, "marker", "process markers"),
    ]
    assert rows(t) == [
        (0, 0, 100000, "span", 0, None, False),
        (0, 6000, 6000, "t", 1, 0, True),
        (0, 7000, 7000, "old", 1, 0, True),
        (1, 4000, 4000, "g", 0, None, True),
        (2, 5000, 5000, "p", 0, None, True),
    ]


def test_counters_with_two_keys_and_a_unit(tmp_path: Path, load_valid) -> None:
    t = load_valid(
        write_json(
            tmp_path,
            "c.json",
            trace_doc(
                {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"alloc": 5, "free": 7.5}},
                {"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"alloc": 6, "free": 8}},
                {"ph": "C", "name": "power [W]", "pid": 1, "ts": 2, "args": {"value": 100}},
            ),
        )
    )
    assert t.events.height == 0
    assert t.locations.select("loc", "pid", "kind").rows() == [(0, 1, "counter")]
    assert t.series.rows() == [(0, 0, "mem alloc", None), (1, 0, "mem free", None), (2, 0, "power", "W")]
    assert t.samples.rows() == [(0, 1000, 5.0), (0, 2000, 6.0), (1, 1000, 7.5), (1, 2000, 8.0), (2, 2000, 100.0)]


def test_counter_id_makes_its_own_series(tmp_path: Path, load_valid) -> None:
    c = {"ph": "C", "name": "ctr", "pid": 1, "ts": 1}
    t = load_valid(
        write_json(tmp_path, "cid.json", trace_doc({**c, "id": 3, "args": {"a": 1}}, {**c, "id": 4, "args": {"a": 2}}))
    )
    assert t.series.height == 2 and t.samples.height == 2


def test_async_begin_end_and_instant(tmp_path: Path, load_valid) -> None:
    def a(ph: str, ts: int, id_: int, name: str = "req") -> dict[str, Any]:
        return {"ph": ph, "name": name, "cat": "net", "id": id_, "pid": 1, "tid": 9, "ts": ts}

    t = load_valid(
        write_json(
            tmp_path,
            "a.json",
            trace_doc(
                a("b", 1, 7),
                a("n", 2, 7),
                a("e", 5, 7),
                a("e", 6, 8, "lonely"),
                a("b", 8, 9, "open"),
            ),
        )
    )
    assert t.locations.select("pid", "tid", "kind", "name").rows() == [(1, None, "async", "net")]
    assert rows(t) == [(0, 1000, 5000, "req", 0, None, False), (0, 2000, 2000, "req", 1, 0, True)]
    assert t.meta["sources"][0]["dropped"] == {
        "async b/e begins without an end": 1,
        "async b/e ends without a begin": 1,
    }


def test_flow_steps_with_and_without_binding_point(tmp_path: Path, load_valid) -> None:
    def step(ph: str, cat: str, tid: int, ts: int, **kw: Any) -> dict[str, Any]:
        return {"ph": ph, "name": "fl", "cat": cat, "id": 1, "pid": 1, "tid": tid, "ts": ts, **kw}

    t = load_valid(
        write_json(
            tmp_path,
            "f.json",
            trace_doc(
                X("A", 1, 0, 10),
                X("B", 2, 20, 10),
                X("C", 3, 40, 10),
                X("D", 3, 60, 10),
                step("s", "c1", 1, 5),
                step("t", "c1", 2, 25),
                step("f", "c1", 3, 45, bp="e"),  # A -> B -> C
                step("s", "c2", 1, 5),
                step("f", "c2", 3, 55),  # no bp: the next slice, D
                step("s", "c3", 1, 5),
                step("f", "c3", 3, 55, bp="e"),  # bp e at 55: no enclosing slice
            ),
        )
    )
    assert t.flows.select("src", "dst", pl.col("kind").cast(pl.String), "id", "src_cat").rows() == [
        (0, 1, "user", 1, "c1"),
        (1, 2, "user", 1, "c1"),
        (0, 3, "user", 1, "c2"),
    ]
    assert t.meta["sources"][0]["dropped"] == {"flow starts without an end": 1, "flow step on no slice": 1}


def test_flow_v2_bind_id(tmp_path: Path, load_valid) -> None:
    t = load_valid(
        write_json(
            tmp_path,
            "v2.json",
            trace_doc(
                X("P", 1, 0, 1, bind_id=42, flow_out=True),
                X("Q", 2, 3, 1, bind_id=42, flow_in=True, flow_out=True),
                X("R", 3, 6, 1, bind_id=42, flow_in=True),
                X("S", 4, 9, 1, bind_id="x", flow_in=True),
            ),
        )
    )
    assert t.flows.select("src", "dst", pl.col("kind").cast(pl.String), "id", "src_cat").rows() == [
        (0, 1, "user", 42, None),
        (1, 2, "user", 42, None),
    ]
    assert t.meta["sources"][0]["dropped"] == {"flow_in flow ends without a start": 1}


def test_array_format_without_closing_bracket_and_string_pid(tmp_path: Path, load_valid) -> None:
    text = (
        '[{"ph":"X","name":"A","pid":"Spans","tid":"PyTorch Profiler","ts":1.5,"dur":2.25},\n'
        '{"ph":"X","name":"B","pid":3,"tid":4,"ts":0.0005,"dur":1},\n'
    )
    t = load_valid(write_json(tmp_path, "arr.json", text))
    assert t.locations.select("pid", "tid", "kind", "name", "process").rows() == [
        (3, 4, "cpu_thread", None, None),
        (None, None, "cpu_thread", "PyTorch Profiler", "Spans"),
    ]
    assert rows(t) == [(0, 1, 1001, "B", 0, None, False), (1, 1500, 3750, "A", 0, None, False)]
    assert t.meta["warnings"] == [] and t.meta["sources"][0]["dropped"] == {}


def test_flow_binds_to_a_slice_not_an_instant(tmp_path: Path, load_valid) -> None:
    t = load_valid(
        write_json(
            tmp_path,
            "fi.json",
            trace_doc(
                X("A", 1, 0, 10),
                {"ph": "i", "s": "t", "name": "mark", "pid": 1, "tid": 1, "ts": 5},
                X("B", 2, 0, 10),
                {"ph": "s", "id": 1, "cat": "c", "name": "f", "pid": 1, "tid": 1, "ts": 5},
                {"ph": "f", "bp": "e", "id": 1, "cat": "c", "name": "f", "pid": 1, "tid": 2, "ts": 5},
            ),
        )
    )
    assert t.flows.select("src", "dst").rows() == [(0, 2)]  # A -> B; row 1 is the instant


def test_every_flow_record_is_accounted_for(tmp_path: Path, load_valid) -> None:
    def step(ph: str, tid: int, ts: int, **kw: Any) -> dict[str, Any]:
        return {"ph": ph, "name": "fl", "cat": "c", "id": 1, "pid": 1, "tid": tid, "ts": ts, **kw}

    t = load_valid(
        write_json(
            tmp_path,
            "acc.json",
            trace_doc(
                X("A", 1, 0, 10),
                X("B", 2, 0, 100),
                step("s", 1, 1),
                step("s", 1, 20),
                step("f", 2, 30, bp="e"),
            ),
        )
    )
    assert t.flows.height == 0
    dropped = t.meta["sources"][0]["dropped"]
    assert sum(dropped.get(k, 0) for k in FLOW_DROPS) == 3, dropped


def test_more_distinct_names_than_the_first_symbol_table_holds(tmp_path: Path) -> None:
    from di.convert.symbols import FIRST_CAPACITY

    n = FIRST_CAPACITY + 1000
    events = [{"ph": "X", "name": f"op{i}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(n)]
    t = assert_valid(di.load(write_json(tmp_path, "many.json", trace_doc(*events))))
    names = t.events.get_column("name").cast(str)
    assert names.n_unique() == n
    assert names.to_list()[:3] == ["op0", "op1", "op2"] and names[-1] == f"op{n - 1}"


def test_pages_released_behind_the_scanner_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Releasing the mapped file's pages while scanning (done for large files) must not
    change what is read: names and args whose bytes lie in released pages come back
    from the page cache."""
    from di.convert.chrome import decode

    events = [
        {
            "ph": "X",
            "name": f"op{i % 997}",
            "cat": "cpu_op",
            "pid": 1,
            "tid": 1 + i % 3,
            "ts": i,
            "dur": 1,
            "args": {"i": i, "pad": "x" * 40},
        }
        for i in range(150_000)
    ]
    path = write_json(tmp_path, "big.json", trace_doc(*events))
    whole = di.load(path)
    monkeypatch.setattr(decode, "RELEASE_MIN_BYTES", 0)
    monkeypatch.setattr(decode, "RELEASE_MARGIN_BYTES", 0)
    released = assert_valid(di.load(path))
    for table in ("events", "locations"):
        assert released.table(table).equals(whole.table(table)), table


def test_collectives_come_from_a_top_level_collective_name_member(tmp_path: Path, load_valid) -> None:
    coll = {"Collective name": "allreduce", "In msg nelems": 4, "dtype": "Float", "Group size": 2}
    t = load_valid(
        write_json(
            tmp_path,
            "coll.json",
            trace_doc(
                X("record_param_comms", 1, 0, 5, cat="cpu_op", args=coll),
                X("nested", 1, 10, 5, cat="cpu_op", args={"meta": {"Collective name": "broadcast"}}),
                X("in_a_string", 1, 20, 5, cat="cpu_op", args={"note": '"Collective name": "gather"'}),
                {"ph": "B", "name": "record_param_comms", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 30},
                {"ph": "E", "pid": 1, "tid": 1, "ts": 35, "args": {**coll, "Collective name": "broadcast"}},
            ),
        )
    )
    names = t.events.get_column("name").cast(pl.String).gather(t.collectives.get_column("event")).to_list()
    assert names == ["record_param_comms", "record_param_comms"]
    assert t.collectives.select("op", "bytes").rows() == [("allreduce", 16), ("broadcast", 16)]


def test_launch_flows_pair_each_api_call_with_every_gpu_record_of_its_correlation(tmp_path: Path, load_valid) -> None:
    gpu = {"pid": 0, "cat": "kernel"}
    t = load_valid(
        write_json(
            tmp_path,
            "launch.json",
            trace_doc(
                X("cudaLaunchKernel", 1, 0, 2, cat="cuda_runtime", args={"correlation": 7}),
                X("cudaGraphLaunch", 1, 3, 2, cat="cuda_runtime", args={"correlation": 8}),
                X("aten::mm", 1, 6, 2, cat="cpu_op", args={"correlation": 8}),
                {"ph": "X", "name": "k1", "tid": 7, "ts": 10, "dur": 1, "args": {"correlation": 7}, **gpu},
                {"ph": "X", "name": "g1", "tid": 7, "ts": 20, "dur": 1, "args": {"correlation": 8}, **gpu},
                {"ph": "X", "name": "g2", "tid": 8, "ts": 21, "dur": 1, "args": {"correlation": 8}, **gpu},
                {"ph": "X", "name": "lone", "tid": 8, "ts": 30, "dur": 1, "args": {"correlation": 9}, **gpu},
                {"ph": "s", "id": 7, "pid": 1, "tid": 1, "ts": 0, "cat": "ac2g", "name": "ac2g"},
                {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 10, "cat": "ac2g", "name": "ac2g", "bp": "e"},
            ),
        )
    )
    name = t.events.get_column("name").cast(pl.String)
    edges = sorted((name[s], name[d], k) for s, d, k in t.flows.select("src", "dst", "kind").iter_rows())
    assert edges == [
        ("cudaGraphLaunch", "g1", "launch"),
        ("cudaGraphLaunch", "g2", "launch"),
        ("cudaLaunchKernel", "k1", "launch"),
    ]


@pytest.mark.parametrize(
    ("src_cat", "name", "cat"),
    [
        ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "nccl"),
        ("kernel", "void at::native::add_kernel", "kernel"),
        ("kernel", "RCCL_ring", "nccl"),
        ("cuda_runtime", "cudaDeviceSynchronize", "sync"),
        ("cuda_driver", "cuStreamWaitEvent", "sync"),
        ("cuda_runtime", "cudaLaunchKernel", "cuda_api"),
        ("cpu_op", "record_param_comms", "nccl"),
        ("cpu_op", "aten::record_param_comms", "compute"),
        ("user_annotation", "ProfilerStep#3", "step"),
        ("user_annotation", "forward", "user"),
        ("mtia_ccp_events", "WaitForEvent", "sync"),
        ("io", "read", "io"),
        ("weird", "x", "other"),
        (None, "x", "other"),
    ],
)
def test_canonical_category_rules(src_cat: str | None, name: str, cat: str) -> None:
    from di.convert.categories import canonical_cat_of, canonical_cats

    assert canonical_cat_of(src_cat, name) == cat
    got = canonical_cats(pl.Series([src_cat, "cpu_op", src_cat], dtype=pl.String), pl.Series([name, "aten::mm", name]))
    assert got.cast(pl.String).to_list() == [cat, "compute", cat]


def test_canonical_category_columns_follow_the_rules_row_by_row() -> None:
    from di.convert.categories import SOURCE_CATEGORIES, canonical_cat_of, canonical_cat_rows, canonical_cats
    from di.trace import CATS

    names = [
        "",
        "NCCL_AllReduce",
        "xxncclKernel",
        "hccl_x",
        "cudaStreamSynchronize",
        "cuEventQuery",
        "WAITing",
        "c10d::allreduce_",
        "gloo:all_reduce",
        "nccl:all_reduce",
        "ProfilerStep#12",
        "profilerstep#1",
        "aten::mm",
        "ſynchronize",
    ]
    src = [None, "", "weird", *SOURCE_CATEGORIES, *CATS]
    pairs = [(c, n) for c in src for n in names]
    src_cats, texts = pl.Series([c for c, _ in pairs], dtype=pl.String), pl.Series([n for _, n in pairs])
    expected = [canonical_cat_of(c, n) for c, n in pairs]
    assert canonical_cats(src_cats, texts).cast(pl.String).to_list() == expected
    assert canonical_cat_rows(src_cats, texts).cast(pl.String).to_list() == expected  # the pairs are distinct


def test_more_names_than_the_first_symbol_table_holds(tmp_path: Path) -> None:
    """100,000 events of 70,000 distinct names, short (looked up in the scanner's memo) and long, repeating after
    the symbol table's first 65,536 fill it: the scan goes on with a bigger table of the same ids, and every event
    keeps its own name and category."""
    names = [f"k{i}" if i % 2 else f"void cutlass::Kernel2<tile_{i}x64_64x3_tn_align8>" for i in range(70_000)]
    cats = ["kernel", "cpu_op", "cuda_runtime"]
    events = [
        {"ph": "X", "cat": cats[i % 3], "name": names[i % 70_000], "pid": 1, "tid": f"t{i % 5}", "ts": i, "dur": 1}
        for i in range(100_000)
    ]
    trace = di.load(write_json(tmp_path, "names.json", trace_doc(*events)))
    ev = trace.events.sort("start_ns")
    assert ev.height == 100_000
    assert ev["name"].cast(pl.String).to_list() == [names[i % 70_000] for i in range(100_000)]
    assert ev["src_cat"].cast(pl.String).to_list() == [cats[i % 3] for i in range(100_000)]
    assert trace.locations.height == 5


def test_phase_counts_count_every_record_block_by_block() -> None:
    """The records of each phase byte, counted a block at a time, are those of one count of all of them."""
    from types import SimpleNamespace

    import numpy as np

    from di.convert.chrome import phases

    codes = np.frombuffer(b"XXXsfBEiMC\x00", dtype=np.uint8)
    for n in (0, 1, phases._COUNT_BLOCK, 2 * phases._COUNT_BLOCK + 17):
        ph = np.random.default_rng(n).choice(codes, n)
        raw = SimpleNamespace(cols={"ph": ph})
        assert np.array_equal(phases.phase_counts(raw), np.bincount(ph, minlength=256))
