"""Darshan reading cost and the per-file I/O table it gives; the GPU-clock analysis' cost.

Run on demand (not a test)::

    python bench/darshan_read.py [--repeats 3] [--mb 32]

- every binary ``.darshan`` log of ``../shared/data/logs/darshan``: CPU seconds of ``di.load`` (best of
  ``--repeats`` after a warm-up), rows of ``io_files`` and ``io`` events;
- ``darshan-parser`` text grown to about ``--mb`` MB (the counter rows of the samples repeated under new
  record ids and ranks): CPU seconds, MB per CPU second and ``io_files`` rows;
- ``gpu_clocks`` over the real two-rank Kineto trace ``kineto/hta_trace_filter`` merged with an
  nvidia-smi log sampled every 10 ms: CPU seconds of the analysis alone.

Prints a table and writes ``bench/out/darshan_read.json``; peak RSS of the process at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"


def cpu(fn, repeats: int) -> tuple[float, object]:  # noqa: ANN001
    out = fn()  # warm-up: imports, numba cache, PyDarshan's library
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def grown_parser_text(mb: float, folder: Path) -> Path:
    """darshan-parser text of about ``mb`` MB: the samples' counter rows, copy k under record id + k and rank k."""
    import re

    srcs = sorted((DATA / "logs" / "darshan").glob("*.darshan-parser.txt"))
    head = [ln for ln in srcs[0].read_text().splitlines() if ln.startswith("#")]
    row = re.compile(r"^(?:POSIX|MPI-IO|STDIO)\t-?\d+\t\d+\t\w+\t\S+\t")
    rows = [ln for src in srcs for ln in src.read_text().splitlines() if row.match(ln)]
    block = "\n".join(rows) + "\n"
    copies = max(1, int(mb * 2**20 / len(block)))
    out = folder / "grown.darshan-parser.txt"
    with out.open("w") as fh:
        fh.write("\n".join(head) + "\n")
        for k in range(copies):
            for line in rows:
                f = line.split("\t")
                f[1] = str(k) if f[1] != "-1" else "-1"
                f[2] = str(int(f[2]) + k)
                f[5] = f"{f[5]}.{k}"
                fh.write("\t".join(f) + "\n")
    return out


def smi_log(trace, folder: Path, period_ns: int = 10_000_000) -> Path:  # noqa: ANN001
    span = trace.meta["time_range"]
    lines = ["timestamp, index, clocks.sm [MHz], power.draw [W], temperature.gpu"]
    for ts in range(span["start_ns"] // period_ns * period_ns, span["end_ns"] + period_ns, period_ns):
        stamp = dt.datetime.fromtimestamp(ts // 10**9, dt.timezone.utc).strftime("%Y/%m/%d %H:%M:%S")
        for gpu in (0, 1):
            mhz = 1005 if (ts // 10**9) % 2 else 1410
            lines.append(f"{stamp}.{ts % 10**9 // 10**6:03d}, {gpu}, {mhz} MHz, 300.00 W, 60")
    out = folder / "smi.csv"
    out.write_text("\n".join(lines) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mb", type=float, default=32.0)
    args = ap.parse_args()
    import polars as pl

    import di
    from di.engine.window import prepare

    results: dict[str, object] = {}
    print(f"{'input':<48} {'CPU s':>8} {'io_files':>9} {'io events':>9}")
    for log in sorted((DATA / "logs" / "darshan").glob("*.darshan")):
        t, trace = cpu(lambda log=log: di.load(log), args.repeats)
        n_io = trace.events.filter(pl.col("cat") == "io").height
        results[log.name] = {"cpu_s": t, "io_files": trace.io_files.height, "io_events": n_io}
        print(f"{log.name:<48} {t:8.3f} {trace.io_files.height:9,} {n_io:9,}")
    with tempfile.TemporaryDirectory() as tmp:
        text = grown_parser_text(args.mb, Path(tmp))
        size = text.stat().st_size
        t, trace = cpu(lambda: di.load(text), args.repeats)
        results["darshan-parser text"] = {"bytes": size, "cpu_s": t, "mb_per_cpu_s": size / 2**20 / t}
        results["darshan-parser text"]["io_files"] = trace.io_files.height
        print(f"{'darshan-parser text ' + f'{size / 2**20:.1f} MB':<48} {t:8.3f} {trace.io_files.height:9,}")
        print(f"  {size / 2**20 / t:,.0f} MB per CPU second")
        kineto = DATA / "kineto" / "hta_trace_filter"
        if kineto.is_dir():
            job = di.load([kineto, smi_log(di.load(kineto), Path(tmp))])
            frame = prepare(job, None)
            from di.engine.gpu_clocks import gpu_clocks

            t, out = cpu(lambda: gpu_clocks(frame), args.repeats)
            kernels = job.events.filter(pl.col("cat") == "kernel").height
            results["gpu_clocks"] = {"cpu_s": t, "kernels": kernels, "samples": job.samples.height, "rows": out.height}
            print(
                f"gpu_clocks: {kernels:,} kernels, {job.samples.height:,} samples -> {out.height} rows, {t:.4f} CPU s"
            )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results["peak_rss_mb"] = rss
    print(f"peak RSS {rss:,.0f} MB")
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "darshan_read.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
