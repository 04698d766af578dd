"""What carrying comms, comm_links and io_files costs the Chrome, Perfetto and OTF2 writers and readers.

Run on demand (not a test)::

    python bench/side_tables.py [--files 20000] [--repeats 3]

The job is a real Darshan log merged with a real NCCL log (``../shared/data/logs``); its io_files table is
grown to about ``--files`` rows (the log's rows repeated under new file names: a recording of a job that
touched that many files). For each format, best of ``--repeats``: CPU seconds of ``di.save`` and ``di.load``
with the side tables and with them emptied (the difference is what they cost), the output's size, and that
the tables come back equal. Peak RSS of the process at the end. A table goes to stdout.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LOGS = ROOT.parent / "shared" / "data" / "logs"


def job(files: int):  # noqa: ANN201
    import polars as pl

    import di

    trace = di.load(
        [
            LOGS / "darshan" / "pydarshan_ior_hdf5_example.darshan",
            LOGS / "nccl" / "nccltests_allreduce_nccl2.27.7_a100x2_debug_all.log",
        ]
    )
    io = trace.io_files
    copies = max(1, files // io.height)
    grown = pl.concat([io.with_columns(pl.col("file") + f".{k}") for k in range(copies)]).sort("module", "rank", "file")
    return trace.__class__.build(meta=trace.meta, **{**trace.tables(), "io_files": grown})


def cpu(fn) -> float:  # noqa: ANN001
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.rglob("*") if p.is_file())


def main() -> None:
    import di

    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    full = job(args.files)
    bare = full.__class__.build(
        meta=full.meta, **{**full.tables(), "comms": None, "comm_links": None, "io_files": None}
    )
    print(f"io_files {full.io_files.height} rows, comms {full.comms.height}, comm_links {full.comm_links.height}")
    print(f"{'format':16} {'save s':>8} {'bare':>8} {'load s':>8} {'bare':>8} {'MB':>7} {'bare MB':>8} equal")
    for ext in ("json", "perfetto-trace", "otf2"):
        row = []
        with tempfile.TemporaryDirectory() as tmp:
            for trace, name in ((full, "full"), (bare, "bare")):
                path = Path(tmp) / name / f"t.{ext}"
                path.parent.mkdir()
                save = min(cpu(lambda: di.save(trace, path, force=True)) for _ in range(args.repeats))
                load = min(cpu(lambda: di.load(path)) for _ in range(args.repeats))
                row.append((save, load, size(path) / 1e6))
            back = di.load(Path(tmp) / "full" / f"t.{ext}")
            equal = all(getattr(back, t).equals(getattr(full, t)) for t in ("comms", "comm_links", "io_files"))
        (fs, fl, fm), (bs, bl, bm) = row
        print(f"{ext:16} {fs:8.3f} {bs:8.3f} {fl:8.3f} {bl:8.3f} {fm:7.2f} {bm:8.2f} {equal}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
