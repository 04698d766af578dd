"""Ingest benchmark: how fast and how lean ``di.load`` reads Kineto JSON.

Run on demand (not a test)::

    python bench/ingest.py [--events 5000000] [--keep DIR] [--skip-gzip] [--repeat 3]

It measures two inputs:

(a) the largest Kineto trace under ``../shared/data/kineto`` (by uncompressed size;
    skipped with a note when that folder is absent);
(b) a generated Kineto-shaped trace of at least ``--events`` events: one uncompressed
    rank-0 file of a 2-rank :func:`di.demo.kineto_job` with enough steps.

For each, ``di.load(path)`` runs in a fresh subprocess, so the peak RSS read at the
end of the child is that load's own, plus the interpreter and imports. It is Linux's
``VmHWM`` where available, not ``ru_maxrss``: an exec'd child's ``ru_maxrss`` starts
at its parent's RSS at fork time (the trace is generated in a subprocess too, so
this parent stays small either way). Reported: file size (gzip and plain), events in the source
(``"ph":`` occurrences), load wall seconds, events/s, CPU seconds and events per CPU
second (= events/s per core; the loader is single-threaded unless stated, so the two
agree when it is), peak RSS and RSS / uncompressed JSON size (also less the RSS the
child had before the load, after a warm-up load of a tiny demo file), and the time of
``di info FILE`` as a CLI subprocess with a fresh empty ``NUMBA_CACHE_DIR`` (cold:
JIT compiles) and again with the cache it left (warm). The load runs with the warm
cache, ``--repeat`` times in fresh processes; the run with the least CPU time is
reported (another job's interference and the kernel's page-fault cost, which varies
with memory fragmentation on a VM, only ever add time) and every run's user and
system seconds and page faults are kept in the JSON. Targets from the issue: >= 1 M events/s per core, peak RSS <= 2x the
uncompressed JSON. A table goes to stdout and the numbers to ``bench/out/ingest.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KINETO = REPO.parent / "shared" / "data" / "kineto"
OUT = REPO / "bench" / "out" / "ingest.json"
TARGET_EVENTS_PER_CORE_S = 1_000_000  # from the issue
TARGET_RSS_RATIO = 2.0  # peak RSS / uncompressed JSON, from the issue
CHUNK_BYTES = 64 << 20  # streaming read size for counting and compressing
PH = b'"ph":'
GEN_RANKS, GEN_OPS_PER_STEP = 2, 1000  # generated job shape; only rank 0 is written

# The children report VmHWM (this process image's peak RSS) where Linux has it: the
# ru_maxrss of an exec'd child starts at its parent's RSS at fork time.
PEAK = r"""
def peak_kb():
    import resource
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""

LOAD = (
    PEAK
    + r"""
import json, resource, sys, time
import di
from di.demo import write_kineto_job
warmup = write_kineto_job(sys.argv[2], ranks=2, steps=3, ops_per_step=20, render_ranks=[0])
di.load(warmup[0])  # lazy imports, numba cache, polars thread pool: not timed
base, base_kb = resource.getrusage(resource.RUSAGE_SELF), peak_kb()
t = time.perf_counter()
trace = di.load(sys.argv[1])
wall = time.perf_counter() - t
after = resource.getrusage(resource.RUSAGE_SELF)
user, system = after.ru_utime - base.ru_utime, after.ru_stime - base.ru_stime
events = getattr(getattr(trace, "events", None), "height", None)
print(json.dumps({"wall_s": wall, "cpu_s": user + system, "user_s": user, "sys_s": system,
                  "page_faults": after.ru_minflt - base.ru_minflt, "max_rss_kb": peak_kb(),
                  "base_rss_kb": base_kb, "ru_maxrss_kb": after.ru_maxrss, "events_loaded": events}))
"""
)

GENERATE = r"""
import json, math, sys, time
from di.demo import kineto_job, write_kineto_job
where, events, ranks, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
one, two = (kineto_job(ranks=ranks, steps=n, ops_per_step=ops, render_ranks=[0])[0]
            .count(b'"ph":') for n in (1, 2))
steps = max(1, math.ceil((events - (2 * one - two)) / (two - one)))
t = time.perf_counter()
write_kineto_job(where, ranks=ranks, steps=steps, ops_per_step=ops, render_ranks=[0])
print(json.dumps({"steps": steps, "generate_s": time.perf_counter() - t}))
"""


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    inputs: list[dict[str, Any]] = []
    real = _largest_kineto()
    if real is None:
        print(f"note: {KINETO} not found, skipping the real-trace measurement")
    else:
        inputs.append({"name": str(real.relative_to(KINETO.parent)), "path": real})
    with tempfile.TemporaryDirectory(prefix="di-bench-") as tmp:
        where = Path(args.keep) if args.keep else Path(tmp)
        path, gen_s = _generated(where, args.events)
        inputs.append({"name": "generated (di.demo rank 0)", "path": path, "generate_s": gen_s})
        results = [_measure(i, skip_gzip=args.skip_gzip, repeat=args.repeat) for i in inputs]
    _report(results)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "machine": _machine(),
                "targets": {"events_per_core_s": TARGET_EVENTS_PER_CORE_S, "rss_ratio": TARGET_RSS_RATIO},
                "results": results,
            },
            indent=1,
            default=str,
        )
    )
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0 if all(r.get("error") is None for r in results) else 1


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--events", type=int, default=5_000_000, help="minimum events of the generated trace (default 5,000,000)"
    )
    p.add_argument("--keep", metavar="DIR", help="write the generated trace to DIR and keep it; reused when present")
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="fresh-process loads per input; the one with the least CPU time is reported, all are kept (default 3)",
    )
    p.add_argument(
        "--skip-gzip", action="store_true", help="do not gzip the generated trace to report its compressed size"
    )
    return p.parse_args(argv)


