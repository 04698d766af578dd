"""``di report``: one self-contained HTML page with the analysis of a trace.

The page holds aggregates only (per rank, step, name, file or time bin), never
the events, so it stays small for large traces. Each panel is a function

    panel(ctx: ReportContext) -> Section | None

(None: nothing to show for this trace) in a module of this package; plugins add
panels of the same shape through the ``di.report_panels`` entry-point group
(see :mod:`di.plugins`). A panel that raises is reported on the page and
skipped; the other panels still render.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from di.viewers.report.page import GENERATOR, Cell, Section, ms, new_figure, num, pct, render_page, svg_plot, table

if TYPE_CHECKING:
    import polars as pl

    from di.engine import Analysis
    from di.trace import Trace

__all__ = [
    "Aggregates",
    "ReportContext",
    "Section",
    "Cell",
    "Panel",
    "build_report",
    "write_report",
    "builtin_panels",
    "ms",
    "pct",
    "num",
    "table",
    "new_figure",
    "svg_plot",
]


@dataclass(frozen=True)
class Aggregates:
    """What the built-in panels compute from the events, samples and waits of the whole job, made elsewhere
    (:mod:`di.parallel.report`: each process over its ranks, then reduced exactly); each field equals what
    the panel computes from the whole trace.

    Attributes:
        job_facts: :func:`di.viewers.report.summary.job_facts`.
        window_span: :attr:`ReportContext.window_span`.
        top_names: per group key of :data:`di.viewers.report.top_events.GROUPS`, its
            :func:`~di.viewers.report.top_events.top_names` (groups without events left out).
        transport_hint: :func:`di.viewers.report.top_events.slowest_collective_transport`.
        io_per_file: :func:`di.viewers.report.files.io_per_file`.
        counters: (info, bins) of :func:`di.viewers.report.counters.counter_tables`; None: no samples to show.
        waits: (number of waits, totals, matrix, hints) as :mod:`di.viewers.report.waits` computes them from
            the wait rows (:func:`~di.viewers.report.waits.wait_totals`, ``wait_matrix``, ``_hints``); None: no
            wait states computed.
    """

    job_facts: dict[str, int | str]
    window_span: tuple[int, int] | None
    top_names: dict[str, pl.DataFrame]
    transport_hint: str | None
    io_per_file: pl.DataFrame
    counters: tuple[pl.DataFrame, pl.DataFrame] | None
    waits: tuple[int, pl.DataFrame, pl.DataFrame, list[str]] | None


@dataclass(frozen=True)
class ReportContext:
    """What a panel reads: the canonical trace and the engine's result (run with ``per_step=True``).

    Every panel shows the window the result was computed over (``--window``):
    engine tables are already windowed; panels that read events or samples
    take :attr:`window_events` and :attr:`window_span`.

    Attributes:
        trace: the loaded trace, without analysis tracks (read it, never modify it).
        result: :class:`di.engine.Analysis` over ``result.window``.
        inputs: the paths the trace was loaded from, as given.
        aggregates: what the panels would compute from the trace's events, samples and waits, computed
            elsewhere (by the processes of ``mpiexec -n P di report``, :mod:`di.parallel.report`); then
            ``trace`` may hold only the whole tables (locations, series, io_files ...) and meta.
    """

    trace: Trace
    result: Analysis
    inputs: tuple[str, ...]
    aggregates: Aggregates | None = None

    @cached_property
    def window_events(self) -> pl.DataFrame:
        """The events inside ``result.window``, as the analyses selected them (times clipped to a
        time window; column ``row``: position in ``trace.events``). Panels that read events use these."""
        from di.engine.window import window_events

        return window_events(self.trace, self.result.window)

    @cached_property
    def window_span(self) -> tuple[int, int] | None:
        """[start, end] in ns of the window: its time range (an open end: the trace's), or from the first
        selected step's start to the last one's end; None when the window holds nothing."""
        if self.aggregates is not None:
            return self.aggregates.window_span
        ev = self.window_events
        if not ev.height:
            return None
        return span_of(
            int(ev.get_column("start_ns").min()), int(ev.get_column("end_ns").max()), self.result, self.trace
        )


def span_of(lo: int, hi: int, result: Analysis, trace: Trace) -> tuple[int, int]:
    """:attr:`ReportContext.window_span` of a window whose events start at ``lo`` at the earliest and end at
    ``hi`` at the latest (ns)."""
    from di.engine.window import parse_window

    win = parse_window(None if result.window == "all" else result.window)
    if win.steps is not None and result.steps.height:
        return int(result.steps.get_column("start_ns").min()), int(result.steps.get_column("end_ns").max())
    base = int(trace.meta.get("time_range", {}).get("start_ns") or lo)
    return (lo if win.t0_ns is None else base + win.t0_ns), (hi if win.t1_ns is None else base + win.t1_ns)


Panel = Callable[[ReportContext], "Section | None"]


def builtin_panels() -> list[tuple[str, Panel]]:
    """The built-in panels in page order, as (name, function)."""
    from di.viewers.report import (
        breakdown,
        comm_bandwidth,
        communicators,
        counters,
        critical_path,
        files,
        flops,
        gpu_clocks,
        gpu_idle,
        imbalance,
        io_stats,
        memory,
        overlap,
        phases,
        step_times,
        summary,
        top_events,
        waits,
    )

    return [
        ("summary", summary.panel),
        ("step_times", step_times.panel),
        ("breakdown", breakdown.panel),
        ("phases", phases.panel),
        ("gpu_idle", gpu_idle.panel),
        ("memory", memory.panel),
        ("flops", flops.panel),
        ("overlap", overlap.panel),
        ("imbalance", imbalance.panel),
        ("top_events", top_events.panel),
        ("comm_bandwidth", comm_bandwidth.panel),
        ("gpu_clocks", gpu_clocks.panel),
        ("critical_path", critical_path.panel),
        ("wait_states", waits.panel),
        ("io", files.panel),
        ("io_stats", io_stats.panel),
        ("communicators", communicators.panel),
        ("counters", counters.panel),
    ]


def build_report(
    trace: Trace,
    result: Analysis,
    *,
    inputs: Sequence[str] = (),
    plugins: bool = True,
    extra_panels: Sequence[tuple[str, Panel]] = (),
    aggregates: Aggregates | None = None,
    rendered: dict[str, Section | str | None] | None = None,
) -> tuple[str, list[str]]:
    """The HTML page and a list of problems (panels or plugins that failed, each one line).

    Args:
        trace, result: the trace and :func:`di.analyze` of it (``per_step=True`` for the heat map).
        inputs: shown in the header.
        plugins: also run the panels of installed ``di.report_panels`` plugins.
        extra_panels: more (name, panel) pairs, after the plugins'.
        aggregates: the built-in panels' aggregates made elsewhere (:class:`Aggregates`).
        rendered: panels already rendered elsewhere, by name (:func:`render_panel` of the same context).
    """
    from di.analysis_parts import without_analysis

    ctx = ReportContext(trace=without_analysis(trace), result=result, inputs=tuple(inputs), aggregates=aggregates)
    panels = builtin_panels()
    problems: list[str] = []
    if plugins:
        from di.plugins import load_group

        loaded = load_group("di.report_panels")
        panels += [(p.name, p.obj) for p in loaded.ok]
        problems += [f"plugin {p.name} ({p.value}) skipped: {p.error}" for p in loaded.failed]
    panels += list(extra_panels)
    sections: list[Section] = []
    for name, panel in panels:
        section = rendered[name] if rendered is not None and name in rendered else render_panel(ctx, name, panel)
        if isinstance(section, str):
            problems.append(section)
        elif section is not None:
            sections.append(section)
    if problems:
        from html import escape

        body = "".join(f'<p class="error">{escape(p)}</p>' for p in problems)
        sections.append(Section("problems", "Panels not shown", body))
    src = ", ".join(inputs) or "trace"
    subtitle = f"{src} · window {result.window} · di report {time.strftime('%Y-%m-%d %H:%M')}"
    return render_page(f"di report: {src}", subtitle, sections), problems


def render_panel(ctx: ReportContext, name: str, panel: Panel) -> Section | str | None:
    """``panel(ctx)``, or the line saying that it failed."""
    try:
        return panel(ctx)
    except Exception as exc:  # a plugin's bug must not take the report down
        return f"panel {name} failed: {type(exc).__name__}: {exc}"


def write_report(trace: Trace, result: Analysis, path: str | Path, **kw: Any) -> list[str]:
    """Write :func:`build_report`'s page to ``path``; returns its problems."""
    from di.output import atomic_write

    page, problems = build_report(trace, result, **kw)
    with atomic_write(path) as fh:
        fh.write(page.encode("utf-8"))
    return problems


def is_own_report(path: Path) -> bool:
    """True when ``path`` is an HTML report di wrote (its head names di as the generator)."""
    from di.output import file_starts_with

    return file_starts_with(GENERATOR.encode())(path)
