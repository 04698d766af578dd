"""Why the GPUs are idle: each GPU's idle time by cause, and the longest idle gaps.

Numbers are the engine's (:mod:`di.engine.gpu_idle`): the breakdown's GPU idle time, gap by gap, given to the host
launching late (after a device wait or not), the launch latency, short gaps between queued kernels, queued work that
did not run, or no recorded launch. The table lists the exact ns (``data-v``) that ``di analyze --json`` reports
under ``ranks[].gpu_idle`` (step null) and ``gpu_idle_gaps``.
"""

from __future__ import annotations

import polars as pl

from di.engine.gpu_idle import CAUSE_HELP, CAUSE_LABELS, CAUSES
from di.viewers.report.page import Section, ms, share_bars, table

COLORS = {
    "host": "#ef6c00",
    "host_sync": "#c62828",
    "launch": "#f9a825",
    "kernel_wait": "#6a1b9a",
    "queued": "#1565c0",
    "unknown": "#9e9e9e",
}
ADVICE = {
    "host": "the host issues work too slowly for this GPU: look at the operators in the longest gaps below (data "
    "loading, Python overhead, many small operators); larger batches, operator fusion or CUDA graphs help",
    "host_sync": "the host waits for the device and only then launches more work: remove synchronizations from the "
    "step (.item(), .cpu(), blocking copies, cudaDeviceSynchronize) or move them off the critical stream",
    "launch": "launch calls take long to reach the GPU: many small kernels or a busy launch queue; CUDA graphs cut it",
    "kernel_wait": "the gaps between back-to-back kernels add up: fewer, larger kernels (fusion, CUDA graphs)",
    "queued": "work was launched in time but did not run: it waited on an event of another stream, a copy from "
    "pageable memory or a peer; see the longest gaps for which work",
    "unknown": "the trace records no launch for the work after these gaps, so their cause is not known",
}


def panel(ctx) -> Section | None:  # noqa: ANN001
    idle = ctx.result.gpu_idle
    if idle is None or not idle.height:
        return None
    whole = idle.filter(pl.col("step").is_null())
    wide = whole.pivot(on="cause", index=["rank", "scope", "idle_ns", "span_ns"], values="time_ns").sort(
        "rank", "scope"
    )
    causes = [c for c in CAUSES if c in wide.columns and (wide.get_column(c).fill_null(0) > 0).any()]
    rows = [
        (r["rank"], r["scope"], ms(r["span_ns"]), ms(r["idle_ns"]), *(ms(r[c]) for c in causes))
        for r in wide.iter_rows(named=True)
    ]
    legend = "".join(f"<li><b>{CAUSE_LABELS[c]}</b>: {CAUSE_HELP[c]}</li>" for c in causes)
    body = (
        share_bars(
            wide,
            [(c, COLORS[c], CAUSE_LABELS[c]) for c in causes],
            "% of the GPU's span (idle time only)",
            "GPU idle time by cause",
        )
        + f'<ul class="note">{legend}</ul>'
        + table("gpu_idle", ["rank", "gpu", "span_ns", "idle_ns", *(f"{c}_ns" for c in causes)], rows)
    )
    gaps = ctx.result.gpu_idle_gaps
    if gaps is not None and gaps.height:
        span = ctx.window_span
        t0 = span[0] if span is not None else 0
        body += '<h3>Longest idle gaps</h3><p class="note">at: from the window start.</p>' + table(
            "gpu_idle_gaps",
            ["rank", "gpu", "at_ns", "dur_ns", "cause", "next work", "launch", "operator"],
            [
                (
                    r["rank"],
                    r["device"],
                    ms(r["start_ns"] - t0),
                    ms(r["dur_ns"]),
                    CAUSE_LABELS[r["cause"]],
                    r["next"] or "—",
                    r["launch"] or "—",
                    r["operator"] or "—",
                )
                for r in gaps.iter_rows(named=True)
            ],
        )
    return Section("gpu_idle", "Why the GPUs are idle", body, _hints(whole))


def _hints(whole: pl.DataFrame) -> list[str]:
    """The largest cause of the GPU that is idle most, when the GPU is idle over a tenth of its span."""
    if not whole.height:
        return []
    worst = whole.filter(pl.col("span_ns") > 0).sort(pl.col("idle_ns") / pl.col("span_ns"), descending=True)
    if not worst.height:
        return []
    first = worst.row(0, named=True)
    rank, scope, idle_ns, span_ns = first["rank"], first["scope"], first["idle_ns"], first["span_ns"]
    if idle_ns < 0.1 * span_ns:
        return []
    top = (
        worst.filter((pl.col("rank") == rank) & (pl.col("scope") == scope))
        .sort("time_ns", descending=True)
        .row(0, named=True)
    )
    return [
        f"GPU {scope} of rank {rank} is idle {100 * idle_ns / span_ns:.0f} % of its span, "
        f"{100 * (top['share'] or 0):.0f} % of it {CAUSE_LABELS[top['cause']]}: {ADVICE[top['cause']]}."
    ]