def _plain_size(path: Path) -> int:
    """Uncompressed size; for .gz the ISIZE trailer (exact below 4 GiB)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def _largest_kineto() -> Path | None:
    if not KINETO.is_dir():
        return None
    files = [p for p in KINETO.rglob("*") if p.name.endswith((".json", ".json.gz"))]
    return max(files, key=_plain_size) if files else None


def _count_events(path: Path) -> int:
    """Occurrences of ``"ph":`` (one per event), streamed in chunks."""
    opener = gzip.open if path.suffix == ".gz" else open
    count, carry = 0, b""
    with opener(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            data = carry + chunk
            count += data.count(PH)
            carry = data[-(len(PH) - 1) :]
    return count


def _gzip_size(path: Path) -> int:
    """Bytes of the file gzipped at level 6 (streamed; nothing written)."""
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK_BYTES):
            size += len(comp.compress(chunk))
    return size + len(comp.flush())


def _generated(where: Path, events: int) -> tuple[Path, float | None]:
    """A rank-0 demo file of at least ``events`` events (reused if already there),
    made in a subprocess so that this process, parent of the measured ones, stays small."""
    path = where / "rank-0.json"
    if path.exists() and _count_events(path) >= events:
        print(f"reusing {path}")
        return path, None
    print(f"generating {path} ({events:,}+ events) ...")
    cmd = [sys.executable, "-c", GENERATE, str(where), str(events), str(GEN_RANKS), str(GEN_OPS_PER_STEP)]
    _, done = _run(cmd, {**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode != 0:
        raise SystemExit(f"generating the trace failed:\n{done.stderr}")
    return path, json.loads(done.stdout)["generate_s"]


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    return time.perf_counter() - t, done


def _measure(item: dict[str, Any], *, skip_gzip: bool, repeat: int) -> dict[str, Any]:
    path: Path = item["path"]
    plain = _plain_size(path)
    gz = path.stat().st_size if path.suffix == ".gz" else None if skip_gzip else _gzip_size(path)
    res: dict[str, Any] = {
        "name": item["name"],
        "json_bytes": plain,
        "gzip_bytes": gz,
        "events": _count_events(path),
        "generate_s": item.get("generate_s"),
        "error": None,
    }
    print(f"measuring {item['name']} ({plain / 1e6:,.1f} MB, {res['events']:,} events) ...")
    with tempfile.TemporaryDirectory(prefix="di-numba-") as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(REPO)}
        info = [sys.executable, "-m", "di", "info", str(path)]
        res["info_cold_s"], cold = _run(info, env)
        res["info_warm_s"], warm = _run(info, env)
        loads = [
            _run([sys.executable, "-c", LOAD, str(path), str(Path(cache) / "warmup")], env)[1] for _ in range(repeat)
        ]
    for what, done in (("di info (cold)", cold), ("di info (warm)", warm), *(("di.load", d) for d in loads)):
        if done.returncode != 0:
            res["error"] = f"{what} exited {done.returncode}: {done.stderr.strip()[-2000:]}"
            return res
    runs = [json.loads(d.stdout.strip().splitlines()[-1]) for d in loads]
    child = min(runs, key=lambda r: r["cpu_s"])  # interference only ever adds time
    res["runs"] = [{k: r[k] for k in ("wall_s", "cpu_s", "user_s", "sys_s", "page_faults", "max_rss_kb")} for r in runs]
    res.update(child)
    res["events_per_s"] = res["events"] / child["wall_s"]
    res["events_per_core_s"] = res["events"] / max(child["cpu_s"], 1e-9)
    res["cores_used"] = child["cpu_s"] / child["wall_s"]
    res["peak_rss_mb"] = child["max_rss_kb"] / 1024
    res["base_rss_mb"] = child["base_rss_kb"] / 1024
    res["rss_ratio"] = child["max_rss_kb"] * 1024 / plain
    res["rss_ratio_over_base"] = (child["max_rss_kb"] - child["base_rss_kb"]) * 1024 / plain
    return res


def _report(results: list[dict[str, Any]]) -> None:
    rows = [
        (
            "input",
            "json MB",
            "gzip MB",
            "events",
            "load s",
            "Mev/s",
            "Mev/core-s",
            "cores",
            "peak RSS MB",
            "RSS/json",
            "(RSS-base)/json",
            "info cold s",
            "info warm s",
        )
    ]
    for r in results:
        if r.get("error"):
            print(f"{r['name']}: FAILED: {r['error']}")
            continue
        gz = "-" if r["gzip_bytes"] is None else f"{r['gzip_bytes'] / 1e6:,.1f}"
        rows.append(
            (
                r["name"],
                f"{r['json_bytes'] / 1e6:,.1f}",
                gz,
                f"{r['events']:,}",
                f"{r['wall_s']:.2f}",
                f"{r['events_per_s'] / 1e6:.2f}",
                f"{r['events_per_core_s'] / 1e6:.2f}",
                f"{r['cores_used']:.1f}",
                f"{r['peak_rss_mb']:,.0f}",
                f"{r['rss_ratio']:.2f}",
                f"{r['rss_ratio_over_base']:.2f}",
                f"{r['info_cold_s']:.1f}",
                f"{r['info_warm_s']:.1f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    print(
        f"targets: >= {TARGET_EVENTS_PER_CORE_S / 1e6:g} M events/s per core, "
        f"peak RSS <= {TARGET_RSS_RATIO:g}x uncompressed JSON"
    )


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


if __name__ == "__main__":
    sys.exit(main())
