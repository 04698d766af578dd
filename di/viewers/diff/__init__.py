"""``di diff A B``: what changed from run A to run B.

:func:`diff` runs :func:`di.analyze` on both traces over the same window and
reads their events tables; every table of the :class:`Diff` puts A's rows
beside B's (:mod:`di.viewers.diff.sides`: ``a_X``, ``b_X``, ``delta_X = b_X - a_X``),
times in int64 ns. Definitions live in the modules:

- :mod:`di.viewers.diff.results`: step time, breakdown, training phases, GPU idle, device memory, matrix work,
  overlap, critical path, counters, communicators;
- :mod:`di.viewers.diff.names`: kernels and operators by name, kernels by launch stack;
- :mod:`di.viewers.diff.collectives`: collectives by op and size, algbw and busbw.

Kernels are matched by name; a kernel name found in one run only is also
paired with a name found in the other run only that was launched from the
same CPU call stack (TraceLens matches kernels under their op the same way),
so that a renamed or re-tiled kernel shows as a change, not as one kernel
removed and another added (``match == "op"``). ``kernel_stacks`` compares the
launch stacks themselves.

The outputs of a :class:`Diff`: :mod:`di.viewers.diff.document` (JSON,
``schemas/diff/v1``), :mod:`di.viewers.diff.terminal` (rich summary),
:mod:`di.viewers.diff.page` (HTML).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from di.viewers.diff.sides import by_change, side_by_side, with_status

if TYPE_CHECKING:
    from di.engine.window import Window
    from di.trace import Trace

__all__ = ["Diff", "diff"]


@dataclass(frozen=True)
class Diff:
    """A and B side by side; every frame's times are int64 ns, sorted by |delta| where a delta is the point.

    Attributes:
        steps: stat (count, mean_ns, p50_ns, p90_ns, min_ns, max_ns), a, b, delta, ratio.
        step_times: run ("a"/"b"), step, label, start_ns, end_ns, time_ns.
        breakdown: rank, scope, state, a/b time_ns and share, delta_ns, delta_share.
        phases: rank, phase (data, forward, backward, optimizer, other), a/b host_ns, gpu_idle_ns, host_share (of
            the rank's steps), time_ns (the rank's steps summed), delta_host_ns, delta_gpu_idle_ns
            (:func:`di.viewers.diff.results.phases_table`).
        gpu_idle: rank, scope (gpuN), cause, a/b time_ns and share (of the GPU's idle time), delta_ns, delta_share.
        memory: rank, device, a/b peak_bytes, reserved_at_peak_bytes (bytes), growth_bytes_per_step (bytes per
            step), op (at the peak), delta_peak_bytes, rel_peak (b/a - 1) (:func:`di.viewers.diff.results.memory_table`).
        flops: rank, device (GPU id), a/b device_name, peak_dtype, flop, gpu_ns, achieved_tflops (TFLOP/s),
            utilization (fraction of the peak), delta_utilization, rel_achieved (b/a - 1)
            (:func:`di.viewers.diff.results.flops_table`).
        overlap: rank, pair, a/b ratio, numerator_ns, denominator_ns, delta_ratio.
        critical_path: a_length_ns, b_length_ns, delta_ns.
        cp_by_category, cp_by_name: a/b contrib_ns and share, delta_ns.
        kernels: name, cat, status, a/b count, total_ns, mean_ns, delta_ns, match ("name", "op" or null),
            matched_name (the partner of a kernel paired by its launch stack), match_stack.
        kernel_stacks: stack, op, status, a/b count, total_ns, mean_ns, names, delta_ns.
        ops: name, cat, status, a/b count, total_ns, mean_ns, delta_ns.
        collectives: op, bytes, a/b parts, calls, ranks, total_ns, mean_ns, algbw_gbps, busbw_gbps, delta_ns, busbw_factor.
        counters: rank, location, name, unit, a/b samples, mean, max, last, delta_mean, rel_mean
            (:func:`di.viewers.diff.results.counters_table`).
        communicators: nranks, hosts, max_ranks_per_host, a/b comms, version, intra_node, inter_node, changed
            (:func:`di.viewers.diff.results.communicators_table`).
        window: the window text; notes: what the reader must know to read the numbers right.
    """

    steps: pl.DataFrame
    step_times: pl.DataFrame
    breakdown: pl.DataFrame
    phases: pl.DataFrame
    gpu_idle: pl.DataFrame
    memory: pl.DataFrame
    flops: pl.DataFrame
    overlap: pl.DataFrame
    critical_path: dict[str, int | None]
    cp_by_category: pl.DataFrame
    cp_by_name: pl.DataFrame
    kernels: pl.DataFrame
    kernel_stacks: pl.DataFrame
    ops: pl.DataFrame
    collectives: pl.DataFrame
    counters: pl.DataFrame
    communicators: pl.DataFrame
    window: str = "all"
    notes: list[str] = field(default_factory=list)

    def step_stat(self, side: str, stat: str) -> Any:
        """One number of :attr:`steps`: ``side`` "a", "b" or "delta", ``stat`` e.g. "mean_ns"."""
        return self.steps.filter(pl.col("stat") == stat).get_column(side).item()


def diff(a: Trace, b: Trace, *, window: Window | str | None = None) -> Diff:
    """Compare two traces over the same window.

    Args:
        a, b: the runs (the "before" and the "after"); analysis tracks di added are left out.
        window: as for :func:`di.analyze` (``steps=1:``, ``time=0:2s``), applied to each run.

    Raises:
        ValueError: a malformed window.
    """
    from di.analysis_parts import without_analysis
    from di.engine import analyze
    from di.engine.window import Window, parse_window, window_events
    from di.viewers.diff import collectives, names, results

    win = window if isinstance(window, Window) else parse_window(window)
    runs = [without_analysis(t) for t in (a, b)]
    res = [analyze(t, window=win) for t in runs]
    evs = [window_events(t, win) for t in runs]
    kev = [names.kernel_events(t, e) for t, e in zip(runs, evs)]
    ops = [names.op_events(t, e) for t, e in zip(runs, evs)]
    times = pl.concat([results.step_times(r).with_columns(pl.lit(s).alias("run")) for s, r in zip("ab", res)]).select(
        "run", pl.exclude("run")
    )
    summary, cp_cat, cp_name = results.critical_path_tables(*res)
    kernels = _named(*(names.by_name(k) for k in kev))
    kernels = _pair_by_stack(kernels, *(names.name_stacks(k) for k in kev))
    stacks = _named(*(names.by_stack(k) for k in kev), key="stack", extra=("op", "names"))
    coll = side_by_side(
        *(collectives.collective_groups(t, e) for t, e in zip(runs, evs)),
        ["op", "bytes"],
        totals=["parts", "calls", "total_ns"],
        values=["ranks", "mean_ns", "algbw_gbps", "busbw_gbps", "busbw_factor"],
        deltas=["total_ns", "mean_ns", "algbw_gbps", "busbw_gbps"],
    )
    coll = by_change(
        with_status(coll.rename({"delta_total_ns": "delta_ns"}))
        .with_columns(pl.coalesce("a_busbw_factor", "b_busbw_factor").alias("busbw_factor"))
        .drop("a_busbw_factor", "b_busbw_factor"),
        "delta_ns",
        "op",
    )
    return Diff(
        steps=results.steps_table(*res),
        step_times=times,
        breakdown=results.breakdown_table(*res),
        phases=results.phases_table(*res),
        gpu_idle=results.gpu_idle_table(*res),
        memory=results.memory_table(*res),
        flops=results.flops_table(*res),
        overlap=results.overlap_table(*res),
        critical_path=summary,
        cp_by_category=cp_cat,
        cp_by_name=cp_name,
        kernels=kernels,
        kernel_stacks=stacks,
        ops=_named(*(names.by_name(o) for o in ops)),
        collectives=coll,
        counters=results.counters_table(*res),
        communicators=results.communicators_table(*res),
        window=win.text,
        notes=_notes(res, kev),
    )


def _named(a: pl.DataFrame, b: pl.DataFrame, *, key: str = "name", extra: tuple[str, ...] = ("cat",)) -> pl.DataFrame:
    """A :func:`side_by_side` of named aggregates (count, total_ns, mean_ns), ``extra`` columns taken from B, else A."""
    t = side_by_side(
        a, b, [key], totals=["count", "total_ns"], values=["mean_ns", *extra], deltas=["count", "total_ns", "mean_ns"]
    )
    t = t.with_columns(pl.coalesce(f"b_{c}", f"a_{c}").alias(c) for c in extra).drop(
        *(f"{s}_{c}" for c in extra for s in "ab")
    )
    t = with_status(t.rename({"delta_total_ns": "delta_ns"}))
    return by_change(t.select(key, *extra, "status", pl.exclude(key, *extra, "status")), "delta_ns", key)


def _pair_by_stack(kernels: pl.DataFrame, a_stacks: pl.DataFrame, b_stacks: pl.DataFrame) -> pl.DataFrame:
    """Add match, matched_name, match_stack: a name only in A paired one-to-one with a name only in B
    launched from the same stack (the pairs sharing the most time first)."""
    only_a = kernels.filter(pl.col("status") == "removed").select("name")
    only_b = kernels.filter(pl.col("status") == "added").select("name")
    left = a_stacks.join(only_a, on="name").rename({"name": "a_name", "total_ns": "a_ns"})
    right = b_stacks.join(only_b, on="name").rename({"name": "b_name", "total_ns": "b_ns"})
    pairs = left.join(right, on="stack").sort(
        pl.min_horizontal("a_ns", "b_ns"), "a_name", "b_name", descending=[True, False, False]
    )
    chosen: list[tuple[str, str, str]] = []
    used_a: set[str] = set()
    used_b: set[str] = set()
    for a_name, b_name, stack in pairs.select(
        "a_name", "b_name", "stack"
    ).iter_rows():  # only names without a partner by name: few
        if a_name not in used_a and b_name not in used_b:
            used_a.add(a_name)
            used_b.add(b_name)
            chosen.append((a_name, b_name, stack))
    link = pl.DataFrame(
        chosen + [(b, a, s) for a, b, s in chosen],
        schema={"name": pl.String, "matched_name": pl.String, "match_stack": pl.String},
        orient="row",
    )
    out = kernels.join(link, on="name", how="left", maintain_order="left")
    return out.with_columns(
        pl.when(pl.col("in_a") & pl.col("in_b"))
        .then(pl.lit("name"))
        .when(pl.col("matched_name").is_not_null())
        .then(pl.lit("op"))
        .alias("match")
    )


def _notes(res: list[Any], kernels: list[pl.DataFrame]) -> list[str]:
    from di.viewers.diff.names import NO_LAUNCH

    notes = []
    na, nb = (r.steps.get_column("step").n_unique() if r.steps.height else 0 for r in res)
    if na != nb:
        notes.append(
            f"A has {na} steps in the window and B {nb}: totals (count, total time) cover different numbers of steps; "
            "compare the means, or choose the same steps with --window steps=..."
        )
    for side, k in zip("AB", kernels):
        if k.height and (k.get_column("stack") == NO_LAUNCH).all():
            notes.append(f"{side} records no kernel launches (no launch flows): its kernels are matched by name only")
    return notes
