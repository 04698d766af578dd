"""The engine's results of A and B side by side: step time, breakdown, overlap, critical path.

- **Step time**: a step's time is the job's wall time of it, from the first
  rank's start to the last rank's end (int64 ns); per run its count, mean,
  p50, p90 (nearest rank), min and max over the steps of the window.
- **Breakdown**: per rank, scope (gpuN, host) and state, the exclusive time
  and share of the window (:mod:`di.engine.breakdown`).
- **GPU idle**: per rank, GPU and cause, the idle time given to the cause and its share of the GPU's idle time
  (:mod:`di.engine.gpu_idle`); summed over the GPUs per cause by :func:`gpu_idle_totals`.
- **Memory**: per rank and device (``cuda:0``, ``cpu``), the framework allocator's peak over the window
  (``peak_bytes``), the memory it reserved then and the growth per step (:mod:`di.engine.memory`, its whole-window
  rows), and the operator that reached the peak; ``delta_peak_bytes`` (B - A, bytes) and ``rel_peak`` (b/a - 1,
  null where A's peak is 0 or a run lacks the device). :func:`memory_headline` names the largest change when it is at
  least :data:`MEMORY_HEADLINE_SHARE` of A's peak.
- **Matrix work**: per rank and GPU, the floating-point work of the matrix operators (``flop``), the rate while
  their kernels ran (``achieved_tflops``, TFLOP/s) and the utilization of the GPU's dense peak over the window (a
  fraction; null for a GPU whose peak is unknown) (:mod:`di.engine.flops`, its whole-window rows);
  ``delta_utilization`` (B - A, a fraction: 0.01 is one percentage point) and ``rel_achieved`` (b/a - 1).
  :func:`flops_headline` names the largest utilization change when it is at least :data:`FLOPS_HEADLINE_POINTS`.
- **Training phases**: per rank and phase (data, forward, backward, optimizer, other), the host time, the part of it
  the rank's GPUs sat idle and its share of the rank's steps (:mod:`di.engine.phases`, its whole-window rows), with
  ``delta_host_ns`` and ``delta_gpu_idle_ns`` (B - A). A run that names no phase of a rank (no marker: its phases are
  unknown) has nulls on its side; one that names some has 0 for the others. :func:`phases_headline` names the
  largest host-time change when it is at least :data:`PHASES_HEADLINE_SHARE` of the rank's step time in A.
- **Overlap**: per rank and pair, the ratio and its parts (:mod:`di.engine.overlap`).
- **Critical path**: its length, and its composition by category and by name
  (``contrib_ns``, ``share``) (:mod:`di.engine.critical_path`).
- **Counters**: per counter series, matched by rank, timeline name, series name and unit (ids differ between
  runs), each run's samples, mean, max and last value over the window (:mod:`di.engine.counters`, cumulative
  counters as rates) and the change of the mean, ``delta_mean`` and ``rel_mean`` (over A's mean; null where that
  is 0 or missing), the largest relative change first.
- **Communicators**: those of the same shape (``nranks``, ``hosts``, ``max_ranks_per_host``) together (their keys
  differ between runs), each run's count of them, NCCL versions and transports inside and across nodes
  (:mod:`di.engine.communicators`, the distinct texts joined with `` | ``), ``changed`` where a run's versions or
  transports differ from the other's: a job whose traffic moved from InfiniBand to sockets shows here.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from di.engine import Analysis
from di.engine.gpu_idle import CAUSES
from di.engine.phases import PHASES, phase_order
from di.viewers.diff.sides import by_change, side_by_side

STEP_STATS = ("count", "mean_ns", "p50_ns", "p90_ns", "min_ns", "max_ns")
MEMORY_HEADLINE_SHARE = 0.05
"""A peak-memory change is a headline when its |delta| is at least this share of A's peak."""
FLOPS_HEADLINE_POINTS = 0.02
"""A utilization change is a headline when its |delta| is at least this (an absolute fraction: 2 percentage points
of the GPU's peak)."""
PHASES_HEADLINE_SHARE = 0.05
"""A phase's host-time change is a headline when its |delta_host_ns| is at least this share of the rank's step time
in A (``a_time_ns``): 5 percentage points of A's host_share, a twentieth of the step. The same bar as the report's
phase hints (:data:`di.viewers.report.phases.IDLE_HINT`, ``SLOW_PHASE_MIN``) and :data:`MEMORY_HEADLINE_SHARE`: a
phase growing by what the report would call a phase's excess is news here too. Measured against A's step rather than
as a change of host_share, so that a phase that shrinks together with the step still shows what it saved."""


