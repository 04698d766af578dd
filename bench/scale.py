"""Scaling benchmark of ``mpiexec -n P di analyze`` and ``di report`` over a rank-partitioned store, and of ``--jobs``.

Run on demand (not a test)::

    python bench/scale.py [--ranks 256] [--steps 40] [--ops 160] [--processes 1,2,4] [--commands analyze,report]
                          [--jobs-files 4] [--store S]

The job is bench/engine.py's generated job (per rank a CPU thread and two GPU
streams; per step ``--ops`` operators with launches and kernels, a memcpy, an
NCCL allreduce across all ranks, an MPI ring with late senders), written as a
rank-partitioned ``.di`` store (kept at ``--store`` and reused when it exists). For each P, ``mpiexec -n P`` runs this script's
worker, which runs :func:`di.parallel.analyze.analyze` (P = 1: the single-process
:func:`di.engine.analyze` on the whole store, as ``di analyze`` does) and reports
per process: wall seconds, CPU seconds, peak RSS (``ru_maxrss``) and bytes sent to
other processes, split by stage; then the peak above the fixed part (the peak on a
tiny job) per event a process owns. Every P must give the same analysis JSON
(timings aside); the script checks it. The ``report`` command does the same for
``di report`` (:func:`di.parallel.report.parallel_report`; P = 1: the single-process
writer over the whole store): every P must write the same page (generation time aside). With ``--jobs-files N`` it also writes N
one-rank Chrome JSON files and times loading them with ``--jobs 1`` and
``--jobs 2`` (:func:`di.parallel.convert.load_jobs`). Numbers go to
``bench/out/scale.json``. Wall seconds depend on the machine's load and on P
exceeding its cores; CPU seconds and RSS per process do not, but a process
waiting in a collective call counts CPU too (MPICH polls), so the slowest
process's CPU seconds bound each step's. ``cpu_s_parts`` splits a report
process's CPU: the parallel analysis with its partial aggregates, the
reduction and broadcast, its share of the panels, and writing the page.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"


def _usage(t0: float, c0: float) -> dict[str, Any]:
    return {
        "wall_s": round(time.perf_counter() - t0, 3),
        "cpu_s": round(time.process_time() - c0, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def worker(store: str, out: str, command: str = "analyze") -> None:
    """One process of a run: analyze (or write the report), measure, process 0 writes what every process
    measured."""
    if command == "report":
        report_worker(store, out)
        return
    from di.parallel import world
    from di.viewers.analysis import to_json

    t0, c0 = time.perf_counter(), time.process_time()
    comm = world()
    if comm is None:
        from di.engine import analyze
        from di.store import read_store

        result = analyze(read_store(store))
        stats = [{**_usage(t0, c0), "sent_bytes": 0, "by_stage": {}, "calls": 0}]
    else:
        from di.parallel.analyze import analyze as parallel_analyze
        from di.parallel.exchange import Exchange

        ex = Exchange(comm)
        result = parallel_analyze(store, ex)
        mine = {
            **_usage(t0, c0),
            "sent_bytes": ex.sent_bytes,
            "by_stage": ex.by_stage,
            "calls": ex.calls,
            "calls_by_stage": ex.calls_by_stage,
        }
        stats = comm.gather(mine, root=0)
    if result is None:
        return
    doc = to_json(result, inputs=[store])
    seconds = doc.pop("seconds")
    Path(out).write_text(json.dumps({"processes": stats, "seconds": seconds, "analysis": doc}))


def report_worker(store: str, out: str) -> None:
    """One process of a ``di report`` run: the page goes to OUT.html, the measures to OUT."""
    import re

    from di.parallel import world

    page = Path(out).with_suffix(".html")
    t0, c0 = time.perf_counter(), time.process_time()
    comm = world()
    if comm is None:
        from di.engine import analyze
        from di.store import read_store
        from di.viewers.report import write_report

        trace = read_store(store)
        result = analyze(trace, per_step=True)
        c1 = time.process_time()
        write_report(trace, result, page, inputs=[store])
        parts = {"load_and_analyze": round(c1 - c0, 3), "page": round(time.process_time() - c1, 3)}
        stats = [{**_usage(t0, c0), "sent_bytes": 0, "by_stage": {}, "calls": 0, "cpu_s_parts": parts}]
    else:
        from di.parallel.exchange import Exchange
        from di.parallel.report import parallel_report

        ex = Exchange(comm)
        cpu: dict[str, float] = {}
        parallel_report(Path(store), ex, page, inputs=[store], cpu_s=cpu)
        mine = {**_usage(t0, c0), "sent_bytes": ex.sent_bytes, "by_stage": ex.by_stage, "calls": ex.calls}
        mine["cpu_s_parts"] = {k: round(v, 3) for k, v in cpu.items()}
        stats = comm.gather(mine, root=0)
        if ex.rank:
            return
    text = re.sub(r"di report \d{4}-\d\d-\d\d \d\d:\d\d", "di report (time)", page.read_text())
    Path(out).write_text(json.dumps({"processes": stats, "seconds": {}, "analysis": text}))


def _write_job(ranks: int, steps: int, ops: int, store: Path) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from engine import generate  # bench/engine.py's generated job

    from di.store import write_store

    t0, c0 = time.perf_counter(), time.process_time()
    trace = generate(ranks, steps, ops)
    write_store(trace, store, partitioned=True)
    size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    return {
        "ranks": ranks,
        "events": trace.events.height,
        "messages": trace.messages.height,
        "collectives": trace.collectives.height,
        "store_mb": round(size / 1e6, 1),
        "generate_and_write": _usage(t0, c0),
    }


def _run(processes: int, store: Path, tmp: Path, command: str = "analyze") -> dict[str, Any]:
    out = tmp / f"{command}-p{processes}.json"
    # P = 1 under mpiexec too (one process: the single-process path): a child forked straight from this process
    # would report this process's peak RSS as its own (Linux keeps ru_maxrss across fork and exec)
    cmd = [str(Path(sys.executable).parent / "mpiexec"), "-n", str(processes), sys.executable, __file__]
    cmd += ["--worker", str(store), str(out), command]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    run = json.loads(out.read_text())
    run["launcher_wall_s"] = round(time.perf_counter() - t0, 2)
    return run


def _events(store: Path) -> int:
    return int(json.loads((store / "meta.json").read_text())["tables"]["events"])


def _per_event(runs: dict[int, dict[str, Any]], tmp: Path, events: int, command: str = "analyze") -> dict[str, Any]:
    """Peak RSS per process above the fixed part (interpreter, libraries, compiled kernels: the peak on a
    4-rank job of 1 step), in bytes per event the process owns (events / P)."""
    tiny = tmp / "tiny.di"
    if not tiny.exists():
        _write_job(4, 1, 4, tiny)
    out = {}
    for n in runs:
        fixed = max(p["peak_rss_mb"] for p in _run(n, tiny, tmp, command)["processes"])
        peak = max(p["peak_rss_mb"] for p in runs[n]["processes"])
        out[str(n)] = {
            "fixed_rss_mb": fixed,
            "above_fixed_mb": round(peak - fixed, 1),
            "bytes_per_owned_event": round((peak - fixed) * 2**20 / (events / n), 1),
        }
    return out


def _jobs(files: int, ops: int, steps: int, tmp: Path) -> dict[str, Any]:
    """Loading ``files`` one-rank Chrome JSON files in 1 and 2 processes."""
    sys.path.insert(0, str(HERE))
    from engine import generate

    import di
    from di.parallel import convert

    import polars as pl

    paths = []
    for k in range(files):
        path = tmp / f"rank-{k}.json.gz"
        job = generate(1, steps, ops, seed=k)
        rank = {"locations": job.locations.with_columns(pl.lit(k, pl.Int32).alias("rank"))}
        rank["collectives"] = job.collectives.with_columns(pl.lit(k, pl.Int32).alias("rank"))
        di.save(type(job)(**{**job.tables(), **rank}, meta=job.meta), path)
        paths.append(str(path))
    convert.PARALLEL_LOAD_MIN_BYTES = 0
    out: dict[str, Any] = {"files": files, "bytes": sum(Path(p).stat().st_size for p in paths)}

    def children_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    for jobs in (1, 2):
        t0, c0, k0 = time.perf_counter(), time.process_time(), children_cpu()
        trace = convert.load_jobs(paths, jobs=jobs)
        out[f"jobs_{jobs}"] = {
            **_usage(t0, c0),
            "workers_cpu_s": round(children_cpu() - k0, 2),
            "events": trace.events.height,
        }
    out["speedup_wall"] = round(out["jobs_1"]["wall_s"] / out["jobs_2"]["wall_s"], 2)
    out["parts"] = _jobs_parts(paths)
    return out


def _jobs_parts(paths: list[str]) -> dict[str, Any]:
    """Where ``--jobs`` spends CPU beyond reading (CPU-s, this process): a worker's start (a fresh interpreter
    importing di, polars and numba and loading the reader's kernels from numba's cache, with ``spawn``), reading
    each file, sending its trace back (pickling it, and unpickling it in the parent), merging the parts."""
    import pickle

    from di.convert.loading import read_one
    from di.merge import merge

    probe = (
        "import sys, time; from pathlib import Path; c = time.process_time(); from di.convert.loading import read_one; "
        "read_one(Path(sys.argv[1]), 0, 2, None, None, None); print(time.process_time() - c)"
    )
    start = subprocess.run([sys.executable, "-c", probe, paths[0]], capture_output=True, text=True, check=True)
    parts, times = [], {"read": 0.0, "pickle": 0.0, "unpickle": 0.0}
    first_read = None
    nbytes = 0
    for i, p in enumerate(paths):
        c = time.process_time()
        trace = read_one(Path(p), i, len(paths), None, None, None)[0]
        times["read"] += time.process_time() - c
        first_read = time.process_time() - c if first_read is None else first_read
        c = time.process_time()
        blob = pickle.dumps(trace, protocol=5)
        times["pickle"] += time.process_time() - c
        nbytes += len(blob)
        c = time.process_time()
        parts.append(pickle.loads(blob))
        times["unpickle"] += time.process_time() - c
        del blob
    c = time.process_time()
    merge(parts)
    return {
        "worker_start_cpu_s": round(float(start.stdout.strip()) - (first_read or 0.0), 3),
        **{f"{k}_cpu_s": round(v, 3) for k, v in times.items()},
        "merge_cpu_s": round(time.process_time() - c, 3),
        "pickled_mb": round(nbytes / 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=256)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--ops", type=int, default=160)
    p.add_argument("--processes", default="1,2,4")
    p.add_argument("--commands", default="analyze,report", help="what to run at every P: analyze, report")
    p.add_argument("--jobs-files", type=int, default=0)
    p.add_argument("--store", type=Path, help="the generated job's store: written when absent, reused when there")
    p.add_argument("--out", type=Path, default=OUT / "scale.json", help="where the figures go")
    p.add_argument("--worker", nargs=3, metavar=("STORE", "OUT", "COMMAND"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return 0
    OUT.mkdir(exist_ok=True)
    result: dict[str, Any] = {"cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="di-scale-") as tmp_name:
        tmp = Path(tmp_name)
        store = args.store or tmp / "job.di"
        if store.exists():
            result["job"] = {"store": str(store), "reused": True}
        else:
            result["job"] = _write_job(args.ranks, args.steps, args.ops, store)
        print(json.dumps(result["job"]), flush=True)
        result["same_answer"] = True
        for command in filter(None, args.commands.split(",")):
            runs = {}
            for n in (int(x) for x in args.processes.split(",")):
                runs[n] = _run(n, store, tmp, command)
                print(command, n, json.dumps(runs[n]["processes"]), flush=True)
            first = next(iter(runs.values()))["analysis"]
            same = all(r["analysis"] == first for r in runs.values())
            result["same_answer"] &= same
            key = "" if command == "analyze" else f"{command}_"
            result[f"{key}same_answer"] = same
            result[f"{key}runs"] = {str(n): {k: v for k, v in r.items() if k != "analysis"} for n, r in runs.items()}
            events = result["job"].get("events") or _events(store)
            result[f"{key}per_event"] = _per_event(runs, tmp, events, command)
        if args.jobs_files:
            result["jobs"] = _jobs(args.jobs_files, args.ops, args.steps * 25, tmp)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("runs")}, indent=1))
    return 0 if result["same_answer"] else 1


if __name__ == "__main__":
    sys.exit(main())
