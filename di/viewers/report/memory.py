"""Device memory from the framework's allocator: each device's peak, what held the memory then, and allocated and
reserved memory over time.

Numbers are the engine's (:mod:`di.engine.memory`): sizes are shown in MiB (2**20 bytes), with the exact bytes in
``data-v`` as ``di analyze --json`` reports them under ``ranks[].memory`` (step null) and ``memory_holders``. The
charts (inline SVG, drawn here) take the engine's ``memory_timeline`` (at most 1,000 points a device, each bucket's
largest): x in ms from the window start, y in MiB (KiB or bytes on a device that never reaches 1 MiB).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import polars as pl

from di.engine.memory import PHASES
from di.viewers.report.page import Section, mib, num, pct, table
from di.viewers.terminal import holder_label

MIB = 2**20
CHART_MIN_BYTES = 2**20
"""Devices whose peak is smaller get no chart (a CPU allocator's few KiB beside a GPU's GiB)."""
CHARTS_SHOWN = 16
"""Charts drawn: the devices with the highest peak."""
GROWTH_SHARE = 0.01
"""A growth hint when a device grows from step to step (``growth_bytes_per_step`` over 0) and its peak holds this
share of it or more in allocations made outside the peak's step by traced operators (``earlier_bytes``): memory
that outlives its step, named by the operator that made the most of it."""
CACHED_SHARE = 0.2
"""A fragmentation hint when the allocator's cache at the peak is this share of its reserved memory or more."""
BEFORE_TRACE_SHARE = 0.5
"""A hint when memory allocated before the trace is this share of the peak or more."""
UNITS = ((MIB, "MiB"), (2**10, "KiB"), (1, "bytes"))
"""A chart's unit: the largest that its highest value reaches."""
COLORS = {"allocated": "#1565c0", "reserved": "#9e9e9e", "peak": "#c62828"}
WIDTH, HEIGHT = 900, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 22, 34


def panel(ctx) -> Section | None:  # noqa: ANN001
    mem = ctx.result.memory
    if mem is None or not mem.height:
        return None
    whole = mem.filter(pl.col("step").is_null()).sort("rank", "device")
    held = ctx.result.memory_holders
    held = held if held is not None else pl.DataFrame()
    body = _peaks(whole) + _charts(ctx, whole)
    if held.height:
        body += _held(held)
    return Section("memory", "Device memory (the framework's allocator)", body, _hints(whole, held))


def _peaks(whole: pl.DataFrame) -> str:
    """The table of each device's peak (the whole-window rows of the engine's memory table), with its note."""
    return (
        '<p class="note">peak: the most memory the allocator had handed out; reserved at peak: what it held from the '
        "driver then (the peak and its cache); max reserved: the most it held; start and end: allocated before the "
        "window's first allocator event and after its last; growth: per step, of the memory left at each step's "
        "end.</p>"
        + table(
            "memory",
            [
                "rank",
                "device",
                "peak (MiB)",
                "reserved at peak (MiB)",
                "max reserved (MiB)",
                "start (MiB)",
                "end (MiB)",
                "growth per step (MiB)",
                "step of the peak",
                "at the peak",
            ],
            [
                (
                    r["rank"],
                    r["device"],
                    mib(r["peak_bytes"]),
                    mib(r["reserved_at_peak_bytes"]),
                    mib(r["peak_reserved_bytes"]),
                    mib(r["start_bytes"]),
                    mib(r["end_bytes"]),
                    mib(r["growth_bytes_per_step"]),
                    num(r["peak_step"]),
                    holder_label({**r, "kind": "allocated"}),
                )
                for r in whole.iter_rows(named=True)
            ],
        )
    )


