"""Nsight Systems read speed: how fast an ``nsys export --type sqlite`` report loads, in rows/s.

Run on demand (not a test)::

    python bench/nsys_read.py [--copies 150] [--repeats 3] [--sqlite PATH]

A large export is made from the shared CloverLeaf one (``../shared/data/nsys/cloverleaf``)
by appending ``--copies`` shifted copies of its kernel, memcpy, synchronization,
runtime and OS-runtime rows (times and correlation ids shifted, so launch flows stay
one to one) and ``--nvtx`` NVTX ranges with text, in a temporary folder. Then:

(1) Ways to fetch the kernel table's integer columns (start, end, deviceId, streamId,
    correlationId, globalPid, demangledName, shortName) into numpy: Python's
    ``sqlite3`` ``fetchall`` -> ``np.array``, ``fetchall`` -> ``pl.DataFrame(orient="row")``,
    ``pl.read_database``, per-column queries through ``np.fromiter``, per-column
    ``group_concat`` texts parsed by numpy (one Python string per column, not per value),
    ``pl.read_database_uri`` with a ``sqlite://`` URI through connectorx and through ADBC's
    SQLite driver (Arrow buffers; run where those optional packages are importable, else
    said skipped: they are no dependency of di), and di's numba loop over the SQLite C API
    (:mod:`di.convert.nsys.scan`); rows/s, best of ``--repeats``.
(2) The whole reader (:func:`di.convert.nsys.reader.read_nsys`) with the numba loop and
    with ``fetchall``: rows read (of the tables it maps) per second, best of ``--repeats``,
    after one warm-up run (numba's cache compiled).
Each rate is given per wall second and per CPU second of the process (all its threads):
on a shared machine the wall figure says how busy the machine was, the CPU one what
the reader costs.
Target from the issue: >= 1 M rows/s. A table goes to stdout and the numbers to
``bench/out/nsys_read.json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "bench" / "out" / "nsys_read.json"
CLOVER = REPO.parent / "shared" / "data" / "nsys" / "cloverleaf" / "perlmutter-cloverleaf-cuda.sqlite"
TARGET_ROWS_PER_S = 1_000_000  # from the issue
TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "OSRT_API",
)
KERNEL_COLS = ["start", "end", "deviceId", "streamId", "correlationId", "globalPid", "demangledName", "shortName"]


def grow(src: Path, dst: Path, copies: int, nvtx: int = 0) -> int:
    """Copy ``src`` to ``dst`` and append ``copies`` shifted copies of the event tables, and ``nvtx`` NVTX
    push/pop ranges with unregistered text (300 distinct, as a profiler's per-operator ranges); returns the rows."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    span = con.execute("SELECT max(end) - min(start) + 1000 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    corr = con.execute("SELECT max(correlationId) + 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    rows = 0
    for table in TABLES:
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        shifted = [
            f"{c} + k * {span}" if c in ("start", "end") else f"{c} + k * {corr}" if c == "correlationId" else c
            for c in cols
        ]
        con.execute(f"CREATE TEMP TABLE base AS SELECT * FROM {table}")
        con.execute(
            f"WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < {copies}) "
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(shifted)} FROM base, n"
        )
        con.execute("DROP TABLE base")
        rows += con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    if nvtx:
        gtid = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()[0]
        con.execute(
            "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
            " category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,"
            " domainId INTEGER)"
        )
        con.execute(
            f"WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < {nvtx}) "
            "INSERT INTO NVTX_EVENTS SELECT k * 1000, k * 1000 + 500, 59, NULL, NULL, NULL, 'op_' || (k % 300), ?, "
            "NULL, NULL, 0 FROM n",
            (gtid,),
        )
        rows += nvtx
    con.commit()
    con.close()
    return rows


