"""Device memory from the allocator's events (di.engine.memory): a Kineto job whose peak, holders and growth per step
are known by construction, read through the Kineto reader; the shared trace checked against its own file; the
viewers; one process against several."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from pathlib import Path

import polars as pl
import pytest
from analyze_cli import run_di
from conftest import KINETO

import di
from di.engine.memory import HOLDERS_SHOWN, MEMORY_EVENT, memory, memory_holders, memory_tables
from di.engine.window import prepare

MIB = 2**20
STEP_US = 100_000
BASE = 1000 * MIB
"""Allocated before the trace (the weights)."""
RESERVED = 1536 * MIB
BACKWARD = "autograd::engine::evaluate_function: AddmmBackward0"
TRACELENS = KINETO / "tracelens_h100_bert_small_with_stack.json.gz"


def kineto_job(rank: int, *, steps: int = 4, leak_mib: int = 8, extra_ops: int = 0, optimizer_mib: int = 0) -> dict:
    """One rank of a training loop, profiled with ``profile_memory`` (times in us from the step's start):

    - ``nn.Module: Linear_0`` / ``aten::linear`` allocates 200 MiB of activations at 3,000;
    - ``nn.Module: ReLU_0`` / ``aten::relu`` 100 MiB at 23,000;
    - ``nn.Module: Loss_0`` / ``aten::add`` ``leak_mib`` at 33,000, never freed (a loss kept with its graph);
    - on the autograd thread, ``AddmmBackward0`` allocates a 50 MiB gradient at 60,000 (the step's peak), frees it at
      70,000, then the activations at 80,000 and 85,000.

    Step k (1-based) peaks at BASE + k x leak + 350 MiB; it ends at BASE + k x leak. ``extra_ops`` more operators in
    step 1 each allocate 1 MiB, never freed, before the loss. With ``optimizer_mib``, each step ends in
    ``Optimizer.step#AdamW.step`` (92,000 to 98,000), whose ``aten::zeros_like`` makes that much state in step 1,
    kept (every later total is that much higher).
    """
    events: list[dict] = []
    addr = [0x7F0000000000 + rank * 0x1000000000]
    allocated = [BASE]

    def op(name: str, t0: int, t1: int, tid: int = 1, cat: str = "cpu_op") -> None:
        events.append({"ph": "X", "cat": cat, "name": name, "pid": 100 + rank, "tid": tid, "ts": t0, "dur": t1 - t0})

    def mem(ts: int, size: int, at: int | None = None, tid: int = 1, device: tuple[int, int] = (1, 0)) -> int:
        if at is None:
            addr[0] += 0x10000000
            at = addr[0]
        if device[0] == 1:
            allocated[0] += size
        args = {
            "Total Reserved": RESERVED if device[0] == 1 else 0,
            "Total Allocated": allocated[0] if device[0] == 1 else max(size, 0),
            "Bytes": size,
            "Addr": at,
            "Device Id": device[1],
            "Device Type": device[0],
        }
        events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": MEMORY_EVENT,
                "pid": 100 + rank,
                "tid": tid,
                "ts": ts,
                "args": args,
            }
        )
        return at

    for k in range(steps):
        t = 1_000_000 + k * STEP_US
        op(f"ProfilerStep#{k + 1}", t, t + STEP_US - 1, cat="user_annotation")
        op("nn.Module: Linear_0", t + 1000, t + 20000, cat="python_function")
        op("aten::linear", t + 2000, t + 19000)
        act = mem(t + 3000, 200 * MIB)
        op("nn.Module: ReLU_0", t + 21000, t + 30000, cat="python_function")
        op("aten::relu", t + 22000, t + 29000)
        relu = mem(t + 23000, 100 * MIB)
        if k == 0:
            for i in range(extra_ops):
                op(f"aten::extra{i}", t + 30100 + 50 * i, t + 30140 + 50 * i)
                mem(t + 30110 + 50 * i, MIB)
            op("aten::empty", t + 30900, t + 30990)
            host = mem(t + 30910, 4096, device=(0, -1))
            mem(t + 30980, -4096, host, device=(0, -1))
        op("nn.Module: Loss_0", t + 31000, t + 40000, cat="python_function")
        op("aten::add", t + 32000, t + 39000)
        if leak_mib:
            mem(t + 33000, leak_mib * MIB)
        op(BACKWARD, t + 50000, t + 90000, tid=2)
        grad = mem(t + 60000, 50 * MIB, tid=2)
        mem(t + 70000, -50 * MIB, grad, tid=2)
        mem(t + 80000, -100 * MIB, relu, tid=2)
        mem(t + 85000, -200 * MIB, act, tid=2)
        if optimizer_mib:
            op("Optimizer.step#AdamW.step", t + 92000, t + 98000, cat="user_annotation")
            if k == 0:
                op("aten::zeros_like", t + 93000, t + 94000)
                mem(t + 93500, optimizer_mib * MIB)
    return {"distributedInfo": {"rank": rank, "world_size": 2}, "traceEvents": events}


def write_job(tmp: Path, **kw) -> list[Path]:
    files = []
    for rank, leak in ((0, 8), (1, 0)):
        f = tmp / f"rank{rank}.json"
        f.write_text(json.dumps(kineto_job(rank, leak_mib=leak, **kw)))
        files.append(f)
    return files


def whole(table: pl.DataFrame, rank: int, device: str = "cuda:0") -> dict:
    return table.filter((pl.col("rank") == rank) & (pl.col("device") == device) & pl.col("step").is_null()).row(
        0, named=True
    )


def test_peak_holders_and_growth_of_a_known_job(tmp_path: Path) -> None:
    trace = di.load(write_job(tmp_path))
    frame = prepare(trace)
    table, held, timeline = memory_tables(frame, per_step=True)
    r0 = whole(table, 0)
    assert r0["peak_bytes"] == BASE + 4 * 8 * MIB + 350 * MIB
    assert (r0["peak_step"], r0["op"], r0["module"]) == (4, BACKWARD, None)
    assert r0["peak_ns"] == (1_000_000 + 3 * STEP_US + 60000) * 1000
    assert (r0["start_bytes"], r0["end_bytes"]) == (BASE, BASE + 32 * MIB)
    assert r0["growth_bytes_per_step"] == pytest.approx(8 * MIB)
    assert (r0["reserved_at_peak_bytes"], r0["peak_reserved_bytes"]) == (RESERVED, RESERVED)
    assert (r0["events"], r0["allocs"], r0["frees"]) == (28, 16, 12)
    assert r0["alloc_bytes"] == 4 * 358 * MIB
    r1 = whole(table, 1)
    assert r1["peak_bytes"] == BASE + 350 * MIB and r1["growth_bytes_per_step"] == pytest.approx(0.0)
    assert r1["peak_step"] == 1  # the first event that reached the peak
    step2 = table.filter((pl.col("rank") == 0) & (pl.col("device") == "cuda:0") & (pl.col("step") == 2)).row(
        0, named=True
    )
    assert (step2["peak_bytes"], step2["end_bytes"]) == (BASE + 16 * MIB + 350 * MIB, BASE + 16 * MIB)

    mine = held.filter((pl.col("rank") == 0) & (pl.col("device") == "cuda:0"))
    assert dict(zip(mine["op"], mine["phase"])) == {
        None: None,
        "aten::linear": "forward",
        "aten::relu": "forward",
        BACKWARD: "backward",
        "aten::add": "forward",
    }
    assert r0["phase"] == "backward"
    got = {
        (r["kind"], r["op"], r["module"]): (r["bytes"], r["earlier_bytes"], r["allocations"])
        for r in mine.iter_rows(named=True)
    }
    assert got == {
        ("before_trace", None, None): (BASE, None, None),
        ("allocated", "aten::linear", "nn.Module: Linear_0"): (200 * MIB, 0, 1),
        ("allocated", "aten::relu", "nn.Module: ReLU_0"): (100 * MIB, 0, 1),
        ("allocated", BACKWARD, None): (50 * MIB, 0, 1),
        ("allocated", "aten::add", "nn.Module: Loss_0"): (32 * MIB, 16 * MIB, 4),  # every step's leaked loss; 2 and 3
    }
    assert mine.get_column("bytes").sum() == r0["peak_bytes"]
    assert mine.get_column("bytes").to_list() == sorted(mine.get_column("bytes").to_list(), reverse=True)
    assert mine.get_column("share").sum() == pytest.approx(1.0)

    host = whole(table, 0, "cpu")
    assert (host["peak_bytes"], host["events"], host["op"]) == (4096, 2, "aten::empty")

    line = timeline.filter((pl.col("rank") == 0) & (pl.col("device") == "cuda:0"))
    assert line.height == 28 and line.get_column("allocated").max() == r0["peak_bytes"]  # every event: under 1,000
    assert line.get_column("ts_ns").is_sorted()


def test_timeline_of_many_events_keeps_each_buckets_largest(tmp_path: Path) -> None:
    from di.engine.memory import TIMELINE_POINTS, allocator_events, memory_timeline

    path = tmp_path / "long.json"
    path.write_text(json.dumps(kineto_job(0, steps=300)))  # 2,100 events on cuda:0
    trace = di.load(path)
    ev = allocator_events(trace)
    line = memory_timeline(ev).filter(pl.col("device") == "cuda:0")
    assert TIMELINE_POINTS // 2 < line.height <= TIMELINE_POINTS
    gpu = ev.filter(pl.col("device") == "cuda:0")
    assert line.get_column("allocated").max() == gpu.get_column("allocated").max()
    assert line.get_column("ts_ns").is_sorted() and line.get_column("ts_ns").is_unique().all()


def test_a_first_step_that_creates_state_is_not_growth(tmp_path: Path) -> None:
    """An optimizer's state made at the end of the first step's update (profiled in step 2) and kept: a step up
    from the first step's end, then flat. The slope over all steps would be 19 MiB per step; after the first, 0."""
    job = kineto_job(0, leak_mib=0)
    first = [e for e in job["traceEvents"] if e["name"] == "aten::add"][1]  # the first optimizer step's end
    t = first["ts"] + 10
    job["traceEvents"].append(
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "s": "t",
            "name": MEMORY_EVENT,
            "pid": 100,
            "tid": 1,
            "ts": t,
            "args": {
                "Total Reserved": RESERVED,
                "Total Allocated": BASE + 300 * MIB + 64 * MIB,
                "Bytes": 64 * MIB,
                "Addr": 1,
                "Device Id": 0,
                "Device Type": 1,
            },
        }
    )
    for e in job["traceEvents"]:  # every later total holds the state
        if e["name"] == MEMORY_EVENT and e["ts"] > t and e["args"]["Device Type"] == 1:
            e["args"]["Total Allocated"] += 64 * MIB
    (tmp_path / "t.json").write_text(json.dumps(job))
    frame = prepare(di.load(tmp_path / "t.json"))
    table, held, _ = memory_tables(frame)
    assert whole(table, 0)["growth_bytes_per_step"] == pytest.approx(0.0)
    state = held.filter(pl.col("op") == "aten::add").row(0, named=True)
    assert whole(table, 0)["peak_step"] == 2  # every later step peaks as high: the first is the peak
    assert (state["bytes"], state["earlier_bytes"]) == (64 * MIB, 0)


def test_a_window_and_the_rest_of_many_holders(tmp_path: Path) -> None:
    trace = di.load(write_job(tmp_path, extra_ops=HOLDERS_SHOWN + 2))
    early = memory(prepare(trace, di.engine.window.parse_window("steps=:2")))
    r0 = whole(early, 0)
    extra = (HOLDERS_SHOWN + 2) * MIB
    assert r0["peak_bytes"] == BASE + extra + 16 * MIB + 350 * MIB and r0["peak_step"] == 2

    frame = prepare(trace)
    table = memory(frame)
    held = memory_holders(frame, table).filter((pl.col("rank") == 0) & (pl.col("device") == "cuda:0"))
    kinds = held.get_column("kind").to_list()
    assert kinds.count("allocated") == HOLDERS_SHOWN and kinds.count("rest") == 1
    rest = held.filter(pl.col("kind") == "rest").row(0, named=True)
    smallest = 4 + HOLDERS_SHOWN + 2 - HOLDERS_SHOWN  # 16 operators hold memory: the 1 MiB ones past the 10 largest
    assert (rest["bytes"], rest["allocations"], rest["op"]) == (smallest * MIB, smallest, None)
    # the 12 operators of 1 MiB tie: the first of them by name are shown, the same ones on every run
    tied = sorted(f"aten::extra{i}" for i in range(HOLDERS_SHOWN + 2))
    shown = held.filter((pl.col("kind") == "allocated") & (pl.col("bytes") == MIB)).get_column("op").to_list()
    assert sorted(shown) == tied[: HOLDERS_SHOWN + 2 - smallest]
    assert held.get_column("bytes").sum() == whole(table, 0)["peak_bytes"]


def test_no_allocator_events_no_rows(tmp_path: Path) -> None:
    job = kineto_job(0)
    job["traceEvents"] = [e for e in job["traceEvents"] if e["name"] != MEMORY_EVENT]
    (tmp_path / "t.json").write_text(json.dumps(job))
    result = di.analyze(di.load(tmp_path / "t.json"))
    assert result.memory is not None and result.memory.height == 0 and result.memory_holders.height == 0


@pytest.mark.skipif(not TRACELENS.exists(), reason="shared test data absent")
def test_shared_trace_against_its_own_events() -> None:
    """The peak, reserved memory and event counts equal what the file's own [memory] events say, read with json."""
    with gzip.open(TRACELENS, "rt") as fh:
        raw = [e for e in json.load(fh)["traceEvents"] if e.get("name") == MEMORY_EVENT]
    gpu = [e["args"] for e in raw if e["args"]["Device Type"] == 1]
    frame = prepare(di.load(TRACELENS))
    table, held, _ = memory_tables(frame)
    row = whole(table, 0)
    peak = max(a["Total Allocated"] for a in gpu)
    assert row["peak_bytes"] == peak and row["events"] == len(gpu)
    assert row["reserved_at_peak_bytes"] == next(a["Total Reserved"] for a in gpu if a["Total Allocated"] == peak)
    assert (row["allocs"], row["frees"]) == (sum(a["Bytes"] > 0 for a in gpu), sum(a["Bytes"] < 0 for a in gpu))
    assert row["start_bytes"] == gpu[0]["Total Allocated"] - gpu[0]["Bytes"]
    assert (row["op"], row["module"]) == ("aten::linear", "nn.Module: Linear_25")
    mine = held.filter(pl.col("device") == "cuda:0")
    assert mine.get_column("bytes").sum() == peak
    live: dict[int, int] = {}  # an independent replay: address -> size, up to the first event reaching the peak
    for a in gpu[: next(i for i, a in enumerate(gpu) if a["Total Allocated"] == peak) + 1]:
        if a["Bytes"] > 0:
            live[a["Addr"]] = a["Bytes"]
        else:
            live.pop(a["Addr"], None)
    traced = mine.filter(pl.col("kind") != "before_trace")
    assert traced.get_column("bytes").sum() == sum(live.values())
    assert traced.get_column("allocations").sum() == len(live)
    assert mine.filter(pl.col("kind") == "before_trace").get_column("bytes").to_list() == [
        gpu[0]["Total Allocated"] - gpu[0]["Bytes"]
    ]


def test_viewers(tmp_path: Path) -> None:
    files = write_job(tmp_path)
    done = run_di("analyze", *map(str, files), "--json", "r.json", "--csv", "csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "Device memory" in text and "1,382.0" in text and "(before the trace)" in text
    assert "aten::add in Loss_0" in text and "8.0" in text  # the leak and its growth per step
    assert max(len(line) for line in text.splitlines()) <= 80
    doc = json.loads((tmp_path / "r.json").read_text())  # validated against the schema when written
    mem0 = [m for m in doc["ranks"][0]["memory"] if m["device"] == "cuda:0"][0]
    assert mem0["peak_bytes"] == 1382 * MIB and mem0["op"] == BACKWARD
    assert {h["kind"] for h in doc["memory_holders"]} == {"allocated", "before_trace"}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "csv" / "memory_holders.csv").read_text())))
    assert sum(int(r["bytes"]) for r in rows if r["rank"] == "0" and r["device"] == "cuda:0") == 1382 * MIB
    assert (tmp_path / "csv" / "memory.csv").is_file()