def step_times(result: Analysis) -> pl.DataFrame:
    """step, label, start_ns, end_ns, time_ns: one row per step of the window."""
    s = result.steps
    if not s.height:
        return pl.DataFrame(
            schema={"step": pl.Int64, "label": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64, "time_ns": pl.Int64}
        )
    return (
        s.group_by("step")
        .agg(pl.col("label").first(), pl.col("start_ns").min(), pl.col("end_ns").max())
        .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("time_ns"))
        .sort("step")
    )


def step_stats(times: pl.DataFrame) -> dict[str, Any]:
    """count, mean_ns, p50_ns, p90_ns, min_ns, max_ns of :func:`step_times` (null times when there are no steps)."""
    t = times.get_column("time_ns")
    if not t.len():
        return {"count": 0, **{k: None for k in STEP_STATS[1:]}}

    def q(x: float) -> int:
        return int(t.quantile(x, "nearest"))  # type: ignore[arg-type]

    return {
        "count": t.len(),
        "mean_ns": round(t.mean()),
        "p50_ns": q(0.5),
        "p90_ns": q(0.9),  # type: ignore[arg-type]
        "min_ns": int(t.min()),
        "max_ns": int(t.max()),
    }  # type: ignore[arg-type]


def steps_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """stat, a, b, delta, ratio (b/a): one row per statistic of :func:`step_stats`."""
    sa, sb = step_stats(step_times(a)), step_stats(step_times(b))
    rows = [{"stat": k, "a": sa[k], "b": sb[k]} for k in STEP_STATS]
    df = pl.DataFrame(rows, schema={"stat": pl.String, "a": pl.Int64, "b": pl.Int64})
    return df.with_columns(
        (pl.col("b") - pl.col("a")).alias("delta"),
        pl.when(pl.col("a") > 0).then(pl.col("b") / pl.col("a")).alias("ratio"),
    )


def breakdown_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, scope, state; a/b time_ns, a/b share, delta_ns, delta_share (whole window)."""
    schema = {"rank": pl.Int32, "scope": pl.String, "state": pl.String, "time_ns": pl.Int64, "share": pl.Float64}
    out = side_by_side(
        _whole(a.breakdown, schema),
        _whole(b.breakdown, schema),
        ["rank", "scope", "state"],
        totals=["time_ns"],
        values=["share"],
        deltas=["time_ns", "share"],
    )
    return out.rename({"delta_time_ns": "delta_ns"}).sort("rank", "scope", "state")


def _whole(table: pl.DataFrame | None, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The whole window's rows (step null) of a result table, or an empty frame of ``schema`` when it was not computed."""
    if table is None:
        return pl.DataFrame(schema={**schema, "step": pl.Int64})
    return table.filter(pl.col("step").is_null())


def breakdown_totals(table: pl.DataFrame) -> pl.DataFrame:
    """Per state over all ranks and scopes of a kind (gpu, host): a_time_ns, b_time_ns, delta_ns."""
    kind = pl.when(pl.col("scope").str.starts_with("gpu")).then(pl.lit("gpu")).otherwise(pl.col("scope")).alias("kind")
    return by_change(
        table.group_by(kind, "state").agg(pl.col("a_time_ns", "b_time_ns", "delta_ns").sum()),
        "delta_ns",
        "kind",
        "state",
    )


