"""The rank-partitioned store and `mpiexec -n P di analyze`: the same answers as one process.

Runs the real ``di`` command under the mpich wheel's ``mpiexec`` (1 to 4
processes, uneven rank counts per process) on the shared multi-rank traces
(OTF2, Kineto) and on a generated 16-rank job whose answer is known by
construction, and compares the analysis JSON (timings aside) with the
single-process one. A damaged partition makes every process exit with a clear
error within a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import KINETO, OTF2
from parallel_jobs import LATE_MS, LATE_RANK, RANKS, RING_WAIT_MS, STEPS, ring_job

import di
from di.store import read_store, write_store
from di.store_partition import ROW, read_groups

MPIEXEC = Path(sys.executable).parent / "mpiexec"
TIMEOUT_S = 300
MS = 1_000_000
SHARED = {
    "otf2_10_ranks": OTF2 / "casita_10_scorep_mpi_tags" / "traces.otf2",
    "otf2_cuda_2_ranks": OTF2 / "casita_2_cuda_simple" / "traces.otf2",
    "kineto_2_ranks": KINETO / "hta_trace_filter",
}
need_mpi = pytest.mark.skipif(not MPIEXEC.exists(), reason="mpiexec of the mpich wheel not installed")


def di_run(args: list[str], processes: int | None, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``di ARGS``, under ``mpiexec -n processes`` unless None; fails the test when it hangs past TIMEOUT_S."""
    cmd = [sys.executable, "-m", "di", *args]
    if processes is not None:
        cmd = [str(MPIEXEC), "-n", str(processes), *cmd]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(di.__file__).parents[1]), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


def install_plugin(tmp: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str, entry_points: str) -> None:
    """Put the distribution of plugin ``module`` (its ``source``; ``entry_points``: the text of its
    entry_points.txt) under ``tmp``/site and that folder on the PYTHONPATH of the ``di`` commands run next."""
    site = tmp / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(source)
    info = site / f"{module}-0.1.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points + "\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))


def error_lines(done: subprocess.CompletedProcess[str], command: str, processes: int) -> list[str]:
    """The error lines of a ``di COMMAND`` run that failed: one per process, without a traceback."""
    assert done.returncode != 0
    lines = [x for x in done.stderr.splitlines() if x.startswith(f"di {command}: error:")]
    assert len(lines) == processes and "Traceback" not in done.stderr, done.stderr
    return lines


def analysis(store: Path, tmp: Path, processes: int | None, *extra: str) -> dict:
    out = tmp / f"result-{processes}-{'-'.join(extra) or 'all'}.json".replace("=", "").replace(":", "")
    done = di_run(["analyze", str(store), "--json", str(out), "--force", *extra], processes, tmp)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    doc.pop("seconds")
    doc.pop("inputs")
    return doc


def stores(trace: di.Trace, tmp: Path, ranks_per_group: int | None = None) -> tuple[Path, Path]:
    single, parted = tmp / "single.di", tmp / "parted.di"
    write_store(trace, single)
    write_store(trace, parted, partitioned=True, ranks_per_group=ranks_per_group)
    return single, parted


@pytest.mark.parametrize("name", sorted(SHARED))
def test_partitioned_store_loads_the_same_tables(name: str, tmp_path: Path) -> None:
    if not SHARED[name].exists():
        pytest.skip(f"shared test data absent: {SHARED[name]}")
    trace = di.load(SHARED[name])
    single, parted = stores(trace, tmp_path)
    a, b = di.load(single), di.load(parted)
    for table in a.tables():
        assert a.table(table).equals(b.table(table)), table
        assert di.scan(parted)[table].collect().equals(a.table(table)), table
    assert json.loads((parted / "meta.json").read_text())["partitions"]["groups"] == [[r] for r in trace.ranks]
    assert not (parted / "events.parquet").exists()


