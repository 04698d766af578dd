"""GPU clocks, power and temperature over the time of each kernel, from the trace's counter series.

The series come from nvidia-smi and DCGM logs merged with the trace (:mod:`di.convert.logs.smi`) or from
``di record``'s NVML sampler; the kernels from the trace's GPU streams. Definitions:

- **Quantities**: SM clock (MHz), power (W), GPU temperature (C). Each GPU has at most one series per quantity:
  the first pattern of :data:`SERIES` that it has samples of (``clocks.sm``/``clocks.current.sm``,
  ``q.Clocks.SM``, ``dmon.pclk``, ``dcgm.SMCLK``, NVML's ``gpuN sm clock``; likewise for power and
  temperature); among several of one pattern, the one with the most samples, then by name.
- **Which GPU a series is**: its timeline's ``device``, else the timeline name ``GPU N`` (nvidia-smi and DCGM
  logs), else the series name's ``gpuN`` prefix (NVML). It goes with the kernels of that device index on its
  host; a series whose host is not one of the GPU timelines' hosts (a log without host names) goes with that
  device index only when the GPU timelines are on one host at most (else it is not used).
  Device indices are compared as printed: nvidia-smi's index equals the process's CUDA device only where
  ``CUDA_VISIBLE_DEVICES`` did not renumber them.
- **Value between samples**: a reading stands until the next one (sample and hold); the last one for the
  series' median sampling interval. Kernel time outside that span is not covered.
- **Per kernel name and GPU**: ``sm_clock_mhz``, ``power_w``, ``temperature_c`` are means weighted by time over
  the covered time of all the name's kernels on that GPU (null where none is covered); ``covered_ns`` is that
  time. ``max_sm_clock_mhz`` is the highest SM clock the GPU's series shows over the whole trace;
  ``below_ns`` the covered kernel time during which the SM clock was under :data:`THROTTLE_SHARE` of it;
  ``throttled`` is true when the mean SM clock is under :data:`THROTTLE_SHARE` of it.

Kernels are the window's (a time window clips them). Vectorised: one ``searchsorted`` per series, never a
loop per kernel or sample. Under ``mpiexec`` (:mod:`di.parallel.analyze`) each process takes the GPU series
of every process (:func:`candidates`, :func:`choose`) and its own ranks' kernels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from di.engine.window import EventFrame

__all__ = [
    "COLUMNS",
    "SERIES",
    "THROTTLE_SHARE",
    "candidates",
    "choose",
    "gpu_clocks",
    "gpu_hosts",
    "gpu_series",
    "held_integral",
    "in_order",
]

THROTTLE_SHARE = 0.95
"""A kernel ran throttled when its mean SM clock is under this share of the GPU's highest SM clock seen."""
SERIES: dict[str, tuple[str, ...]] = {
    "sm_clock": (
        r"^clocks\.(?:current\.)?sm$",
        r"^q\.clocks\.sm$",
        r"^dmon\.pclk$",
        r"^dcgm\.smclk$",
        r"^gpu\d+ sm clock$",
        r"^clocks\.(?:current\.)?(?:gr|graphics)$",
        r"^q\.clocks\.graphics$",
    ),
    "power": (
        r"^power\.draw$",
        r"^power\.draw\.instant$",
        r"^q\.gpu power readings\.(?:instantaneous )?power draw$",
        r"^dmon\.pwr$",
        r"^dcgm\.(?:power|pwr)$",
        r"^gpu\d+ power$",
        r"^power\.draw\.average$",
        r"^q\.gpu power readings\.average power draw$",
    ),
    "temperature": (
        r"^temperature\.gpu$",
        r"^q\.temperature\.gpu current temp$",
        r"^dmon\.gtemp$",
        r"^dcgm\.(?:gtemp|tmptr)$",
        r"^gpu\d+ temperature$",
    ),
}
"""Series names (lower case) of each quantity, in order of preference."""
UNITS = {"sm_clock": "MHz", "power": "W", "temperature": "C"}
READING_COLUMNS = {
    "covered_ns": pl.Int64,
    "sm_clock_mhz": pl.Float64,
    "max_sm_clock_mhz": pl.Float64,
    "below_ns": pl.Int64,
    "throttled": pl.Boolean,
    "power_w": pl.Float64,
    "temperature_c": pl.Float64,
}
"""The readings' columns, last in this result and in :mod:`di.engine.gpu_step_clocks`' (definitions above)."""
COLUMNS = {
    "rank": pl.Int64,
    "device": pl.Int64,
    "host": pl.String,
    "name": pl.String,
    "count": pl.Int64,
    "total_ns": pl.Int64,
    **READING_COLUMNS,
}
"""The result's columns: one row per (rank, device, kernel name), longest total first."""


