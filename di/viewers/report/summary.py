"""Job summary: ranks, GPUs, duration, steps, events, sources, and the headline findings."""

from __future__ import annotations

import html

import polars as pl

from di.viewers.report.page import Section


def job_facts(trace, result, events=None) -> dict[str, int | str]:  # noqa: ANN001 (ReportContext parts)
    """The summary numbers: ranks, gpus (distinct rank, device pairs), duration_ns
    (first start to last end of ``events``: the window's, default all), steps (distinct
    step numbers in the window), events (in ``events``), hosts, sources."""
    ev = trace.events if events is None else events
    loc = trace.locations
    gpus = loc.filter(pl.col("device").is_not_null()).select("rank", "device").unique().height
    duration = int(ev.get_column("end_ns").max() - ev.get_column("start_ns").min()) if ev.height else 0
    steps = result.steps.get_column("step").n_unique() if result.steps.height else 0
    sources = ", ".join(
        sorted({str(s.get("format", "?")) if isinstance(s, dict) else str(s) for s in trace.meta.get("sources", [])})
    )
    hosts = loc.get_column("host").drop_nulls().n_unique()
    return {
        "ranks": len(trace.ranks),
        "gpus": gpus,
        "duration_ns": duration,
        "steps": steps,
        "events": ev.height,
        "hosts": hosts,
        "sources": sources or "—",
    }


def panel(ctx) -> Section:  # noqa: ANN001
    f = ctx.aggregates.job_facts if ctx.aggregates else job_facts(ctx.trace, ctx.result, ctx.window_events)
    rows = [
        ("ranks", f["ranks"], f["ranks"]),
        ("GPUs", f["gpus"], f["gpus"]),
        ("duration", f"{f['duration_ns'] / 1e9:,.3f} s", f["duration_ns"]),
        ("steps", f["steps"], f["steps"]),
        ("events", f"{f['events']:,}", f["events"]),
        ("hosts", f["hosts"] or "—", f["hosts"]),
        ("sources", f["sources"], ""),
    ]
    if ctx.result.window != "all":  # duration and events are the window's
        rows.insert(2, ("window", ctx.result.window, ""))
    body = (
        '<dl class="kv">'
        + "".join(
            f'<dt>{k}</dt><dd data-key="{k}" data-v="{html.escape(str(v))}">{html.escape(str(shown))}</dd>'
            for k, shown, v in rows
        )
        + "</dl>"
    )
    hints = []
    warnings = ctx.trace.meta.get("warnings", [])
    if warnings:
        body += "".join(f'<p class="note">warning: {html.escape(str(w))}</p>' for w in warnings[:10])
    if not f["steps"]:
        hints.append(
            "No training steps found: add ProfilerStep markers (torch.profiler schedule) or di.step() calls to get per-step views."
        )
    return Section("summary", "Job summary", body, hints)