def test_one_group_reads_only_its_ranks(tmp_path: Path) -> None:
    trace = ring_job().build()
    _, parted = stores(trace, tmp_path, ranks_per_group=3)
    meta = json.loads((parted / "meta.json").read_text())
    assert meta["partitions"]["groups"][1] == [3, 4, 5]
    (parted / "events" / "g00000.parquet").write_bytes(b"damaged: never read by the owner of group 1")
    part = read_groups(parted, meta, [1], pl.read_parquet)
    rank_of = dict(zip(trace.locations["loc"].to_list(), trace.locations["rank"].to_list()))
    assert {rank_of[x] for x in part["events"]["loc"].to_list()} == {3, 4, 5}
    whole = trace.events.with_row_index(ROW).filter(pl.col(ROW).is_in(part["events"][ROW].implode()))
    assert part["events"].drop(ROW).equals(whole.drop(ROW))
    recv_rank = [rank_of[x] for x in trace.events["loc"].gather(part["messages"]["recv"]).to_list()]
    assert set(recv_rank) == {3, 4, 5} and part["messages"].height == 3 * STEPS


def test_single_file_store_meta_has_no_partitions(tmp_path: Path) -> None:
    trace = ring_job().build()
    _, parted = stores(trace, tmp_path)
    again = tmp_path / "again.di"
    write_store(read_store(parted), again)  # a partitioned store rewritten whole is a single-file store
    assert (again / "events.parquet").is_file() and "partitions" not in json.loads((again / "meta.json").read_text())