def gpu_idle_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, scope, cause; a/b time_ns, a/b share (of the GPU's idle time), delta_ns, delta_share (whole window)."""
    schema = {"rank": pl.Int32, "scope": pl.String, "cause": pl.String, "time_ns": pl.Int64, "share": pl.Float64}
    out = side_by_side(
        _whole(a.gpu_idle, schema),
        _whole(b.gpu_idle, schema),
        ["rank", "scope", "cause"],
        totals=["time_ns"],
        values=["share"],
        deltas=["time_ns", "share"],
    )
    cause_order = pl.col("cause").replace_strict({c: i for i, c in enumerate(CAUSES)}, default=len(CAUSES))
    return out.rename({"delta_time_ns": "delta_ns"}).sort("rank", "scope", cause_order)


def gpu_idle_totals(table: pl.DataFrame) -> pl.DataFrame:
    """Per cause over all GPUs: a_time_ns, b_time_ns, delta_ns, largest change first."""
    return by_change(
        table.group_by("cause").agg(pl.col("a_time_ns", "b_time_ns", "delta_ns").sum()),
        "delta_ns",
        "cause",
    )


def memory_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, device; a/b peak_bytes, reserved_at_peak_bytes (bytes), growth_bytes_per_step (bytes per step, null under
    3 steps), op (the operator at the peak); delta_peak_bytes (bytes), rel_peak (b/a - 1): one row per rank and device
    of either run (whole window), a run without the device null on its side; by rank, GPUs before the CPU."""
    schema = {
        "rank": pl.Int32,
        "device": pl.String,
        "peak_bytes": pl.Int64,
        "reserved_at_peak_bytes": pl.Int64,
        "growth_bytes_per_step": pl.Float64,
        "op": pl.String,
    }
    out = side_by_side(
        _whole(a.memory, schema).select(*schema),
        _whole(b.memory, schema).select(*schema),
        ["rank", "device"],
        values=["peak_bytes", "reserved_at_peak_bytes", "growth_bytes_per_step", "op"],
        deltas=["peak_bytes"],
    )
    rel = pl.when(pl.col("a_peak_bytes") > 0).then(pl.col("b_peak_bytes") / pl.col("a_peak_bytes") - 1)
    return out.with_columns(rel.alias("rel_peak")).sort("rank", pl.col("device") == "cpu", "device")


def memory_headline(table: pl.DataFrame) -> dict[str, Any] | None:
    """The row of a :func:`memory_table` with the largest |delta_peak_bytes|, when that is at least
    :data:`MEMORY_HEADLINE_SHARE` of A's peak (bytes); else None."""
    big = table.filter(
        (pl.col("a_peak_bytes") > 0)
        & (pl.col("delta_peak_bytes").abs() >= MEMORY_HEADLINE_SHARE * pl.col("a_peak_bytes"))
    )
    if not big.height:
        return None
    return by_change(big, "delta_peak_bytes", "rank", "device").row(0, named=True)


def flops_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, device (the GPU's id); a/b device_name, peak_dtype (the dtype whose peak the utilization is of), flop
    (floating-point operations), gpu_ns (their kernels' time), achieved_tflops (TFLOP/s while their kernels ran),
    utilization (of the peak over the window, a fraction); delta_utilization (B - A), rel_achieved (b/a - 1, null
    where A's rate is 0 or missing): one row per rank and GPU of either run (whole window) whose work either run
    knows (a profile without shapes has none), a run without the GPU null on its side; by rank and GPU."""
    schema = {
        "rank": pl.Int32,
        "device": pl.Int32,
        "device_name": pl.String,
        "peak_dtype": pl.String,
        "flop": pl.Int64,
        "gpu_ns": pl.Int64,
        "achieved_tflops": pl.Float64,
        "utilization": pl.Float64,
    }
    out = side_by_side(
        _whole(a.flops, schema).select(*schema),
        _whole(b.flops, schema).select(*schema),
        ["rank", "device"],
        values=[c for c in schema if c not in ("rank", "device")],
        deltas=["utilization"],
    )
    rel = pl.when(pl.col("a_achieved_tflops") > 0).then(pl.col("b_achieved_tflops") / pl.col("a_achieved_tflops") - 1)
    known = pl.col("a_flop").is_not_null() | pl.col("b_flop").is_not_null()  # not a GPU whose shapes neither recorded
    return out.filter(known).with_columns(rel.alias("rel_achieved")).sort("rank", "device")


def flops_headline(table: pl.DataFrame) -> dict[str, Any] | None:
    """The row of a :func:`flops_table` with the largest |delta_utilization|, when that is at least
    :data:`FLOPS_HEADLINE_POINTS`; else None (also where no GPU has a known peak in both runs)."""
    big = table.filter(pl.col("delta_utilization").abs() >= FLOPS_HEADLINE_POINTS)
    if not big.height:
        return None
    return by_change(big, "delta_utilization", "rank", "device").row(0, named=True)


PHASE_COLUMNS = ("host_ns", "gpu_idle_ns", "host_share", "time_ns")
"""The columns of :func:`phases_table` per run."""


def phases_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, phase; a/b host_ns, gpu_idle_ns (null for a rank without GPU work), host_share (host_ns / time_ns),
    time_ns (the rank's steps summed, else its span); delta_host_ns, delta_gpu_idle_ns (B - A, null where either is);
    in_a/in_b (the run names the rank's phases): one row per rank and phase that either run has (whole window), a
    run without phases for the rank null on its side; by rank, the phases in :data:`di.engine.phases.PHASES` order."""
    out = side_by_side(
        _phase_side(a),
        _phase_side(b),
        ["rank", "phase"],
        values=[*PHASE_COLUMNS, "has"],
        deltas=["host_ns", "gpu_idle_ns"],
    )
    has = pl.col("a_has").fill_null(False) | pl.col("b_has").fill_null(False)
    sides = [f"{s}_{c}" for c in PHASE_COLUMNS[:2] for s in ("a", "b", "delta")]
    sides += [f"{s}_{c}" for c in PHASE_COLUMNS[2:] for s in "ab"]
    return out.filter(has).sort("rank", phase_order()).select("rank", "phase", *sides, "in_a", "in_b")


def _phase_side(result: Analysis) -> pl.DataFrame:
    """rank, phase, host_ns, gpu_idle_ns, host_share, time_ns, has: a run's whole-window phases, every phase of each
    rank it has phases for (a phase without a row: no host time in it, no idle; ``has`` false)."""
    schema = {
        "rank": pl.Int32,
        "phase": pl.String,
        "host_ns": pl.Int64,
        "gpu_ns": pl.Int64,
        "gpu_idle_ns": pl.Int64,
        "time_ns": pl.Int64,
        "host_share": pl.Float64,
    }
    whole = _whole(result.phases, schema).select(*schema)
    ranks = whole.group_by("rank").agg(pl.col("time_ns").first(), pl.col("gpu_ns").is_not_null().any().alias("gpu"))
    grid = ranks.join(pl.DataFrame({"phase": list(PHASES)}), how="cross")
    rows = whole.select("rank", "phase", "host_ns", "gpu_idle_ns", "host_share", pl.lit(True).alias("has"))
    return grid.join(rows, on=["rank", "phase"], how="left").select(
        "rank",
        "phase",
        pl.col("host_ns").fill_null(0),
        pl.when(pl.col("gpu")).then(pl.col("gpu_idle_ns").fill_null(0)).alias("gpu_idle_ns"),
        pl.when(pl.col("time_ns") > 0).then(pl.col("host_share").fill_null(0.0)).alias("host_share"),
        "time_ns",
        pl.col("has").fill_null(False),
    )


def phases_headline(table: pl.DataFrame) -> dict[str, Any] | None:
    """The row of a :func:`phases_table` with the largest |delta_host_ns|, when that is at least
    :data:`PHASES_HEADLINE_SHARE` of the rank's step time in A (``a_time_ns``); else None (also where a run has no
    phases for the rank). Ties: the lower rank, then the earlier phase."""
    big = table.filter(
        (pl.col("a_time_ns") > 0) & (pl.col("delta_host_ns").abs() >= PHASES_HEADLINE_SHARE * pl.col("a_time_ns"))
    )
    if not big.height:
        return None
    return big.sort(pl.col("delta_host_ns").abs(), "rank", phase_order(), descending=[True, False, False]).row(
        0, named=True
    )


def overlap_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, pair; a/b ratio, delta_ratio, a/b numerator_ns and denominator_ns (whole window)."""
    schema = {
        "rank": pl.Int32,
        "pair": pl.String,
        "ratio": pl.Float64,
        "numerator_ns": pl.Int64,
        "denominator_ns": pl.Int64,
    }

    return side_by_side(
        _whole(a.overlap, schema),
        _whole(b.overlap, schema),
        ["rank", "pair"],
        totals=["numerator_ns", "denominator_ns"],
        values=["ratio"],
        deltas=["ratio"],
    ).sort("rank", "pair")


def critical_path_tables(a: Analysis, b: Analysis) -> tuple[dict[str, int | None], pl.DataFrame, pl.DataFrame]:
    """(summary: a/b/delta length_ns, by category, by name); the tables have a/b contrib_ns and share and delta_ns, by |delta|."""

    def part(r: Analysis, key: str, col: str) -> pl.DataFrame:
        cp = r.critical_path
        if not cp or key not in cp:
            return pl.DataFrame(schema={col: pl.String, "contrib_ns": pl.Int64, "share": pl.Float64})
        return cp[key].select(pl.col(col).cast(pl.String), "contrib_ns", "share")

    def length(r: Analysis) -> int | None:
        return int(r.critical_path["summary"]["length_ns"]) if r.critical_path else None

    la, lb = length(a), length(b)
    summary = {"a_length_ns": la, "b_length_ns": lb, "delta_ns": None if la is None or lb is None else lb - la}
    tables = []
    for key, col in (("by_category", "category"), ("by_name", "name")):
        t = side_by_side(
            part(a, key, col), part(b, key, col), [col], totals=["contrib_ns"], values=["share"], deltas=["contrib_ns"]
        )
        tables.append(by_change(t.rename({"delta_contrib_ns": "delta_ns"}), "delta_ns", col))
    return summary, tables[0], tables[1]


COUNTER_KEY = ("rank", "location", "name", "unit")


def counters_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """rank, location, name, unit; a/b samples, mean, max, last; delta_mean, rel_mean (see the module docstring)."""
    from di.engine.counters import COLUMNS

    def side(r: Analysis) -> pl.DataFrame:
        c = r.counters if r.counters is not None else pl.DataFrame(schema=COLUMNS)
        return c.select(*COUNTER_KEY, "samples", "mean", "max", "last")

    t = side_by_side(
        side(a), side(b), list(COUNTER_KEY), totals=["samples"], values=["mean", "max", "last"], deltas=["mean"]
    )
    t = t.with_columns(
        pl.when(pl.col("a_mean") != 0).then(pl.col("delta_mean") / pl.col("a_mean").abs()).alias("rel_mean")
    )
    return t.sort(
        pl.col("rel_mean").abs(), *COUNTER_KEY, descending=[True, False, False, False, False], nulls_last=True
    )


COMM_SHAPE = ("nranks", "hosts", "max_ranks_per_host")


def communicators_table(a: Analysis, b: Analysis) -> pl.DataFrame:
    """nranks, hosts, max_ranks_per_host; a/b comms, version, intra_node, inter_node; changed (see the module
    docstring), the changed shapes first, then by nranks (largest first)."""
    from di.engine.communicators import COLUMNS

    def side(r: Analysis) -> pl.DataFrame:
        c = r.communicators if r.communicators is not None else pl.DataFrame(schema=COLUMNS)

        def joined(col: str) -> pl.Expr:
            return pl.col(col).drop_nulls().unique().sort().str.join(" | ")

        return c.group_by(*COMM_SHAPE).agg(
            pl.len().alias("comms"), joined("version"), joined("intra_node"), joined("inter_node")
        )

    t = side_by_side(
        side(a), side(b), list(COMM_SHAPE), totals=["comms"], values=["version", "intra_node", "inter_node"]
    )
    differ = pl.any_horizontal(
        pl.col(f"a_{c}").ne_missing(pl.col(f"b_{c}")) for c in ("version", "intra_node", "inter_node")
    )
    t = t.with_columns((differ & pl.col("in_a") & pl.col("in_b")).alias("changed"))
    return t.sort("changed", "nranks", "hosts", descending=[True, True, False], nulls_last=True)
