"""Binary Darshan logs (``.darshan``, format 3.00 to 3.41, either byte order) through PyDarshan.

PyDarshan (the ``darshan`` package, which wraps darshan-util's C library) does the
decoding; this module maps what it returns, with the same names as the
``darshan-parser``/``darshan-dxt-parser`` text reader (:mod:`.darshan_text`), so a
log and its text read alike:

- DXT segments (``DXT_POSIX``, ``DXT_MPIIO``): one ``io`` event ``read``/``write`` per
  segment on the rank's ``darshan X_POSIX``/``darshan X_MPIIO`` timeline, ``bytes`` =
  length, with file, offset and segment in args; times are the job's start plus the
  segment's seconds (``unix_epoch``).
- POSIX / MPI-IO / STDIO counters: the ``io_files`` table, the per-file I/O statistics
  that ``di record`` writes, in its columns and units (:mod:`.darshan_counters`); its row
  count in ``info.darshan.io_files``.
- HEATMAP (Darshan 3.4+): per module, rank and direction a series
  ``darshan.heatmap.<MODULE>.<read|write>`` in B/s (the bin's bytes over its width), one
  sample per bin at its start, on the rank's ``darshan heatmap`` counter timeline.
- The job header (jobid, nprocs, start and end, executable, modules) to ``info.darshan``.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from di.convert.logs.build import Parts, build_trace
from di.convert.logs.darshan_counters import COUNTER_MODULES, file_stats
from di.errors import FormatError, MissingDependencyError
from di.inputsize import check_size
from di.trace import Trace

__all__ = ["MAGIC", "is_darshan", "read_darshan"]

MAGIC = 6567223
"""DARSHAN_MAGIC_NR: the 8 bytes after the log's version string, in the byte order of the machine that wrote it."""
DXT_MODULES = {"DXT_POSIX": "X_POSIX", "DXT_MPIIO": "X_MPIIO"}


def is_darshan(head: bytes) -> bool:
    """True when ``head`` starts like a Darshan log: ``3.NN`` NUL-padded to 8 bytes, then the magic number."""
    if len(head) < 16 or head[:2] != b"3." or not head[2:4].isdigit() or head[4:8].strip(b"\x00"):
        return False
    return MAGIC in (int.from_bytes(head[8:16], "little"), int.from_bytes(head[8:16], "big"))


@contextlib.contextmanager
def _c_output_caught(into: list[str]) -> Iterator[None]:
    """File descriptors 1 and 2 go to a temporary file inside the block (darshan-util's C library prints its
    errors there, and PyDarshan warns about modules it has no reader for); its text is added to ``into``."""
    import sys
    import tempfile

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 1)
            os.dup2(tmp.fileno(), 2)
            with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(out):
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            into.append(tmp.read().decode("utf-8", errors="replace") + out.getvalue())


def _report(path: Path) -> Any:
    try:
        import darshan
    except ImportError:
        raise MissingDependencyError(
            f"{path}: reading binary Darshan logs needs PyDarshan: pip install darshan"
        ) from None
    said: list[str] = []
    failure = None
    with _c_output_caught(said):
        try:
            report = darshan.DarshanReport(os.fspath(path), read_all=True)
        except Exception as exc:  # the C library's failures surface as several exception types
            failure = f"{type(exc).__name__}: {str(exc)[:200]}"
        if failure is not None:
            import gc

            gc.collect()  # the half-built report closes its handle (and prints about it) now, not later
    if failure is not None:
        first = next((ln for ln in "".join(said).splitlines() if ln.startswith("Error:")), "")
        raise FormatError(path, f"not a readable Darshan log ({first[7:].strip().rstrip('.') or failure})")
    return report


def _dxt(report: Any, names: dict[int, str], t0_ns: int) -> pl.DataFrame:
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("rank", "module", "op", "file", "host", "offset", "length", "start", "end", "segment")
    }
    hosts: list[str] = []
    files: list[str] = []
    for mod in DXT_MODULES:
        if mod not in report.records:
            continue
        for rec in report.records[mod].to_df():  # one per (file, rank), its segments as arrays
            for op in ("write", "read"):
                seg = rec[f"{op}_segments"]
                n = len(seg)
                if not n:
                    continue
                cols["rank"].append(np.full(n, int(rec["rank"]), np.int64))
                cols["module"].append(np.full(n, list(DXT_MODULES).index(mod), np.int64))
                cols["op"].append(np.full(n, op == "write", bool))
                files.append(names.get(int(rec["id"]), str(rec["id"])))
                hosts.append(str(rec.get("hostname") or ""))
                cols["file"].append(np.full(n, len(files) - 1, np.int64))
                cols["host"].append(np.full(n, len(hosts) - 1, np.int64))
                cols["offset"].append(seg["offset"].to_numpy(np.int64))
                cols["length"].append(seg["length"].to_numpy(np.int64))
                cols["start"].append(seg["start_time"].to_numpy(np.float64))
                cols["end"].append(seg["end_time"].to_numpy(np.float64))
                cols["segment"].append(np.arange(n, dtype=np.int64))
    if not cols["rank"]:
        return pl.DataFrame()
    a = {k: np.concatenate(v) for k, v in cols.items()}
    start = t0_ns + np.round(a["start"] * 1e9).astype(np.int64)
    end = np.maximum(start, t0_ns + np.round(a["end"] * 1e9).astype(np.int64))
    modules = np.array(list(DXT_MODULES.values()), dtype=object)
    df = pl.DataFrame(
        {
            "rank": a["rank"],
            "host": pl.Series(np.array(hosts, dtype=object)[a["host"]], dtype=pl.String),
            "module": pl.Series(modules[a["module"]], dtype=pl.String),
            "name": np.where(a["op"], "write", "read"),
            "file": pl.Series(np.array(files, dtype=object)[a["file"]], dtype=pl.String),
            "offset": a["offset"],
            "segment": a["segment"],
            "start_ns": start,
            "end_ns": end,
            "bytes": a["length"],
        }
    )
    return df.select(
        "rank",
        pl.when(pl.col("host") != "").then(pl.col("host")).alias("host"),
        pl.lit(None, pl.Int64).alias("pid"),
        pl.format("darshan {}", "module").alias("track"),
        "start_ns",
        "end_ns",
        "name",
        pl.lit("io").alias("cat"),
        pl.lit(False).alias("instant"),
        "bytes",
        pl.struct("file", "offset", "segment", "module").struct.json_encode().alias("args"),
    )