def _held(held: pl.DataFrame) -> str:
    """What held each device's memory at its peak: by phase, then by the operator that allocated it."""
    return (
        "<h3>Held at each device's peak</h3>"
        '<p class="note">the allocations alive at the peak, by the operator (and module) that made them and the '
        "phase of the step they were made in: forward (activations, the loss), backward (inside an autograd node: "
        "gradients), optimizer (inside an Optimizer region: its state); before the trace: weights and state made "
        "before the profiler started.</p>"
        + _phases(held)
        + table(
            "memory_holders",
            ["rank", "device", "held (MiB)", "share", "allocations", "phase", "allocated by"],
            [
                (
                    r["rank"],
                    r["device"],
                    mib(r["bytes"]),
                    pct(r["share"]),
                    num(r["allocations"]),
                    r["phase"] or "—",
                    holder_label(r),
                )
                for r in held.iter_rows(named=True)
            ],
        )
    )


def _phases(held: pl.DataFrame) -> str:
    """Each device's peak by phase (the holders' rows summed: every rest row keeps its phase)."""
    phase = pl.col("phase").fill_null("before_trace")
    wide = (
        held.group_by("rank", "device", phase)
        .agg(pl.col("bytes").sum())
        .pivot(on="phase", index=["rank", "device"], values="bytes")
        .sort("rank", "device")
    )
    cols = [c for c in ("before_trace", *PHASES) if c in wide.columns]
    return table(
        "memory_phases",
        ["rank", "device", *(f"{c.replace('_', ' ')} (MiB)" for c in cols)],
        [(r["rank"], r["device"], *(mib(r[c]) for c in cols)) for r in wide.iter_rows(named=True)],
    )


def _charts(ctx, whole: pl.DataFrame) -> str:  # noqa: ANN001
    """A chart per device of its allocated and reserved memory in the window (the engine's timeline)."""
    span, line = ctx.window_span, ctx.result.memory_timeline
    if span is None or line is None or not line.height:
        return ""
    t0, t1 = span
    drawn = whole.filter(pl.col("peak_bytes") >= CHART_MIN_BYTES)
    shown = drawn.sort("peak_bytes", descending=True).head(CHARTS_SHOWN).sort("rank", "device")
    if not shown.height:
        return ""
    points = line.join(shown.select("rank", "device"), on=["rank", "device"])
    charts = [
        _chart(r, points.filter((pl.col("rank") == r["rank"]) & (pl.col("device") == r["device"])), t0, t1)
        for r in shown.iter_rows(named=True)
    ]
    note = "" if shown.height == drawn.height else f", the {shown.height} devices with the highest peak"
    if drawn.height < whole.height:
        note += f"; {whole.height - drawn.height} whose peak is under 1 MiB (a host allocator's) not drawn"
    return f'<h3>Memory over time</h3><p class="note">ms from the window start{note}.</p>' + "".join(charts)


@dataclass(frozen=True)
class _Plot:
    """A chart's scales: x in ms from the window start up to ``x_hi``, y in the chart's unit up to ``y_hi``."""

    x_hi: float
    y_hi: float
    w: int = WIDTH - LEFT - RIGHT
    h: int = HEIGHT - TOP - BOTTOM

    def px(self, x: np.ndarray | float) -> np.ndarray | float:
        return LEFT + np.asarray(x) * (self.w / self.x_hi)

    def py(self, y: np.ndarray | float) -> np.ndarray | float:
        return TOP + self.h - np.asarray(y) * (self.h / self.y_hi)


