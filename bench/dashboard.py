"""`di dashboard` benchmark: how fast a folder of 100 runs opens, with cold and warm summaries.

Run on demand (not a test)::

    python bench/dashboard.py [--runs 100]

The folder: ``--runs`` stores made from 10 small generated Kineto jobs
(2 or 4 ranks, 2 to 6 steps; copies of them), and one broken store. Each
figure runs ``di dashboard DIR --port 0 --no-browser`` as a subprocess and
times, from its start, the first answers of ``/`` and ``/api/runs``, and the
moment ``/api/runs`` has no run pending (every summary known):

- **cold**: an empty summary cache (``XDG_CACHE_HOME`` a new folder): every run is loaded and analysed;
- **warm**: the same cache again (a restart): every summary is read from its cache file.

Also the cost of one rescan (``/api/runs`` on a running server, no run changed).
The numba cache is left as it is (compiled by earlier runs). Numbers go to ``bench/out/dashboard.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
TIMEOUT_S = 1800.0


def make_folder(folder: Path, runs: int) -> None:
    import di
    from di.demo import write_kineto_job

    folder.mkdir()
    jobs = []
    for i in range(10):
        src = folder.parent / f"job{i}"
        write_kineto_job(src, ranks=2 if i % 2 else 4, steps=2 + i % 5)
        di.save(di.load(src), folder.parent / f"job{i}.di")
        jobs.append(folder.parent / f"job{i}.di")
    for n in range(runs):
        shutil.copytree(jobs[n % len(jobs)], folder / f"run{n:03d}.di")
    (folder / "broken.di").mkdir()
    (folder / "broken.di" / "meta.json").write_text("{corrupt")


def get(port: int, path: str) -> bytes:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status}")
        return body
    finally:
        c.close()


def open_dashboard(folder: Path, cache: Path) -> dict[str, float]:
    """Start di dashboard, time its first answers and the end of its summaries, stop it."""
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(cache), COLUMNS="200")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "di", "dashboard", str(folder), "--port", "0", "--no-browser"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        port = None
        while port is None:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("di dashboard ended before serving")
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            port = int(m.group(1)) if m else None
        out = {"listening_s": time.perf_counter() - t0}
        get(port, "/")
        out["page_s"] = time.perf_counter() - t0
        doc = json.loads(get(port, "/api/runs"))
        out["first_runs_s"] = time.perf_counter() - t0
        out["pending_at_first"] = doc["pending"]
        while doc["pending"] and time.perf_counter() - t0 < TIMEOUT_S:
            time.sleep(0.05)
            doc = json.loads(get(port, "/api/runs"))
        out["all_summaries_s"] = time.perf_counter() - t0
        out["runs"] = len(doc["runs"])
        out["errors"] = sum(r["state"] == "error" for r in doc["runs"])
        rescans = []
        for _ in range(10):
            t = time.perf_counter()
            get(port, "/api/runs")
            rescans.append(time.perf_counter() - t)
        out["rescan_median_s"] = statistics.median(rescans)
        return out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=100)
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder, cache = Path(tmp) / "runs", Path(tmp) / "cache"
        make_folder(folder, args.runs)
        results = {"runs": args.runs + 1, "cold": open_dashboard(folder, cache), "warm": open_dashboard(folder, cache)}
    (OUT / "dashboard.json").write_text(json.dumps(results, indent=1) + "\n")
    for k in ("cold", "warm"):
        r = results[k]
        print(
            f"{k}: page {r['page_s']:.2f} s, runs listed {r['first_runs_s']:.2f} s ({r['pending_at_first']} pending), "
            f"every summary {r['all_summaries_s']:.2f} s, {r['runs']} runs ({r['errors']} unreadable), rescan {1000 * r['rescan_median_s']:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