def test_memory_counters_as_analysis_tracks(tmp_path: Path) -> None:
    """di convert to Perfetto adds each device's allocated and reserved bytes as counters; converting the result
    again replaces them, never stacks them."""
    files = write_job(tmp_path)
    first, second = tmp_path / "job.pftrace", tmp_path / "again.pftrace"
    for src, dst in ((files, first), ([first], second)):
        done = run_di("convert", *map(str, src), "-o", str(dst), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    for path in (first, second):
        trace = di.load(path)
        got = trace.samples.join(trace.series, on="series").group_by("name").agg(pl.len(), pl.col("value").max())
        got = {r[0]: (r[1], r[2]) for r in got.iter_rows() if " cuda:0 " in r[0] or " cpu " in r[0]}
        assert got == {
            "rank 0 cuda:0 allocated": (28, float(1382 * MIB)),
            "rank 0 cuda:0 reserved": (28, float(RESERVED)),
            "rank 1 cuda:0 allocated": (24, float(1350 * MIB)),
            "rank 1 cuda:0 reserved": (24, float(RESERVED)),
            "rank 0 cpu allocated": (2, 4096.0),
            "rank 1 cpu allocated": (2, 4096.0),
        }


def test_batch_table_has_each_ranks_peak_and_growth(tmp_path: Path) -> None:
    files = write_job(tmp_path)
    done = run_di("analyze", "--batch", str(files[0]), str(files[1]), "--csv", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    from di.viewers.batch import FILE

    table = pl.read_csv(tmp_path / "out" / FILE)
    got = {r["rank"]: (r["memory_peak_bytes"], r["memory_growth_bytes_per_step"]) for r in table.iter_rows(named=True)}
    assert got[0] == (1382 * MIB, pytest.approx(8 * MIB)) and got[1] == (1350 * MIB, pytest.approx(0.0))


@pytest.mark.skipif(not (Path(sys.executable).parent / "mpiexec").exists(), reason="mpiexec of the mpich wheel absent")
def test_under_mpiexec_the_same_answer(tmp_path: Path) -> None:
    """Each process reads its ranks of a partitioned store; the memory rows and holders equal one process's."""
    from test_parallel import analysis, stores

    single, parted = stores(di.load(write_job(tmp_path)), tmp_path, ranks_per_group=1)
    one = analysis(single, tmp_path, None, "--steps")
    assert [
        m["peak_bytes"] for r in one["ranks"] for m in r["memory"] if m["device"] == "cuda:0" and m["step"] is None
    ] == [
        1382 * MIB,
        1350 * MIB,
    ]
    assert analysis(parted, tmp_path, 2, "--steps") == one


def test_args_that_are_not_json_are_read_field_by_field() -> None:
    """A connector's args text that is not JSON (a cut line) still gives the fields it holds."""
    from di.engine.memory import _fields

    args = pl.Series(
        [
            '{"Total Reserved":4096,"Total Allocated":2048,"Bytes":-512,"Addr":77,"Device Id":1,"Device Type":1}',
            '{"Total Allocated": 1024, "Bytes": 1024, "Device Type": 1, "Device Id": 0, "Addr": 78',
        ]
    )
    got = _fields(args)
    assert got.row(0, named=True) == dict(
        allocated=2048, reserved=4096, bytes=-512, addr=77, device_type=1, device_id=1
    )
    assert got.row(1, named=True) == dict(
        allocated=1024, reserved=None, bytes=1024, addr=78, device_type=1, device_id=0
    )


def test_dashboard_summary_has_the_peak(tmp_path: Path) -> None:
    from di.viewers.dashboard.summary import summarize

    files = write_job(tmp_path)
    assert summarize(files[0])["memory_peak_bytes"] == 1382 * MIB
    job = kineto_job(0)
    job["traceEvents"] = [e for e in job["traceEvents"] if e["name"] != MEMORY_EVENT]
    (tmp_path / "plain.json").write_text(json.dumps(job))
    assert summarize(tmp_path / "plain.json")["memory_peak_bytes"] is None


def test_damaged_allocator_events_are_read_for_what_they_hold(tmp_path: Path) -> None:
    """Values of the wrong type, a float, an address past int64, missing fields and an allocation without its free:
    the analysis, the report and the diff run; the damaged fields are null, never misread; the sound events count."""
    job = kineto_job(0)
    mem = [e for e in job["traceEvents"] if e["name"] == MEMORY_EVENT and e["args"]["Device Type"] == 1]
    mem[0]["args"]["Addr"] = 2**64 - 1
    mem[1]["args"]["Bytes"] = 1.5e6
    mem[2]["args"]["Total Allocated"] = "12"
    del mem[3]["args"]["Device Type"], mem[3]["args"]["Device Id"]
    job["traceEvents"].remove(mem[4])  # the gradient's free: the allocation never ends
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(job))
    from di.engine.memory import allocator_events

    ev = allocator_events(di.load(path))
    rows = {r["ts_ns"]: r for r in ev.iter_rows(named=True)}
    first = [rows[round(e["ts"] * 1000)] for e in mem[:4]]
    assert first[0]["addr"] is None and first[0]["bytes"] == 200 * MIB
    assert first[1]["bytes"] is None and first[1]["allocated"] == BASE + 300 * MIB
    assert first[2]["allocated"] is None
    assert first[3]["device"] == "device" and first[3]["bytes"] == 50 * MIB
    assert ev.height == 28 + 2 - 1  # the GPU's and the CPU allocator's, less the one removed
    for args in (["analyze", str(path)], ["report", str(path), "-o", "r.html"], ["diff", str(path), str(path)]):
        done = run_di(*args, cwd=tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_phases_and_optimizer_state_made_once(tmp_path: Path) -> None:
    """The optimizer's state, made in the first step and kept, is held at the peak in the optimizer phase and is not
    memory kept from an earlier step; the leak is; the growth is the leak's alone."""
    path = tmp_path / "adam.json"
    path.write_text(json.dumps(kineto_job(0, optimizer_mib=64)))
    table, held, _ = memory_tables(prepare(di.load(path)))
    r0 = whole(table, 0)
    assert r0["peak_bytes"] == BASE + 64 * MIB + 32 * MIB + 350 * MIB
    assert r0["growth_bytes_per_step"] == pytest.approx(8 * MIB)
    mine = held.filter(pl.col("device") == "cuda:0")
    by_op = {r["op"]: (r["phase"], r["bytes"], r["earlier_bytes"]) for r in mine.iter_rows(named=True)}
    assert by_op["aten::zeros_like"] == ("optimizer", 64 * MIB, 0)
    assert by_op["aten::add"] == ("forward", 32 * MIB, 16 * MIB)
    phases = mine.group_by("phase").agg(pl.col("bytes").sum())
    assert dict(phases.iter_rows()) == {
        None: BASE,
        "forward": (200 + 100 + 32) * MIB,
        "backward": 50 * MIB,
        "optimizer": 64 * MIB,
    }