def candidates(trace) -> pl.DataFrame:  # noqa: ANN001 (a di.trace.Trace)
    """Every series that names a GPU quantity, by name and unit alone (no samples read): series id, name, host,
    device, quantity and ``pref`` (the index of its pattern in :data:`SERIES`)."""
    s = trace.series.with_columns(pl.col("series").cast(pl.Int64)).join(
        trace.locations.select("loc", "host", "device", pl.col("name").alias("where")), on="loc", how="left"
    )
    lower = pl.col("name").cast(pl.String).str.to_lowercase()
    pref = pl.lit(None, pl.Int64)
    quantity = pl.lit(None, pl.String)
    for q, patterns in reversed(SERIES.items()):
        for k, pat in reversed(list(enumerate(patterns))):
            hit = lower.str.contains(pat) & (pl.col("unit") == UNITS[q])
            pref = pl.when(hit).then(pl.lit(k, pl.Int64)).otherwise(pref)
            quantity = pl.when(hit).then(pl.lit(q)).otherwise(quantity)
    device = pl.coalesce(
        pl.col("device").cast(pl.Int64),
        pl.col("where").cast(pl.String).str.extract(r"^GPU (\d+)$").cast(pl.Int64),
        lower.str.extract(r"^gpu(\d+) ").cast(pl.Int64),
    )
    return s.select(
        "series",
        pl.col("name").cast(pl.String),
        "host",
        device.alias("device"),
        quantity.alias("quantity"),
        pref.alias("pref"),
    ).drop_nulls(["quantity", "device"])


def gpu_series(trace) -> pl.DataFrame:  # noqa: ANN001 (a di.trace.Trace)
    """The series used per GPU: host (null: any), device, quantity, series id; one per (host, device, quantity)."""
    counts = trace.samples.group_by("series").len().with_columns(pl.col("series").cast(pl.Int64))
    return choose(candidates(trace).join(counts, on="series"), gpu_hosts(trace))


def gpu_hosts(trace) -> pl.Series:  # noqa: ANN001 (a di.trace.Trace)
    """The hosts of the trace's GPU timelines."""
    return trace.locations.filter(pl.col("kind") == "gpu_stream").get_column("host").drop_nulls().unique()


def choose(found: pl.DataFrame, hosts: pl.Series) -> pl.DataFrame:
    """One series per (host, device, quantity) of ``found`` (:func:`candidates` with their sample counts ``len``):
    the first pattern, then the most samples, then the name. With several ``hosts`` (the GPU timelines') a series
    of another host (or none) is left out; with one host at most every series' host is made null (any)."""
    if hosts.len() > 1:  # a series of no known host goes with a device index only where that names one GPU
        found = found.with_columns(pl.when(pl.col("host").is_in(hosts.implode())).then("host").alias("host"))
        found = found.drop_nulls("host")
    else:  # one host at most: a device index names one GPU, whatever host a series gives (else a named and
        # an unnamed series of one GPU would both be chosen, and its kernels counted twice)
        found = found.with_columns(pl.lit(None, pl.String).alias("host"))
    return (
        found.sort("pref", "len", "name", descending=[False, True, False])
        .unique(["host", "device", "quantity"], keep="first", maintain_order=True)
        .select("host", "device", "quantity", "series")
        .sort("quantity", "device", "host", nulls_last=True)
    )


def in_order(result: pl.DataFrame) -> pl.DataFrame:
    """Rows of a :func:`gpu_clocks` result (or pieces of one, concatenated) in its order: longest total first."""
    return result.sort("total_ns", "rank", "device", "name", descending=[True, False, False, False], nulls_last=True)