def test_a_damaged_group_file_is_named_when_the_table_is_read_at_once(tmp_path: Path) -> None:
    """A table's group files are read in one call; when one is damaged the error still names that file."""
    _, parted = stores(ring_job().build(), tmp_path, ranks_per_group=2)
    assert len(list((parted / "events").glob("g*.parquet"))) > 2
    (parted / "events" / "g00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(di.FormatError, match=r"g00001\.parquet: unreadable Parquet"):
        di.load(parted)


@need_mpi
def test_generated_16_rank_job_same_answer_and_known(tmp_path: Path) -> None:
    single, parted = stores(ring_job().build(), tmp_path, ranks_per_group=3)  # 6 groups: uneven on 4 processes
    one = analysis(single, tmp_path, None, "--steps")
    assert one["per_step"] and len(one["ranks"]) == RANKS
    for p in (1, 2, 3, 4):
        assert analysis(parted, tmp_path, p, "--steps") == one, f"{p} processes"
    by_rank = {r["rank"]: r for r in one["ranks"]}
    late = by_rank[LATE_RANK]["wait_states"]
    assert late["caused_ns"]["wait_nxn"] == (RANKS - 1) * STEPS * LATE_MS * MS
    assert by_rank[0]["wait_states"]["waited_ns"]["late_sender"] == STEPS * RING_WAIT_MS * MS
    work = [r for r in one["imbalance"] if r["state"] == "work" and r["step"] is None]
    assert work[0]["max_rank"] == LATE_RANK
    compute = {c["category"]: c["contrib_ns"] for c in one["critical_path"]["by_category"]}["compute"]
    assert compute == STEPS * (100 + LATE_MS) * MS  # the late rank's compute, every step


@need_mpi
@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_traces_same_answer(name: str, tmp_path: Path) -> None:
    if not SHARED[name].exists():
        pytest.skip(f"shared test data absent: {SHARED[name]}")
    single, parted = stores(di.load(SHARED[name]), tmp_path)
    one = analysis(single, tmp_path, None)
    assert one["critical_path"]["summary"]["length_ns"] > 0
    for p in (2, 3) if name.startswith("otf2_10") else (2,):
        assert analysis(parted, tmp_path, p) == one, f"{p} processes"


@need_mpi
@pytest.mark.parametrize("window", ["steps=:-1", "time=1ms:40ms"])
def test_windows_same_answer(window: str, tmp_path: Path) -> None:
    if not SHARED["otf2_10_ranks"].exists():
        pytest.skip("shared test data absent")
    single, parted = stores(di.load(SHARED["otf2_10_ranks"]), tmp_path, ranks_per_group=2)
    assert analysis(parted, tmp_path, 3, "--window", window) == analysis(single, tmp_path, None, "--window", window)


@need_mpi
def test_trace_files_without_a_store(tmp_path: Path) -> None:
    """Inputs that are not a partitioned store are read whole by every process, then cut the same way."""
    if not SHARED["kineto_2_ranks"].exists():
        pytest.skip("shared test data absent")
    src = str(SHARED["kineto_2_ranks"])
    assert analysis(Path(src), tmp_path, 2) == analysis(Path(src), tmp_path, None)


@need_mpi
def test_a_process_that_cannot_read_its_part_fails_every_process(tmp_path: Path) -> None:
    _, parted = stores(ring_job().build(), tmp_path, ranks_per_group=4)
    (parted / "events" / "g00002.parquet").write_bytes(b"not parquet")
    lines = error_lines(di_run(["analyze", str(parted), "--json", "out.json"], 3, tmp_path), "analyze", 3)
    assert all("g00002.parquet" in x and "unreadable Parquet" in x for x in lines)
    assert sum("process 1 of 3 failed while reading" in x for x in lines) == 2  # the others name the failing one
    assert not (tmp_path / "out.json").exists()


@need_mpi
def test_info_prints_what_one_process_prints(tmp_path: Path) -> None:
    """``mpiexec -n P di info``: each process counts its rank groups, process 0 prints one process's output."""
    path = SHARED["otf2_10_ranks"]
    trace = di.load(path) if path.exists() else ring_job().build()  # the OTF2 job has sources to list
    single, parted = stores(trace, tmp_path, ranks_per_group=3)  # 10 ranks: 4 groups, uneven on 3 processes
    for extra in ([], ["--json"]):
        one = di_run(["info", str(single), *extra], None, tmp_path)
        assert one.returncode == 0, one.stderr
        assert str(trace.events.height) in one.stdout.replace(",", "")
        for p in (2, 3):
            done = di_run(["info", str(parted), *extra], p, tmp_path)
            assert done.returncode == 0, done.stderr
            assert done.stdout == one.stdout, f"{p} processes {extra}"
    whole = di_run(["info", str(single), "--json"], 2, tmp_path)  # not partitioned: process 0 alone
    assert whole.returncode == 0 and whole.stdout == one.stdout
    (parted / "events" / "g00001.parquet").write_bytes(b"not parquet")
    done = di_run(["info", str(parted)], 3, tmp_path)
    lines = [x for x in done.stderr.splitlines() if x.startswith("di info: error:")]
    assert done.returncode != 0 and len(lines) == 3 and "Traceback" not in done.stderr, done.stderr
    assert all("g00001.parquet" in x for x in lines)


def kineto_inputs() -> list[str]:
    """Four Kineto files of three jobs, given ranks 0-3 (--ranks)."""
    files = [
        KINETO / "hta_trace_filter" / "sampled_rank-0.json.gz",
        KINETO / "hta_trace_filter" / "sampled_rank-1.json.gz",
        *sorted((KINETO / "hta_nccl_parser_config").glob("*.json.gz"))[:1],
        *sorted((KINETO / "hta_ns_resolution_trace").glob("*.json.gz"))[:1],
    ]
    if not all(f.exists() for f in files) or len(files) != 4:
        pytest.skip("shared test data absent")
    return [str(f) for f in files]


@need_mpi
def test_mpi_convert_writes_the_partitioned_store_of_one_process(tmp_path: Path) -> None:
    files = kineto_inputs()
    done = di_run(["convert", *files, "--ranks", "0,1,2,3", "-o", "one.di"], None, tmp_path)
    assert done.returncode == 0, done.stderr
    one = di.load(tmp_path / "one.di")  # many per-rank inputs: one process writes the partitioned form too
    assert json.loads((tmp_path / "one.di" / "meta.json").read_text())["partitions"]["groups"] == [[0], [1], [2], [3]]
    for p in (2, 3):  # 3: two files on process 0, one on each other
        out = f"p{p}.di"
        done = di_run(["convert", *files, "--ranks", "0,1,2,3", "-o", out], p, tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"partitioned by rank, {p} processes" in done.stdout
        meta = json.loads((tmp_path / out / "meta.json").read_text())
        assert meta["partitions"]["groups"] == [[0], [1], [2], [3]]
        many = di.load(tmp_path / out)
        for table in one.tables():
            assert one.table(table).equals(many.table(table)), (p, table)
        assert meta == json.loads((tmp_path / "one.di" / "meta.json").read_text())
    one_doc = analysis(tmp_path / "one.di", tmp_path, None)
    assert analysis(tmp_path / "p3.di", tmp_path, 3) == one_doc


@need_mpi
def test_parts_with_columns_of_their_own_merge_serial_and_under_mpi(tmp_path: Path) -> None:
    """One input's locations carry a column the others lack (Nsight's gpu_model): merged, it is null on the
    other ranks' locations, the same by one process and by two (before: polars refused to stack the tables,
    an internal error)."""
    from dataclasses import replace

    import polars as pl

    from tests.perfetto_cases import generated_job

    generated_job(tmp_path / "job", ranks=2, steps=1)
    inputs = []
    for rank in (0, 1):
        part = di.load(tmp_path / "job" / f"rank-{rank}.json")
        if rank == 0:
            part = replace(part, locations=part.locations.with_columns(gpu_model=pl.lit("H100")))
        di.save(part, tmp_path / f"part-{rank}.pftrace")
        inputs.append(str(tmp_path / f"part-{rank}.pftrace"))
    one = di.load(inputs)
    assert one.locations.filter(pl.col("rank") == 0).get_column("gpu_model").to_list() == ["H100"] * int(
        (one.locations.get_column("rank") == 0).sum()
    )
    assert one.locations.filter(pl.col("rank") == 1).get_column("gpu_model").null_count() > 0
    done = di_run(["convert", *inputs, "-o", "one.di"], None, tmp_path)
    assert done.returncode == 0, done.stderr
    done = di_run(["convert", *inputs, "-o", "two.di"], 2, tmp_path)
    assert done.returncode == 0, done.stderr
    a, b = di.load(tmp_path / "one.di"), di.load(tmp_path / "two.di")
    for table in a.tables():
        assert a.table(table).equals(b.table(table)), table


@need_mpi
def test_mpi_convert_of_an_unreadable_input_fails_every_process(tmp_path: Path) -> None:
    files = kineto_inputs()
    bad = tmp_path / "rank-9.json"
    bad.write_text('{"traceEvents": [')
    done = di_run(["convert", *files[:2], str(bad), "-o", "out.di"], 3, tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("di convert: error:")]
    assert len(lines) == 3 and all("rank-9.json" in x for x in lines), done.stderr
    assert not (tmp_path / "out.di").exists()


def test_jobs_load_equals_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from di.convert.registry import load_paths
    from di.parallel import convert

    files = kineto_inputs()
    monkeypatch.setattr(convert, "PARALLEL_LOAD_MIN_BYTES", 0)
    many = convert.load_jobs(files, jobs=2, ranks=[0, 1, 2, 3])
    one = load_paths(files, ranks=[0, 1, 2, 3])
    for table in one.tables():
        assert one.table(table).equals(many.table(table)), table
    assert many.meta == one.meta


def test_jobs_load_joins_logs_and_links_as_one_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files read by several processes are joined as load_paths joins them: a text log aligned to the job and
    its collectives joined (before: merged as they were, so the answer depended on the cores and input size)."""
    from di.convert.registry import load_paths
    from di.demo import write_kineto_job
    from di.parallel import convert
    from tests.conftest import DATA

    log = DATA / "logs" / "training" / "megatron_lm_2021_gpt2_tp4pp4_4node_slurm.out"
    if not log.exists():
        pytest.skip("../shared/data is absent")
    files = [*write_kineto_job(tmp_path / "job", ranks=2, steps=2), log]
    monkeypatch.setattr(convert, "PARALLEL_LOAD_MIN_BYTES", 0)
    many = convert.load_jobs(files, jobs=2)
    one = load_paths(files)
    for table in one.tables():
        assert one.table(table).equals(many.table(table)), table
    assert many.meta == one.meta


def test_jobs_default_is_the_idle_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs``'s default leaves out the cores that other processes keep busy (the load beyond this one)."""
    import os

    from di.parallel import convert

    cores = convert.available_cores()
    for load, want in ((0.3, cores), (1.0 + cores - 1, 1), (1.0 + 10 * cores, 1), (1.9, cores)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, load, load))
        assert convert.idle_cores() == want, load
    if cores > 2:
        monkeypatch.setattr(os, "getloadavg", lambda: (3.2, 0.0, 0.0))
        assert convert.idle_cores() == cores - 2


@pytest.mark.parametrize("where", ["this process's share", "a worker's share"])
def test_jobs_load_of_an_unreadable_file_names_it(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs``: this process reads the first share, the workers the others; a bad file in either is named."""
    from di.errors import FormatError
    from di.parallel import convert

    files = kineto_inputs()[:2]
    bad = tmp_path / "rank-9.json"
    bad.write_text('{"traceEvents": [')
    files = [str(bad), *files] if where.startswith("this") else [*files, str(bad)]
    monkeypatch.setattr(convert, "PARALLEL_LOAD_MIN_BYTES", 0)
    with pytest.raises(FormatError, match="rank-9.json"):
        convert.load_jobs(files, jobs=2)


@need_mpi
def test_a_di_record_capture_same_answer(tmp_path: Path) -> None:
    """A 4-rank mpi4py job recorded by ``di record --mpi`` (p2p, non-blocking, collectives on sub-communicators)."""
    from capture_helpers import PROGRAMS, need_mpi4py, record_launcher

    need_mpi4py()
    run = tmp_path / "run.di"
    proc = record_launcher(run, [sys.executable, str(PROGRAMS / "known_calls.py"), str(tmp_path)], "--mpi")
    assert proc.returncode == 0, proc.stderr
    trace = di.load(run)
    assert trace.messages.height and trace.collectives.height
    single, parted = stores(trace, tmp_path)
    one = analysis(single, tmp_path, None)
    assert one["critical_path"]["summary"]["length_ns"] > 0
    assert analysis(parted, tmp_path, 3) == one
    assert analysis(run, tmp_path, 2) == one  # the recording itself: every process reads it whole


@need_mpi
def test_csv_tables_same_as_one_process(tmp_path: Path) -> None:
    single, parted = stores(ring_job().build(), tmp_path, ranks_per_group=2)
    for store, p, out in ((single, None, "one"), (parted, 3, "three")):
        done = di_run(["analyze", str(store), "--csv", out, "--steps"], p, tmp_path)
        assert done.returncode == 0, done.stderr
    names = sorted(f.name for f in (tmp_path / "one").iterdir())
    assert names == sorted(f.name for f in (tmp_path / "three").iterdir()) and "wait_states.csv" in names
    for name in names:
        a, b = pl.read_csv(tmp_path / "one" / name), pl.read_csv(tmp_path / "three" / name)
        if name == "wait_states.csv":  # rows tied in (start_ns, rank) come in either order
            a, b = a.sort(a.columns), b.sort(b.columns)
        assert a.equals(b), name


def test_replay_kernel_paused_and_resumed_equals_the_engine_kernel() -> None:
    """:func:`di.parallel.critical_path._advance`, stopped at every node whose input is not known yet and
    resumed once it is, gives the distances and predecessors of the engine's one-pass ``_longest``."""
    from dataclasses import replace

    import numpy as np

    from di.engine.critical_path import _arrivals, _cross_weights, _local_weights, _longest
    from di.engine.critical_path_graph import build_graph
    from di.engine.window import prepare
    from di.parallel.critical_path import _advance

    path = SHARED["otf2_cuda_2_ranks"]
    if not path.exists():
        pytest.skip("shared test data absent")
    frame = prepare(di.load(path))
    g, _ = build_graph(frame)
    order = np.argsort(g.time_ns, kind="stable").astype(np.int32)
    pos = np.empty(order.size, np.int64)
    pos[order] = np.arange(order.size)
    keep = pos[g.src] < pos[g.dst]
    g = replace(g, src=g.src[keep], dst=g.dst[keep], kind=g.kind[keep])
    arrival = _arrivals(g)
    by_dst = np.argsort(g.dst, kind="stable")
    in_src, in_w = g.src[by_dst], _cross_weights(g)[by_dst]
    in_ptr = np.searchsorted(g.dst[by_dst], np.arange(g.event.size + 1)).astype(np.int64)
    args = (g.time_ns, g.first_of_loc, g.owner, g.event, frame.activity, frame.on_gpu, frame.call_only)
    ptr32 = in_ptr.astype(np.int32)  # the parallel replay's CSR offsets are int32
    m = order.size
    want, want_pred, want_via = np.zeros(m, np.int64), np.full(m, -1, np.int32), np.full(m, -1, np.int32)
    local_w = _local_weights(frame, g, arrival)  # the engine's vectorised weights; _advance weighs node by node
    _longest(order.copy(), g.first_of_loc, local_w, in_ptr, in_src, in_w, want, want_pred, want_via)
    # the nodes of half the timelines play another process's: their distances arrive only when asked for
    node_loc = frame.trace.events.get_column("loc").to_numpy()[g.event]
    locs = np.unique(node_loc)
    remote = np.isin(node_loc, np.random.default_rng(7).choice(locs, size=locs.size // 2, replace=False))
    mine = order[~remote[order]]  # int32, as the parallel replay orders its nodes
    known = np.zeros(order.size, bool)
    dist, pred, via = (
        np.zeros(order.size, np.int64),
        np.full(order.size, -1, np.int32),
        np.full(order.size, -1, np.int32),
    )
    k, pauses = 0, 0
    while k < mine.size:
        k = _advance(k, mine, known, dist, pred, via, *args, ptr32, in_src, in_w)
        if k < mine.size:  # give the waiting node its remote inputs (computed by the engine's kernel)
            pauses += 1
            v = mine[k]
            srcs = in_src[in_ptr[v] : in_ptr[v + 1]]
            late = srcs[~known[srcs]]
            assert remote[late].all()
            dist[late], known[late] = want[late], True
    assert pauses > 0
    assert np.array_equal(dist[mine], want[mine])
    assert np.array_equal(pred[mine], want_pred[mine])


@pytest.mark.parametrize("batch", [1, 7, 1 << 18])
def test_layout_in_batches_equals_the_engine_layout(batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`di.parallel.critical_path.layout.lay_out`, a batch of whole timelines at a time (a timeline longer
    than a batch is one batch), lays the nodes out as the engine's one-pass layout does."""
    import numpy as np

    from di.engine.critical_path_graph import build_graph, in_graph
    from di.engine.window import prepare
    from di.parallel.critical_path import layout

    path = SHARED["otf2_10_ranks"]
    if not path.exists():
        pytest.skip("shared test data absent")
    frame = prepare(di.load(path))
    g, _ = build_graph(frame)
    want = (g.event, g.time_ns, g.is_end, g.first_of_loc, g.owner)
    rows = np.flatnonzero(in_graph(frame)).astype(np.int64)
    m = 2 * rows.size
    out = (
        np.empty(m, np.int32),
        np.empty(m, np.int64),
        np.zeros(m, np.bool_),
        np.zeros(m, np.bool_),
        np.empty(m, np.int32),
    )
    monkeypatch.setattr(layout, "LAYOUT_BATCH", batch)
    ev_loc = frame.trace.events.get_column("loc").to_numpy()
    layout.lay_out(frame, rows, ev_loc, out, np.zeros(frame.rank.size, np.bool_))
    assert m > 2 * 7 and all(np.array_equal(a, b) for a, b in zip(out, want, strict=True))


EVENTS_PER_RANK_PLUGIN = """
import polars as pl


def per_rank(trace, result):
    rank = trace.locations.select("loc", "rank")
    ev = trace.events.join(rank, on="loc").group_by("rank").agg(pl.len().alias("events")).sort("rank")
    return {"events": ev.with_columns(pl.lit(result.breakdown.height).alias("breakdown_rows"))}
"""


@need_mpi
def test_analysis_plugins_run_on_process_0_over_the_whole_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``di.analyses`` plugin under mpiexec sees the whole trace and the whole result, as in one process."""
    install_plugin(
        tmp_path,
        monkeypatch,
        "di_rank_plugin",
        EVENTS_PER_RANK_PLUGIN,
        "[di.analyses]\nranks = di_rank_plugin:per_rank",
    )
    trace = ring_job().build()
    single, parted = stores(trace, tmp_path, ranks_per_group=3)
    for store, p, out in ((single, None, "one"), (parted, 3, "three")):
        done = di_run(["analyze", str(store), "--csv", out], p, tmp_path)
        assert done.returncode == 0, done.stderr
    one, three = (pl.read_csv(tmp_path / d / "ranks_events.csv") for d in ("one", "three"))
    assert one.equals(three)
    assert one.get_column("rank").to_list() == list(range(RANKS))
    assert one.get_column("events").sum() == trace.events.height