def best(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Least wall and least CPU seconds (all of the process's threads) of ``repeats`` runs."""
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return min(wall), min(cpu)


def rates(n: int, seconds: tuple[float, float]) -> dict[str, float]:
    return {"wall": n / seconds[0], "cpu": n / seconds[1]}


def _uri_methods(path: Path, sql: str) -> dict[str, Callable[[], object]]:
    """``pl.read_database_uri`` through connectorx and ADBC, for those installed."""
    out: dict[str, Callable[[], object]] = {}
    for engine, module in (("connectorx", "connectorx"), ("adbc", "adbc_driver_sqlite")):
        try:
            __import__(module)
        except ImportError:
            print(f"pl.read_database_uri ({engine}): skipped, {module} is not installed")
            continue
        uri = f"sqlite://{path.resolve()}" if engine == "connectorx" else f"sqlite:///{path.resolve()}"
        out[f"pl.read_database_uri ({engine}, Arrow)"] = lambda uri=uri, engine=engine: pl.read_database_uri(
            sql, uri, engine=engine
        )
    return out


def fetch_methods(path: Path, repeats: int) -> dict[str, dict[str, float]]:
    """rows/s of each way to read the kernel table's integer columns."""
    from di.convert.nsys.scan import int_columns

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sql = f"SELECT {', '.join(KERNEL_COLS)} FROM CUPTI_ACTIVITY_KIND_KERNEL"
    n = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    int_columns(con, path, "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLS)  # compile / load numba's cache
    methods: dict[str, Callable[[], object]] = {
        "fetchall -> np.array": lambda: np.array(con.execute(sql).fetchall(), dtype=np.int64),
        "fetchall -> pl.DataFrame(orient=row)": lambda: pl.DataFrame(
            con.execute(sql).fetchall(), schema=KERNEL_COLS, orient="row"
        ),
        "pl.read_database": lambda: pl.read_database(sql, con),
        "per-column np.fromiter": lambda: [
            np.fromiter(
                itertools.chain.from_iterable(con.execute(f"SELECT {c} FROM CUPTI_ACTIVITY_KIND_KERNEL")),
                dtype=np.int64,
            )
            for c in KERNEL_COLS
        ],
        "per-column group_concat -> np.array(str.split)": lambda: [
            np.array(
                con.execute(f"SELECT group_concat({c}) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0].split(","),
                dtype=np.int64,
            )
            for c in KERNEL_COLS
        ],
        **_uri_methods(path, sql),
        "numba loop over the SQLite C API (di)": lambda: int_columns(
            con, path, "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLS
        ),
    }
    out = {name: rates(n, best(fn, repeats)) for name, fn in methods.items()}
    con.close()
    return out


def whole_reader(path: Path, rows: int, repeats: int) -> dict[str, dict[str, float]]:
    from di.convert.nsys.reader import read_nsys

    read_nsys(path)  # warm-up
    return {
        f"read_nsys ({'numba loop' if native else 'fetchall'})": rates(
            rows, best(lambda native=native: read_nsys(path, native=native), repeats)
        )
        for native in (True, False)
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--copies", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nvtx", type=int, default=200_000, help="NVTX ranges added (CloverLeaf traced none)")
    ap.add_argument("--sqlite", type=Path, default=CLOVER)
    args = ap.parse_args()
    if not args.sqlite.exists():
        sys.exit(f"{args.sqlite}: not found (the shared CloverLeaf export)")
    with tempfile.TemporaryDirectory(prefix="di-nsys-bench-") as tmp:
        big = Path(tmp) / "big.sqlite"
        rows = grow(args.sqlite, big, args.copies, args.nvtx)
        kernels = sqlite3.connect(big).execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        fetch = fetch_methods(big, args.repeats)
        reader = whole_reader(big, rows, args.repeats)
    print(
        f"export: {rows:,} event rows ({kernels:,} kernels, {args.nvtx:,} NVTX ranges), "
        f"{args.copies} copies of the CloverLeaf rows"
    )
    load = os.getloadavg()[0]
    print(
        f"{'method':48s} {'rows/s (wall)':>14s} {'rows/s (CPU)':>14s}   load average {load:.1f} on {os.cpu_count()} cores"
    )
    for name, r in {**fetch, **reader}.items():
        print(f"{name:48s} {r['wall']:14,.0f} {r['cpu']:14,.0f}")
    fastest = max(fetch, key=lambda k: fetch[k]["wall"])
    second = max((r["wall"] for k, r in fetch.items() if k != fastest), default=0.0)
    print(
        f"fastest fetch: {fastest}, {fetch[fastest]['wall'] / second:.1f}x the next; target {TARGET_ROWS_PER_S:,} rows/s"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "rows": rows,
                "kernels": kernels,
                "load_average": load,
                "fetch_rows_per_s": fetch,
                "reader_rows_per_s": reader,
                "target_rows_per_s": TARGET_ROWS_PER_S,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