def _chart(row: dict, points: pl.DataFrame, t0: int, t1: int) -> str:
    """One device's chart: allocated and reserved memory as step lines, the peak marked."""
    if not points.height:
        return ""
    x_ms = (points.get_column("ts_ns").to_numpy() - t0) / 1e6
    top_bytes = max(points.get_column("allocated").max(), points.get_column("reserved").max() or 0, row["peak_bytes"])
    scale, unit = next((s, u) for s, u in UNITS if top_bytes >= s or s == 1)
    alloc = points.get_column("allocated").to_numpy().astype(np.float64) / scale
    reserved = points.get_column("reserved").fill_null(0).to_numpy().astype(np.float64) / scale
    held_any = bool((reserved > 0).any())  # a CPU allocator reserves nothing: no line at 0
    plot = _Plot(x_hi=max((t1 - t0) / 1e6, 1e-9), y_hi=max(top_bytes / scale, 1e-9) * 1.05)
    rank, device = row["rank"], html.escape(row["device"])
    label = f"allocated and reserved memory of rank {rank} {row['device']} over time"
    return (
        f'<div class="plot" role="img" aria-label="{html.escape(label)}">'
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'font-size="10" font-family="system-ui,sans-serif">'
        + _title(plot, rank, device, unit, held_any)
        + "".join(_axes(plot))
        + (_line(plot, x_ms, reserved, "reserved", rank, device) if held_any else "")
        + _line(plot, x_ms, alloc, "allocated", rank, device)
        + _peak(plot, row, t0, t1, scale, unit)
        + f'<text x="{LEFT + plot.w}" y="{HEIGHT - 4}" text-anchor="end">ms</text></svg></div>'
    )


def _title(plot: _Plot, rank: int, device: str, unit: str, held_any: bool) -> str:
    """The chart's title (rank, device, unit) and its legend (reserved only where drawn)."""
    return (
        f'<text x="{LEFT}" y="14" font-weight="600">rank {rank} {device} ({unit})</text>'
        f'<text x="{LEFT + plot.w}" y="14" text-anchor="end"><tspan fill="{COLORS["allocated"]}">— allocated</tspan> '
        + (f'<tspan fill="{COLORS["reserved"]}">— reserved</tspan>' if held_any else "")
        + "</text>"
    )


def _axes(plot: _Plot) -> list[str]:
    """The axes, the y grid lines with their values and the x tick values."""
    w, h, px, py = plot.w, plot.h, plot.px, plot.py
    axes = [f'<line x1="{LEFT}" y1="{TOP + h}" x2="{LEFT + w}" y2="{TOP + h}" stroke="#888"/>']
    axes.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + h}" stroke="#888"/>')
    for y in _ticks(plot.y_hi):
        axes.append(
            f'<line x1="{LEFT - 4}" y1="{py(y):.1f}" x2="{LEFT + w}" y2="{py(y):.1f}" stroke="#e3e6eb"/>'
            f'<text x="{LEFT - 6}" y="{py(y) + 3:.1f}" text-anchor="end">{y:,.{_decimals(plot.y_hi)}f}</text>'
        )
    for x in _ticks(plot.x_hi):
        axes.append(
            f'<text x="{px(x):.1f}" y="{TOP + h + 14}" text-anchor="middle">{x:,.{_decimals(plot.x_hi)}f}</text>'
        )
    return axes


def _line(plot: _Plot, x_ms: np.ndarray, y: np.ndarray, series: str, rank: int, device: str) -> str:
    """One series as a step line: each value held until the next point."""
    xs, ys = plot.px(np.repeat(x_ms, 2)[1:]), plot.py(np.repeat(y, 2)[:-1])
    coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs.tolist(), ys.tolist()))
    return (
        f'<polyline data-rank="{rank}" data-device="{device}" data-series="{series}" fill="none" '
        f'stroke="{COLORS[series]}" stroke-width="1.3" points="{coords}"/>'
    )


def _peak(plot: _Plot, row: dict, t0: int, t1: int, scale: int, unit: str) -> str:
    """The peak's mark and label, where the peak lies in the window."""
    if row["peak_ns"] is None or not t0 <= row["peak_ns"] <= t1:
        return ""
    x, y = (row["peak_ns"] - t0) / 1e6, row["peak_bytes"] / scale
    anchor = "end" if x > 0.7 * plot.x_hi else "start"
    dx = -6 if anchor == "end" else 6
    px, py = plot.px(x), plot.py(y)
    return (
        f'<circle data-peak="{row["peak_bytes"]}" cx="{px:.1f}" cy="{py:.1f}" r="3.5" '
        f'fill="{COLORS["peak"]}"/><text x="{px + dx:.1f}" y="{py - 5:.1f}" text-anchor="{anchor}" '
        f'fill="{COLORS["peak"]}">peak {y:,.1f} {unit} at {x:,.3f} ms</text>'
    )


