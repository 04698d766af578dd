"""One run's summary for the dashboard, and its cache in the per-user cache folder.

A summary is a small JSON-able dict read by the runs table and the trends:

- ``name`` (the run's file or folder name), ``path`` (resolved), ``time``
  (ISO 8601, UTC: the trace's start when its clock is the Unix epoch, else the
  run's modification time), ``command`` (``meta.json``'s, as ``di record``
  writes it; null when the trace names none), ``sources`` (formats read);
- ``ranks``, ``gpus`` (distinct rank, device pairs), ``events``, ``duration_ns``;
- ``steps`` and ``step_ns`` (mean, p50, p90 of the steps' wall time, first
  rank's start to last rank's end: :func:`di.viewers.diff.results.step_stats`);
- ``breakdown``: ``{"scope": "gpu"|"host", "span_ns", "states": {state: time_ns}}``,
  each state's exclusive time summed over the ranks' GPU scopes (the host's
  when the trace has no GPU), :mod:`di.engine.breakdown`;
- ``bottleneck``: the largest state of that breakdown other than idle
  (``{"state", "share"}``, share of the summed span), and ``cp_top``: the
  critical path's largest category (``{"category", "share"}``), ``cp_length_ns``;
- ``memory_peak_bytes``: the framework allocator's largest peak over the ranks' accelerators (not ``cpu``), null
  without allocator events (:mod:`di.engine.memory`);
- ``flop_utilization``: the mean over the ranks' GPUs of their matrix work's rate against the GPU's peak (MFU when
  nothing is recomputed), null without recorded shapes or a known peak (:mod:`di.engine.flops`);
- ``data_wait_share``: the largest over the ranks of the share of their steps their GPUs sat idle while they loaded
  data (the host's data-loading time for a rank without GPU work), null without data-loading regions
  (:mod:`di.engine.phases`);
- ``warnings``: how many the trace carries; ``error``: one line when the run
  could not be read or analysed (every other field then null).

The cache file of a run is ``$XDG_CACHE_HOME/di/dashboard/HASH.json`` (or
``~/.cache/di/dashboard/``), HASH from the run's resolved path, never beside
the run. It holds the run's :func:`signature` (count, bytes and newest
mtime of its files) and the di version; a summary is recomputed only when
either differs. Errors are cached too, so a broken run is not re-read until
it changes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any

CACHE_FORMAT = "di-dashboard-summary"
CACHE_VERSION = 4
"""Bumped when a summary's fields change: older cache files are recomputed."""
HASH_CHARS = 16
"""Hex digits of the SHA-256 of the run's resolved path in its cache file's name (64 bits)."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/di/dashboard`` (an absolute XDG_CACHE_HOME only, as the XDG spec says) or ``~/.cache/di/dashboard``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "di" / "dashboard"


def cache_file(path: Path) -> Path:
    """The cache file of the run at ``path``."""
    digest = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:HASH_CHARS]
    return cache_dir() / f"{digest}.json"


def signature(path: Path) -> list[int]:
    """[files, bytes, newest mtime in ns] of a run (a folder: every file under it); what changes when the run does."""
    if not path.is_dir():
        st = path.stat()
        return [1, st.st_size, st.st_mtime_ns]
    count = size = newest = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.stat(os.path.join(root, f))
            except OSError:
                continue
            count, size, newest = count + 1, size + st.st_size, max(newest, st.st_mtime_ns)
    return [count, size, newest]


def read_cached(path: Path, sig: list[int]) -> dict[str, Any] | None:
    """The cached summary of ``path`` when its signature, di version and the user's GPU peaks
    (:mod:`di.engine.gpu_specs`) match; else None."""
    from di import __version__
    from di.engine import gpu_specs

    try:
        doc = json.loads(cache_file(path).read_text())
    except (OSError, ValueError):
        return None
    ok = (
        isinstance(doc, dict)
        and doc.get("format") == CACHE_FORMAT
        and doc.get("version") == CACHE_VERSION
        and doc.get("di_version") == __version__
        and doc.get("signature") == sig
        and doc.get("path") == str(path.resolve())
        and doc.get("gpu_specs") == gpu_specs.fingerprint()  # the user's GPU peaks: the utilization depends on them
    )
    return doc.get("summary") if ok else None


def write_cached(path: Path, sig: list[int], summary: dict[str, Any]) -> None:
    """Store ``summary`` (atomically); a cache folder that cannot be written is no error (the summary is recomputed next time)."""
    from di import __version__
    from di.engine import gpu_specs
    from di.output import atomic_write

    doc = {
        "format": CACHE_FORMAT,
        "version": CACHE_VERSION,
        "di_version": __version__,
        "path": str(path.resolve()),
        "signature": sig,
        "gpu_specs": gpu_specs.fingerprint(),
        "summary": summary,
    }
    target = cache_file(path)
    try:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with atomic_write(target) as fh:
            fh.write(json.dumps(doc).encode())
    except OSError:
        return


def summarize(path: Path, *, max_input_size: Any = None) -> dict[str, Any]:
    """The summary of one run (see the module docstring); a run that cannot be read gets ``error``.

    Raises nothing for bad input: the error text is the summary's ``error``.
    """
    import di
    from di.analysis_parts import without_analysis

    try:
        trace = without_analysis(di.load(path, max_input_size=max_input_size))
        result = di.analyze(trace)
        return {**_base(path, None), **facts(trace, result, path)}
    except (di.DIError, OSError, ValueError, MemoryError) as exc:
        return {**_base(path, _one_line(exc))}
    except Exception as exc:  # noqa: BLE001 (a bug in a reader must not take the dashboard down: the run shows it)
        return {**_base(path, f"internal error: {_one_line(exc)}")}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _base(path: Path, error: str | None) -> dict[str, Any]:
    mtime = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
    return {
        "name": path.name,
        "path": str(path.resolve()),
        "time": mtime.isoformat(timespec="seconds"),
        "command": None,
        "sources": None,
        "ranks": None,
        "gpus": None,
        "events": None,
        "duration_ns": None,
        "steps": None,
        "step_ns": None,
        "breakdown": None,
        "bottleneck": None,
        "cp_top": None,
        "cp_length_ns": None,
        "memory_peak_bytes": None,
        "flop_utilization": None,
        "data_wait_share": None,
        "warnings": None,
        "error": error,
    }


def facts(trace: Any, result: Any, path: Path) -> dict[str, Any]:
    """The summary fields read from a loaded trace and :func:`di.analyze` of it."""
    from di.engine.memory import rank_peaks
    from di.viewers.diff.results import step_stats, step_times
    from di.viewers.report.summary import job_facts

    f = job_facts(trace, result)
    stats = step_stats(step_times(result))
    out: dict[str, Any] = {
        "ranks": f["ranks"],
        "gpus": f["gpus"],
        "events": f["events"],
        "duration_ns": f["duration_ns"],
        "sources": f["sources"],
        "steps": stats["count"],
        "warnings": len(trace.meta.get("warnings", [])),
    }
    out["step_ns"] = None if not stats["count"] else {k[:-3]: stats[k] for k in ("mean_ns", "p50_ns", "p90_ns")}
    command = trace.meta.get("command")
    out["command"] = " ".join(map(str, command)) if isinstance(command, list) else command
    clock = trace.meta.get("clock") or {}
    start = (trace.meta.get("time_range") or {}).get("start_ns")
    if clock.get("domain") == "unix_epoch" and start:
        out["time"] = dt.datetime.fromtimestamp(start / 1e9, dt.timezone.utc).isoformat(timespec="seconds")
    out["breakdown"] = breakdown(result)
    b = out["breakdown"]
    busy = {k: v for k, v in (b["states"] if b else {}).items() if k != "idle" and v > 0}
    if busy and b["span_ns"]:
        state = max(busy, key=lambda k: busy[k])
        out["bottleneck"] = {"state": state, "share": busy[state] / b["span_ns"]}
    peaks = rank_peaks(result.memory) if result.memory is not None else None
    out["memory_peak_bytes"] = int(peaks.get_column("peak_bytes").max()) if peaks is not None and peaks.height else None  # type: ignore[arg-type]
    out["flop_utilization"] = flop_utilization(result)
    out["data_wait_share"] = data_wait_share(result)
    cp = result.critical_path
    if cp:
        out["cp_length_ns"] = int(cp["summary"]["length_ns"])
        cat = cp["by_category"]
        if cat.height:
            top = cat.sort("contrib_ns", descending=True).row(0, named=True)
            out["cp_top"] = {"category": str(top["category"]), "share": top["share"]}
    return out


def breakdown(result: Any) -> dict[str, Any] | None:
    """States' exclusive time summed over ranks: GPU scopes, else the hosts (see the module docstring)."""
    import polars as pl

    from di.engine.breakdown import STATE_NAMES

    b = result.breakdown
    if b is None or not b.height:
        return None
    whole = b.filter(pl.col("step").is_null())
    gpu = whole.filter(pl.col("scope") != "host")
    side, scope = (gpu, "gpu") if gpu.height else (whole, "host")
    span = int(side.select("rank", "scope", "span_ns").unique().get_column("span_ns").fill_null(0).sum())
    per = dict(side.group_by("state").agg(pl.col("time_ns").fill_null(0).sum()).iter_rows())
    return {"scope": scope, "span_ns": span, "states": {s: int(per.get(s, 0) or 0) for s in STATE_NAMES}}


def flop_utilization(result: Any) -> float | None:
    """The mean of the whole-window utilization of the run's GPUs (:mod:`di.engine.flops`), None without any."""
    import polars as pl

    if result.flops is None or not result.flops.height:
        return None
    mean = result.flops.filter(pl.col("step").is_null()).get_column("utilization").mean()
    return None if mean is None else float(mean)  # type: ignore[arg-type]


def data_wait_share(result: Any) -> float | None:
    """The largest over the ranks of their data phase's GPU idle time (host time without GPU work) over their steps'
    time (:mod:`di.engine.phases`), None where no rank has a data phase."""
    import polars as pl

    if result.phases is None or not result.phases.height:
        return None
    data = result.phases.filter(pl.col("step").is_null() & (pl.col("phase") == "data") & (pl.col("time_ns") > 0))
    share = data.select((pl.coalesce("gpu_idle_ns", "host_ns") / pl.col("time_ns")).max()).item()
    return None if share is None else float(share)