def held_integral(ts: np.ndarray, values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(integral of the held ``values`` over [lo, hi) clipped to the series' span, covered ns) per interval.

    ``ts`` sorted int64 ns; ``values`` float64 (nan: no reading, counted as not covered)."""
    n = ts.size
    step = np.diff(ts)
    last = int(np.median(step)) if step.size else 0
    end = ts[-1] + last
    a = np.clip(lo, ts[0], end)
    b = np.clip(hi, ts[0], end)
    known = ~np.isnan(values)
    width = np.append(step, last).astype(np.float64)
    area = np.concatenate(([0.0], np.cumsum(np.where(known, values, 0.0) * width)))
    seen = np.concatenate(([0.0], np.cumsum(known * width)))

    def at(t: np.ndarray, cum: np.ndarray, rate: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(ts, t, side="right") - 1, 0, n - 1)
        return cum[k] + rate[k] * (t - ts[k]).astype(np.float64)

    vals = np.where(known, values, 0.0)
    return at(b, area, vals) - at(a, area, vals), at(b, seen, known.astype(np.float64)) - at(
        a, seen, known.astype(np.float64)
    )


def integrate_series(spans: pl.DataFrame, use: pl.DataFrame, samples: pl.DataFrame) -> pl.DataFrame | None:
    """``spans`` (``row``, ``host``, ``device``, ``start_ns``, ``end_ns``) with, per quantity q of
    :data:`SERIES`, ``q_area`` (value x ns) and ``q_covered`` (ns) of its chosen series held over each span,
    ``below`` (ns under :data:`THROTTLE_SHARE` of the GPU's highest SM clock) and ``max_sm_clock_mhz``; null
    where a GPU has no such series. None when no span has any series (``use``: :func:`choose`'s rows)."""
    samples = samples.with_columns(pl.col("series").cast(pl.Int64)).sort("series", "ts_ns")
    parts: dict[str, list[pl.DataFrame]] = {q: [] for q in SERIES}
    for host, device, quantity, series in use.iter_rows():  # one per GPU and quantity, not per span
        mine = spans.filter(
            (pl.col("device") == device) & ((pl.col("host") == host) if host is not None else pl.lit(True))
        )
        s = samples.filter(pl.col("series") == series)
        if not mine.height or not s.height:
            continue
        ts, v = s.get_column("ts_ns").to_numpy(), s.get_column("value").to_numpy().astype(np.float64)
        lo, hi = mine.get_column("start_ns").to_numpy(), mine.get_column("end_ns").to_numpy()
        area, covered = held_integral(ts, v, lo, hi)
        cols = {"row": mine.get_column("row"), f"{quantity}_area": area, f"{quantity}_covered": covered}
        if quantity == "sm_clock":
            top = float(np.nanmax(v)) if np.isfinite(v).any() else np.nan
            below = np.where(np.isnan(v), np.nan, (v < THROTTLE_SHARE * top).astype(np.float64))
            cols["below"], _ = held_integral(ts, below, lo, hi)
            cols["max_sm_clock_mhz"] = np.full(mine.height, top)
        parts[quantity].append(pl.DataFrame(cols))
    if not any(parts.values()):
        return None
    for quantity, frames in parts.items():
        if frames:
            spans = spans.join(pl.concat(frames), on="row", how="left")
        else:
            spans = spans.with_columns(
                pl.lit(None, pl.Float64).alias(f"{quantity}_area"),
                pl.lit(None, pl.Float64).alias(f"{quantity}_covered"),
            )
    if "below" not in spans.columns:
        spans = spans.with_columns(
            pl.lit(None, pl.Float64).alias("below"), pl.lit(None, pl.Float64).alias("max_sm_clock_mhz")
        )
    return spans


def gpu_clocks(frame: EventFrame, use: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (rank, device, kernel name) in the window: the GPU's SM clock, power and temperature over the
    kernels' time (see the module docstring); an empty frame of :data:`COLUMNS` when the trace has no such
    series or no kernels. ``use``: the series per GPU (default :func:`gpu_series` of the frame's trace)."""
    trace = frame.trace
    empty = pl.DataFrame(schema=COLUMNS)
    use = gpu_series(trace) if use is None else use
    if not use.height:
        return empty
    ev = trace.events
    is_kernel = (ev.get_column("cat") == "kernel").to_numpy()  # on the Enum's codes: no text per row
    rows = np.flatnonzero(is_kernel & frame.selected & frame.on_gpu)
    if not rows.size:
        return empty
    hosts = trace.locations.select("loc", "host")
    kernels = pl.DataFrame(
        {
            "row": rows,
            "rank": frame.rank[rows],
            "device": frame.device[rows],
            "start_ns": frame.start_ns[rows],
            "end_ns": frame.end_ns[rows],
        }
    ).with_columns(
        ev.get_column("name").cast(pl.String).gather(rows).alias("name"),
        ev.get_column("loc").gather(rows).alias("loc"),
    )
    kernels = kernels.join(hosts, on="loc", how="left").drop("loc")
    kernels = integrate_series(kernels, use, trace.samples)
    if kernels is None:
        return empty

    def mean(q: str) -> pl.Expr:
        covered = pl.col(f"{q}_covered").sum()
        return pl.when(covered > 0).then(pl.col(f"{q}_area").sum() / covered)

    out = (
        kernels.group_by("rank", "device", "host", "name")
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("total_ns"),
            pl.col("sm_clock_covered").sum().round().cast(pl.Int64).alias("covered_ns"),
            mean("sm_clock").alias("sm_clock_mhz"),
            pl.col("max_sm_clock_mhz").max(),
            pl.col("below").sum().round().cast(pl.Int64).alias("below_ns"),
            mean("power").alias("power_w"),
            mean("temperature").alias("temperature_c"),
        )
        .with_columns((pl.col("sm_clock_mhz") < THROTTLE_SHARE * pl.col("max_sm_clock_mhz")).alias("throttled"))
    )
    return in_order(out.select([pl.col(c).cast(t) for c, t in COLUMNS.items()]))