def _counters(report: Any, names: dict[int, str]) -> pl.DataFrame:
    """Long frame (module, rank, file, counter, value) of the counter modules' records."""
    parts = []
    for mod in COUNTER_MODULES:
        if mod not in report.records:
            continue
        frames = report.records[mod].to_df()
        for kind in ("counters", "fcounters"):
            df = pl.from_pandas(frames[kind])
            if not df.height:
                continue
            long = df.unpivot(index=["rank", "id"], variable_name="counter", value_name="value")
            parts.append(
                long.select(
                    pl.lit(mod).alias("module"),
                    pl.col("rank").cast(pl.Int64),
                    pl.col("id").cast(pl.UInt64).alias("id"),
                    "counter",
                    pl.col("value").cast(pl.Float64),
                )
            )
    if not parts:
        return pl.DataFrame()
    ids = pl.DataFrame({"id": list(names), "file": list(names.values())}, schema={"id": pl.UInt64, "file": pl.String})
    c = pl.concat(parts).join(ids, on="id", how="left")
    return c.with_columns(pl.coalesce("file", pl.col("id").cast(pl.String)).alias("file"))


def _heatmaps(report: Any, t0_ns: int) -> pl.DataFrame:
    rows = []
    for mod, heat in (getattr(report, "heatmaps", None) or {}).items():
        for op in ("read", "write"):
            df = heat.to_df(ops=[op])
            if df.empty:
                continue
            left = np.array([iv.left for iv in df.columns], np.float64)  # one per bin, not per sample
            width = np.array([iv.length for iv in df.columns], np.float64)
            vals = df.to_numpy(np.float64)
            ranks = df.index.to_numpy(np.int64)
            nb = len(left)
            rows.append(
                pl.DataFrame(
                    {
                        "rank": np.repeat(ranks, nb),
                        "series": f"darshan.heatmap.{mod}.{op}",
                        "ts_ns": np.tile(t0_ns + np.round(left * 1e9).astype(np.int64), len(ranks)),
                        "value": (vals / np.where(width > 0, width, 1.0)).ravel(),
                    }
                )
            )
    if not rows:
        return pl.DataFrame()
    return pl.concat(rows).select(
        "rank",
        pl.lit(None, pl.String).alias("host"),
        pl.lit("darshan heatmap").alias("track"),
        "series",
        pl.lit("B/s").alias("unit"),
        "ts_ns",
        "value",
    )


def read_darshan(
    path: Path,
    *,
    rank: int | None = None,
    rank_source: str = "single",
    source: int = 0,
    max_input_bytes: int | None = None,
    **_: Any,
) -> Trace:
    """Read a binary Darshan log (see the module docstring).

    Raises:
        MissingDependencyError: PyDarshan is not installed.
        FormatError: PyDarshan could not read the file.
        InputTooLargeError: over ``max_input_bytes``.
    """
    path = Path(path)
    check_size(path, path.stat().st_size, max_input_bytes)
    report = _report(path)
    job = report.metadata.get("job", {})
    t0_ns = int(job.get("start_time_sec", 0)) * 1_000_000_000 + int(job.get("start_time_nsec", 0) or 0)
    names = {int(k): str(v) for k, v in report.name_records.items()}
    events = _dxt(report, names, t0_ns)
    samples = _heatmaps(report, t0_ns)
    stats = file_stats(_counters(report, names))
    exe = report.metadata.get("exe")
    info: dict[str, Any] = {
        "darshan": {
            "version": job.get("log_ver"),
            "library": (job.get("metadata") or {}).get("lib_ver"),
            "exe": " ".join(exe) if isinstance(exe, list) else exe,
            "jobid": job.get("jobid"),
            "nprocs": job.get("nprocs"),
            "start_time_s": job.get("start_time_sec"),
            "end_time_s": job.get("end_time_sec"),
            "run_time_s": job.get("run_time"),
            "modules": sorted(report.modules),
            "io_files": stats.height,
            "time": "start_time_plus_seconds",
        }
    }
    parts = Parts("darshan", epoch=True, info=info, tables={"io_files": stats})
    if events.height:
        parts.events = events
    if samples.height:
        parts.samples = samples
    return build_trace(
        path,
        [parts],
        rank=0 if rank is None else rank,
        rank_source=rank_source,
        source=source,
        fmt="log:darshan",
        unknown={},
        garbled={},
    )
