"""Training phases: per rank, the time spent loading data, in the forward and backward passes, in the optimizer and
elsewhere, on the host and on the GPUs, and how long the GPUs sat idle in each.

Numbers are the engine's (:mod:`di.engine.phases`, where the terms are defined): times in ms with the exact ns in
``data-v``, shares of the rank's steps in %, as ``di analyze --json`` reports them under ``ranks[].phases``.
"""

from __future__ import annotations

import polars as pl

from di.viewers.report.page import Section, ms, num, pct, table

IDLE_HINT = 0.05
"""A hint when a rank's GPUs sit idle in one phase for at least this share of its steps."""
SLOW_PHASE = 1.5
"""A hint when a rank spends this many times the ranks' median share in one phase ..."""
SLOW_PHASE_MIN = 0.05
"""... and at least this share of its steps more than the median."""
HINTS_SHOWN = 4
ADVICE = {
    "data": "more DataLoader workers (num_workers), pin_memory=True, prefetching, or data on faster storage let the "
    "next batch be ready when the step needs it",
    "forward": "the host launches the forward's kernels more slowly than the GPU runs them: CUDA graphs or "
    "torch.compile launch them in fewer calls",
    "backward": "the backward's kernels wait for the host (or for gradients' communication): CUDA graphs, "
    "torch.compile, or larger all-reduce buckets",
    "optimizer": "a fused or foreach optimizer (torch.optim.AdamW(fused=True)) updates every parameter in a few "
    "kernels instead of several per tensor",
    "other": "look at what runs after the last backward and outside the phases (synchronizations, .item(), logging, "
    "checkpoints) in the timeline",
}
"""What to try when the GPUs sit idle in each phase."""


def panel(ctx) -> Section | None:  # noqa: ANN001
    ph = ctx.result.phases
    if ph is None or not ph.height:
        return None
    whole = ph.filter(pl.col("step").is_null())
    body = (
        "<p class=\"note\">host: the union over the rank's threads of the phase's regions and work (PyTorch's "
        "DataLoader, autograd and optimizer regions, users' forward/backward/optimizer ranges; unmarked work in a "
        "step before its last backward is the forward); GPU: the work launched in the phase; GPU idle: the part of "
        "the host time with the rank's GPUs running nothing; % of the rank's steps.</p>"
        + table(
            "phases",
            [
                "rank",
                "phase",
                "host (ms)",
                "host (%)",
                "GPU (ms)",
                "GPU (%)",
                "GPU idle (ms)",
                "GPU idle (%)",
                "kernels",
            ],
            [
                (
                    num(r["rank"]),
                    r["phase"],
                    ms(r["host_ns"]),
                    pct(r["host_share"]),
                    ms(r["gpu_ns"]),
                    pct(r["gpu_share"]),
                    ms(r["gpu_idle_ns"]),
                    pct(_idle_share(r)),
                    num(r["kernels"]),
                )
                for r in whole.iter_rows(named=True)
            ],
        )
    )
    return Section("phases", "Training phases", body, hints=_hints(whole))


def _idle_share(r: dict) -> float | None:
    return r["gpu_idle_ns"] / r["time_ns"] if r["gpu_idle_ns"] is not None and r["time_ns"] else None


def _hints(whole: pl.DataFrame) -> list[str]:
    out = []
    shares = whole.with_columns(
        (pl.col("gpu_idle_ns") / pl.col("time_ns")).alias("idle"),
        pl.col("host_share").median().over("phase").alias("median"),
        pl.len().over("phase").alias("ranks"),
    )
    idle = shares.filter(pl.col("idle") >= IDLE_HINT).sort("idle", "rank", descending=[True, False])
    for r in idle.unique("phase", keep="first", maintain_order=True).iter_rows(named=True):
        out.append(
            f"Rank {r['rank']}'s GPUs sat idle {r['gpu_idle_ns'] / 1e6:,.3f} ms ({100 * r['idle']:.1f}% of its steps) "
            f"in its {r['phase']} phase: {ADVICE[r['phase']]}."
        )
    slow = shares.filter(
        (pl.col("ranks") > 2)
        & (pl.col("host_share") >= SLOW_PHASE * pl.col("median"))
        & (pl.col("host_share") - pl.col("median") >= SLOW_PHASE_MIN)
    ).sort(pl.col("host_share") - pl.col("median"), descending=True)
    for r in slow.head(HINTS_SHOWN).iter_rows(named=True):
        out.append(
            f"Rank {r['rank']} spends {100 * r['host_share']:.1f}% of its steps in its {r['phase']} phase against a "
            f"median of {100 * r['median']:.1f}% over the ranks: its extra time is there, in work or in waiting (the "
            "wait states say which)."
        )
    return out[:HINTS_SHOWN]
