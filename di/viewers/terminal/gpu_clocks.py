"""The GPU-clock sections: the clock, power and temperature during the longest kernels and the slowest steps."""

from __future__ import annotations

from typing import Any

from di.engine import Analysis
from di.viewers.terminal.tables import ms_text, pct_text, print_table, short_name


def render_clocks(result: Analysis, console: Any, top: int = 10) -> None:
    """The longest kernels' GPU clock, power and temperature (where the trace has such series)."""
    from rich.table import Table

    clocks = result.gpu_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return
    t = Table(title="GPU clocks during the longest kernels (mean over their time; * = under 95 % of the GPU's highest)")
    for c in ("rank", "gpu", "kernel", "total ms", "SM MHz", "max MHz", "under ms", "W", "C"):
        t.add_column(c, justify="left" if c == "kernel" else "right")
    for r in clocks.drop_nulls("sm_clock_mhz").head(top).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            str(r["device"]),
            short_name(r["name"]),
            ms_text(r["total_ns"]),
            *_clock_cells(r),
        )
    print_table(console, t)


def _clock_cells(r: dict) -> tuple[str, ...]:
    """SM MHz (``*``: throttled), max MHz, ms under 95 % of it, W and °C of a kernels' or a step's row."""
    return (
        f"{r['sm_clock_mhz']:,.0f}{'*' if r['throttled'] else ''}",
        f"{r['max_sm_clock_mhz']:,.0f}",
        ms_text(r["below_ns"]),
        "" if r["power_w"] is None else f"{r['power_w']:,.0f}",
        "" if r["temperature_c"] is None else f"{r['temperature_c']:,.0f}",
    )


def render_step_clocks(result: Analysis, console: Any, top: int = 12) -> None:
    """The slowest steps' GPU clock, power and temperature (where the trace has steps and such series)."""
    from rich.table import Table

    clocks = result.gpu_step_clocks
    if clocks is None or not clocks.drop_nulls("sm_clock_mhz").height:
        return
    t = Table(title="GPU clocks during the slowest steps (mean over the step; * = under 95 % of the GPU's highest)")
    for c in ("rank", "step", "gpu", "step ms", "vs median %", "SM MHz", "max MHz", "under ms", "W", "C"):
        t.add_column(c, justify="right")
    rows = clocks.drop_nulls("sm_clock_mhz").sort(
        "duration_ns", "rank", "step", "device", descending=[True, False, False, False]
    )
    for r in rows.head(top).iter_rows(named=True):
        t.add_row(
            str(r["rank"]),
            str(r["step"]),
            str(r["device"]),
            ms_text(r["duration_ns"]),
            pct_text(r["slowdown"]),
            *_clock_cells(r),
        )
    print_table(console, t)