def _ticks(hi: float, n: int = 5) -> list[float]:
    """Round tick values from 0 to ``hi``, about ``n`` of them."""
    raw = hi / n
    base = 10 ** np.floor(np.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    return [float(v) for v in np.arange(0, hi + step * 1e-9, step)]


def _decimals(hi: float) -> int:
    return int(max(0, -np.floor(np.log10(hi / 5)))) if hi > 0 else 0


def _hints(whole: pl.DataFrame, held: pl.DataFrame) -> list[str]:
    """The device whose memory grows most, whose allocator caches most, and whose peak is most memory allocated
    before the trace, each past its threshold."""
    out = []
    kept = (
        held.filter(pl.col("kind") == "allocated")
        .sort("earlier_bytes", descending=True)
        .unique(["rank", "device"], keep="first")
        .select("rank", "device", pl.col("op").alias("held_op"), pl.col("module").alias("held_module"), "earlier_bytes")
        if held.height
        else pl.DataFrame(schema={"rank": pl.Int32, "device": pl.String, "earlier_bytes": pl.Int64})
    )
    growth = whole.join(kept, on=["rank", "device"]).filter(
        (pl.col("growth_bytes_per_step") > 0) & (pl.col("earlier_bytes") >= GROWTH_SHARE * pl.col("peak_bytes"))
    )
    if growth.height:
        r = growth.sort(pl.col("growth_bytes_per_step") / pl.col("peak_bytes"), descending=True).row(0, named=True)
        out.append(
            f"Memory on {_where(r)} grows {r['growth_bytes_per_step'] / MIB:,.1f} MiB per step; at the peak "
            f"{r['earlier_bytes'] / MIB:,.1f} MiB made by {holder_label({'op': r['held_op'], 'module': r['held_module'], 'kind': 'allocated'})} in earlier steps was still alive: memory "
            f"kept across steps (losses kept with their graph, a growing cache) runs out in a long run"
            f"{_more(growth)}."
        )
    cached = whole.with_columns((pl.col("reserved_at_peak_bytes") - pl.col("peak_bytes")).alias("cached")).filter(
        (pl.col("reserved_at_peak_bytes") > 0) & (pl.col("cached") >= CACHED_SHARE * pl.col("reserved_at_peak_bytes"))
    )
    if cached.height:
        r = cached.sort(pl.col("cached") / pl.col("reserved_at_peak_bytes"), descending=True).row(0, named=True)
        out.append(
            f"At its peak the allocator on {_where(r)} caches {r['cached'] / MIB:,.1f} MiB, free but held "
            f"({100 * r['cached'] / r['reserved_at_peak_bytes']:.0f} % of the {r['reserved_at_peak_bytes'] / MIB:,.1f}"
            f" MiB it reserves): fragmentation; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets it reuse "
            f"them{_more(cached)}."
        )
    if held.height:
        before = held.filter((pl.col("kind") == "before_trace") & (pl.col("share") >= BEFORE_TRACE_SHARE))
        if before.height:
            r = before.sort("share", descending=True).row(0, named=True)
            out.append(
                f"{100 * r['share']:.0f} % of the peak on {_where(r)} was allocated before the trace began (weights, "
                f"optimizer state): sharding them (FSDP, ZeRO) or keeping them in lower precision shrinks "
                f"it{_more(before)}."
            )
    return out


def _where(row: dict) -> str:
    return f"{row['device']} of rank {row['rank']}"


def _more(rows: pl.DataFrame) -> str:
    n = rows.height - 1
    return "" if n < 1 else f" (and {n} more device{'s' if n > 1 else ''})"
